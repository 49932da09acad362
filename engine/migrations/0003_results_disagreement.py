"""Stored results in layout 3 (engine.services.RESULTS_LAYOUT): the
disagreement measures (engine.disagreement) are stored with the results, so
a results page shows them without computing: each expert's attribute and
metric weights (rows renormalised to 1), "disagreement" (per attribute and
metric the weights' min, max, mean and population standard deviation, and
the AHP-OS consensus S* of both weight matrices) and each candidate's
"veto_shares". The stored document text gains the optional fields too.

The measures are computed here, from each run's snapshot, with numpy alone
and in the same operations as engine.disagreement, rather than by importing
the engine: a migration must keep meaning what it meant when it was written
whatever the code becomes. tests/engine/test_runs.py checks that it stores
exactly what a fresh run stores. Backwards, the new keys are dropped.

A run whose snapshot cannot give the measures (it never happens to a run
that succeeded, whose inputs were checked) stays in layout 2, which every
reader still serves, without the optional fields.
"""

import json
import math

import numpy as np
from django.db import migrations

SCALE_MAX = 9.0
WORDING = ((0.0, "very low"), (0.5, "low"), (0.625, "moderate"), (0.75, "high"), (0.875, "very high"))
SPREAD_KEYS = ("min", "max", "mean", "stdev")
STORED_KEYS = ("expert_attribute_weights", "expert_metric_weights", "disagreement")


def _rows(grid):
    weights = np.array(grid, dtype=float)
    if weights.ndim != 2 or 0 in weights.shape or not np.isfinite(weights).all() or weights.min() < 0:
        raise ValueError("not a weight matrix")
    return weights / weights.sum(axis=1)[:, None]


def _spread(weights):
    spread = (weights.min(axis=0), weights.max(axis=0), weights.mean(axis=0), weights.std(axis=0))
    return {key: values.tolist() for key, values in zip(SPREAD_KEYS, spread)}


def _entropies(shares):
    return -(shares * np.log(np.where(shares > 0, shares, 1.0))).sum(axis=-1)


def _consensus(weights):
    k, n = weights.shape
    if k == 1 or n == 1 or (weights == weights[0]).all():
        value = 1.0
    else:
        alpha = float(_entropies(weights).mean())
        gamma = float(_entropies(weights.mean(axis=0)))
        diversity = math.exp(gamma - alpha)
        top, rest = SCALE_MAX / (n + SCALE_MAX - 1), 1 / (n + SCALE_MAX - 1)
        alpha_min = -top * math.log(top) - (n - 1) * rest * math.log(rest)
        correction = n / math.exp(alpha_min)
        value = min(max((1 / diversity - 1 / correction) / (1 - 1 / correction), 0.0), 1.0)
    wording = next(words for bound, words in reversed(WORDING) if value >= bound)
    return {"value": value, "wording": wording}


def _veto_shares(snapshot, names):
    """Per candidate named, the share of the experts whose range vetoes it on each metric."""
    lower = np.array(snapshot["lower"], dtype=float)
    upper = np.array(snapshot["upper"], dtype=float)
    measurements = np.array(snapshot["measurements"], dtype=float).reshape(-1, lower.shape[1])
    index = {name: c for c, name in enumerate(snapshot["candidates"])}
    shares = []
    for name in names:
        measured = measurements[index[name]]
        # m̄ = 0 exactly when the value is at or beyond b^l, away from b^u (engine.core._vetoing_mask).
        vetoing = np.where(upper > lower, measured <= lower, measured >= lower)
        shares.append((vetoing.sum(axis=0) / len(lower)).tolist())
    return shares


def _measures(snapshot, results):
    """The fields layout 3 adds, from the run's snapshot."""
    attribute_weights = _rows(snapshot["attribute_weights"])
    metric_weights = _rows(snapshot["metric_weights"])
    stored = {
        "expert_attribute_weights": attribute_weights.tolist(),
        "expert_metric_weights": metric_weights.tolist(),
        "disagreement": {
            "attribute_weights": _spread(attribute_weights),
            "metric_weights": _spread(metric_weights),
            "consensus": {
                "measure": "ahp_os_s_star",
                "scale_max": SCALE_MAX,
                "attribute_weights": _consensus(attribute_weights),
                "metric_weights": _consensus(metric_weights),
            },
        },
    }
    return stored, _veto_shares(snapshot, [candidate["name"] for candidate in results["candidates"]])


def _json(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _named_spread(names, spread):
    return {name: dict(zip(SPREAD_KEYS, values)) for name, values in zip(names, zip(*(spread[k] for k in SPREAD_KEYS)))}


def _document_with_measures(document, results, stored, shares):
    """The stored document text (from "iterations" on) with the optional
    fields in place: "disagreement" after "expert_influence", each
    candidate's "veto_shares" after its "group_scores"."""
    body = json.loads("{" + document + "}")
    disagreement = stored["disagreement"]
    out = {}
    for key, value in body.items():
        if key == "candidates":
            value = [
                {**candidate, "veto_shares": dict(zip(results["metrics"], row))}
                for candidate, row in zip(value, shares)
            ]
        out[key] = value
        if key == "expert_influence":
            out["disagreement"] = {
                "attribute_weights": _named_spread(results["selected_attributes"], disagreement["attribute_weights"]),
                "metric_weights": _named_spread(results["metrics"], disagreement["metric_weights"]),
                "consensus": disagreement["consensus"],
            }
    return _json(out)[1:-1]


def _document_without_measures(document):
    body = json.loads("{" + document + "}")
    body.pop("disagreement", None)
    for candidate in body["candidates"]:
        candidate.pop("veto_shares", None)
    return _json(body)[1:-1]


def to_layout_3(apps, schema_editor):
    Run = apps.get_model("engine", "Run")
    for run in Run.objects.filter(results__layout=2).iterator(chunk_size=50):
        results = run.results
        try:
            stored, shares = _measures(run.snapshot, results)
        except (KeyError, TypeError, ValueError, IndexError):
            continue  # left in layout 2, served without the optional fields
        upgraded = {key: value for key, value in results.items() if key not in ("candidates", "document")}
        upgraded["layout"] = 3
        upgraded.update(stored)
        upgraded["candidates"] = [
            {**candidate, "veto_shares": row} for candidate, row in zip(results["candidates"], shares)
        ]
        if "document" in results:
            upgraded["document"] = _document_with_measures(results["document"], results, stored, shares)
        run.results = upgraded
        run.save(update_fields=["results"])


def to_layout_2(apps, schema_editor):
    Run = apps.get_model("engine", "Run")
    for run in Run.objects.filter(results__layout=3).iterator(chunk_size=50):
        results = run.results
        downgraded = {key: value for key, value in results.items() if key not in STORED_KEYS}
        downgraded["layout"] = 2
        downgraded["candidates"] = [
            {key: value for key, value in candidate.items() if key != "veto_shares"}
            for candidate in results["candidates"]
        ]
        if "document" in results:
            downgraded["document"] = _document_without_measures(results["document"])
        run.results = downgraded
        run.save(update_fields=["results"])


class Migration(migrations.Migration):
    dependencies = [("engine", "0002_results_scale")]

    operations = [migrations.RunPython(to_layout_3, to_layout_2)]
