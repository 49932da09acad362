"""The notifications' writes: each event's notifications (in the app, and
whether each is e-mailed now, in the digest or not at all), the e-mail
preferences, the one-click unsubscribe and marking notifications read
(docs/notifications.md)."""

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.db import transaction
from django.utils import timezone

from workspace.errors import InvalidInput
from workspace.events import Event
from workspace.extensions import MAIL_DIGEST, MAIL_OFF
from workspace.models import Study

from .kinds import KINDS
from .models import Notification, NotificationPreference
from .recipients import RECIPIENTS
from .selectors import preference_get

UNSUBSCRIBE_SALT = "notifications.unsubscribe"
#: The unsubscribe token's kind that stops every e-mail.
ALL_KINDS = "all"


# --- preferences -----------------------------------------------------------------------


def _kinds(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(kind, str) for kind in value):
        raise InvalidInput({"email_off": "must be a list of notification kinds"})
    unknown = sorted(set(value) - set(KINDS))
    if unknown:
        raise InvalidInput({"email_off": f"unknown kind(s) {', '.join(unknown)}; use {', '.join(KINDS)}"})
    return [kind for kind in KINDS if kind in value]


def preferences_set(*, user: User, email_off: Any, digest: Any) -> NotificationPreference:
    """Store which kinds are not e-mailed (``email_off``, kinds of
    ``KINDS``) and whether the rest come in a daily digest."""
    kinds = _kinds(email_off)
    if not isinstance(digest, bool):
        raise InvalidInput({"digest": "must be true or false"})
    preference, _ = NotificationPreference.objects.update_or_create(
        user=user, defaults={"email_off": kinds, "digest": digest}
    )
    return preference


def mail_choices(*, kind: str, user_ids: list[int]) -> dict[int, str]:
    """For ``workspace.extensions``: how each of ``user_ids`` who is not
    e-mailed at once about ``kind`` gets it."""
    chosen = {}
    for preference in NotificationPreference.objects.filter(user_id__in=user_ids):
        if kind in preference.email_off:
            chosen[preference.user_id] = MAIL_OFF
        elif preference.digest:
            chosen[preference.user_id] = MAIL_DIGEST
    return chosen


# --- unsubscribe -----------------------------------------------------------------------


def unsubscribe_token(*, user: User, kind: str) -> str:
    """A signed token that turns off ``user``'s e-mails of ``kind`` (or
    ``ALL_KINDS``), for the link and the List-Unsubscribe header of their
    mails. Signed with SECRET_KEY and a salt of its own: no other signed
    value of the site passes for one."""
    return signing.dumps({"u": user.pk, "k": kind}, salt=UNSUBSCRIBE_SALT, compress=True)


def unsubscribe_read(*, token: str) -> tuple[User, str] | None:
    """The user and kind a token stands for, or None when it is forged,
    altered, or names no active user or no kind."""
    try:
        value = signing.loads(token, salt=UNSUBSCRIBE_SALT, max_age=settings.NOTIFICATIONS_UNSUBSCRIBE_MAX_AGE)
    except signing.BadSignature:
        return None
    if not isinstance(value, dict) or value.get("k") not in (*KINDS, ALL_KINDS):
        return None
    if not isinstance(value.get("u"), int):
        return None
    user = User.objects.filter(pk=value["u"], is_active=True).first()
    return (user, value["k"]) if user else None


def unsubscribe(*, user: User, kind: str) -> NotificationPreference:
    """Turn off ``user``'s e-mails of ``kind`` (every kind for
    ``ALL_KINDS``); what is still to be mailed of those kinds is not."""
    preference = preference_get(user=user)
    kinds = list(KINDS) if kind == ALL_KINDS else [*preference.email_off, kind]
    preference = preferences_set(user=user, email_off=sorted(set(kinds)), digest=preference.digest)
    stopped = Notification.objects.filter(
        recipient=user, mail__in=[Notification.Mail.PENDING, Notification.Mail.DIGEST]
    )
    stopped.filter(kind__in=kinds).update(mail=Notification.Mail.NONE)
    return preference


# --- the notifications of an event -----------------------------------------------------


def _mail_of(user: User, kind: str, preferences: dict[int, NotificationPreference]) -> str:
    preference = preferences.get(user.pk)
    if not user.email or (preference and kind in preference.email_off):
        return Notification.Mail.NONE
    return Notification.Mail.DIGEST if preference and preference.digest else Notification.Mail.PENDING


@transaction.atomic
def event_record(*, event: Event) -> list[int]:
    """Write the notifications of ``event`` (one per person told, see
    ``recipients``), each marked to be e-mailed now, in the digest or not
    (no address, or the kind turned off). Returns the ids to e-mail now."""
    study = Study.objects.filter(pk=event.study_id).first()
    find = RECIPIENTS.get(event.kind)
    if study is None or find is None:
        return []
    drafts = find(event, study)
    preferences = {p.user_id: p for p in NotificationPreference.objects.filter(user__in=[d.user for d in drafts])}
    made = Notification.objects.bulk_create(
        Notification(
            recipient=draft.user,
            study=study,
            kind=event.kind,
            text=draft.text[:500],
            body=draft.body,
            link=draft.link,
            mail=_mail_of(draft.user, event.kind, preferences),
        )
        for draft in drafts
    )
    return [n.pk for n in made if n.mail == Notification.Mail.PENDING]


def mail_sent(*, notifications: Iterable[Notification]) -> None:
    """Note that these notifications were e-mailed (alone or in a digest)."""
    ids = [n.pk for n in notifications]
    Notification.objects.filter(pk__in=ids).update(mail=Notification.Mail.SENT, emailed_at=timezone.now())


def mail_failed(*, notification: Notification, reason: str) -> None:
    """Note that the mail server refused the notification's mail for good."""
    Notification.objects.filter(pk=notification.pk).update(mail=Notification.Mail.FAILED, mail_error=reason[:300])


# --- read ------------------------------------------------------------------------------


def notifications_mark_read(*, user: User, ids: list[int] | None = None) -> int:
    """Mark the user's notifications ``ids`` (every unread one for None)
    read; another person's ids are left alone. Returns how many changed."""
    unread = Notification.objects.filter(recipient=user, read_at__isnull=True)
    if ids is not None:
        unread = unread.filter(pk__in=ids)
    return unread.update(read_at=timezone.now())
