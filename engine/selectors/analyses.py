"""Robustness analyses of runs, each read only through a study the user is a
member of (``engine.analyses`` writes them)."""

from typing import Any, cast

from django.db.models import QuerySet
from django.db.models.fields.json import KeyTransform

from engine import sensitivity
from engine.analysis_words import with_words
from engine.models import Analysis, Run
from workspace.selectors import User, studies_visible_to


def run_snapshot_parts(*, run_id: int, keys: tuple[str, ...]) -> dict[str, Any]:
    """Those top-level parts of a run's snapshot, extracted by the database:
    one query."""
    row = Run.objects.filter(pk=run_id).values(*(f"snapshot__{key}" for key in keys)).get()
    return {key: row[f"snapshot__{key}"] for key in keys}


def run_stored_ranking(*, run: Run) -> sensitivity.StoredRanking:
    """What a run's robustness is computed from: its stored results (as
    loaded on ``run``) and its snapshot's metrics with their attributes (one
    query)."""
    metrics = run_snapshot_parts(run_id=run.pk, keys=("metrics",))["metrics"]
    return sensitivity.stored_ranking(cast(dict, run.results), metrics)


def analysis_list(*, run: Run, with_result: bool = False) -> QuerySet[Analysis]:
    """The run's analyses, newest first, with who launched them and (unless
    ``with_result``) without their results."""
    analyses = Analysis.objects.filter(run=run).select_related("launched_by")
    return analyses if with_result else analyses.defer("result")


def analysis_latest(*, run: Run, kind: str) -> Analysis | None:
    """The run's newest analysis of ``kind``, with of its result the
    summary alone (``result`` is ``{"summary": ...}``, or None before it
    succeeded): the database extracts it, and the merged counts (most of
    the bytes at a thousand candidates) are never read (issue 33, item 6)."""
    analysis = (
        Analysis.objects.filter(run=run, kind=kind)
        .select_related("launched_by")
        .defer("result")
        .annotate(result_summary=KeyTransform("summary", "result"))
        .first()
    )
    if analysis is not None:
        summary = analysis.result_summary  # annotated above
        analysis.result = None if summary is None else {"summary": summary}
    return analysis


def analysis_get(*, analysis_id: int, user: User, run_id: int | None = None) -> Analysis:
    """One analysis of a run of a study the user is a member of
    (``Analysis.DoesNotExist`` otherwise; of that run when ``run_id`` is
    given), with its run (without the run's JSON): one query."""
    analyses = Analysis.objects.select_related("launched_by", "run").defer("run__snapshot", "run__results")
    if run_id is not None:
        analyses = analyses.filter(run_id=run_id)
    return analyses.get(pk=analysis_id, run__study__in=studies_visible_to(user))


def analysis_sentences(*, run: Run) -> dict[str, str]:
    """The newest succeeded analysis of each kind's one-sentence summary,
    ``{kind: sentence}``, written now (``engine.analysis_words``) from what
    the database extracts of the stored summary (not the counts): a
    leave-one-out's winner and rows, a Monte Carlo's two candidates most
    often best (its summary lists them first); a summary stored with its
    sentence (before the words were written when shown) gives that. One
    query."""
    rows = (
        Analysis.objects.filter(run=run, status=Analysis.Status.SUCCEEDED)
        .order_by("-launched_at", "-id")
        .values_list(
            "kind",
            "result__summary__sentence",
            "result__summary__winner",
            "result__summary__rows",
            "result__summary__candidates__0",
            "result__summary__candidates__1",
        )
    )
    sentences: dict[str, str] = {}
    for kind, stored, winner, experts, first, second in rows:
        if kind in sentences:
            continue
        if stored is not None:
            summary: dict[str, Any] = {"sentence": stored}
        elif kind == Analysis.Kind.LEAVE_ONE_OUT:
            summary = {"winner": winner, "rows": experts}
        else:
            summary = {"candidates": [row for row in (first, second) if row is not None]}
        sentences[kind] = with_words(kind, summary)["sentence"]
    return sentences
