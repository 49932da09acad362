"""Forms of the dashboard, the study home and the run pages. The phase,
delete and launch forms carry no field: their confirmation is the POST."""

from django import forms


class InvitationAcceptForm(forms.Form):
    """Accepting an invitation. ``confirm_inputs`` is shown only when someone
    imported inputs in the person's name; the service decides whether it
    must be ticked (and says so under the box when it is not)."""

    confirm_inputs = forms.BooleanField(
        label="These inputs are mine",
        required=False,
        help_text="Tick to confirm that the inputs listed above are what you think; they then count in the study.",
    )
