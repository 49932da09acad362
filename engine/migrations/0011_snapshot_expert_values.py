"""Snapshot version 3 (``expert_values``, each expert's own value of the
elicited metrics): bump every study's ``input_version`` so that no launch
copies a snapshot of the old layout (engine.snapshot.SNAPSHOT_VERSION,
docs/architecture.md)."""

from django.db import migrations
from django.db.models import F


def bump_input_versions(apps, schema_editor):
    Study = apps.get_model("workspace", "Study")
    Study.objects.update(input_version=F("input_version") + 1)


class Migration(migrations.Migration):
    dependencies = [
        ("engine", "0010_rounds_history"),
        ("workspace", "0012_input_version"),
    ]

    operations = [
        # Nothing to undo: a higher input_version only stops old snapshots being copied.
        migrations.RunPython(bump_input_versions, migrations.RunPython.noop),
    ]
