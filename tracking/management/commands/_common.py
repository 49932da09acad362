"""What the MLflow commands share: a refusal as a CommandError."""

from django.core.management.base import CommandError

from workspace.errors import InvalidInput, PhaseConflict, Unavailable


def refusal(error: InvalidInput | PhaseConflict | Unavailable) -> CommandError:
    if isinstance(error, InvalidInput):
        lines = [
            message if field == "non_field_errors" else f"{field}: {message}"
            for field, messages in error.errors.items()
            for message in messages
        ]
        return CommandError("refused, nothing was written:\n  " + "\n  ".join(lines))
    return CommandError(str(error))
