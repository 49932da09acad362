"""The two-factor pages' forms."""

from django import forms

CODE_MAX_LENGTH = 32


def _code_field(label: str, help_text: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        max_length=CODE_MAX_LENGTH,
        help_text=help_text,
        widget=forms.TextInput(
            attrs={
                "autocomplete": "one-time-code",
                "autocapitalize": "none",
                "spellcheck": "false",
                "class": "input--mono two-factor__code",
            }
        ),
    )


class SetupForm(forms.Form):
    code = _code_field("Code from the app", "The 6 digits your app shows for approve now.")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["code"].widget.attrs["inputmode"] = "numeric"


class VerifyForm(forms.Form):
    code = _code_field("Code", "The 6-digit code from your authenticator app, or one of your recovery codes.")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["code"].widget.attrs["autofocus"] = True


class ConfirmForm(forms.Form):
    """A current code, or else the password."""

    code = forms.CharField(
        label="A code from your app, or a recovery code",
        max_length=CODE_MAX_LENGTH,
        required=False,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "autocapitalize": "none", "class": "input--mono two-factor__code"}
        ),
    )
    password = forms.CharField(
        label="Or your password",
        required=False,
        strip=False,
        max_length=4096,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
    )
