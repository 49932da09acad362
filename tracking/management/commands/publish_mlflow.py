from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from engine.models import Run
from tracking import services
from workspace.errors import PhaseConflict, Unavailable

from ._common import refusal


class Command(BaseCommand):
    help = (
        "Publish a succeeded run's decision to the study's MLflow server: tags approve.study, approve.rank, "
        "approve.cef, approve.vetoed and approve.run_url on each candidate's run, and a summary run holding the "
        "results document and CSV. Idempotent. Prints the summary run's id."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int)
        parser.add_argument(
            "--base-url",
            default="http://127.0.0.1:8000",
            help="where approve is served, for approve.run_url (default http://127.0.0.1:8000)",
        )

    def handle(self, *args: Any, run_id: int, base_url: str, **options: Any) -> None:
        run = Run.objects.filter(pk=run_id).select_related("study").first()
        if run is None:
            raise CommandError(f"no run with id {run_id}")
        run_url = base_url.rstrip("/") + reverse("run_page", kwargs={"run_id": run_id})
        try:
            publication = services.mlflow_publish(run=run, published_by=None, run_url=run_url)
        except (PhaseConflict, Unavailable) as error:
            raise refusal(error) from None
        for name, mlflow_run in publication.tagged.items():
            self.stdout.write(f"tagged {name}: {mlflow_run}")
        self.stdout.write(publication.summary_run_id)
