"""Reminders: the designer e-mails experts the study's link and what each
still has to do. Sent through Django's e-mail framework (``EMAIL_URL`` in
the settings: the console by default, SMTP in production)."""

import logging
import smtplib
from dataclasses import dataclass, field

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from . import history, selectors, services
from .models import Membership, Phase, Study
from .services._checks import subject_line

logger = logging.getLogger(__name__)

_WHAT_NOW: dict[str, str] = {
    Phase.DRAFT: "The study is still being set up; voting has not opened yet.",
    Phase.VOTING: "Voting is open: please vote on the complementary attributes and the metrics.",
    Phase.ASSESSMENT: "The assessment is open.",
    Phase.CLOSED: "The assessment is closed; the designer validates the candidates.",
}


@dataclass
class ReminderReport:
    """Who got a reminder (``sent``: (username, address)), who has no
    e-mail address, and whose message the mail server refused."""

    sent: list[tuple[str, str]] = field(default_factory=list)
    no_address: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def unreached(self) -> list[tuple[str, str]]:
        """Whom the reminder did not reach and why, in the order chosen:
        ``("clinician", "no e-mail address")``."""
        return [(name, "no e-mail address") for name in self.no_address] + [
            (name, f"the mail server refused the message ({error})") for name, error in self.failed
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


def reminders_send(*, study: Study, experts: list[Membership], link: str, note: str = "") -> ReminderReport:
    """E-mail each of ``experts`` (memberships with their users) a reminder
    with ``link`` (the study's home) and, during the assessment, what they
    still have to give and the notes on what they gave, each naming its step
    ("Your priorities have a consistency ratio of 0.29 (at most 0.10):
    please revise them"). Each membership keeps when it was last reminded
    and whether that reached them (the experts page shows it); the report
    says what was sent."""
    assessment = services.phase_allows(study, services.Action.PRIORITISE)  # inputs are being given
    missing = selectors.missing_input_list(study=study) if assessment else {}
    notes = selectors.input_note_list(study=study) if assessment else {}
    report = ReminderReport()
    now = timezone.now()
    for expert in experts:
        username = expert.user.get_username()
        address = expert.user.email
        expert.last_reminded_at, expert.last_reminder_unreached = now, ""
        if not address:
            report.no_address.append(username)
            expert.last_reminder_unreached = "no e-mail address"
            continue
        body = _body(study, username, link, missing.get(username), notes.get(username), note)
        try:
            send_mail(subject_line(f"Reminder: {study.title}"), body, settings.DEFAULT_FROM_EMAIL, [address])
        except (smtplib.SMTPException, OSError) as error:
            logger.warning("reminder to %s not sent: %s", address, error)
            reason = str(error) or type(error).__name__
            report.failed.append((username, reason))
            expert.last_reminder_unreached = f"the mail server refused the message ({reason})"[:300]
        else:
            report.sent.append((username, address))
    history.bulk_update(Membership, experts, ["last_reminded_at", "last_reminder_unreached"])
    return report
