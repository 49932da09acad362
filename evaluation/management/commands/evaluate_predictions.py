"""``python manage.py evaluate_predictions FILE [--positive LABEL] [--json]``:
every metric of METHOD.md section 7 that a predictions file's (CSV or
Parquet) columns allow,
per candidate, without a study (FORMATS.md, ``approve-evaluation/1``)."""

import math
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.predictions import PredictionFileError, read_predictions
from evaluation.report import COMPUTATIONS, THRESHOLD_METHODS, Options, document_json, evaluation_document
from evaluation.services import prediction_text_limits
from workspace import limits


def _positive_number(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(text)
    return value


class Command(BaseCommand):
    # It reads a file and prints a report: no database, no URLs, nothing the
    # system checks look at (they would load every view, seconds on a busy machine).
    requires_system_checks: list[str] = []
    help = (
        "Compute every metric an approve-predictions/1 file's columns allow (CSV, or Parquet), per candidate, "
        "without a study. "
        "With --json, print the approve-evaluation/1 document. A file of more than "
        f"{limits.PREDICTIONS_MAX_CLASSES} distinct labels, or a value (label, fold, context, instance id) of more "
        f"than {limits.PREDICTIONS_MAX_LABEL_LENGTH} characters, is refused, as on the web."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the predictions file (approve-predictions/1): CSV, or Parquet")
        parser.add_argument("--positive", help="the positive label of a binary task")
        parser.add_argument("--json", action="store_true", help="print the approve-evaluation/1 document")
        defaults = Options()  # the report's own defaults, not restated here
        parser.add_argument(
            "--threshold",
            choices=THRESHOLD_METHODS,
            default=defaults.threshold_method,
            help="how binary scores become labels when there is no y_pred column "
            f"(default: {defaults.threshold_method} at {defaults.threshold_value:g})",
        )
        parser.add_argument(
            "--threshold-value",
            type=float,
            default=defaults.threshold_value,
            help=f"the fixed threshold (default {defaults.threshold_value:g})",
        )
        parser.add_argument(
            "--alpha",
            type=_positive_number,
            default=defaults.alpha,
            help=f"Relevance Score's alpha (default {defaults.alpha:g})",
        )
        parser.add_argument(
            "--beta",
            type=_positive_number,
            default=defaults.beta,
            help=f"Relevance Score's beta (default {defaults.beta:g})",
        )
        parser.add_argument(
            "--root", type=_positive_number, default=defaults.root, help=f"A3R's root N (default {defaults.root:g})"
        )
        parser.add_argument(
            "--acc-d",
            type=_positive_number,
            default=defaults.acc_d,
            help=f"ARR's AccD, accuracy traded per tenfold time (default {defaults.acc_d:g})",
        )

    def handle(self, *args: Any, file: str, positive: str | None = None, **options: Any) -> None:
        try:
            data = read_predictions(
                file,
                positive=positive,
                max_classes=limits.PREDICTIONS_MAX_CLASSES,
                text_limits=prediction_text_limits(web=False),
                instances=False,  # (checked, not kept: no metric reads them)
            )
        except OSError as error:
            raise CommandError(f"{file}: {error.strerror or error}") from None
        except PredictionFileError as error:
            raise CommandError(f"{file} was refused:\n" + "\n".join(f"  {line}" for line in error.errors)) from None
        document = evaluation_document(
            data,
            Options(
                threshold_method=options["threshold"],
                threshold_value=options["threshold_value"],
                alpha=options["alpha"],
                beta=options["beta"],
                root=options["root"],
                acc_d=options["acc_d"],
            ),
        )
        if options["json"]:
            self.stdout.write(document_json(document))
            return
        self.stdout.write(f"{data.rows} rows, {len(data.candidates)} candidates, labels: {', '.join(data.labels)}")
        self.stdout.write(f"positive label: {data.positive if data.positive is not None else '(none given)'}")
        for name, values in document["candidates"].items():
            self.stdout.write("")
            self.stdout.write(name)
            reasons = document["notes"].get(name, {})
            for key, value in values.items():
                shown = f"{value:.6g}" if value is not None else f"undefined: {reasons[key]}"
                self.stdout.write(f"  {COMPUTATIONS[key].name:<44} {shown}")
