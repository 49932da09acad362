"""The discussion: a thread per attribute and per metric of a study.

Members post in every phase: a discussion informs votes, priorities and
ranges, and after closing it still explains them (a study may reopen).
Who may call these is checked by the pages and the API: ``post_add`` any
active member of the study, ``post_edit`` the post's author, ``post_hide``
and ``post_unhide`` the designer.
"""

from typing import cast

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from ..errors import InvalidInput
from ..limits import DISCUSSION_POST_MAX_CHARS
from ..models import Metric, Post, QualityAttribute, Study
from ._checks import text

HIDDEN_POST_FROZEN = "the designer has hidden this post: it can no longer be changed"


def _body(body: object) -> str:
    return text(body, "body", max_length=DISCUSSION_POST_MAX_CHARS, multiline=True)


@transaction.atomic
def post_add(
    *,
    study: Study,
    author: User,
    attribute: QualityAttribute | None = None,
    metric: Metric | None = None,
    body: str,
) -> Post:
    """Add ``author``'s post to the thread of ``attribute`` or of ``metric``
    (exactly one), an item of ``study``. The body is trimmed; empty, over
    ``DISCUSSION_POST_MAX_CHARS`` or not storable text is refused."""
    if (attribute is None) == (metric is None):
        raise InvalidInput({"thread": "a post is about exactly one attribute or one metric"})
    # Exactly one is given (checked above).
    item, field = (attribute, "attribute") if attribute is not None else (cast(Metric, metric), "metric")
    if item.study_id != study.pk:
        raise InvalidInput({field: f"{item.name!r} is not an item of this study"})
    return Post.objects.create(study=study, attribute=attribute, metric=metric, author=author, body=_body(body))


@transaction.atomic
def post_edit(*, post: Post, body: str) -> Post:
    """Replace the body of ``post`` (its author's), marking it edited. A
    post the designer has hid can no longer change: the designer judged
    what it says."""
    if post.is_hidden:
        raise InvalidInput({"post": HIDDEN_POST_FROZEN})
    post.body = _body(body)
    post.edited_at = timezone.now()
    post.save(update_fields=["body", "edited_at"])
    return post


@transaction.atomic
def post_hide(*, post: Post, by: User) -> Post:
    """Hide ``post`` from everyone but the designer. Hiding a hidden post
    changes nothing (it keeps who hid it and when)."""
    if not post.is_hidden:
        post.hidden_at = timezone.now()
        post.hidden_by = by
        post.save(update_fields=["hidden_at", "hidden_by"])
    return post


@transaction.atomic
def post_unhide(*, post: Post) -> Post:
    """Show ``post`` to every member again."""
    if post.is_hidden:
        post.hidden_at = None
        post.hidden_by = None
        post.save(update_fields=["hidden_at", "hidden_by"])
    return post
