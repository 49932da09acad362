"""API tokens expire. Tokens made before this migration get the default
lifetime counted from the upgrade, not from their creation: scripts using an
old token keep working for that long instead of failing on the day of the
upgrade."""

from datetime import timedelta

from django.conf import settings
from django.db import migrations, models
from django.utils import timezone


def set_expiry(apps, schema_editor):
    ApiToken = apps.get_model("workspace", "ApiToken")
    expires_at = timezone.now() + timedelta(days=settings.API_TOKEN_LIFETIME_DAYS)
    ApiToken.objects.filter(expires_at__isnull=True).update(expires_at=expires_at)


class Migration(migrations.Migration):

    dependencies = [
        ("workspace", "0004_prioritisation_result"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(null=True, help_text="the token authenticates no one from this moment"),
        ),
        migrations.RunPython(set_expiry, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(help_text="the token authenticates no one from this moment"),
        ),
    ]
