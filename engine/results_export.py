"""What a succeeded run's results are offered as beyond its JSON document,
the same for the pages and the API: the results CSV (one function, so the
page's download and ``GET /api/v1/runs/{run}/results.csv`` are the same
bytes) and two runs compared (``engine.compare`` over the stored
documents and snapshots, the earlier run always "before")."""

from dataclasses import dataclass
from typing import cast

from workspace.csv_safe import CSV_CONTENT_TYPE, csv_download, csv_text

from . import selectors as engine_selectors
from . import snapshot as engine_snapshot
from .compare import Comparison, compare_runs
from .explain import MetricInfo, veto_sentences
from .models import Run


def metric_infos(score_inputs: dict) -> dict[str, MetricInfo]:
    """Each metric's unit and direction, and whether it is elicited (the
    columns of the experts' own values when ``score_inputs`` hold them, else
    their ``elicited_metrics``, as ``run_score_inputs`` gives them)."""
    elicited = {entry["metric"] for entry in score_inputs.get("expert_values") or []}
    elicited |= set(score_inputs.get("elicited_metrics") or [])
    return {
        m["name"]: MetricInfo(unit=m["unit"], better=m["better"], elicited=j in elicited)
        for j, m in enumerate(score_inputs["metrics"])
    }


# (Every CSV goes through workspace.csv_safe: text a spreadsheet would run
# as a formula starts with an apostrophe, numbers are numbers.)
RESULTS_CSV_CONTENT_TYPE = CSV_CONTENT_TYPE


def results_csv(document: dict, infos: dict[str, MetricInfo]) -> str:
    """One row per candidate in rank order: rank, name, cef, weighted_score,
    vetoed, veto reasons (the page's sentences), then each metric's group
    score. Numbers at full precision, as in the JSON document."""
    metrics = document["metrics"]
    rows: list[list[object]] = [["rank", "name", "cef", "weighted_score", "vetoed", "veto_reasons", *metrics]]
    rows += [
        [
            candidate["rank"],
            candidate["name"],
            float(candidate["cef"]),
            float(candidate["weighted_score"]),
            "true" if candidate["vetoed"] else "false",
            " ".join(veto_sentences(candidate["name"], candidate["vetoes"], infos)),
            *(float(candidate["group_scores"][metric]) for metric in metrics),
        ]
        for candidate in document["candidates"]
    ]
    return csv_text(rows)


def results_csv_bytes(*, run: Run) -> bytes:
    """The CSV download of a succeeded run, with a byte-order mark (as
    ``csv_safe.csv_download``)."""
    infos = metric_infos(engine_selectors.run_score_inputs(run_id=run.pk, keys=engine_selectors.METRIC_INPUT_KEYS))
    return b"\xef\xbb\xbf" + results_csv(engine_selectors.results_document(run=run), infos).encode()


def candidate_scores_csv_bytes(score_inputs: dict, name: str) -> bytes | None:
    """Every expert's individual score of one candidate (the run page's heat
    table, all of it): a row per expert, a column per metric, numbers at
    full precision. None if the run has no such candidate."""
    inputs = engine_snapshot.ScoreInputs(score_inputs)
    if name not in inputs.index:
        return None
    scores = inputs.score_matrix(name).tolist()
    rows: list[list[object]] = [["expert", *inputs.metrics]]
    rows += [[expert, *row] for expert, row in zip(inputs.experts, scores, strict=True)]
    return csv_download(rows)


def candidate_scores_csv_filename(run: Run, name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    return f"approve-run-{run.pk}-scores-{safe}.csv"


COMPARISON_CSV_COLUMNS = [
    "name",
    "before_rank",
    "after_rank",
    "move",
    "places",
    "before_cef",
    "after_cef",
    "cef_change",
    "before_weighted_score",
    "after_weighted_score",
    "weighted_score_change",
    "before_vetoed",
    "after_vetoed",
]


def _flag(value: bool | None) -> str:
    return "" if value is None else ("true" if value else "false")


def comparison_csv_bytes(compared: "RunComparison") -> bytes:
    """Every candidate of two runs compared (the comparison page's table, all
    of it), in the order of the later run: ranks, move (up, down, same, new,
    gone) and places, CEF and weighted score before, after and their change;
    an empty cell where a run has no such candidate."""
    rows: list[list[object]] = [list(COMPARISON_CSV_COLUMNS)]
    rows += [
        [
            move.name,
            move.before_rank,
            move.after_rank,
            move.status,
            move.places,
            move.before_cef,
            move.after_cef,
            move.cef_delta,
            move.before_weighted,
            move.after_weighted,
            move.weighted_delta,
            _flag(move.before_vetoed),
            _flag(move.after_vetoed),
        ]
        for move in compared.comparison.candidates
    ]
    return csv_download(rows)


def comparison_csv_filename(compared: "RunComparison") -> str:
    return f"approve-runs-{compared.before.pk}-{compared.after.pk}-compared.csv"


def results_csv_filename(run: Run) -> str:
    return f"approve-run-{run.pk}-results.csv"


# --- two runs compared ---------------------------------------------------------------------


class ComparisonRefused(Exception):
    """Two runs that cannot be compared; ``status`` is 400 for runs of
    different studies, 409 for a run with itself or one without results."""

    def __init__(self, message: str, status: int, code: str = "invalid_input") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


@dataclass(frozen=True)
class RunComparison:
    before: Run
    after: Run
    comparison: Comparison


def comparison_refusal(first: Run, second: Run) -> ComparisonRefused | None:
    """Why ``first`` and ``second`` cannot be compared, or None."""
    if first.pk == second.pk:
        return ComparisonRefused(
            f"{first.label} compared with itself changes nothing: choose another run of the study.", 409, "same_run"
        )
    if first.study_id != second.study_id:
        return ComparisonRefused(
            f"{first.label} belongs to the study {first.study.title!r} and {second.label.lower()} to "
            f"{second.study.title!r}: only runs of the same study can be compared.",
            400,
        )
    unfinished = [run for run in (first, second) if run.status != Run.Status.SUCCEEDED]
    if unfinished:
        return ComparisonRefused(
            " ".join(
                f"{run.label} has not succeeded (it is {run.get_status_display().lower()}), so it has no results "
                "to compare yet."
                for run in unfinished
            ),
            409,
            "run_not_finished",
        )
    return None


def run_comparison(first: Run, second: Run) -> RunComparison:
    """The two runs (from ``engine_selectors.run_pair_get``) compared, the earlier
    as "before" (``ComparisonRefused`` if they cannot be)."""
    refusal = comparison_refusal(first, second)
    if refusal is not None:
        raise refusal
    before, after = sorted((first, second), key=lambda run: (run.launched_at, run.pk))
    comparison = compare_runs(
        engine_selectors.comparison_document(run=before),
        engine_selectors.comparison_document(run=after),
        # succeeded runs (comparison_refusal), which always have their snapshots
        cast(dict, before.snapshot),
        cast(dict, after.snapshot),
        # the inputs the database found equal (and did not read)
        getattr(before, "inputs_same", ()),
    )
    return RunComparison(before=before, after=after, comparison=comparison)
