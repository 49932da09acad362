"""Widgets written in Python: a select of many choices (a study's thousand
candidates), and a number input repeated per metric or expert.

Django renders a ``<select>``'s options through its template once per
option, tens of microseconds each; ``ManyOptionsSelect`` writes them in
Python, the markup of Django's own ``select.html`` and
``select_option.html``; ``PlainNumberInput`` its ``input.html``
(tests/workspace/test_widgets.py checks both)."""

from typing import Any

from django import forms
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe


def _attrs(attrs: dict[str, Any]) -> str:
    """django/forms/widgets/attrs.html."""
    return "".join(
        f" {conditional_escape(name)}"
        if value is True
        else f' {conditional_escape(name)}="{conditional_escape(str(value))}"'
        for name, value in attrs.items()
        if value is not False
    )


class ManyOptionsSelect(forms.Select):
    """``forms.Select`` with its options written in Python."""

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        widget = self.get_context(name, value, attrs)["widget"]
        parts = [f'<select name="{conditional_escape(widget["name"])}"{_attrs(widget["attrs"])}>']
        for group_name, group_choices, _index in widget["optgroups"]:
            if group_name:
                parts.append(f'\n  <optgroup label="{conditional_escape(group_name)}">')
            for option in group_choices:
                parts.append(
                    f'\n  <option value="{conditional_escape(str(option["value"]))}"{_attrs(option["attrs"])}>'
                    f"{conditional_escape(option['label'])}</option>\n"  # the option template's last line
                )
            if group_name:
                parts.append("\n  </optgroup>")
        parts.append("\n</select>")
        return mark_safe("".join(parts))  # noqa: S308 (every name, value and label escaped above)


class PlainNumberInput(forms.NumberInput):
    """``forms.NumberInput`` written in Python, the markup of Django's
    ``input.html``: the ranges step has two a metric (40 at 20 metrics), the
    peer-weights step one an expert (100), each a template render by Django."""

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        widget = self.get_context(name, value, attrs)["widget"]
        shown = "" if widget["value"] is None else f' value="{conditional_escape(str(widget["value"]))}"'
        return mark_safe(  # noqa: S308 (every part escaped)
            f'<input type="{conditional_escape(widget["type"])}" name="{conditional_escape(widget["name"])}"'
            f"{shown}{_attrs(widget['attrs'])}>"
        )
