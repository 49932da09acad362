"""Reads, always scoped to what the user may see.

An outsider never learns a study exists: every lookup of a study goes
through ``studies_visible_to`` so a study the user is not a member of is
simply "not found" (``Study.DoesNotExist``). Reads that take a study or a
membership take one the caller has already resolved that way.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db.models import Count, Exists, F, Func, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from engine.models import Run

from .models import (
    AcceptableRange,
    AttributeJudgment,
    AttributePrioritisation,
    AttributeVote,
    AttributeWeight,
    Candidate,
    Measurement,
    Membership,
    Metric,
    MetricJudgment,
    MetricPrioritisation,
    MetricVote,
    MetricWeight,
    PeerWeight,
    Post,
    QualityAttribute,
    Study,
)

User = AbstractBaseUser | AnonymousUser

# --- studies ---------------------------------------------------------------------


def studies_visible_to(user: User) -> QuerySet[Study]:
    """Studies in which ``user`` is the designer or an expert; a pending
    membership (not yet accepted) does not count."""
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(memberships__user=user, memberships__status=Membership.Status.ACTIVE).distinct()


def _my_memberships(user: User) -> Prefetch:
    mine = Membership.objects.filter(user=user).order_by("role")
    return Prefetch("memberships", queryset=mine, to_attr="my_memberships")


def studies_with_my_roles(user: User) -> QuerySet[Study]:
    """The user's studies with their designers and, as ``my_memberships``,
    the user's own memberships: two queries however many studies."""
    return (
        studies_visible_to(user)
        .select_related("designer")
        .prefetch_related(_my_memberships(user))
        .order_by("-created_at", "-id")
    )


def study_get(*, study_id: int, user: User) -> Study:
    """One of the user's studies with its designer and, as
    ``my_memberships``, the user's roles in it (two queries)."""
    return studies_with_my_roles(user).get(pk=study_id)


def study_detail_get(*, study_id: int, user: User) -> Study:
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


# --- experts ----------------------------------------------------------------------


def expert_list(*, study: Study | None) -> QuerySet[Membership]:
    """The study's expert memberships with their users, in the order they
    joined (the rows of V and W in every run). ``study=None`` gives the
    unfiltered queryset, for prefetching."""
    experts = Membership.objects.filter(role=Membership.Role.EXPERT).select_related("user").order_by("id")
    return experts if study is None else experts.filter(study=study)


def expert_get(*, study: Study, username: str) -> Membership:
    """The study's expert ``username`` (``Membership.DoesNotExist`` if none).
    A username with a NUL character names nobody; it must not reach the
    query, which PostgreSQL would fail instead of answering."""
    if "\x00" in username:
        raise Membership.DoesNotExist
    return expert_list(study=study).get(user__username=username)


def member_list(*, study: Study) -> QuerySet[Membership]:
    """The designer and the experts, with their users."""
    return Membership.objects.filter(study=study).select_related("user").order_by("role", "id")


# --- setup ----------------------------------------------------------------------------


def attribute_get(*, study: Study, name: str) -> QualityAttribute:
    """The study's attribute ``name`` (``QualityAttribute.DoesNotExist`` if none)."""
    return QualityAttribute.objects.get(study=study, name=name)


def measurement_list(*, study: Study) -> QuerySet:
    """The study's measurements as ``{candidate__name, metric__name, value}``
    rows, by candidate then metric: one query, touching only this study's
    rows (through the index on ``Measurement.study``)."""
    return (
        Measurement.objects.filter(study=study)
        .order_by("candidate__position", "candidate_id", "metric__position", "metric_id")
        .values("candidate__name", "metric__name", "value")
    )


# --- the selection ------------------------------------------------------------------


def selected_attributes(study: Study | None) -> QuerySet[QualityAttribute]:
    """The attributes fixed by the vote, in the study's order (the columns of
    a prioritisation)."""
    attributes = QualityAttribute.objects.filter(is_selected=True).order_by("position", "id")
    return attributes if study is None else attributes.filter(study=study)


def selected_metrics(study: Study | None) -> QuerySet[Metric]:
    """The metrics fixed by the vote, grouped by attribute in the study's
    order: the columns of W, L, U and M in every run."""
    metrics = (
        Metric.objects.filter(is_selected=True)
        .select_related("attribute")
        .order_by("attribute__position", "attribute__id", "position", "id")
    )
    return metrics if study is None else metrics.filter(study=study)


