"""The discussion through the REST API: who may read, post, edit, hide;
validation; hidden posts' bodies reach the designer only."""

import pytest

from tests.fixtures import api_error, error_fields
from workspace import services
from workspace.limits import DISCUSSION_POST_MAX_CHARS
from workspace.models import Membership, Phase, Post

from .conftest import db_snapshot

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def world(make_study, cast):
    """A study in voting (alice designs, bob and carol are experts, charlie
    an outsider and dave a pending expert who has not accepted), with two
    posts in Accuracy's thread, the second hidden, and one in AUC's."""
    built = make_study(Phase.VOTING)
    dave = type(cast.alice).objects.create_user(username="dave", password="x")
    Membership.objects.create(study=built.study, user=dave, role="expert", status=Membership.Status.PENDING)
    accuracy, auc = built.attributes["Accuracy"], built.metrics["AUC"]
    first = services.post_add(study=built.study, author=cast.bob, attribute=accuracy, body="Accuracy above all.")
    hidden = services.post_add(study=built.study, author=cast.carol, attribute=accuracy, body="Off-topic rant")
    services.post_hide(post=hidden, by=cast.alice)
    on_auc = services.post_add(study=built.study, author=cast.alice, metric=auc, body="AUC is per fold.")
    base = f"{API}/studies/{built.study.pk}/discussion/"
    return {
        "built": built,
        "first": first,
        "hidden": hidden,
        "on_auc": on_auc,
        "dave": dave,
        "base": base,
        "accuracy": f"{base}attributes/{accuracy.pk}/",
        "auc": f"{base}metrics/{auc.pk}/",
    }


@pytest.fixture
def dave_client(world, api):
    return api(world["dave"])


def _post_json(post, *, body, hidden=False, hidden_by=None, author_is_designer=False, edited=False):
    return {
        "id": post.pk,
        "author": post.author.username,
        "author_is_designer": author_is_designer,
        "body": body,
        "created_at": post.created_at.isoformat().replace("+00:00", "Z"),
        "edited_at": post.edited_at.isoformat().replace("+00:00", "Z") if edited else None,
        "hidden": hidden,
        "hidden_at": post.hidden_at.isoformat().replace("+00:00", "Z") if hidden else None,
        "hidden_by": hidden_by,
    }


# --- reading --------------------------------------------------------------------------


def test_an_expert_reads_every_thread_without_the_hidden_body(world, clients):
    response = clients["bob"].get(world["base"])
    assert response.status_code == 200
    body = response.json()
    assert [t["name"] for t in body["attributes"]] == ["Accuracy", "Consistency", "Efficiency", "Flexibility"]
    assert [(t["name"], t["attribute"]) for t in body["metrics"]] == [
        ("Success rate", "Accuracy"),
        ("AUC", "Accuracy"),
        ("Fold stdev", "Consistency"),
        ("Training time", "Efficiency"),
        ("Flexibility score", "Flexibility"),
    ]
    accuracy = body["attributes"][0]
    built = world["built"]
    assert {k: accuracy[k] for k in ("kind", "id", "attribute", "anchor", "post_count")} == {
        "kind": "attribute",
        "id": built.attributes["Accuracy"].pk,
        "attribute": None,
        "anchor": f"attribute-{built.attributes['Accuracy'].pk}",
        "post_count": 2,
    }
    world["hidden"].refresh_from_db()
    assert accuracy["posts"] == [
        _post_json(world["first"], body="Accuracy above all."),
        _post_json(world["hidden"], body=None, hidden=True, hidden_by="alice"),
    ]
    on_auc = _post_json(world["on_auc"], body="AUC is per fold.", author_is_designer=True)
    assert body["metrics"][1]["posts"] == [on_auc]
    assert body["metrics"][1]["anchor"] == f"metric-{built.metrics['AUC'].pk}"
    assert all(t["posts"] == [] and t["post_count"] == 0 for t in body["attributes"][1:])
    assert "Off-topic rant" not in response.content.decode()


def test_the_designer_reads_the_hidden_body(world, clients):
    response = clients["alice"].get(world["accuracy"])
    assert response.status_code == 200
    posts = response.json()["posts"]
    assert [(p["author"], p["body"], p["hidden"]) for p in posts] == [
        ("bob", "Accuracy above all.", False),
        ("carol", "Off-topic rant", True),
    ]
    assert response.json()["name"] == "Accuracy"


def test_the_author_of_a_hidden_post_does_not_read_its_body_either(world, clients):
    posts = clients["carol"].get(world["accuracy"]).json()["posts"]
    assert posts[1]["author"] == "carol" and posts[1]["body"] is None and posts[1]["hidden"] is True


