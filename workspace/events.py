"""What happened in a study, told to whoever listens (issue 32).

The services publish an event when something a person or a pipeline may want
to hear about happens: an invitation, a phase that opens or closes, a
revision round, a run or an analysis that finishes, an expert excluded, a
reminder, a decision recorded. The apps above (notifications: e-mails and
the in-app list; webhooks: the study's registered URLs) listen, registered
in their ``AppConfig.ready()``, so workspace and the engine import neither
(docs/architecture.md, "Layers").

An event is delivered once the transaction that published it commits (never
for a change that was rolled back), to every listener in turn. A listener
must be quick (it enqueues a Celery task, it sends nothing itself) and an
error in one is logged and never reaches the change that published it.
"""

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

logger = logging.getLogger(__name__)

# Every kind of event, with what it means in words (the webhooks page and
# the notification preferences list them; docs/formats.md, "Events").
EVENT_KINDS: dict[str, str] = {
    "invitation.created": "an expert was invited to the study",
    "phase.changed": "the study moved to another phase",
    "round.opened": "a revision round opened",
    "round.closed": "a revision round closed",
    "reminder.sent": "the designer reminded experts of their steps",
    "expert.excluded": "an expert was excluded from the panel",
    "run.succeeded": "a validation run succeeded",
    "run.failed": "a validation run failed",
    "analysis.finished": "a robustness analysis finished",
    "decision.recorded": "the study's decision was recorded",
}


@dataclass(frozen=True)
class Event:
    """``kind`` (a key of ``EVENT_KINDS``), the study's id, who did it
    (``actor_id``, None for a worker), when, and what else a listener needs
    to say it (ids, phase names: JSON values only)."""

    kind: str
    study_id: int
    data: dict[str, Any] = field(default_factory=dict)
    actor_id: int | None = None
    at: datetime = field(default_factory=timezone.now)


Listener = Callable[[Event], None]
LISTENERS: list[Listener] = []


def event_listen(listener: Listener) -> None:
    """Call ``listener(event)`` for every event published from now on
    (registered once, in an ``AppConfig.ready()``)."""
    if listener in LISTENERS:
        raise ImproperlyConfigured(f"{listener!r} already listens to the study events.")
    LISTENERS.append(listener)


def _deliver(event: Event) -> None:
    for listener in LISTENERS:
        try:
            listener(event)
        except Exception:  # one listener's failure must not stop the others, nor the change
            logger.exception("event %s of study %s: listener %r failed", event.kind, event.study_id, listener)


_QUIET: ContextVar[bool] = ContextVar("approve_events_quiet", default=False)


@contextmanager
def events_quiet() -> Iterator[None]:
    """Nothing published inside reaches the listeners: for a replay of what
    happened elsewhere (a study imported from its bundle goes through its
    phases, absences and rounds again), which is nobody's news."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def event_publish(kind: str, *, study_id: int, actor_id: int | None = None, **data: Any) -> Event:
    """Publish an event of ``kind`` about study ``study_id``: delivered to
    the listeners once the current transaction commits (at once outside
    one); never inside ``events_quiet``."""
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    event = Event(kind=kind, study_id=study_id, data=data, actor_id=actor_id)
    if not _QUIET.get():
        transaction.on_commit(lambda: _deliver(event), robust=False)
    return event
