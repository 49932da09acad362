"""The discussion page /studies/{id}/discussion/ with the Django test client:
statuses per role, contents, the post form and its errors, hiding, editing,
and the page's pinned query count."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.fixtures import PASSWORD, db_snapshot
from workspace import services
from workspace.limits import DISCUSSION_POST_MAX_CHARS
from workspace.models import Membership, Phase, Post

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(make_study, cast):
    """A study in assessment (alice designs it, bob and carol are experts;
    Flexibility and its metric were not selected), two posts on Accuracy,
    the second hidden by alice, one by alice on AUC."""
    built = make_study(Phase.ASSESSMENT)
    accuracy, auc = built.attributes["Accuracy"], built.metrics["AUC"]
    first = services.post_add(
        study=built.study, author=cast.bob, attribute=accuracy, body="Accuracy above all.\n\nReally."
    )
    hidden = services.post_add(study=built.study, author=cast.carol, attribute=accuracy, body="An off-topic rant")
    services.post_hide(post=hidden, by=cast.alice)
    on_auc = services.post_add(study=built.study, author=cast.alice, metric=auc, body="AUC is computed per fold.")
    return {
        "built": built,
        "study": built.study,
        "first": first,
        "hidden": hidden,
        "on_auc": on_auc,
        "url": f"/studies/{built.study.pk}/discussion/",
        "accuracy": accuracy,
        "auc": auc,
    }


def client_for(user):
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def _posts_snapshot():
    return db_snapshot(), list(Post.objects.order_by("pk").values_list("pk", "body", "hidden_at", "edited_at"))


def _section(html, anchor):
    """The HTML of one thread, from its anchor to the next thread."""
    start = html.index(f'id="{anchor}"')
    following = html.find('<article class="card thread"', start)
    return html[start : following if following != -1 else len(html)]


# --- statuses ------------------------------------------------------------------------


def test_anonymous_is_sent_to_the_login_page(world):
    response = client_for(None).get(world["url"])
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_outsiders_and_pending_members_get_404_everywhere(world, cast):
    dave = get_user_model().objects.create_user(username="dave", password=PASSWORD)
    Membership.objects.create(study=world["study"], user=dave, role="expert", status=Membership.Status.PENDING)
    base, post = world["url"], world["first"].pk
    before = _posts_snapshot()
    for user in (cast.charlie, dave):
        client = client_for(user)
        assert client.get(base).status_code == 404
        assert client.get(f"{base}attributes/{world['accuracy'].pk}/").status_code == 404
        for kind, pk in (("attribute", world["accuracy"].pk), ("metric", world["auc"].pk)):
            assert client.post(f"{base}{kind}s/{pk}/", {f"{kind}-{pk}-body": "x"}).status_code == 404
        assert client.get(f"{base}posts/{post}/edit/").status_code == 404
        assert client.post(f"{base}posts/{post}/hide/").status_code == 404
        assert client.post(f"{base}posts/{post}/unhide/").status_code == 404
    assert _posts_snapshot() == before


def test_an_item_or_post_of_another_study_is_404(world, make_study, cast):
    other = make_study(Phase.DRAFT, title="Another study")
    foreign = services.post_add(study=other.study, author=cast.alice, attribute=other.attributes["Accuracy"], body="x")
    alice = client_for(cast.alice)
    base = world["url"]
    assert alice.post(f"{base}attributes/{other.attributes['Accuracy'].pk}/", {"body": "x"}).status_code == 404
    assert alice.post(f"{base}posts/{foreign.pk}/hide/").status_code == 404
    assert alice.get(f"{base}posts/{foreign.pk}/edit/").status_code == 404
    assert not Post.objects.get(pk=foreign.pk).is_hidden


@pytest.mark.parametrize("username", ["alice", "bob", "carol"])
def test_every_member_reads_the_page(world, cast, username):
    response = client_for(getattr(cast, username)).get(world["url"])
    assert response.status_code == 200
    html = response.content.decode()
    assert "<title>Discussion · Choosing a classifier · approve</title>" in html
    assert 'href="/studies/{}/discussion/" aria-current="page"'.format(world["study"].pk) in html


def test_get_on_a_thread_path_goes_to_the_thread_anchor(world, cast):
    response = client_for(cast.bob).get(f"{world['url']}metrics/{world['auc'].pk}/")
    assert response.status_code == 302 and response["Location"] == f"{world['url']}#metric-{world['auc'].pk}"


# --- contents ------------------------------------------------------------------------------


def test_one_thread_per_attribute_and_metric_with_anchors_and_a_summary(world, cast):
    html = client_for(cast.bob).get(world["url"]).content.decode()
    built = world["built"]
    anchors = re.findall(r'<article class="card thread" id="([a-z]+-\d+)"', html)
    assert anchors == [f"attribute-{a.pk}" for a in built.attributes.values()] + [
        f"metric-{m.pk}" for m in built.metrics.values()
    ]
    # The summary: each thread linked to its anchor with its post count.
    summary = html[html.index('id="summary-title"') : html.index('<div class="discussion-threads">')]
    counts = re.findall(r'<a href="#([a-z]+-\d+)">([^<]+)</a>.*?(\d+) posts?</span>', summary, re.S)
    assert counts == [
        (f"attribute-{built.attributes['Accuracy'].pk}", "Accuracy", "2"),
        (f"attribute-{built.attributes['Consistency'].pk}", "Consistency", "0"),
        (f"attribute-{built.attributes['Efficiency'].pk}", "Efficiency", "0"),
        (f"attribute-{built.attributes['Flexibility'].pk}", "Flexibility", "0"),
        (f"metric-{built.metrics['Success rate'].pk}", "Success rate", "0"),
        (f"metric-{built.metrics['AUC'].pk}", "AUC", "1"),
        (f"metric-{built.metrics['Fold stdev'].pk}", "Fold stdev", "0"),
        (f"metric-{built.metrics['Training time'].pk}", "Training time", "0"),
        (f"metric-{built.metrics['Flexibility score'].pk}", "Flexibility score", "0"),
    ]
    assert "3 posts in all" in summary


def test_posts_show_author_time_and_the_designer_role(world, cast):
    html = client_for(cast.bob).get(world["url"]).content.decode()
    accuracy = _section(html, f"attribute-{world['accuracy'].pk}")
    first = world["first"]
    assert f'id="post-{first.pk}"' in accuracy
    assert '<span class="post__author">bob</span>' in accuracy
    assert f'datetime="{first.created_at.isoformat()}"' in accuracy
    assert "<p>Accuracy above all.</p>\n\n<p>Really.</p>" in accuracy
    auc = _section(html, f"metric-{world['auc'].pk}")
    assert '<span class="post__author">alice</span>' in auc
    assert '<span class="role role--designer">Designer</span>' in auc
    assert "metric of Accuracy, higher is better" in auc
    assert "No posts yet." in _section(html, f"attribute-{world['built'].attributes['Consistency'].pk}")


def test_unselected_items_are_marked_after_voting(world, cast):
    html = client_for(cast.bob).get(world["url"]).content.decode()
    built = world["built"]
    assert "Not selected" in _section(html, f"attribute-{built.attributes['Flexibility'].pk}")
    assert "Not selected" in _section(html, f"metric-{built.metrics['Flexibility score'].pk}")
    assert "Not selected" not in _section(html, f"attribute-{built.attributes['Accuracy'].pk}")


def test_a_hidden_post_reads_hidden_by_the_designer_to_the_experts(world, cast):
    for user in (cast.bob, cast.carol):  # carol wrote it: she does not read it either
        html = client_for(user).get(world["url"]).content.decode()
        post = _section(html, f"attribute-{world['accuracy'].pk}").split(f'id="post-{world["hidden"].pk}"')[1]
        assert "Hidden by the designer." in post
        assert "An off-topic rant" not in html
        assert "Show again" not in html and ">Hide<" not in html


def test_the_designer_reads_a_hidden_post_marked_hidden_with_buttons(world, cast):
    html = client_for(cast.alice).get(world["url"]).content.decode()
    accuracy = _section(html, f"attribute-{world['accuracy'].pk}")
    hidden_part = accuracy.split(f'id="post-{world["hidden"].pk}"')[1]
    assert "An off-topic rant" in hidden_part
    assert '<span class="badge badge--hidden">Hidden</span>' in hidden_part
    assert "Hidden by alice on" in hidden_part
    assert f'action="/studies/{world["study"].pk}/discussion/posts/{world["hidden"].pk}/unhide/"' in hidden_part
    assert f'action="/studies/{world["study"].pk}/discussion/posts/{world["first"].pk}/hide/"' in accuracy


def test_edit_link_only_on_ones_own_posts(world, cast):
    html = client_for(cast.bob).get(world["url"]).content.decode()
    edit = f"/studies/{world['study'].pk}/discussion/posts/{{}}/edit/"
    assert edit.format(world["first"].pk) in html
    assert edit.format(world["on_auc"].pk) not in html


# --- posting --------------------------------------------------------------------------------


def test_posting_adds_the_post_and_returns_to_the_thread(world, cast):
    auc = world["auc"]
    url = f"{world['url']}metrics/{auc.pk}/"
    response = client_for(cast.carol).post(url, {f"metric-{auc.pk}-body": "  Per fold.  "})
    assert response.status_code == 302 and response["Location"] == f"{world['url']}#metric-{auc.pk}"
    post = Post.objects.latest("pk")
    assert (post.author, post.metric, post.body) == (cast.carol, auc, "Per fold.")
    html = client_for(cast.carol).get(world["url"]).content.decode()
    assert "<p>Per fold.</p>" in _section(html, f"metric-{auc.pk}")


def test_the_form_posts_to_its_thread_and_back_to_its_anchor(world, cast):
    html = client_for(cast.bob).get(world["url"]).content.decode()
    accuracy = world["accuracy"]
    section = _section(html, f"attribute-{accuracy.pk}")
    action = f'action="/studies/{world["study"].pk}/discussion/attributes/{accuracy.pk}/#attribute-{accuracy.pk}"'
    assert action in section
    assert f'<label for="id_attribute-{accuracy.pk}-body">Your post on Accuracy</label>' in section
    assert f'name="attribute-{accuracy.pk}-body"' in section


@pytest.mark.parametrize(
    "body, message",
    [
        ("", "This field is required."),
        ("   \n ", "This field is required."),
        (
            "x" * (DISCUSSION_POST_MAX_CHARS + 1),
            f"Ensure this value has at most {DISCUSSION_POST_MAX_CHARS} characters",
        ),
        ("a\x00b", "Null characters are not allowed."),
        ("Accuracy \u202eis last", "must not contain a bidirectional control (U+202E)"),
    ],
)
def test_a_refused_post_shows_the_error_on_that_threads_form_naming_the_field(world, cast, body, message):
    accuracy = world["accuracy"]
    before = _posts_snapshot()
    url = f"{world['url']}attributes/{accuracy.pk}/"
    response = client_for(cast.bob).post(url, {f"attribute-{accuracy.pk}-body": body})
    assert response.status_code == 200
    assert _posts_snapshot() == before
    html = response.content.decode()
    field_id = f"id_attribute-{accuracy.pk}-body"
    section = _section(html, f"attribute-{accuracy.pk}")
    # The summary above the form names the field and links to it; the field carries the message.
    assert re.search(rf'<p><a href="#{field_id}">Your post on Accuracy</a>: {re.escape(message)}', section)
    assert f'<ul class="field__errors" id="{field_id}_error"><li>{message}' in section
    assert re.search(rf'<textarea[^>]*aria-describedby="[^"]*{field_id}_error', section)
    assert 'aria-invalid="true"' in section
    # No other thread shows an error.
    others = html.replace(section, "")
    assert "field__errors" not in others and 'role="alert"' not in others


# --- hiding and editing -----------------------------------------------------------------


def test_the_designer_hides_and_shows_again(world, cast):
    first = world["first"]
    alice = client_for(cast.alice)
    response = alice.post(f"{world['url']}posts/{first.pk}/hide/")
    assert response.status_code == 302 and response["Location"] == f"{world['url']}#post-{first.pk}"
    first.refresh_from_db()
    assert first.is_hidden and first.hidden_by == cast.alice
    assert "Accuracy above all." not in client_for(cast.bob).get(world["url"]).content.decode()
    response = alice.post(f"{world['url']}posts/{first.pk}/unhide/")
    assert response.status_code == 302
    assert not Post.objects.get(pk=first.pk).is_hidden
    assert "Accuracy above all." in client_for(cast.bob).get(world["url"]).content.decode()


def test_experts_may_not_hide_and_get_a_page_saying_so(world, cast):
    before = _posts_snapshot()
    for action in ("hide", "unhide"):
        response = client_for(cast.bob).post(f"{world['url']}posts/{world['first'].pk}/{action}/")
        assert response.status_code == 403
        assert "Only the designer of this study can hide or show posts." in response.content.decode()
    assert _posts_snapshot() == before


def test_hiding_needs_a_post_request(world, cast):
    response = client_for(cast.alice).get(f"{world['url']}posts/{world['first'].pk}/hide/")
    assert response.status_code == 405
    assert not Post.objects.get(pk=world["first"].pk).is_hidden


def test_the_author_edits_their_post(world, cast):
    first = world["first"]
    url = f"{world['url']}posts/{first.pk}/edit/"
    bob = client_for(cast.bob)
    page = bob.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Edit your post on Accuracy" in html
    assert "Accuracy above all.\n\nReally.</textarea>" in html
    response = bob.post(url, {"body": "Accuracy, then consistency."})
    assert response.status_code == 302 and response["Location"] == f"{world['url']}#post-{first.pk}"
    first.refresh_from_db()
    assert first.body == "Accuracy, then consistency." and first.edited_at is not None
    listed = bob.get(world["url"]).content.decode()
    assert re.search(rf'id="post-{first.pk}".*?<span class="post__state">edited <time', listed, re.S)


def test_an_empty_edit_is_refused_naming_the_field(world, cast):
    first = world["first"]
    before = _posts_snapshot()
    response = client_for(cast.bob).post(f"{world['url']}posts/{first.pk}/edit/", {"body": "  "})
    assert response.status_code == 200
    assert '<p><a href="#id_body">Your post on Accuracy</a>: This field is required.</p>' in response.content.decode()
    assert _posts_snapshot() == before


def test_only_the_author_edits(world, cast):
    url = f"{world['url']}posts/{world['first'].pk}/edit/"
    before = _posts_snapshot()
    for user in (cast.carol, cast.alice):
        client = client_for(user)
        assert client.get(url).status_code == 403
        response = client.post(url, {"body": "hijacked"})
        assert response.status_code == 403
        assert "Only its author can change a post." in response.content.decode()
    assert _posts_snapshot() == before


# --- queries ---------------------------------------------------------------------------------


def _grow(built, cast, make_study):
    """More posts in more threads, by more authors, and more experts."""
    User = get_user_model()
    for n in range(4):
        extra = User.objects.create_user(username=f"expert{n}", password=PASSWORD)
        Membership.objects.create(study=built.study, user=extra, role="expert")
        for item in ("Consistency", "Efficiency"):
            services.post_add(study=built.study, author=extra, attribute=built.attributes[item], body=f"{n} on {item}")
        services.post_add(study=built.study, author=extra, metric=built.metrics["Fold stdev"], body=f"{n}")
        post = services.post_add(study=built.study, author=cast.bob, metric=built.metrics["Training time"], body=f"{n}")
        services.post_hide(post=post, by=cast.alice)


@pytest.mark.parametrize("username", ["alice", "bob"])
def test_the_page_makes_a_fixed_number_of_queries(world, cast, make_study, django_assert_num_queries, username):
    client = client_for(getattr(cast, username))
    for grown in (False, True):
        if grown:
            _grow(world["built"], cast, make_study)
        # session, user, study, my memberships, attributes, metrics, posts with authors and who hid them
        with django_assert_num_queries(8):  # with the header's unread notifications
            response = client.get(world["url"])
        assert response.status_code == 200
    assert response.content.decode().count('class="post') >= 15


def test_a_refused_post_makes_a_fixed_number_of_queries(world, cast, make_study, django_assert_num_queries):
    client = client_for(cast.bob)
    url = f"{world['url']}attributes/{world['accuracy'].pk}/"
    for grown in (False, True):
        if grown:
            _grow(world["built"], cast, make_study)
        # session, user, study, my memberships, the attribute, then the page's attributes, metrics, posts
        with django_assert_num_queries(9):  # with the header's unread notifications
            assert client.post(url, {}).status_code == 200


def test_a_hidden_post_can_no_longer_be_edited_and_offers_no_edit_link(world, cast):
    hidden = world["hidden"]
    carol = client_for(cast.carol)
    assert f"/discussion/posts/{hidden.pk}/edit/" not in carol.get(world["url"]).content.decode()
    url = f"{world['url']}posts/{hidden.pk}/edit/"
    before = _posts_snapshot()
    for response in (carol.get(url), carol.post(url, {"body": "toned down"})):
        assert response.status_code == 403
        html = response.content.decode()
        assert "The designer has hidden this post: it can no longer be changed." in html
        assert "An off-topic rant" not in html
    assert _posts_snapshot() == before


def test_an_edit_with_no_fields_at_all_is_refused_naming_the_field(world, cast):
    before = _posts_snapshot()
    response = client_for(cast.bob).post(f"{world['url']}posts/{world['first'].pk}/edit/", {})
    assert response.status_code == 200
    assert '<p><a href="#id_body">Your post on Accuracy</a>: This field is required.</p>' in response.content.decode()
    assert _posts_snapshot() == before