def test_one_metric_thread(world, clients):
    response = clients["carol"].get(world["auc"])
    assert response.status_code == 200
    assert {k: response.json()[k] for k in ("kind", "name", "attribute", "post_count")} == {
        "kind": "metric",
        "name": "AUC",
        "attribute": "Accuracy",
        "post_count": 1,
    }


def test_discussion_reads_in_a_fixed_number_of_queries(world, clients, cast, django_assert_num_queries):
    built = world["built"]
    for more in (False, True):
        if more:  # more posts, in more threads, by more authors: the same queries
            for n in range(6):
                services.post_add(study=built.study, author=cast.carol, metric=built.metrics["Fold stdev"], body=f"{n}")
                efficiency = built.attributes["Efficiency"]
                services.post_add(study=built.study, author=cast.alice, attribute=efficiency, body="x")
        # the token with its user, the study, my memberships, attributes, metrics, posts with their authors
        with django_assert_num_queries(6):
            assert clients["bob"].get(world["base"]).status_code == 200
        # one thread: token, study, memberships, the item, its posts
        with django_assert_num_queries(5):
            assert clients["bob"].get(world["accuracy"]).status_code == 200


# --- access -------------------------------------------------------------------------------


def _every_endpoint(world):
    post = world["first"].pk
    base = world["base"]
    return [
        ("get", base, None),
        ("get", world["accuracy"], None),
        ("post", world["accuracy"], {"body": "hello"}),
        ("get", world["auc"], None),
        ("post", world["auc"], {"body": "hello"}),
        ("put", f"{base}posts/{post}/", {"body": "changed"}),
        ("post", f"{base}posts/{post}/hide/", None),
        ("post", f"{base}posts/{post}/unhide/", None),
    ]


def _send(client, method, url, body):
    return getattr(client, method)(url, body, format="json") if body is not None else getattr(client, method)(url)


@pytest.mark.parametrize("actor", ["anonymous", "charlie", "dave"])
def test_outsiders_and_pending_members_never_learn_the_study_exists(world, clients, dave_client, actor):
    client = dave_client if actor == "dave" else clients[actor]
    before = db_snapshot(), list(Post.objects.values_list("pk", "body", "hidden_at", "edited_at"))
    for method, url, body in _every_endpoint(world):
        response = _send(client, method, url, body)
        if actor == "anonymous":
            assert response.status_code == 401, url
        else:
            assert response.status_code == 404, url
            assert response.json() == api_error("not_found", "No such study.")
    assert (db_snapshot(), list(Post.objects.values_list("pk", "body", "hidden_at", "edited_at"))) == before


@pytest.mark.parametrize("actor", ["bob", "alice"])
def test_any_member_posts_in_any_thread(world, clients, cast, actor):
    response = clients[actor].post(world["auc"], {"body": "  Per fold, then averaged.  "}, format="json")
    assert response.status_code == 201, response.content
    created = Post.objects.get(pk=response.json()["id"])
    assert (created.author.username, created.metric.name, created.body) == (actor, "AUC", "Per fold, then averaged.")
    assert response.json() == _post_json(created, body="Per fold, then averaged.", author_is_designer=actor == "alice")


@pytest.mark.parametrize("phase", [Phase.DRAFT, Phase.ASSESSMENT, Phase.CLOSED])
def test_posting_works_in_every_phase(make_study, clients, phase):
    built = make_study(phase)
    url = f"{API}/studies/{built.study.pk}/discussion/attributes/{built.attributes['Consistency'].pk}/"
    assert clients["carol"].post(url, {"body": "Consistency matters"}, format="json").status_code == 201
    assert clients["carol"].get(url).json()["posts"][0]["body"] == "Consistency matters"


def test_an_item_of_another_study_is_not_found(world, make_study, clients):
    other = make_study(Phase.DRAFT, title="Alice's other study")
    url = f"{world['base']}attributes/{other.attributes['Accuracy'].pk}/"
    for method, body in (("get", None), ("post", {"body": "x"})):
        response = _send(clients["bob"], method, url, body)
        assert response.status_code == 404 and response.json() == api_error(
            "not_found", "No such attribute in this study."
        )
    missing = _send(clients["bob"], "get", f"{world['base']}metrics/{other.metrics['AUC'].pk}/", None)
    assert missing.json() == api_error("not_found", "No such metric in this study.")
    # A post of another study is not found either, even by its designer.
    foreign = services.post_add(
        study=other.study, author=other.study.designer, attribute=other.attributes["Accuracy"], body="x"
    )
    response = clients["alice"].post(f"{world['base']}posts/{foreign.pk}/hide/")
    assert response.status_code == 404 and response.json() == api_error("not_found", "No such post in this study.")
    assert not Post.objects.get(pk=foreign.pk).is_hidden


