"""The discussion's services, selectors and database constraints."""

import pytest
from django.db import IntegrityError, transaction

from workspace import selectors, services
from workspace.errors import InvalidInput
from workspace.limits import DISCUSSION_POST_MAX_CHARS
from workspace.models import Phase, Post


@pytest.fixture
def built(make_study):
    return make_study(Phase.VOTING)


def test_post_add_trims_the_body_and_files_it_under_its_attribute(built, cast):
    accuracy = built.attributes["Accuracy"]
    post = services.post_add(study=built.study, author=cast.bob, attribute=accuracy, body="  Accuracy first.\n ")
    post.refresh_from_db()
    assert (post.study_id, post.attribute_id, post.metric_id) == (built.study.pk, accuracy.pk, None)
    assert (post.author, post.body) == (cast.bob, "Accuracy first.")
    assert post.edited_at is None and not post.is_hidden
    assert post.thread_anchor == f"attribute-{accuracy.pk}"


def test_post_add_in_a_metric_thread(built, cast):
    auc = built.metrics["AUC"]
    post = services.post_add(study=built.study, author=cast.alice, metric=auc, body="Is AUC measured per fold?")
    assert (post.attribute_id, post.metric_id, post.thread_anchor) == (None, auc.pk, f"metric-{auc.pk}")


@pytest.mark.parametrize("phase", [Phase.DRAFT, Phase.ASSESSMENT, Phase.CLOSED])
def test_posting_is_open_in_every_phase(make_study, cast, phase):
    built = make_study(phase)
    post = services.post_add(study=built.study, author=cast.carol, attribute=built.attributes["Efficiency"], body="ok")
    assert Post.objects.get(pk=post.pk).body == "ok"


@pytest.mark.parametrize(
    "body, message",
    [
        ("", "must not be empty"),
        (" \n\t ", "must not be empty"),
        ("x" * (DISCUSSION_POST_MAX_CHARS + 1), f"must be at most {DISCUSSION_POST_MAX_CHARS} characters"),
        ("a\x00b", "must not contain NUL characters"),
        (7, "must be text, got int"),
    ],
)
def test_a_bad_body_is_refused_naming_the_field(built, cast, unchanged, body, message):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        services.post_add(study=built.study, author=cast.bob, attribute=built.attributes["Accuracy"], body=body)
    assert refused.value.errors == {"body": [message]}
    assert not Post.objects.exists()


def test_a_body_at_the_limit_is_kept_whole(built, cast):
    body = "y" * DISCUSSION_POST_MAX_CHARS
    post = services.post_add(study=built.study, author=cast.bob, metric=built.metrics["AUC"], body=body)
    assert len(Post.objects.get(pk=post.pk).body) == DISCUSSION_POST_MAX_CHARS


def test_a_post_is_about_exactly_one_item(built, cast):
    both = {"attribute": built.attributes["Accuracy"], "metric": built.metrics["AUC"]}
    for items in (both, {}):
        with pytest.raises(InvalidInput) as refused:
            services.post_add(study=built.study, author=cast.bob, body="hi", **items)
        assert refused.value.errors == {"thread": ["a post is about exactly one attribute or one metric"]}
    assert not Post.objects.exists()


def test_an_item_of_another_study_is_refused(built, make_study, cast):
    other = make_study(Phase.DRAFT, title="Another study")
    with pytest.raises(InvalidInput) as refused:
        services.post_add(study=built.study, author=cast.bob, metric=other.metrics["AUC"], body="hi")
    assert refused.value.errors == {"metric": ["'AUC' is not an item of this study"]}
    assert not Post.objects.exists()


def test_edit_replaces_the_body_and_marks_it_edited(built, cast):
    post = services.post_add(study=built.study, author=cast.bob, attribute=built.attributes["Accuracy"], body="first")
    services.post_edit(post=post, body=" second ")
    post.refresh_from_db()
    assert post.body == "second" and post.edited_at is not None and post.edited_at >= post.created_at
    with pytest.raises(InvalidInput) as refused:
        services.post_edit(post=post, body="")
    assert refused.value.errors == {"body": ["must not be empty"]}
    post.refresh_from_db()
    assert post.body == "second"


