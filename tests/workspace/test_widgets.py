"""ManyOptionsSelect and PlainNumberInput write what Django's Select and
NumberInput write through their templates."""

import pytest
from django import forms

from workspace.forms.widgets import ManyOptionsSelect, PlainNumberInput

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


@pytest.mark.parametrize("value", [None, "", 0.25, 12, 1e-07, '0.5" & <b>', "lots"])
@pytest.mark.parametrize("language", ["en-gb", "de"])
@pytest.mark.parametrize(
    "attrs",
    [
        None,
        {"id": "id_least-3", "aria-describedby": "id_least-3_error", "aria-invalid": "true", "required": True},
        {"id": "x", "disabled": True, "readonly": False, "class": "peer-weight", "min": 0, "max": "100"},
    ],
)
def test_plain_number_input_writes_djangos_markup(value, language, attrs):
    from django.utils import translation

    base = {"step": "any", "inputmode": "decimal"}
    with translation.override(language):
        expected = forms.NumberInput(attrs=base).render("least-3", value, attrs)
        written = PlainNumberInput(attrs=base).render("least-3", value, attrs)
    assert written == expected and written.startswith('<input type="number" name="least-3"')