def test_only_the_designer_hides_and_unhides(world, clients):
    first = world["first"]
    for actor in ("bob", "carol"):
        for action in ("hide", "unhide"):
            response = clients[actor].post(f"{world['base']}posts/{first.pk}/{action}/")
            assert response.status_code == 403
            assert response.json() == api_error(
                "permission_denied", f"Only the designer of this study can {action} posts."
            )
    assert not Post.objects.get(pk=first.pk).is_hidden

    hidden = clients["alice"].post(f"{world['base']}posts/{first.pk}/hide/")
    assert hidden.status_code == 200
    first.refresh_from_db()
    assert hidden.json() == _post_json(first, body="Accuracy above all.", hidden=True, hidden_by="alice")
    assert clients["bob"].get(world["accuracy"]).json()["posts"][0]["body"] is None

    shown = clients["alice"].post(f"{world['base']}posts/{first.pk}/unhide/")
    assert shown.status_code == 200 and shown.json()["hidden"] is False and shown.json()["hidden_by"] is None
    assert clients["bob"].get(world["accuracy"]).json()["posts"][0]["body"] == "Accuracy above all."


def test_only_the_author_edits_their_post(world, clients):
    first = world["first"]
    url = f"{world['base']}posts/{first.pk}/"
    for actor in ("carol", "alice"):
        response = clients[actor].put(url, {"body": "hijacked"}, format="json")
        assert response.status_code == 403 and response.json() == api_error(
            "permission_denied", "Only its author can change a post."
        )
    assert Post.objects.get(pk=first.pk).body == "Accuracy above all."
    response = clients["bob"].put(url, {"body": "Accuracy, then consistency."}, format="json")
    assert response.status_code == 200
    first.refresh_from_db()
    assert response.json() == _post_json(first, body="Accuracy, then consistency.", edited=True)


# --- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload, errors",
    [
        ({}, {"body": ["This field is required."]}),
        ({"body": ""}, {"body": ["This field may not be blank."]}),
        ({"body": "   "}, {"body": ["This field may not be blank."]}),
        (
            {"body": "x" * (DISCUSSION_POST_MAX_CHARS + 1)},
            {"body": [f"Ensure this field has no more than {DISCUSSION_POST_MAX_CHARS} characters."]},
        ),
        ({"body": "a\x00b"}, {"body": ["Null characters are not allowed."]}),
        # As in titles (issue 29, finding 11): text that displays in another order than it reads.
        ({"body": "Accuracy \u202eis last"}, {"body": ["must not contain a bidirectional control (U+202E)"]}),
        (
            {"body": "one\n\u2067two\u2069"},
            {"body": ["must not contain a bidirectional control (U+2067)"]},
        ),
        ({"body": 12}, {"body": ["must be text, got int"]}),  # no longer coerced to "12" (issue 17, finding 8)
        ({"body": "ok", "author": "carol"}, {"author": ["is not a field of this request (the fields are body)"]}),
        (["body"], {"non_field_errors": ["Invalid data. Expected a dictionary, but got list."]}),
    ],
)
def test_invalid_posts_are_400_naming_the_field_and_write_nothing(world, clients, payload, errors):
    before = Post.objects.count()
    response = clients["bob"].post(world["accuracy"], payload, format="json")
    assert response.status_code == 400
    assert error_fields(response) == errors
    assert Post.objects.count() == before


def test_hide_refuses_unknown_fields(world, clients):
    url = f"{world['base']}posts/{world['first'].pk}/hide/"
    response = clients["alice"].post(url, {"reason": "spam"}, format="json")
    assert response.status_code == 400
    assert error_fields(response) == {"reason": ["is not a field of this request (the fields are )"]}
    assert not Post.objects.get(pk=world["first"].pk).is_hidden


def test_edit_refuses_an_empty_body(world, clients):
    response = clients["bob"].put(f"{world['base']}posts/{world['first'].pk}/", {"body": " "}, format="json")
    assert response.status_code == 400 and error_fields(response) == {"body": ["This field may not be blank."]}
    assert Post.objects.get(pk=world["first"].pk).edited_at is None


def test_a_hidden_post_can_no_longer_be_edited(world, clients):
    hidden = world["hidden"]
    response = clients["carol"].put(f"{world['base']}posts/{hidden.pk}/", {"body": "toned down"}, format="json")
    assert response.status_code == 400
    assert error_fields(response) == {"post": ["the designer has hidden this post: it can no longer be changed"]}
    assert Post.objects.get(pk=hidden.pk).body == "Off-topic rant"
