"""An elicited metric's unit and direction follow its kind (issue 31,
docs/method.md 7.4): a diagonal one is a weighted accuracy (higher is
better), an off-diagonal one an expected cost (lower is better), whose
values were minus the cost until now. An off-diagonal metric's default
range and ranges are negated onto the cost (the same range, least above
desired), and in a study still open every range of an elicited metric is
marked as needing its expert's confirmation: it may date from before the
metric was elicited. The studies' input_version is bumped, so no run
copies a snapshot holding the old values."""

from django.db import migrations
from django.db.models import F

UNITS = {"diagonal": ("weighted accuracy", "higher"), "offdiagonal": ("expected cost per instance", "lower")}


def forwards(apps, schema_editor):
    ElicitedMetric = apps.get_model("evaluation", "ElicitedMetric")
    Metric = apps.get_model("workspace", "Metric")
    AcceptableRange = apps.get_model("workspace", "AcceptableRange")
    Study = apps.get_model("workspace", "Study")
    studies = set()
    for metric_id, kind, study_id, phase in ElicitedMetric.objects.values_list(
        "metric_id", "kind", "metric__study_id", "metric__study__phase"
    ):
        unit, better = UNITS[kind]
        metric = Metric.objects.get(pk=metric_id)
        ranges = AcceptableRange.objects.filter(metric_id=metric_id)
        if kind == "offdiagonal" and metric.better == "higher":
            if metric.default_least_acceptable is not None:
                metric.default_least_acceptable = -metric.default_least_acceptable
                metric.default_desired = -metric.default_desired
            ranges.update(least_acceptable=-F("least_acceptable"), desired=-F("desired"))
        metric.unit, metric.better = unit, better
        metric.save(update_fields=["unit", "better", "default_least_acceptable", "default_desired"])
        if phase != "closed":
            ranges.update(needs_confirmation=True)
        studies.add(study_id)
    Study.objects.filter(pk__in=studies).update(input_version=F("input_version") + 1)


class Migration(migrations.Migration):
    dependencies = [
        ("evaluation", "0007_elicitation_typed_ratios"),
        ("workspace", "0020_range_needs_confirmation"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
