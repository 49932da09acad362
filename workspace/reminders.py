"""Reminders: the designer e-mails experts the study's link and what each
still has to do. The request decides whom the reminder can reach and
publishes ``reminder.sent`` (workspace.events); the notifications app writes
and sends each mail by a Celery task, outside the request, through Django's
e-mail framework (``EMAIL_URL`` in the settings: the console by default,
SMTP in production). A mail the server refuses for good is noted on the
expert's membership (``reminder_unreached_set``): the experts page says it."""

import logging
from dataclasses import dataclass, field

from django.utils import timezone

from . import history, selectors, services
from .events import event_publish
from .extensions import MAIL_DIGEST, MAIL_OFF, mail_choices
from .models import Membership, Phase, Study

logger = logging.getLogger(__name__)

_WHAT_NOW: dict[str, str] = {
    Phase.DRAFT: "The study is still being set up; voting has not opened yet.",
    Phase.VOTING: "Voting is open: please vote on the complementary attributes and the metrics.",
    Phase.ASSESSMENT: "The assessment is open.",
    Phase.CLOSED: "The assessment is closed; the designer validates the candidates.",
}

#: Why a reminder did not reach an expert who turned reminder e-mails off.
TURNED_OFF = "they turned reminder e-mails off"


@dataclass
class ReminderReport:
    """Whom a reminder is being e-mailed to (``sent``: (username, address),
    sent by a task outside the request), who gets it in their daily digest,
    who has no e-mail address and who turned reminder e-mails off. Every
    one of them also finds it in their notifications."""

    sent: list[tuple[str, str]] = field(default_factory=list)
    digest: list[str] = field(default_factory=list)
    no_address: list[str] = field(default_factory=list)
    turned_off: list[str] = field(default_factory=list)

    @property
    def unreached(self) -> list[tuple[str, str]]:
        """Whom the reminder's e-mail does not reach and why, in the order
        chosen: ``("clinician", "no e-mail address")``."""
        return [(name, "no e-mail address") for name in self.no_address] + [
            (name, TURNED_OFF) for name in self.turned_off
        ]


def _body(
    study: Study, username: str, link: str, missing: list[str] | None, notes: dict[str, float] | None, note: str
) -> str:
    lines = [f"Hello {username},", "", f"This is a reminder about the study “{study.title}”.", _WHAT_NOW[study.phase]]
    if services.phase_allows(study, services.Action.PRIORITISE):
        if missing:
            lines += ["Still to give:", *(f"- {item}" for item in missing)]
        else:
            lines.append("You have given every input; you may still review them until the assessment closes.")
        for key, value in (notes or {}).items():
            lines.append(selectors.note_words(key, value, to_expert=True) + ".")
    if note:
        lines += ["", f"{study.designer.get_username()} adds:", note]
    lines += ["", f"Open the study: {link}", "", "approve"]
    return "\n".join(lines)


def reminder_bodies(*, study: Study, experts: list[Membership], link: str, note: str) -> dict[int, str]:
    """The reminder's text for each of ``experts`` (``{membership id:
    text}``): the study's ``link``, during the assessment what each still
    has to give and the notes on what they gave, and the designer's
    ``note``. Read when the mail is written, so it says what is missing
    then."""
    assessment = services.phase_allows(study, services.Action.PRIORITISE)  # inputs are being given
    missing = selectors.missing_input_list(study=study) if assessment else {}
    notes = selectors.input_note_list(study=study) if assessment else {}
    return {
        expert.pk: _body(
            study,
            expert.user.get_username(),
            link,
            missing.get(expert.user.get_username()),
            notes.get(expert.user.get_username()),
            note,
        )
        for expert in experts
    }


def reminders_send(*, study: Study, experts: list[Membership], link: str, note: str = "") -> ReminderReport:
    """Remind each of ``experts`` (memberships with their users) of the
    study, with ``link`` (the study's home) and ``note``: publishes
    ``reminder.sent`` for the notifications app, which e-mails each of them
    (``reminder_bodies``: during the assessment what they still have to
    give and the notes on what they gave, each naming its step, "Your
    priorities have a consistency ratio of 0.29 (at most 0.10): please
    revise them"), by a task, as their preferences say. Each membership
    keeps when it was last reminded and whether that reached them (the
    experts page shows it); the report says to whom it is being sent."""
    report = ReminderReport()
    now = timezone.now()
    chosen = mail_choices(kind="reminder.sent", user_ids=[expert.user_id for expert in experts])
    for expert in experts:
        username, address = expert.user.get_username(), expert.user.email
        expert.last_reminded_at, expert.last_reminder_unreached = now, ""
        if not address:
            report.no_address.append(username)
            expert.last_reminder_unreached = "no e-mail address"
        elif chosen.get(expert.user_id) == MAIL_OFF:
            report.turned_off.append(username)
            expert.last_reminder_unreached = TURNED_OFF
        elif chosen.get(expert.user_id) == MAIL_DIGEST:
            report.digest.append(username)
        else:
            report.sent.append((username, address))
    history.bulk_update(Membership, experts, ["last_reminded_at", "last_reminder_unreached"])
    if experts:
        event_publish(
            "reminder.sent",
            study_id=study.pk,
            actor_id=study.designer_id,
            membership_ids=[expert.pk for expert in experts],
            link=link,
            note=note,
        )
    return report


def reminder_unreached_set(*, membership_id: int, reason: str) -> None:
    """Note on the membership that the mail server refused its last
    reminder for good (the experts page shows ``reason``)."""
    words = f"the mail server refused the message ({reason})"[:300]
    Membership.objects.filter(pk=membership_id).update(last_reminder_unreached=words)