def vote_selection_get(*, study: Study) -> tuple[set[int], set[int]]:
    """The selection the votes give now: ``(attribute ids, metric ids)``.

    An attribute is selected when it is main or has **at least** ``c`` votes
    (METHOD.md section 2, Decision); a metric when its attribute is selected
    and it has at least the metric threshold of votes.
    """
    attributes = QualityAttribute.objects.filter(study=study).annotate(vote_count=Count("votes"))
    attribute_ids = {
        a.pk for a in attributes if a.kind == QualityAttribute.Kind.MAIN or a.vote_count >= study.attribute_threshold
    }
    metrics = Metric.objects.filter(study=study).annotate(vote_count=Count("votes"))
    metric_ids = {m.pk for m in metrics if m.attribute_id in attribute_ids and m.vote_count >= study.metric_threshold}
    return attribute_ids, metric_ids


# --- what is missing --------------------------------------------------------------------


# --- pending experts (consent): why their inputs do not count yet --------------------------


def _pending_experts(study: Study) -> QuerySet[Membership]:
    return Membership.objects.filter(study=study, role=Membership.Role.EXPERT, status=Membership.Status.PENDING)


def pending_reason(membership: Membership) -> str:
    name = membership.user.get_username()
    if membership.inputs_imported_by is None:
        return f"{name} has not yet accepted the invitation"
    return f"{name} has not yet confirmed the inputs imported by {membership.inputs_imported_by.get_username()}"


def unconfirmed_votes(*, study: Study) -> list[str]:
    """Why closing the vote must wait: pending experts holding imported votes."""
    voted = Q(Exists(AttributeVote.objects.filter(expert=OuterRef("pk")))) | Q(
        Exists(MetricVote.objects.filter(expert=OuterRef("pk")))
    )
    pending = _pending_experts(study).filter(voted)
    return [pending_reason(m) for m in pending.select_related("user", "inputs_imported_by").order_by("id")]


def inputs_pending(*, study: Study) -> dict[int, str]:
    """``{membership id: reason}`` for the study's pending experts."""
    pending = _pending_experts(study)
    return {m.pk: pending_reason(m) for m in pending.select_related("user", "inputs_imported_by")}


def missing_input_list(*, study: Study) -> dict[str, list[str]]:
    """What each expert still has to give before assessment can close:
    ``{username: [what is missing, ...]}``, only experts with gaps."""
    experts = list(expert_list(study=study))
    without_default = [m for m in selected_metrics(study) if m.default_least_acceptable is None]
    prioritised = set(AttributePrioritisation.objects.filter(expert__study=study).values_list("expert_id", flat=True))
    ranged = set(AcceptableRange.objects.filter(expert__study=study).values_list("expert_id", "metric_id"))
    rated = {}
    for rater_id, ratee_id in PeerWeight.objects.filter(rater__study=study).values_list("rater_id", "ratee_id"):
        rated.setdefault(rater_id, set()).add(ratee_id)
    expert_ids = {e.pk for e in experts}
    pending = inputs_pending(study=study)
    gaps = {}
    for expert in experts:
        if expert.pk in pending:  # imported inputs count once confirmed
            gaps[expert.user.get_username()] = [pending[expert.pk]]
            continue
        missing = []
        if expert.pk not in prioritised:
            missing.append("prioritisation of the attributes")
        unranged = [m.name for m in without_default if (expert.pk, m.pk) not in ranged]
        if unranged:
            missing.append(f"acceptable range for {', '.join(unranged)}")
        if rated.get(expert.pk, set()) != expert_ids:
            missing.append("weights for fellow experts")
        if missing:
            gaps[expert.user.get_username()] = missing
    return gaps


# --- what experts entered, in bundle shape ------------------------------------------------

INPUT_SECTIONS = ("votes", "priorities", "ranges", "peer_weights")


