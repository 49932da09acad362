import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from engine.models import Run
from engine.selectors import results_document, results_json, runs_with_document
from engine.services import run_awaits_broker, run_launch
from workspace.errors import PhaseConflict
from workspace.models import Study
from workspace.services import study_close_assessment
from workspace.services.phases import Action, phase_allows

# What polling reads: the status, never the snapshot and results (megabytes
# of JSON on a large study).
STATUS_FIELDS = ("status", "error", "lease_expires_at")


class Command(BaseCommand):
    help = (
        "Launch a validation run of a closed study and print its results "
        "(through Celery when a broker is configured, waiting for the result)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study_id", type=int)
        parser.add_argument("--json", action="store_true", help="print the approve-results/1 document (compact JSON)")
        parser.add_argument(
            "--individual",
            action="store_true",
            help="with --json, add every candidate's individual scores (the document then grows with the experts)",
        )
        parser.add_argument("--close", action="store_true", help="close the assessment first if it is still open")
        parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for a worker (default 600)")

    def handle(
        self,
        *args: Any,
        study_id: int,
        close: bool = False,
        timeout: float = 600,
        individual: bool = False,
        **options: Any,
    ) -> None:
        as_json = options["json"]
        if individual and not as_json:
            raise CommandError("--individual only applies to --json")
        study = Study.objects.select_related("designer").filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"no study with id {study_id}")
        try:
            if not phase_allows(study, Action.LAUNCH_RUN):
                if not close:
                    raise CommandError(
                        f"the study is in the {study.phase} phase; validation needs it closed "
                        "(pass --close to close the assessment now)"
                    )
                study = study_close_assessment(study=study)
            run = run_launch(study=study, launched_by=study.designer)
        except PhaseConflict as conflict:
            raise CommandError(str(conflict)) from None

        self.wait(run.pk, timeout)
        if as_json:
            runs = Run.objects.all() if individual else runs_with_document(queryset=Run.objects)
            self.stdout.write(results_json(run=runs.get(pk=run.pk), individual=individual).decode())
            return
        document = results_document(run=Run.objects.defer("snapshot").get(pk=run.pk))
        self.stdout.write(f"Run {run.pk} of {document['study']!r}: {document['iterations']} aggregation layers\n")
        self.stdout.write(
            "Consensus weights: " + ", ".join(f"{name} {w:.4f}" for name, w in document["metric_weights"].items())
        )
        self.stdout.write(
            "Expert influence:  " + ", ".join(f"{name} {w:.4f}" for name, w in document["expert_influence"].items())
        )
        self.stdout.write("")
        self.stdout.write(f"{'rank':>4}  {'candidate':<24} {'CEF':>8} {'weighted':>9}  vetoed by")
        for candidate in document["candidates"]:
            vetoes = ", ".join(sorted({f"{v['expert']} ({v['metric']})" for v in candidate["vetoes"]}))
            self.stdout.write(
                f"{candidate['rank']:>4}  {candidate['name']:<24} {candidate['cef']:>8.4f} "
                f"{candidate['weighted_score']:>9.4f}  {vetoes}"
            )

    def wait(self, run_id: int, timeout: float) -> None:
        """Return once the run has succeeded; CommandError if it failed or
        did not finish in time."""
        deadline = time.monotonic() + timeout
        run = Run.objects.only(*STATUS_FIELDS).get(pk=run_id)
        if run_awaits_broker(run=run):
            raise CommandError(
                f"the broker (Redis) is unreachable, so no worker can take run {run.pk}: it is saved as queued and "
                "the recovery sweep (celery beat) sends it once the broker is back; follow it with "
                f"GET /api/v1/runs/{run.pk}/"
            )
        if not settings.CELERY_TASK_ALWAYS_EAGER and not run.is_finished:
            self.stderr.write(f"Run {run.pk} queued; waiting for a worker…")
        while not run.is_finished:
            if time.monotonic() > deadline:
                raise CommandError(
                    f"run {run.pk} is still {run.status} after {timeout:g} s: is a Celery worker running?"
                )
            time.sleep(0.2)
            run.refresh_from_db(fields=STATUS_FIELDS)
        if run.status == Run.Status.FAILED:
            raise CommandError(f"run {run.pk} failed: {run.error}")
