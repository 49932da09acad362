"""The discussion's form: a post's body (the service trims and checks it)."""

from typing import Any

from django import forms

from ..limits import DISCUSSION_POST_MAX_CHARS
from ..models import Metric, QualityAttribute


class PostForm(forms.Form):
    body = forms.CharField(max_length=DISCUSSION_POST_MAX_CHARS, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args: Any, item: QualityAttribute | Metric, help_text: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["body"]
        # Every thread has a form on the same page: the label says which.
        field.label = f"Your post on {item.name}"
        if help_text:  # the discussion page says it once, above its many forms
            field.help_text = f"Every member of the study reads it. At most {DISCUSSION_POST_MAX_CHARS} characters."
