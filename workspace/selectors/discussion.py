"""The discussion: one thread per attribute and per metric, with its posts."""

from dataclasses import dataclass, field
from typing import cast

from django.db.models import QuerySet

from ..models import Metric, Post, QualityAttribute, Study
from .design import metric_list

THREAD_KINDS = ("attribute", "metric")


@dataclass
class Thread:
    """The discussion of one attribute or one metric: ``kind`` is
    ``"attribute"`` or ``"metric"``, ``posts`` oldest first."""

    kind: str
    item: QualityAttribute | Metric
    posts: list[Post] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        """Its anchor on the discussion page, ``attribute-{pk}`` or
        ``metric-{pk}`` (binding: PAGES.md)."""
        return f"{self.kind}-{self.item.pk}"


def _posts(study: Study) -> QuerySet[Post]:
    return Post.objects.filter(study=study).select_related("author", "hidden_by").order_by("created_at", "id")


def discussion_get(*, study: Study) -> dict[str, list[Thread]]:
    """Every thread of the study with its posts: ``{"attributes": [...],
    "metrics": [...]}``, one thread per attribute and per metric in the
    study's order (metrics grouped by attribute), with or without posts.
    Three queries however many items, posts and authors."""
    study_attributes = QualityAttribute.objects.filter(study=study).order_by("position", "id")
    attributes = {a.pk: Thread("attribute", a) for a in study_attributes}
    metrics = {m.pk: Thread("metric", m) for m in metric_list(study=study)}
    for post in _posts(study):
        # a post is about an attribute or else a metric (a database constraint)
        thread = attributes[post.attribute_id] if post.attribute_id is not None else metrics[cast(int, post.metric_id)]
        thread.posts.append(post)
    return {"attributes": list(attributes.values()), "metrics": list(metrics.values())}


def discussion_item_get(*, study: Study, kind: str, pk: int) -> QualityAttribute | Metric:
    """The study's attribute or metric ``pk`` (``kind`` is ``"attribute"`` or
    ``"metric"``); ``DoesNotExist`` if the study has none."""
    if kind == "attribute":
        return QualityAttribute.objects.get(study=study, pk=pk)
    return metric_list(study=study).get(pk=pk)


def thread_of(*, study: Study, item: QualityAttribute | Metric) -> Thread:
    """The thread of ``item`` (from ``discussion_item_get``) with its posts:
    one query."""
    kind = "attribute" if isinstance(item, QualityAttribute) else "metric"
    return Thread(kind, item, list(_posts(study).filter(**{kind: item})))


def post_get(*, study: Study, pk: int) -> Post:
    """The study's post ``pk`` with its author and its item
    (``Post.DoesNotExist`` if none): one query."""
    return _posts(study).select_related("attribute", "metric").get(pk=pk)
