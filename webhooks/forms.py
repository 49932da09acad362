"""The webhooks page's forms."""

from typing import Any

from django import forms

from . import payloads
from .models import URL_MAX_LENGTH


class WebhookForm(forms.Form):
    """A webhook's URL, the events it receives (one box each) and whether it is active."""

    url = forms.CharField(
        label="URL",
        max_length=URL_MAX_LENGTH,
        help_text="https://… of the receiver: a public host (http:// and internal hosts only if the operator "
        "lists them in WEBHOOK_ALLOWED_HOSTS). A Slack or Teams incoming-webhook URL works as it is.",
        widget=forms.URLInput(attrs={"class": "input--mono", "autocomplete": "off", "spellcheck": "false"}),
    )
    events = forms.MultipleChoiceField(
        label="Events",
        choices=[(kind, f"{words[0].upper()}{words[1:]} ({kind})") for kind, words in payloads.SUBSCRIBABLE.items()],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one event."},
    )
    active = forms.BooleanField(label="Active: send it the events chosen", required=False, initial=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.is_bound and "events" not in self.initial:
            self.initial["events"] = list(payloads.SUBSCRIBABLE)
