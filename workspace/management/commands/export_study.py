import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workspace.bundles import study_export_bundle
from workspace.models import Study


class Command(BaseCommand):
    help = "Write a study as an approve-study/1 bundle to standard output."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study_id", type=int)

    def handle(self, *args: Any, study_id: int, **options: Any) -> None:
        study = Study.objects.select_related("designer").filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"no study with id {study_id}")
        self.stdout.write(json.dumps(study_export_bundle(study=study), indent=2, ensure_ascii=False))
