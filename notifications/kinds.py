"""The notifications a person gets, by event kind (workspace.events), with
how the preferences page names each."""

#: Event kind -> what the preferences page and the digest call it.
KINDS: dict[str, str] = {
    "invitation.created": "Invitations to a study",
    "phase.changed": "A phase opens or closes while you have steps to do",
    "round.opened": "A revision round opens",
    "round.closed": "A revision round closes",
    "reminder.sent": "Reminders from a study's designer",
    "expert.excluded": "You are excluded from a study's panel, or marked abstaining",
    "run.succeeded": "A validation run of your study succeeded",
    "run.failed": "A validation run of your study failed",
    "analysis.finished": "A robustness analysis of your study finished",
}
