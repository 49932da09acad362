import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation.selectors import prediction_set_get
from evaluation.services import prediction_set_evaluations_keep, prediction_set_import
from workspace import limits
from workspace.errors import InvalidInput
from workspace.models import Study


class Command(BaseCommand):
    help = (
        "Store an approve-predictions/1 file (CSV, or Parquet) as a prediction set of the study (all or nothing) "
        "and print the set's id. Run by the operator with shell access, it applies neither limit of a web upload "
        "(20 MB, 1,000,000 rows): a file of millions of rows is read in batches into arrays of its size, which "
        "must fit in memory (about 40 bytes a row for labels, a score, a fold and a time). The set's evaluation "
        "and each candidate's report with the default options are computed and kept before the id is printed: the "
        "pages and the API evaluate a set past the web's limits with those options only. The limits on distinct labels "
        f"({limits.PREDICTIONS_MAX_CLASSES}) and on a value's length ({limits.PREDICTIONS_MAX_LABEL_LENGTH} "
        "characters: a label, a fold, a context, an instance id) apply as on the web. The set has no uploader."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study_id", type=int)
        parser.add_argument("file", help="path of the CSV or Parquet file, or - for standard input")
        parser.add_argument("--candidate", help="the file is this candidate's alone (its candidate column is optional)")
        parser.add_argument("--positive", help="the positive label of a binary set (needed with a score column)")
        parser.add_argument("--name", help="the set's name (default: the file's name)")

    def handle(
        self,
        *args: Any,
        study_id: int,
        file: str,
        candidate: str | None = None,
        positive: str | None = None,
        name: str | None = None,
        **options: Any,
    ) -> None:
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"no study with id {study_id}")
        try:
            stream = sys.stdin.buffer if file == "-" else open(file, "rb")  # noqa: SIM115 (closed below)
        except OSError as error:
            raise CommandError(f"cannot read {file}: {error.strerror}") from None
        try:
            prediction_set = prediction_set_import(
                study=study,
                stream=stream,
                name=name or ("standard input" if file == "-" else os.path.basename(file)),
                uploaded_by=None,
                candidate=candidate,
                positive=positive,
                max_bytes=None,
                max_rows=None,
            )
        except InvalidInput as error:
            raise CommandError(
                "the file was refused, nothing was stored:\n  "
                + "\n  ".join(
                    message if field == "file" else f"{field}: {message}"
                    for field, messages in error.errors.items()
                    for message in messages
                )
            ) from None
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
        # Evaluated now, with the default options, and kept: a set past the web's
        # limits is not evaluated within a request.
        prediction_set_evaluations_keep(
            prediction_set=prediction_set_get(study=study, prediction_set_id=prediction_set.pk)
        )
        self.stdout.write(str(prediction_set.pk))
