"""Stored results in layout 2 (engine.services.RESULTS_LAYOUT): the names the
results document needs are kept with the results, so serving it never reads
the snapshot, and vetoes are ``[expert, metric, value, least, desired]``
with indices rather than repeated names."""

from django.db import migrations


COMMON = ("name", "rank", "cef", "weighted_score", "vetoed")


def _names(snapshot):
    return snapshot["experts"], [m["name"] for m in snapshot["metrics"]]


def to_layout_2(apps, schema_editor):
    Run = apps.get_model("engine", "Run")
    for run in Run.objects.filter(results__isnull=False).iterator(chunk_size=50):
        results = run.results
        if results.get("layout") == 2:
            continue
        experts, metrics = _names(run.snapshot)
        expert_index = {name: i for i, name in enumerate(experts)}
        metric_index = {name: j for j, name in enumerate(metrics)}
        run.results = {
            "layout": 2,
            "study": run.snapshot["study"]["title"],
            "iterations": results["iterations"],
            "selected_attributes": run.snapshot["attributes"],
            "metrics": metrics,
            "experts": experts,
            "attribute_weights": results["attribute_weights"],
            "metric_weights": results["metric_weights"],
            "expert_influence": results["expert_influence"],
            "candidates": [
                {
                    **{key: c[key] for key in COMMON},
                    "vetoes": [
                        [expert_index[v["expert"]], metric_index[v["metric"]], v["value"], *v["range"]]
                        for v in c["vetoes"]
                    ],
                    "group_scores": c["group_scores"],
                }
                for c in results["candidates"]
            ],
        }
        run.save(update_fields=["results"])


def to_layout_1(apps, schema_editor):
    Run = apps.get_model("engine", "Run")
    for run in Run.objects.filter(results__layout=2).iterator(chunk_size=50):
        results = run.results
        experts, metrics = results["experts"], results["metrics"]
        index = {name: c for c, name in enumerate(run.snapshot["candidates"])}
        run.results = {
            "iterations": results["iterations"],
            "metric_weights": results["metric_weights"],
            "attribute_weights": results["attribute_weights"],
            "expert_influence": results["expert_influence"],
            "candidates": [
                {
                    "index": index[c["name"]],
                    **{key: c[key] for key in COMMON},
                    "vetoes": [
                        {"expert": experts[i], "metric": metrics[j], "value": value, "range": [least, desired]}
                        for i, j, value, least, desired in c["vetoes"]
                    ],
                    "group_scores": c["group_scores"],
                }
                for c in results["candidates"]
            ],
        }
        run.save(update_fields=["results"])


class Migration(migrations.Migration):
    dependencies = [("engine", "0001_initial")]

    operations = [migrations.RunPython(to_layout_2, to_layout_1)]
