"""A study's history as CSV and JSON (the History tab's downloads and the
API's answer share the record's shape): one row per record, its changes as
``field: old → new`` in CSV and as a list in JSON."""

import json
from collections.abc import Iterable
from typing import Any

from .csv_safe import csv_text
from .selectors import HistoryEntry

CSV_COLUMNS = ("at", "user", "source", "kind", "object_id", "object_name", "action", "expert", "changes", "sentence")


def entry_document(entry: HistoryEntry) -> dict[str, Any]:
    """A record as JSON: what ``GET /api/v1/studies/{id}/history/`` lists."""
    return {
        "id": entry.id,
        "at": entry.at.isoformat(),
        "user": entry.user,
        "source": entry.source,
        "kind": entry.kind,
        "kind_label": entry.kind_label,
        "object_id": entry.object_id,
        "object_name": entry.object_name,
        "action": entry.action,
        "expert": entry.expert,
        "changes": [
            {"field": c.field, "old": c.old, "new": c.new, "old_name": c.old_name, "new_name": c.new_name}
            for c in entry.changes
        ],
        "sentence": entry.sentence,
    }


def history_json(entries: Iterable[HistoryEntry]) -> bytes:
    return json.dumps({"history": [entry_document(entry) for entry in entries]}, indent=1, default=str).encode()


def _changes_text(entry: HistoryEntry) -> str:
    return "; ".join(
        f"{c.field}: {'' if c.old is None else c.old_shown} → {'' if c.new is None else c.new_shown}"
        for c in entry.changes
    )


def history_csv(entries: Iterable[HistoryEntry]) -> str:
    """Text a spreadsheet would run as a formula (a name, a value, a user)
    starts with ``'``, as in every CSV (``workspace.csv_safe``)."""
    rows: list[tuple[object, ...]] = [CSV_COLUMNS]
    for e in entries:
        row = (e.at.isoformat(), e.user or "", e.source, e.kind, e.object_id, e.object_name, e.action)
        rows.append((*row, e.expert or "", _changes_text(e), e.sentence))
    return csv_text(rows, line_end="\n")
