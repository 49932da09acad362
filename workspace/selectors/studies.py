"""Studies: which the user may see, the dashboard, a study's detail and the
summary of its setup."""

from typing import TYPE_CHECKING, Any, TypedDict, cast

from django.db.models import OuterRef, Prefetch, QuerySet

from ..extensions import STUDY_CONTENTS
from ..models import Candidate, Membership, Metric, QualityAttribute, Study
from ._queries import User, count_of
from .design import selected_attributes, selected_metrics
from .experts import ExpertProgress, expert_list, expert_progress_annotate


class MyMemberships(TypedDict):
    my_memberships: list[Membership]  # the user's own, prefetched


class Detail(MyMemberships):
    experts: list[Membership]  # with their users, in the order they joined
    selected_attributes: list[QualityAttribute]
    selected_metrics: list[Metric]


class DashboardRow(TypedDict):
    my_memberships: list[ExpertProgress]
    attribute_count: int
    metric_count: int
    candidate_count: int
    run_count: int
    expert_rows: list[ExpertProgress]  # the designer's studies: every expert's progress


# A study with the user's memberships, and one as the dashboard reads it
# (for the type checker: WithAnnotations takes its TypedDict only there).
if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    StudyWithRoles = WithAnnotations[Study, MyMemberships]
    StudyDetail = WithAnnotations[Study, Detail]
    DashboardStudy = WithAnnotations[Study, DashboardRow]
else:
    StudyWithRoles = StudyDetail = DashboardStudy = Study


def studies_visible_to(user: User) -> QuerySet[Study]:
    """Studies in which ``user`` is the designer or an expert; a pending
    membership (not yet accepted) does not count."""
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(memberships__user=user.pk, memberships__status=Membership.Status.ACTIVE).distinct()


def _my_memberships(user: User) -> Prefetch:
    mine = Membership.objects.filter(user=user.pk).order_by("role")
    return Prefetch("memberships", queryset=mine, to_attr="my_memberships")


def studies_designed_by(*, user: User) -> list[tuple[int, str]]:
    """The studies ``user`` designs, newest first, as ``(id, title)`` (the
    new-study page's templates): one query."""
    designed = studies_visible_to(user).filter(designer=user.pk).order_by("-created_at", "-id")
    return list(designed.values_list("pk", "title"))


def studies_with_my_roles(user: User) -> QuerySet[StudyWithRoles]:
    """The user's studies with their designers and, as ``my_memberships``,
    the user's own memberships: two queries however many studies."""
    studies = (
        studies_visible_to(user)
        .select_related("designer")
        .prefetch_related(_my_memberships(user))
        .order_by("-created_at", "-id")
    )
    return cast("QuerySet[StudyWithRoles]", studies)  # my_memberships: the prefetch's to_attr


def study_get(*, study_id: int, user: User) -> StudyWithRoles:
    """One of the user's studies with its designer and, as
    ``my_memberships``, the user's roles in it (two queries)."""
    return studies_with_my_roles(user).get(pk=study_id)


def study_detail_get(*, study_id: int, user: User) -> StudyDetail:
    """``study_get`` plus, as lists, ``experts`` (memberships with their
    users), ``selected_attributes`` and ``selected_metrics`` in the
    selection's order: five queries however big the study."""
    return (
        studies_with_my_roles(user)
        .prefetch_related(
            Prefetch("memberships", queryset=expert_list(study=None), to_attr="experts"),
            Prefetch("attributes", queryset=selected_attributes(None), to_attr="selected_attributes"),
            Prefetch("metrics", queryset=selected_metrics(None), to_attr="selected_metrics"),
        )
        .get(pk=study_id)
    )


def dashboard_studies(*, user: User) -> list[DashboardStudy]:
    """The user's studies for the dashboard, newest first, each with
    ``my_memberships`` (the expert one with its progress annotated), the
    counts of its setup (``attribute_count``, ``metric_count``,
    ``candidate_count``, ``run_count``) and, for the studies the user
    designs, ``expert_rows``: every expert's progress. Three queries
    however many studies."""
    mine = expert_progress_annotate(Membership.objects.filter(user=user.pk).order_by("role"))
    studies = cast(
        "list[DashboardStudy]",  # expert_rows is set below
        list(
            studies_visible_to(user)
            .select_related("designer")
            .prefetch_related(Prefetch("memberships", queryset=mine, to_attr="my_memberships"))
            .annotate(
                attribute_count=count_of(QualityAttribute.objects.filter(study=OuterRef("pk"))),
                metric_count=count_of(Metric.objects.filter(study=OuterRef("pk"))),
                candidate_count=count_of(Candidate.objects.filter(study=OuterRef("pk"))),
                # run_count: the engine's runs (workspace.extensions.STUDY_CONTENTS)
                **{key: count_of(rows().filter(study=OuterRef("pk"))) for key, rows in STUDY_CONTENTS.items()},
            )
            .order_by("-created_at", "-id")
        ),
    )
    designed = studies_visible_to(user).filter(designer=user.pk)
    experts = expert_progress_annotate(
        Membership.objects.filter(study__in=designed, role=Membership.Role.EXPERT)
        .select_related("user", "inputs_imported_by")
        .order_by("id")
    )
    by_study: dict[int, list[ExpertProgress]] = {}
    for expert in experts:
        by_study.setdefault(expert.study_id, []).append(expert)
    for study in studies:
        study.expert_rows = by_study.get(study.pk, [])
    return studies


def study_content_counts(*, study: Study) -> dict[str, int]:
    """What the apps above keep for ``study``, counted by the key each
    registered (``workspace.extensions.STUDY_CONTENTS``: ``run_count``)."""
    return {key: rows().filter(study=study).count() for key, rows in STUDY_CONTENTS.items()}


def study_setup_get(*, study: Study) -> dict[str, Any]:
    """What the study home summarises of the setup: ``attributes`` (each
    with ``metric_list``, in the study's order), ``metrics`` (grouped by
    attribute, as ``selected_metrics``) and ``candidate_count``: three
    queries."""
    attributes = list(QualityAttribute.objects.filter(study=study).order_by("position", "id"))
    metrics = list(Metric.objects.filter(study=study).order_by("attribute__position", "attribute_id", "position", "id"))
    per_attribute: dict[int, list[Metric]] = {}
    for metric in metrics:
        per_attribute.setdefault(metric.attribute_id, []).append(metric)
    for attribute in attributes:
        attribute.metric_list = per_attribute.get(attribute.pk, [])  # type: ignore[attr-defined]  # for the template
    return {
        "attributes": attributes,
        "metrics": metrics,
        "candidate_count": Candidate.objects.filter(study=study).count(),
    }
