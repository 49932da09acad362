"""The notifications' e-mails: a plain-text and an HTML part from
templates/notifications/, a one-click unsubscribe link (RFC 8058: the
``List-Unsubscribe`` and ``List-Unsubscribe-Post`` headers too) and a
subject made one line by ``subject_line`` (a study title with a line break
cannot add a header)."""

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import EmailMultiAlternatives
from django.template import loader

from workspace.services._checks import subject_line

from .kinds import KINDS
from .models import Notification
from .services import ALL_KINDS, unsubscribe_token

SUBJECTS: dict[str, str] = {
    "invitation.created": "Invitation to {title}",
    "phase.changed": "{title}: a phase changed",
    "round.opened": "{title}: a revision round opened",
    "round.closed": "{title}: a revision round closed",
    "reminder.sent": "Reminder: {title}",
    "expert.excluded": "Your part in {title}",
    "run.succeeded": "{title}: a run succeeded",
    "run.failed": "{title}: a run failed",
    "analysis.finished": "{title}: an analysis finished",
}


def absolute(path: str) -> str:
    """``path`` on the site's address (NOTIFICATIONS_SITE_URL)."""
    return settings.NOTIFICATIONS_SITE_URL.rstrip("/") + path


def unsubscribe_url(user: User, kind: str) -> str:
    return absolute(f"/notifications/unsubscribe/{unsubscribe_token(user=user, kind=kind)}/")


def _message(user: User, subject: str, template: str, context: dict, unsubscribe: str) -> EmailMultiAlternatives:
    context = {
        **context,
        "user": user,
        "unsubscribe_url": unsubscribe,
        "preferences_url": absolute("/accounts/notifications/"),
    }
    message = EmailMultiAlternatives(
        subject_line(subject),
        loader.render_to_string(f"notifications/{template}.txt", context),
        settings.DEFAULT_FROM_EMAIL,
        [user.email],
        headers={"List-Unsubscribe": f"<{unsubscribe}>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"},
    )
    message.attach_alternative(loader.render_to_string(f"notifications/{template}.html", context), "text/html")
    return message


def notification_message(notification: Notification) -> EmailMultiAlternatives:
    """The e-mail of one notification, to its recipient."""
    title = notification.study.title if notification.study else "approve"
    subject = SUBJECTS.get(notification.kind, "{title}").format(title=title)
    return _message(
        notification.recipient,
        subject,
        "notification",
        {
            "notification": notification,
            "link": absolute(notification.link),
            "kind_words": KINDS.get(notification.kind, ""),
        },
        unsubscribe_url(notification.recipient, notification.kind),
    )


def digest_message(user: User, notifications: list[Notification]) -> EmailMultiAlternatives:
    """The daily digest of ``notifications`` (the user's), grouped by study."""
    groups: dict[str, list[dict]] = {}
    for notification in notifications:
        title = notification.study.title if notification.study else "approve"
        groups.setdefault(title, []).append({"text": notification.text, "link": absolute(notification.link)})
    return _message(
        user,
        f"Your approve digest: {len(notifications)} notification{'s' if len(notifications) != 1 else ''}",
        "digest",
        {"groups": list(groups.items()), "count": len(notifications)},
        unsubscribe_url(user, ALL_KINDS),
    )
