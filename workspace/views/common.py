"""What every page module shares."""

from django import forms

from ..errors import InvalidInput


def form_add_service_errors(form: forms.Form, error: InvalidInput) -> None:
    """A service's refusal shown on the form: each message under the field it
    names, messages about no field of the form above it."""
    for field, field_messages in error.errors.items():
        form.add_error(field if field in form.fields else None, list(field_messages))
