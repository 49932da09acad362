"""The preferences form."""

from typing import Any

from django import forms

from .kinds import KINDS


class PreferencesForm(forms.Form):
    """One box per kind (ticked: e-mailed) and the daily digest."""

    digest = forms.BooleanField(
        required=False,
        label="One e-mail a day with everything (a daily digest), instead of one e-mail each",
    )

    def __init__(self, *args: Any, email_off: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        off = set(email_off or [])
        for kind, words in KINDS.items():
            self.fields[kind] = forms.BooleanField(required=False, label=words, initial=kind not in off)

    def email_off(self) -> list[str]:
        return [kind for kind in KINDS if not self.cleaned_data.get(kind)]

    def kind_fields(self) -> list[forms.BoundField]:
        return [self[kind] for kind in KINDS]