def number_out(value: float) -> int | float:
    """Whole numbers as ints, so ``7`` round-trips as ``7`` and not ``7.0``."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


def _prioritisation_out(prioritisation: AttributePrioritisation | MetricPrioritisation, item_field: str) -> dict:
    # Rows were written in the order given (weights in item order), so sorting
    # by id keeps the export independent of the order the database returns.
    if prioritisation.method == "direct":
        weights = sorted(prioritisation.weights.all(), key=lambda w: w.pk)
        return {"method": "direct", "weights": {getattr(w, item_field).name: number_out(w.given) for w in weights}}
    judgments = sorted(prioritisation.judgments.all(), key=lambda j: j.pk)
    judgments = [[j.row.name, j.column.name, number_out(j.value)] for j in judgments]
    return {"method": prioritisation.method, "judgments": judgments}


def _prioritisations(
    model: type, weight_model: type, judgment_model: type, item_field: str, ids: list[int]
) -> QuerySet:
    """Prioritisations of these experts with their weights and judgments:
    three queries."""
    return model.objects.filter(expert_id__in=ids).prefetch_related(
        Prefetch("weights", queryset=weight_model.objects.select_related(item_field)),
        Prefetch("judgments", queryset=judgment_model.objects.select_related("row", "column")),
    )


def _priorities_into(sections: dict, username: dict[int, str], with_results: bool) -> None:
    ids = list(username)
    attribute_level = _prioritisations(AttributePrioritisation, AttributeWeight, AttributeJudgment, "attribute", ids)
    for prioritisation in attribute_level:
        section = _prioritisation_out(prioritisation, "attribute")
        if with_results:
            section["result"] = prioritisation.result_record
        sections[username[prioritisation.expert_id]]["priorities"] = section
    local = _prioritisations(MetricPrioritisation, MetricWeight, MetricJudgment, "metric", ids)
    local = local.select_related("attribute")
    for prioritisation in sorted(local, key=lambda p: (p.attribute.position, p.attribute_id)):
        section = sections[username[prioritisation.expert_id]]["priorities"]
        if section is None:
            continue
        name = prioritisation.attribute.name
        section.setdefault("metric_priorities", {})[name] = _prioritisation_out(prioritisation, "metric")
        if with_results:
            section.setdefault("metric_results", {})[name] = prioritisation.result_record


def _empty_inputs(sections: set[str]) -> dict[str, Any]:
    fresh = {
        "votes": lambda: {"attributes": [], "metrics": []},
        "priorities": lambda: None,
        "ranges": dict,
        "peer_weights": dict,
    }
    return {key: make() for key, make in fresh.items() if key in sections}


def expert_inputs_list(
    *,
    study: Study,
    experts: Iterable[Membership] | None = None,
    sections: Iterable[str] = INPUT_SECTIONS,
    with_results: bool = False,
) -> dict[str, dict[str, Any]]:
    """Each expert's inputs in bundle shape: ``{username: {"votes":
    {"attributes", "metrics"}, "priorities", "ranges", "peer_weights"}}``.

    ``experts`` limits it to those memberships (the API's ``my/`` and
    ``inputs/`` endpoints), ``sections`` to those sections; the query count
    does not grow with the number of experts or items. ``with_results``
    adds to each prioritisation the ``result`` (and ``metric_results``)
    stored when it was saved.
    """
    experts = list(expert_list(study=study) if experts is None else experts)
    sections = set(sections)
    username = {e.pk: e.user.get_username() for e in experts}
    inputs = {name: _empty_inputs(sections) for name in username.values()}
    ids = list(username)

    if "votes" in sections:
        attribute_votes = AttributeVote.objects.filter(expert_id__in=ids).select_related("attribute")
        for vote in attribute_votes.order_by("attribute__position", "attribute__id"):
            inputs[username[vote.expert_id]]["votes"]["attributes"].append(vote.attribute.name)
        metric_votes = MetricVote.objects.filter(expert_id__in=ids).select_related("metric")
        for vote in metric_votes.order_by("metric__position", "metric__id"):
            inputs[username[vote.expert_id]]["votes"]["metrics"].append(vote.metric.name)
    if "priorities" in sections:
        _priorities_into(inputs, username, with_results)
    if "ranges" in sections:
        ranges = AcceptableRange.objects.filter(expert_id__in=ids).select_related("metric")
        ranges = ranges.order_by("metric__attribute__position", "metric__attribute_id", "metric__position", "metric_id")
        for acceptable in ranges:
            inputs[username[acceptable.expert_id]]["ranges"][acceptable.metric.name] = [
                number_out(acceptable.least_acceptable),
                number_out(acceptable.desired),
            ]
    if "peer_weights" in sections:
        for peer in PeerWeight.objects.filter(rater_id__in=ids).select_related("ratee__user").order_by("ratee_id"):
            inputs[username[peer.rater_id]]["peer_weights"][peer.ratee.user.get_username()] = peer.weight
    return inputs


# --- pages: studyhome ----------------------------------------------------------------
# The dashboard, the study home and the run pages. Progress is read with
# subqueries on the expert memberships, so a page reads every expert's
# progress in one query however many experts, studies or inputs there are.


def _count(queryset: QuerySet) -> Coalesce:
    """``SELECT COUNT(*)`` of ``queryset`` as a subquery expression."""
    counted = queryset.order_by().annotate(total=Func(F("pk"), function="COUNT")).values("total")
    return Coalesce(Subquery(counted[:1]), 0)


def expert_progress_annotate(memberships: QuerySet[Membership]) -> QuerySet[Membership]:
    """Expert memberships with what each has given so far, as annotations:

    - ``votes_cast``: attribute and metric votes;
    - ``prioritised_at`` / ``prioritisation_method``: the attribute
      prioritisation's last change and method (null: none yet);
    - ``ranges_needed``: selected metrics without a default range (the ones
      closing the assessment needs a range for, as ``missing_input_list``);
      ``ranges_missing``: those the expert has no range for;
      ``ranges_given``: the expert's ranges on selected metrics;
    - ``peers_rated`` / ``experts_total``: peer weights given, and the
      study's experts (complete when equal: one weight per expert).
    """
    needed = Metric.objects.filter(study=OuterRef("study_id"), is_selected=True, default_least_acceptable__isnull=True)
    ranged = AcceptableRange.objects.filter(expert=OuterRef(OuterRef("pk")), metric=OuterRef("pk"))
    prioritisation = AttributePrioritisation.objects.filter(expert=OuterRef("pk"))
    return memberships.annotate(
        votes_cast=_count(AttributeVote.objects.filter(expert=OuterRef("pk")))
        + _count(MetricVote.objects.filter(expert=OuterRef("pk"))),
        prioritised_at=Subquery(prioritisation.values("updated_at")[:1]),
        prioritisation_method=Subquery(prioritisation.values("method")[:1]),
        ranges_needed=_count(needed),
        ranges_missing=_count(needed.exclude(Exists(ranged))),
        ranges_given=_count(AcceptableRange.objects.filter(expert=OuterRef("pk"), metric__is_selected=True)),
        peers_rated=_count(PeerWeight.objects.filter(rater=OuterRef("pk"))),
        experts_total=_count(Membership.objects.filter(study=OuterRef("study_id"), role=Membership.Role.EXPERT)),
    )


def expert_progress_list(*, study: Study) -> QuerySet[Membership]:
    """The study's experts (pending ones too) with their users, who imported
    their inputs, and their progress (``expert_progress_annotate``): one
    query."""
    experts = expert_list(study=study).select_related("inputs_imported_by")
    return expert_progress_annotate(experts)


def dashboard_studies(*, user: User) -> list[Study]:
    """The user's studies for the dashboard, newest first, each with
    ``my_memberships`` (the expert one with its progress annotated), the
    counts of its setup (``attribute_count``, ``metric_count``,
    ``candidate_count``, ``run_count``) and, for the studies the user
    designs, ``expert_rows``: every expert's progress. Three queries
    however many studies."""
    mine = expert_progress_annotate(Membership.objects.filter(user=user).order_by("role"))
    studies = list(
        studies_visible_to(user)
        .select_related("designer")
        .prefetch_related(Prefetch("memberships", queryset=mine, to_attr="my_memberships"))
        .annotate(
            attribute_count=_count(QualityAttribute.objects.filter(study=OuterRef("pk"))),
            metric_count=_count(Metric.objects.filter(study=OuterRef("pk"))),
            candidate_count=_count(Candidate.objects.filter(study=OuterRef("pk"))),
            run_count=_count(Run.objects.filter(study=OuterRef("pk"))),
        )
        .order_by("-created_at", "-id")
    )
    designed = studies_visible_to(user).filter(designer=user)
    experts = expert_progress_annotate(
        Membership.objects.filter(study__in=designed, role=Membership.Role.EXPERT)
        .select_related("user", "inputs_imported_by")
        .order_by("id")
    )
    by_study = {}
    for expert in experts:
        by_study.setdefault(expert.study_id, []).append(expert)
    for study in studies:
        study.expert_rows = by_study.get(study.pk, [])
    return studies


def study_setup_get(*, study: Study) -> dict[str, Any]:
    """What the study home summarises of the setup: ``attributes`` (each
    with ``metric_list``, in the study's order), ``metrics`` (grouped by
    attribute, as ``selected_metrics``) and ``candidate_count``: three
    queries."""
    attributes = list(QualityAttribute.objects.filter(study=study).order_by("position", "id"))
    metrics = list(Metric.objects.filter(study=study).order_by("attribute__position", "attribute_id", "position", "id"))
    per_attribute = {}
    for metric in metrics:
        per_attribute.setdefault(metric.attribute_id, []).append(metric)
    for attribute in attributes:
        attribute.metric_list = per_attribute.get(attribute.pk, [])
    return {
        "attributes": attributes,
        "metrics": metrics,
        "candidate_count": Candidate.objects.filter(study=study).count(),
    }


def run_list(*, study: Study) -> QuerySet[Run]:
    """The study's runs, newest first, with who launched them, without
    their snapshot and results (megabytes on a large study)."""
    return Run.objects.filter(study=study).select_related("launched_by").defer("snapshot", "results")


def run_get(*, run_id: int, user: User) -> Run:
    """One run of a study the user is a member of (``Run.DoesNotExist``
    otherwise), with its results but without its snapshot: one query."""
    visible = studies_visible_to(user)
    return Run.objects.select_related("launched_by").defer("snapshot").get(pk=run_id, study__in=visible)


def runs_visible_to(user: User) -> QuerySet[Run]:
    """Runs of the studies the user is a member of."""
    return Run.objects.filter(study__in=studies_visible_to(user))


# What the results page reads of a run's snapshot: the metrics' units and
# directions (for its sentences) and what a candidate's individual scores
# are computed from. The weights and peer weights are left in the database.
SCORE_INPUT_KEYS = ("experts", "metrics", "candidates", "lower", "upper", "measurements")


def run_score_inputs(*, run_id: int) -> dict[str, Any]:
    """Those parts of a run's snapshot (``SCORE_INPUT_KEYS``), extracted by
    the database: one query."""
    row = Run.objects.filter(pk=run_id).values(*(f"snapshot__{key}" for key in SCORE_INPUT_KEYS)).get()
    return {key: row[f"snapshot__{key}"] for key in SCORE_INPUT_KEYS}


def run_pair_get(*, run_id: int, other_id: int, user: User) -> tuple[Run, Run]:
    """Two runs, each of a study the user is a member of, with their
    snapshots, results and studies (``Run.DoesNotExist`` if either is not):
    one query."""
    visible = studies_visible_to(user)
    pair = Run.objects.select_related("launched_by", "study").filter(pk__in={run_id, other_id}, study__in=visible)
    runs = {run.pk: run for run in pair}
    if run_id not in runs or other_id not in runs:
        raise Run.DoesNotExist
    return runs[run_id], runs[other_id]


def run_comparable_list(*, run: Run) -> QuerySet[Run]:
    """The study's other succeeded runs, newest first, without their JSON:
    what ``run`` can be compared with."""
    return (
        Run.objects.filter(study_id=run.study_id, status=Run.Status.SUCCEEDED)
        .exclude(pk=run.pk)
        .only("pk", "launched_at", "study_id")
    )


# --- pages: discussion ------------------------------------------------------------------

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


def _study_metrics(study: Study) -> QuerySet[Metric]:
    return (
        Metric.objects.filter(study=study)
        .select_related("attribute")
        .order_by("attribute__position", "attribute_id", "position", "id")
    )


def discussion_get(*, study: Study) -> dict[str, list[Thread]]:
    """Every thread of the study with its posts: ``{"attributes": [...],
    "metrics": [...]}``, one thread per attribute and per metric in the
    study's order (metrics grouped by attribute), with or without posts.
    Three queries however many items, posts and authors."""
    study_attributes = QualityAttribute.objects.filter(study=study).order_by("position", "id")
    attributes = {a.pk: Thread("attribute", a) for a in study_attributes}
    metrics = {m.pk: Thread("metric", m) for m in _study_metrics(study)}
    for post in _posts(study):
        thread = attributes[post.attribute_id] if post.attribute_id is not None else metrics[post.metric_id]
        thread.posts.append(post)
    return {"attributes": list(attributes.values()), "metrics": list(metrics.values())}


def discussion_item_get(*, study: Study, kind: str, pk: int) -> QualityAttribute | Metric:
    """The study's attribute or metric ``pk`` (``kind`` is ``"attribute"`` or
    ``"metric"``); ``DoesNotExist`` if the study has none."""
    if kind == "attribute":
        return QualityAttribute.objects.get(study=study, pk=pk)
    return _study_metrics(study).get(pk=pk)


def thread_of(*, study: Study, item: QualityAttribute | Metric) -> Thread:
    """The thread of ``item`` (from ``discussion_item_get``) with its posts:
    one query."""
    kind = "attribute" if isinstance(item, QualityAttribute) else "metric"
    return Thread(kind, item, list(_posts(study).filter(**{kind: item})))


def post_get(*, study: Study, pk: int) -> Post:
    """The study's post ``pk`` with its author and its item
    (``Post.DoesNotExist`` if none): one query."""
    return _posts(study).select_related("attribute", "metric").get(pk=pk)


# --- pages: expert ---------------------------------------------------------------------------


def expert_steps_get(*, expert: Membership) -> dict[str, bool]:
    """Which of the expert's four steps hold an input (one query), from the
    progress the study home shows (``expert_progress_annotate``).

    votes: at least one vote stored (a ballot with no vote leaves no row, so
    it reads as missing); priorities: a prioritisation of the attributes;
    ranges: every selected metric without a default range has the expert's
    range (as ``missing_input_list`` asks); peer weights: a weight for every
    expert of the study (``peer_weights_set`` stores whole rows only).
    """
    progress = expert_progress_annotate(Membership.objects.filter(pk=expert.pk)).get()
    return {
        "votes": progress.votes_cast > 0,
        "priorities": progress.prioritised_at is not None,
        "ranges": progress.ranges_missing == 0,
        "peer_weights": progress.peers_rated == progress.experts_total,
    }


def ballot_list(*, study: Study, with_tallies: bool) -> list[QualityAttribute]:
    """Every attribute of the study with, as ``ballot_metrics``, its metrics,
    in the study's order (two queries). ``with_tallies`` adds ``vote_count``
    to each attribute and metric: the tallies shown once voting has closed."""
    metrics = Metric.objects.order_by("position", "id")
    attributes = QualityAttribute.objects.filter(study=study).order_by("position", "id")
    if with_tallies:
        metrics = metrics.annotate(vote_count=Count("votes"))
        attributes = attributes.annotate(vote_count=Count("votes"))
    return list(attributes.prefetch_related(Prefetch("metrics", queryset=metrics, to_attr="ballot_metrics")))


def selected_measurement_list(*, study: Study) -> QuerySet:
    """The measurements of the study's selected metrics as ``{metric_id,
    candidate__name, value}`` rows, by candidate (one query)."""
    return (
        Measurement.objects.filter(study=study, metric__is_selected=True)
        .order_by("candidate__position", "candidate_id")
        .values("metric_id", "candidate__name", "value")
    )


# --- pages: designer ---------------------------------------------------------------------


def metric_list(*, study: Study) -> QuerySet[Metric]:
    """The study's metrics with their attributes, grouped by attribute in
    the study's order (one query)."""
    return _study_metrics(study)


