"""The reads of a run's results: the ``approve-results/1`` document
(FORMATS.md) as a dict (``results_document``) or as its bytes
(``results_json``), the queryset that serves those bytes without parsing
(``runs_with_document``), and one candidate's individual scores
(``candidate_individual_scores``). ``document_tail`` is the one place the
document's computed part is serialised: ``engine.results`` stores its text
when a run finishes.
"""

import json
from collections.abc import Collection, Iterator
from typing import cast

from django.db.models import Manager, QuerySet
from django.db.models.fields.json import KT

from engine import disagreement
from engine.models import Run
from engine.snapshot import ScoreInputs
from workspace.downloads import version_tag

__all__ = [
    "candidate_individual_scores",
    "comparison_document",
    "document_tail",
    "results_document",
    "results_individual_page",
    "results_json",
    "results_json_read",
    "results_version",
    "runs_with_document",
]


def _named(names: list[str], row: list) -> dict:
    return dict(zip(names, row, strict=True))


def _candidate_out(entry: dict, experts: list[str], metrics: list[str]) -> dict:
    """One stored candidate in the document's shape (FORMATS.md); its
    optional "veto_shares" only when stored (results of layout 3)."""
    candidate = {
        "name": entry["name"],
        "rank": entry["rank"],
        "cef": entry["cef"],
        "weighted_score": entry["weighted_score"],
        "vetoed": entry["vetoed"],
        "vetoes": [
            {"expert": experts[i], "metric": metrics[j], "value": value, "range": [least, desired]}
            for i, j, value, least, desired in entry["vetoes"]
        ],
        "group_scores": _named(metrics, entry["group_scores"]),
    }
    if "veto_shares" in entry:
        candidate["veto_shares"] = _named(metrics, entry["veto_shares"])
    return candidate


def _document_start(run: Run, study: str | None) -> dict:
    """The document's keys before its computed results, in FORMATS.md's order."""
    return {
        "format": "approve-results/1",
        "study": study,
        "run": run.pk,
        "launched_at": run.launched_at.isoformat().replace("+00:00", "Z"),
        "tolerance": run.tolerance,
    }


# The stored JSON keeps no key order (PostgreSQL's jsonb sorts keys): the
# document's order of the disagreement fields is written out here.
SPREAD_KEYS = disagreement.WeightSpread._fields  # "min", "max", "mean", "stdev"
CONSENSUS_KEYS = ("value", "wording")


def _spread_out(names: list[str], spread: dict) -> dict:
    """A stored spread (lists in column order) as ``{name: {"min", "max", "mean", "stdev"}}``."""
    columns = zip(*(spread[key] for key in SPREAD_KEYS), strict=True)
    return {name: dict(zip(SPREAD_KEYS, values, strict=True)) for name, values in zip(names, columns, strict=True)}


def _disagreement_out(results: dict) -> dict:
    """The document's optional "disagreement" object (docs/formats.md)."""
    stored = results["disagreement"]
    consensus = stored["consensus"]
    return {
        "attribute_weights": _spread_out(results["selected_attributes"], stored["attribute_weights"]),
        "metric_weights": _spread_out(results["metrics"], stored["metric_weights"]),
        "consensus": {
            "measure": consensus["measure"],
            "scale_max": consensus["scale_max"],
            **{
                of: {key: consensus[of][key] for key in CONSENSUS_KEYS}
                for of in ("attribute_weights", "metric_weights")
            },
        },
    }


CONSISTENCY_KEYS = ("expert", "attribute", "method", "consistency_ratio", "inconsistent", "acknowledged_at")


def _consistency_out(stored: dict) -> dict:
    """The document's optional "consistency" object (docs/formats.md), its
    keys in the documented order (jsonb keeps none)."""
    return {
        "threshold": stored["threshold"],
        "prioritisations": [{key: entry[key] for key in CONSISTENCY_KEYS} for entry in stored["prioritisations"]],
    }


def _document_body(results: dict) -> dict:
    """The computed results but the candidates, in FORMATS.md's order; the
    optional "disagreement" only when stored (results of layout 3)."""
    metrics = results["metrics"]
    body = {
        "iterations": results["iterations"],
        "selected_attributes": results["selected_attributes"],
        "metrics": metrics,
        "attribute_weights": _named(results["selected_attributes"], results["attribute_weights"]),
        "metric_weights": _named(metrics, results["metric_weights"]),
        "expert_influence": _named(results["experts"], results["expert_influence"]),
    }
    if "disagreement" in results:
        body["disagreement"] = _disagreement_out(results)
    if "consistency" in results:
        body["consistency"] = _consistency_out(results["consistency"])
    return body


def _candidates_out(results: dict, snapshot: dict | None = None) -> Iterator[dict]:
    """The candidates in the document's shape; with their individual scores
    when given the snapshot they come from."""
    inputs = ScoreInputs(snapshot) if snapshot is not None else None
    for entry in results["candidates"]:
        candidate = _candidate_out(entry, results["experts"], results["metrics"])
        if inputs is not None:
            candidate["individual_scores"] = inputs.scores(entry["name"])
        yield candidate


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def document_tail(results: dict, snapshot: dict | None = None) -> str:
    """The document from ``iterations`` to its end, as compact JSON without
    the closing brace. Candidates are serialised one at a time: with
    individual scores the document is large, and its dictionaries are never
    all held at once."""
    body = _json(_document_body(results))[1:-1]
    candidates = ",".join(_json(candidate) for candidate in _candidates_out(results, snapshot))
    return f'{body},"candidates":[{candidates}]'


