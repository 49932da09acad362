import json
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from workspace.bundles import study_import_bundle
from workspace.errors import InvalidInput
from workspace.limits import bundle_check_limits


class Command(BaseCommand):
    help = (
        "Import an approve-study/1 bundle (all or nothing) and print the new study's id. "
        "Run by the operator with shell access, it is trusted: accounts are created for unknown "
        "usernames (without a usable password), every expert is an active member and the inputs "
        "in the bundle count as entered, without invitations; a prediction set's rows are not "
        "limited (as with import_predictions). (An import through the API is bound by consent: see "
        "workspace/invitations.py.)"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="path of the JSON bundle, or - for standard input")
        parser.add_argument(
            "--designer",
            help="username of the designer when the bundle names none (the account must exist)",
        )

    def handle(self, *args: Any, file: str, designer: str | None = None, **options: Any) -> None:
        try:
            if file == "-":
                bundle = json.load(sys.stdin)
            else:
                with open(file, encoding="utf-8") as handle:
                    bundle = json.load(handle)
        except OSError as error:
            raise CommandError(f"cannot read {file}: {error.strerror}") from None
        except json.JSONDecodeError as error:
            raise CommandError(f"{file} is not valid JSON: {error}") from None

        if designer:
            if not get_user_model().objects.filter(username=designer).exists():
                raise CommandError(f"--designer: no user named {designer!r}")
            if isinstance(bundle, dict) and bundle.get("designer") is None:
                bundle["designer"] = designer
        try:
            bundle_check_limits(bundle)
            # No importer: the operator, trusted (see the help); a prediction
            # set's rows are not limited, as with import_predictions.
            study = study_import_bundle(bundle=bundle, max_rows=None)
        except InvalidInput as error:
            raise CommandError(
                "the bundle was refused, nothing was written:\n  "
                + "\n  ".join(f"{field}: {message}" for field, messages in error.errors.items() for message in messages)
            ) from None
        self.stdout.write(str(study.pk))
