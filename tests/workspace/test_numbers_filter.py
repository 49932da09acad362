"""Numbers on pages: the ``sig`` filter rounds every computed number to
DISPLAY_SIGNIFICANT_DIGITS significant digits (issue 16, finding 9)."""

import math

from django.template import Context, Template
from hypothesis import given
from hypothesis import strategies as st

from engine.rules import DISPLAY_SIGNIFICANT_DIGITS
from workspace.templatetags.numbers import _significant, sig, significant


def test_the_reported_value_is_shown_with_four_significant_digits():
    assert DISPLAY_SIGNIFICANT_DIGITS == 4
    assert significant(0.9019607843137255) == "0.902"
    assert significant(-0.46469938650306747) == "-0.4647"
    assert significant(0.5) == "0.5"
    assert significant(0.847) == "0.847"
    assert significant(6.0) == "6"
    assert significant(1234567.0) == "1234567"
    assert significant(12345.678) == "12346"
    assert significant(999.96) == "1000"
    assert significant(0.99996) == "1"
    assert significant(1.234567e-05) == "1.235e-05"
    assert significant(1e-05) == "1e-05"
    assert significant(0.0) == significant(-0.0) == "0"
    assert significant(math.inf) == "inf"


def test_the_filter_in_a_template():
    rendered = Template("{% load numbers %}{{ a|sig }} {{ b|sig|default:'–' }} {{ c|sig }} {{ d|sig }}").render(
        Context({"a": 0.9019607843137255, "b": None, "c": "0.9019607843137255", "d": "n/a"})
    )
    assert rendered == "0.902 – 0.902 n/a"
    assert sig(True) is True


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300))
def test_rounding_keeps_the_value_within_half_a_unit_of_the_last_digit(value):
    shown = significant(value)
    assert "e" in shown or len(shown) <= 20  # never a 17-digit repr on a page
    back = float(shown)
    if value == 0:
        assert back == 0
        return
    unit = 10 ** (math.floor(math.log10(abs(value))) - DISPLAY_SIGNIFICANT_DIGITS + 1)
    # half a unit of the fourth significant digit (or of the ones for whole numbers), plus a carry
    assert (
        abs(back - value)
        <= max(unit, 1 if abs(value) >= 10**DISPLAY_SIGNIFICANT_DIGITS else 0) * 0.5 + abs(value) * 1e-15
    )


# Values at the edges of the common case: its ends, and just below each power of ten.
BOUNDARIES = [1e-3, 0.0009999999999999998, 9.99996, 9.999949999, 0.99996, 0.0099996, 99.996, 999.96] + [
    10.0**k * (1 - 2**-52) for k in range(-3, 9)
]


@given(
    st.one_of(
        st.floats(min_value=-20, max_value=20),
        st.floats(min_value=-1.2e8, max_value=1.2e8),
        st.floats(min_value=1e-4, max_value=2e-3),
        st.sampled_from(BOUNDARIES),
    ),
    st.integers(min_value=1, max_value=8),
)
def test_the_common_case_writes_what_the_general_rule_writes(value, digits):
    assert significant(value, digits) == _significant(value, digits)
