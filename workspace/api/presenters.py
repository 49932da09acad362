"""What the API shows of what selectors read: shaping only, no queries."""

from typing import Any

from engine.rules import is_consistent


def prioritisation_result_out(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored prioritisation result with its consistency verdict:
    ``inconsistent`` is true above engine.rules.CONSISTENCY_THRESHOLD (a
    warning), null for direct weights."""
    if result is None:
        return None
    ratio = result["consistency_ratio"]
    return {**result, "inconsistent": None if ratio is None else not is_consistent(ratio)}


def priorities_out(section: dict[str, Any] | None) -> dict[str, Any]:
    """An expert's priorities section (read ``with_results``): what they
    entered, with ``result`` and, for local prioritisations,
    ``metric_results``."""
    if section is None:
        return {"method": None, "result": None}
    payload = {**section, "result": prioritisation_result_out(section.get("result"))}
    payload.pop("metric_results", None)
    if section.get("metric_priorities"):
        payload["metric_results"] = {
            attribute: prioritisation_result_out(result) for attribute, result in section["metric_results"].items()
        }
    return payload