def _results(run: Run) -> dict:
    """The results stored with a succeeded run (the table's constraint
    ``run_succeeded_has_results`` guarantees them)."""
    if run.results is None:
        raise ValueError(f"run {run.pk} has no results: it is {run.status}")
    return run.results


def results_document(*, run: Run, individual: bool = False, candidates: Collection[str] | None = None) -> dict:
    """The ``approve-results/1`` document of a succeeded run (FORMATS.md),
    built from its stored results in one pass. ``individual`` adds every
    candidate's k x n individual scores, computed from the snapshot (the
    document then grows with experts; FORMATS.md "Size"). ``candidates``
    keeps only the candidates of those names (a page about one candidate
    of a thousand builds one)."""
    results = _results(run)
    stored = results
    if candidates is not None:
        stored = {**results, "candidates": [c for c in results["candidates"] if c["name"] in candidates]}
    return {
        **_document_start(run, results["study"]),
        **_document_body(results),
        "candidates": list(_candidates_out(stored, run.snapshot if individual else None)),
    }


def comparison_document(*, run: Run) -> dict:
    """What ``engine.compare.compare_results`` reads of a run's results, in
    the document's shape: the named weights and influence, and each
    candidate's entry, of which it reads the name, rank, CEF, weighted score
    and whether vetoed. From
    whole stored results or from the part ``workspace.selectors.run_pair_get``
    reads."""
    results = _results(run)
    return {
        "attribute_weights": _named(results["selected_attributes"], results["attribute_weights"]),
        "metric_weights": _named(results["metrics"], results["metric_weights"]),
        "expert_influence": _named(results["experts"], results["expert_influence"]),
        # Each entry as stored or as picked: compare_results reads of it
        # only those five keys, and a thousand copies are not made.
        "candidates": results["candidates"],
    }


def runs_with_document(*, queryset: QuerySet[Run] | Manager[Run]) -> QuerySet[Run]:
    """``queryset`` ready for ``results_json``: the stored document text and
    the study's title are read out of the results by the database, and
    neither the snapshot nor the results is loaded or parsed."""
    return queryset.defer("snapshot", "results").annotate(
        stored_study=KT("results__study"), stored_document=KT("results__document")
    )


def results_json(*, run: Run, individual: bool = False) -> bytes:
    """The document as compact UTF-8 JSON: the one place its bytes are made,
    so the command, the API and any download serve the same bytes.

    Without individual scores it is the text stored when the run finished
    (read without parsing it when ``run`` comes from ``runs_with_document``);
    with them it is built from the results and the snapshot (the whole of
    it: the API serves it in pages, ``results_individual_page``)."""
    if individual:
        return results_individual_page(run=run)[0]
    study, tail = getattr(run, "stored_study", None), getattr(run, "stored_document", None)
    if tail is None:  # loaded without runs_with_document, or stored before the text was
        results = _results(run)
        study, tail = results["study"], results.get("document") or document_tail(results)
    # The start is a non-empty object: its "}" is replaced by the tail.
    return f"{_json(_document_start(run, study))[:-1]},{tail}}}".encode()


def results_version(run: Run) -> str:
    """The entity tag of a succeeded run's document (``results_json``'s
    bytes, without individual scores): its text is stored once, when the
    run succeeds, and never changes, so the run is its version."""
    return version_tag("run", run.pk, "results")


def results_json_read(*, run: Run) -> bytes:
    """``results_json`` of ``run``, loaded without its JSON (one query, to
    read it once ``results_version`` said the client does not have it)."""
    return results_json(run=runs_with_document(queryset=Run.objects).get(pk=run.pk))


def results_individual_page(*, run: Run, start: int = 0, max_bytes: int | None = None) -> tuple[bytes, int | None]:
    """A page of the document with individual scores, and the position (in
    rank order) of the next page's first candidate, None after the last.

    The page is the whole document (``results_json(individual=True)``'s
    bytes, key for key) but that its candidates are those from position
    ``start``: as many whole candidates as fit, with everything else, in
    ``max_bytes`` (at least one, whatever its size; without ``max_bytes``,
    every one). Only the page's candidates are scored, plus the first one
    that did not fit (issue 29, finding 8: the whole document at 100 experts
    x 20 metrics x 1,000 candidates is 64 MB)."""
    results = _results(run)
    entries = results["candidates"]
    if not (start == 0 or 0 <= start < len(entries)):
        raise ValueError(f"must be from 0 to {len(entries) - 1} (a position among the run's candidates), got {start}")
    head = f'{_json(_document_start(run, results["study"]))[:-1]},{_json(_document_body(results))[1:-1]},"candidates":['
    used = len(head.encode()) + len("]}")
    inputs = ScoreInputs(cast(dict, run.snapshot))
    parts: list[str] = []
    position = start
    for entry in entries[start:]:
        candidate = _candidate_out(entry, results["experts"], results["metrics"])
        candidate["individual_scores"] = inputs.scores(entry["name"])
        text = _json(candidate)
        size = len(text.encode()) + (1 if parts else 0)  # the comma before it
        if parts and max_bytes is not None and used + size > max_bytes:
            break
        parts.append(text)
        used += size
        position += 1
    page = f"{head}{','.join(parts)}]}}".encode()
    return page, position if position < len(entries) else None


def candidate_individual_scores(*, run: Run, candidate_name: str) -> dict | None:
    """One candidate's k x n individual scores, computed from the snapshot
    for that candidate only: ``{expert: {metric: score}}``, or None if no
    such candidate. Of a succeeded run, which always has its snapshot."""
    snapshot = cast(dict, run.snapshot)
    if candidate_name not in snapshot["candidates"]:
        return None
    return ScoreInputs(snapshot).scores(candidate_name)
