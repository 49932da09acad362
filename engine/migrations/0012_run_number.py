"""Runs numbered within their study (issue 31, finding 13): ``number``, 1
for a study's first run, in the order of the runs' ids (their launch order),
so the demo's first run is "Run 1" whatever other studies ran before. The
history's copies take their run's number; a copy of a run deleted before
this migration, which no page shows, takes 0."""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def number_runs(apps, schema_editor):
    Run = apps.get_model("engine", "Run")
    HistoricalRun = apps.get_model("engine", "HistoricalRun")
    counts: dict[int, int] = {}
    numbered = []
    for run in Run.objects.order_by("study_id", "pk").only("pk", "study_id").iterator():
        counts[run.study_id] = counts.get(run.study_id, 0) + 1
        run.number = counts[run.study_id]
        numbered.append(run)
    Run.objects.bulk_update(numbered, ["number"], batch_size=1000)
    HistoricalRun.objects.update(number=Subquery(Run.objects.filter(pk=OuterRef("id")).values("number")[:1]))
    HistoricalRun.objects.filter(number__isnull=True).update(number=0)


class Migration(migrations.Migration):
    dependencies = [
        ("engine", "0011_snapshot_expert_values"),
    ]

    operations = [
        migrations.AddField(
            model_name="historicalrun",
            name="number",
            field=models.PositiveIntegerField(editable=False, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="number",
            field=models.PositiveIntegerField(editable=False, null=True),
        ),
        # Numbers are only added: going back drops the column.
        migrations.RunPython(number_runs, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="historicalrun",
            name="number",
            field=models.PositiveIntegerField(editable=False),
        ),
        migrations.AlterField(
            model_name="run",
            name="number",
            field=models.PositiveIntegerField(editable=False),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(fields=("study", "number"), name="run_unique_number"),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.CheckConstraint(condition=models.Q(("number__gte", 1)), name="run_number_positive"),
        ),
    ]
