"""Measurement.study: the candidate's study, on the row, so that a study's
measurements are read through its index (issue 7); existing rows take their
candidate's study. Measurement.candidate loses its own index, which the
unique (candidate, metric) index already serves."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill_study(apps, schema_editor):
    Candidate = apps.get_model("workspace", "Candidate")
    Measurement = apps.get_model("workspace", "Measurement")
    Measurement.objects.using(schema_editor.connection.alias).update(
        study_id=Subquery(Candidate.objects.filter(pk=OuterRef("candidate_id")).values("study_id"))
    )


class Migration(migrations.Migration):

    dependencies = [
        ("workspace", "0007_discussion"),
    ]

    operations = [
        migrations.AddField(
            model_name="measurement",
            name="study",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.CASCADE, related_name="measurements",
                to="workspace.study",
            ),
        ),
        migrations.RunPython(fill_study, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="measurement",
            name="candidate",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="measurements",
                to="workspace.candidate",
            ),
        ),
        migrations.AlterField(
            model_name="measurement",
            name="study",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="measurements", to="workspace.study"
            ),
        ),
    ]
