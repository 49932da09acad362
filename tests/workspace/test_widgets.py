"""ManyOptionsSelect writes what Django's Select writes through its templates."""

import pytest
from django import forms

from workspace.forms.widgets import ManyOptionsSelect

CHOICES = [
    ("", "The file names its candidates"),
    ("a & b", "a & b"),
    ('say "hi"', "<b>bold</b>"),
    ("c", "c"),
    (3, "three"),
    ("Group <1>", [("g1", "first in group"), ("g2", "second")]),
]


@pytest.mark.parametrize("value", [None, "", "a & b", 'say "hi"', "g2", "3", ["c", "g1"]])
@pytest.mark.parametrize(
    "attrs", [None, {"id": "id_candidate", "aria-describedby": "x y", "required": True, "disabled": False}]
)
def test_many_options_select_writes_djangos_markup(value, attrs):
    django_select, ours = forms.Select(choices=CHOICES), ManyOptionsSelect(choices=CHOICES)
    if isinstance(value, list):
        django_select.allow_multiple_selected = ours.allow_multiple_selected = True
    expected = django_select.render("candidate", value, attrs)
    written = ours.render("candidate", value, attrs)
    assert written == expected
    assert "<option" in written and "&lt;b&gt;bold&lt;/b&gt;" in written