def measurement_values(*, study: Study) -> dict[tuple[int, int], float]:
    """``{(candidate id, metric id): value}`` of the study (one query of plain values)."""
    rows = Measurement.objects.filter(study=study).values_list("candidate_id", "metric_id", "value")
    return {(candidate, metric): value for candidate, metric, value in rows}


def is_expert_of(*, study: Study, user: User) -> bool:
    """Whether ``user`` holds an expert membership (active or pending) of ``study``."""
    return Membership.objects.filter(study=study, user_id=user.pk, role=Membership.Role.EXPERT).exists()


def attribute_list(*, study: Study) -> QuerySet[QualityAttribute]:
    """The study's attributes in its order (one query)."""
    return QualityAttribute.objects.filter(study=study).order_by("position", "id")


def candidate_list(*, study: Study) -> QuerySet[Candidate]:
    """The study's candidates in its order (one query)."""
    return study.candidates.order_by("position", "id")


def measurements_of(*, item: QualityAttribute | Metric | Candidate) -> QuerySet[Measurement]:
    """The measured values that go when ``item`` is removed."""
    if isinstance(item, QualityAttribute):
        return Measurement.objects.filter(metric__attribute=item)
    if isinstance(item, Metric):
        return Measurement.objects.filter(metric=item)
    return Measurement.objects.filter(candidate=item)