def test_hide_and_unhide(built, cast):
    post = services.post_add(study=built.study, author=cast.bob, attribute=built.attributes["Accuracy"], body="rude")
    services.post_hide(post=post, by=cast.alice)
    post.refresh_from_db()
    assert post.is_hidden and post.hidden_by == cast.alice and post.body == "rude"
    first_hidden_at = post.hidden_at
    # Hiding again keeps the first moment.
    services.post_hide(post=Post.objects.get(pk=post.pk), by=cast.alice)
    assert Post.objects.get(pk=post.pk).hidden_at == first_hidden_at
    services.post_unhide(post=post)
    post.refresh_from_db()
    assert (post.hidden_at, post.hidden_by) == (None, None)


# --- the database's own checks --------------------------------------------------------


def _insert(built, cast, **fields):
    values = {"study": built.study, "author": cast.bob, "body": "text", **fields}
    with transaction.atomic():
        Post.objects.create(**values)


def test_constraint_exactly_one_of_attribute_and_metric(built, cast):
    with pytest.raises(IntegrityError):
        _insert(built, cast, attribute=built.attributes["Accuracy"], metric=built.metrics["AUC"])
    with pytest.raises(IntegrityError):
        _insert(built, cast)
    _insert(built, cast, metric=built.metrics["AUC"])
    assert Post.objects.count() == 1


def test_constraint_body_not_empty_nor_over_the_limit(built, cast):
    accuracy = built.attributes["Accuracy"]
    with pytest.raises(IntegrityError):
        _insert(built, cast, attribute=accuracy, body="")
    with pytest.raises(IntegrityError):
        _insert(built, cast, attribute=accuracy, body="z" * (DISCUSSION_POST_MAX_CHARS + 1))
    assert not Post.objects.exists()


def test_constraint_no_hidden_by_on_a_visible_post(built, cast):
    with pytest.raises(IntegrityError):
        _insert(built, cast, attribute=built.attributes["Accuracy"], hidden_by=cast.alice)
    assert not Post.objects.exists()


# --- selectors ------------------------------------------------------------------------


def test_discussion_get_lists_every_item_with_its_posts_in_three_queries(built, cast, django_assert_num_queries):
    accuracy, auc = built.attributes["Accuracy"], built.metrics["AUC"]
    first = services.post_add(study=built.study, author=cast.bob, attribute=accuracy, body="one")
    second = services.post_add(study=built.study, author=cast.alice, attribute=accuracy, body="two")
    third = services.post_add(study=built.study, author=cast.carol, metric=auc, body="three")
    with django_assert_num_queries(3):  # attributes, metrics, posts with authors
        threads = selectors.discussion_get(study=built.study)
        every_thread = threads["attributes"] + threads["metrics"]
        authors = [post.author.username for thread in every_thread for post in thread.posts]
    assert [t.item.name for t in threads["attributes"]] == ["Accuracy", "Consistency", "Efficiency", "Flexibility"]
    metric_names = ["Success rate", "AUC", "Fold stdev", "Training time", "Flexibility score"]
    assert [t.item.name for t in threads["metrics"]] == metric_names
    assert threads["attributes"][0].posts == [first, second]
    assert threads["metrics"][1].posts == [third]
    assert threads["metrics"][1].anchor == f"metric-{auc.pk}"
    assert authors == ["bob", "alice", "carol"]


def test_deleting_an_item_deletes_its_thread(built, cast):
    services.post_add(study=built.study, author=cast.bob, attribute=built.attributes["Flexibility"], body="gone soon")
    built.attributes["Flexibility"].delete()
    assert not Post.objects.exists()


def test_a_hidden_post_can_no_longer_be_edited(built, cast):
    post = services.post_add(study=built.study, author=cast.bob, attribute=built.attributes["Accuracy"], body="first")
    services.post_hide(post=post, by=cast.alice)
    with pytest.raises(InvalidInput) as refused:
        services.post_edit(post=post, body="second")
    assert refused.value.errors == {"post": ["the designer has hidden this post: it can no longer be changed"]}
    post.refresh_from_db()
    assert (post.body, post.edited_at) == ("first", None)
