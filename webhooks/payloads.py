"""What a delivery says (docs/webhooks.md, "Payload"): the events a webhook
may receive, the data each one carries (an explicit list of fields: never an
invitation's key, an e-mail address, an expert's name or answers), the
sentence for chat tools (Slack's and Teams' incoming webhooks show
``text``), and how the body is signed."""

import hashlib
import hmac
import json
from datetime import datetime
from typing import Any

from django.conf import settings

from workspace.events import EVENT_KINDS
from workspace.models import Phase, Study

# The events a webhook may subscribe to: those about the study, not about a
# person (an invitation, a reminder, an exclusion are never sent).
SUBSCRIBABLE: dict[str, str] = {
    kind: EVENT_KINDS[kind]
    for kind in (
        "phase.changed",
        "round.opened",
        "round.closed",
        "run.succeeded",
        "run.failed",
        "analysis.finished",
        "decision.recorded",
    )
}
# The test delivery's kind (the page's button, the API's test endpoint):
# no study event, so not one of workspace's EVENT_KINDS.
TEST_EVENT = "webhook.test"

# Per kind, the fields of the event's data a delivery carries, each with its
# type; anything else the event holds stays here.
FIELDS: dict[str, dict[str, type]] = {
    "phase.changed": {"from": str, "to": str},
    "round.opened": {"round_id": int, "number": int},
    "round.closed": {"round_id": int, "number": int},
    "run.succeeded": {"run_id": int, "number": int, "status": str},
    "run.failed": {"run_id": int, "number": int, "status": str},
    "analysis.finished": {"analysis_id": int, "run_id": int, "run_number": int, "analysis_kind": str, "status": str},
    "decision.recorded": {"run_id": int, "number": int, "experiment_name": str, "times": int},
    TEST_EVENT: {},
}
# The longest text value a delivery carries from an event's data.
VALUE_MAX_CHARS = 200

SIGNATURE_HEADER = "X-Approve-Signature"
USER_AGENT = "approve-webhooks/1"


def absolute(path: str) -> str:
    """``path`` on the site's address (WEBHOOK_SITE_URL)."""
    return settings.WEBHOOK_SITE_URL.rstrip("/") + path


def event_data(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """The whitelisted fields of ``data`` for ``kind`` (of their type,
    texts cut), with the links a receiver may open."""
    kept: dict[str, Any] = {}
    for name, kind_of in FIELDS[kind].items():
        value = data.get(name)
        if isinstance(value, kind_of) and not isinstance(value, bool):
            kept[name] = value[:VALUE_MAX_CHARS] if isinstance(value, str) else value
    if "run_id" in kept:
        kept["run_url"] = absolute(f"/runs/{kept['run_id']}/")
    if kind == "analysis.finished" and "run_id" in kept:
        kept["analysis_url"] = absolute(f"/runs/{kept['run_id']}/robustness/")
    return kept


def _phase(name: object) -> str:
    return Phase(name).label if name in Phase.values else str(name)


def _chat(text: str) -> str:
    """Slack's three escapes (``&``, ``<``, ``>``): a study title cannot
    mention a channel or forge a link in a chat message."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def sentence(kind: str, title: str, data: dict[str, Any], link: str) -> str:
    """The delivery's ``text``: one sentence and the link to open."""
    study = f"“{title}”"
    number = data.get("number", data.get("run_number"))
    run = f"run {number}" if number is not None else "a run"
    revision = f"Revision round {number}" if number is not None else "A revision round"
    texts = {
        "phase.changed": f"{study} moved from {_phase(data.get('from'))} to {_phase(data.get('to'))}",
        "round.opened": f"{revision} of {study} opened",
        "round.closed": f"{revision} of {study} closed",
        "run.succeeded": f"{run.capitalize()} of {study} succeeded",
        "run.failed": f"{run.capitalize()} of {study} failed",
        "analysis.finished": (
            f"A {str(data.get('analysis_kind', 'robustness')).replace('_', '-')} analysis of {run} of {study} "
            f"{data.get('status', 'finished')}"
        ),
        "decision.recorded": f"The decision of {run} of {study} was recorded in MLflow",
        TEST_EVENT: f"A test delivery from approve for {study}",
    }
    return _chat(f"{texts[kind]}: {link}")


def payload(*, delivery_id: str, kind: str, study: Study, data: dict[str, Any], at: datetime) -> dict[str, Any]:
    """A delivery's JSON document (docs/webhooks.md, "Payload")."""
    study_url = absolute(f"/studies/{study.pk}/")
    kept = event_data(kind, data)
    link = kept.get("analysis_url") or kept.get("run_url") or study_url
    return {
        "id": delivery_id,
        "event": kind,
        "occurred_at": at.isoformat(),
        "study": {"id": study.pk, "title": study.title, "url": study_url},
        "data": kept,
        "text": sentence(kind, study.title, kept, link),
    }


def body(document: dict[str, Any]) -> bytes:
    """The bytes sent (and signed): compact JSON in UTF-8."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, timestamp: int, content: bytes) -> str:
    """The ``X-Approve-Signature`` header: ``sha256=`` and the hex
    HMAC-SHA256, under the webhook's secret, of ``"<timestamp>."`` followed
    by the body."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + content, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def headers(*, secret: str, kind: str, delivery_id: str, timestamp: int, content: bytes) -> dict[str, str]:
    """The headers of one attempt (signed afresh at each one)."""
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Approve-Event": kind,
        "X-Approve-Delivery": delivery_id,
        "X-Approve-Timestamp": str(timestamp),
        SIGNATURE_HEADER: signature(secret, timestamp, content),
    }
