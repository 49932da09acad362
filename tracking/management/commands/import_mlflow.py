import json
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tracking import services
from workspace.errors import InvalidInput, PhaseConflict, Unavailable
from workspace.models import Study

from ._common import refusal


def _mapping(text: str) -> dict[str, str]:
    """``KEY=METRIC`` or ``KEY=METRIC:UNIT``."""
    key, equals, rest = text.partition("=")
    if not equals or not key or not rest:
        raise CommandError(f"--map {text!r}: write KEY=METRIC or KEY=METRIC:UNIT")
    metric, colon, unit = rest.partition(":")
    return {"key": key, "metric": metric, **({"unit": unit} if colon else {})}


class Command(BaseCommand):
    help = (
        "Import the runs of an MLflow experiment as candidates of the study, as the API's MLflow import does: "
        "each mapped metric key becomes a measurement, an artifact matching --artifact the candidate's prediction set. "
        "Runs imported before update their candidates (a run named like another candidate: --on-existing); "
        "what changed is printed. All or nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study_id", type=int)
        parser.add_argument("--experiment", required=True, help="the experiment's name or id")
        parser.add_argument(
            "--map",
            action="append",
            required=True,
            dest="mapping",
            metavar="KEY=METRIC[:UNIT]",
            help="an MLflow metric key and the study metric it measures (repeat for each)",
        )
        parser.add_argument("--filter", default="", help="MLflow's search syntax, e.g. \"tags.stage = 'candidate'\"")
        parser.add_argument("--step", type=int, help="read each metric at this step (default: its latest value)")
        parser.add_argument("--name-tag", help="name candidates by this tag (default: the run's name)")
        parser.add_argument("--artifact", help="glob of the prediction artifact, e.g. 'predictions/*.csv'")
        parser.add_argument("--positive", help="the prediction sets' positive label (needed with a score column)")
        parser.add_argument(
            "--on-existing",
            choices=services.ON_EXISTING,
            help="a run named like an existing candidate: update it, import it as a new one, or skip it "
            "(default: refused, naming each such run)",
        )
        parser.add_argument(
            "--tracking-uri", help="connect the study to this server (or file: store) first, replacing its connection"
        )
        parser.add_argument(
            "--token-env", help="with --tracking-uri: the environment variable holding the server's token"
        )
        parser.add_argument("--json", action="store_true", help="print the outcome as JSON")

    def handle(self, *args: Any, study_id: int, **options: Any) -> None:
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"no study with id {study_id}")
        try:
            if options["tracking_uri"]:
                token = os.environ.get(options["token_env"], "") if options["token_env"] else ""
                services.connection_set(study=study, tracking_uri=options["tracking_uri"], token=token)
            outcome = services.mlflow_import(
                study=study,
                imported_by=None,
                experiment=options["experiment"],
                filter=options["filter"],
                mapping=[_mapping(text) for text in options["mapping"]],
                step=options["step"],
                name_tag=options["name_tag"],
                artifact_pattern=options["artifact"],
                positive=options["positive"],
                on_existing=options["on_existing"],
                inline=True,  # a command waits for its import, however many runs
            )
            assert isinstance(outcome, services.ImportOutcome)  # inline: never queued
        except (InvalidInput, PhaseConflict, Unavailable) as error:
            raise refusal(error) from None
        if options["json"]:
            self.stdout.write(json.dumps(outcome.as_dict()))
            return
        self.stdout.write(f"{outcome.runs} runs read; {len(outcome.created)} candidates added")
        for name in outcome.created:
            self.stdout.write(f"  + {name}")
        for change in outcome.changes:
            before = "new" if change["before"] is None else f"{change['before']:g} →"
            self.stdout.write(f"  {change['candidate']} / {change['metric']}: {before} {change['value']:g}")
        for entry in outcome.matched:
            self.stdout.write(f"  {entry['name']} ({entry['run_id']}) updates {entry['candidate']}")
        for entry in outcome.skipped:
            self.stdout.write(f"  skipped {entry['name']} ({entry['run_id']}), named like {entry['candidate']}")
        for made in outcome.prediction_sets:
            self.stdout.write(f"  {made['candidate']}: prediction set {made['prediction_set']} from {made['artifact']}")
        self.stdout.write(f"{len(outcome.changes)} values changed, {outcome.unchanged} unchanged")
