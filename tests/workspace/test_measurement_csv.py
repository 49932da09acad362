"""The measurement CSV parser (workspace.measurement_csv): both layouts,
and every refusal naming its line (and column)."""

import pytest

from workspace.measurement_csv import (
    MAX_ERRORS_SHOWN,
    CsvRefused,
    Row,
    measurements_csv_text,
    measurements_parse,
    number_parse,
    rows_as_measurements,
    text_decode,
)

CANDIDATES = {"J48", "JRip", "Naive Bayes"}
METRICS = {"Success rate", "AUC", "Training time"}


def parse(text: str, max_rows: int = 100) -> list[Row]:
    return measurements_parse(text, candidates=CANDIDATES, metrics=METRICS, max_rows=max_rows)


def refusal(text: str, max_rows: int = 100) -> list[str]:
    with pytest.raises(CsvRefused) as refused:
        parse(text, max_rows)
    return refused.value.errors


def test_long_layout_in_order_with_lines() -> None:
    rows = parse("candidate,metric,value\nJ48,Success rate,0.847\n\nJRip,AUC,0.9\n")
    assert rows == [Row("J48", "Success rate", 0.847, 2), Row("JRip", "AUC", 0.9, 4)]
    assert rows_as_measurements(rows) == [
        {"candidate": "J48", "metric": "Success rate", "value": 0.847},
        {"candidate": "JRip", "metric": "AUC", "value": 0.9},
    ]


def test_long_header_is_case_insensitive_and_cells_are_stripped() -> None:
    assert parse("Candidate, Metric ,VALUE\n J48 , AUC , 1e-3 \n") == [Row("J48", "AUC", 0.001, 2)]


def test_wide_layout_skips_empty_cells() -> None:
    rows = parse("candidate,Success rate,Training time\nJ48,0.847,\nJRip,,6.3\n")
    assert rows == [Row("J48", "Success rate", 0.847, 2), Row("JRip", "Training time", 6.3, 3)]


def test_tabs_from_a_spreadsheet_and_semicolons_work() -> None:
    assert parse("candidate\tAUC\nJ48\t0.88\n") == [Row("J48", "AUC", 0.88, 2)]
    assert parse("candidate;AUC\nJ48;-2\n") == [Row("J48", "AUC", -2.0, 2)]


def test_quoted_names_with_commas_and_a_byte_order_mark() -> None:
    assert parse('\ufeffcandidate,metric,value\n"Naive Bayes",AUC,"0.5"\n') == [Row("Naive Bayes", "AUC", 0.5, 2)]


def test_trailing_separators_are_tolerated() -> None:
    assert parse("candidate,AUC,,\nJ48,0.5,,\n") == [Row("J48", "AUC", 0.5, 2)]


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        ("", ["the CSV is empty: give a header row, then one row per candidate or measurement"]),
        ("candidate,metric,value\n", ["the CSV has a header but no measurements"]),
        (
            "name,AUC\nJ48,1\n",
            ["line 1: the first column must be 'candidate' (then either 'metric,value', or one column per metric)"],
        ),
        ("candidate,AUC,Speed\nJ48,1,2\n", ["line 1, column Speed: no metric named 'Speed' in this study"]),
        ("candidate,AUC,AUC\nJ48,1,2\n", ["line 1, column AUC: the metric is given twice"]),
        (
            "candidate,AUC,,Success rate\nJ48,1,2,3\n",
            ["line 1, column 3: the column has no name (it must be a metric's name)"],
        ),
        (
            "candidate\nJ48\n",
            ["line 1: no metric columns: add 'metric,value' or one column per metric after 'candidate'"],
        ),
        ("candidate,metric,value\nJ48,AUC,0.5\nJ48,AUC,0.6,7\n", ["line 3: 4 values, but the header has 3 columns"]),
        (
            "candidate,metric,value\nC4.5,AUC,0.5\n",
            ["line 2, column candidate: no candidate named 'C4.5' in this study"],
        ),
        ("candidate,metric,value\n,AUC,0.5\n", ["line 2, column candidate: empty: name the candidate"]),
        ("candidate,metric,value\nJ48,Speed,0.5\n", ["line 2, column metric: no metric named 'Speed' in this study"]),
        ("candidate,metric,value\nJ48,,0.5\n", ["line 2, column metric: empty: name the metric"]),
        ("candidate,metric,value\nJ48,AUC,\n", ["line 2, column value: empty"]),
        ("candidate,metric,value\nJ48,AUC,high\n", ["line 2, column value: not a number ('high')"]),
        ("candidate,metric,value\nJ48,AUC,0,5\n", ["line 2: 4 values, but the header has 3 columns"]),
        ('candidate,AUC\nJ48,"0,5"\n', ["line 2, column AUC: not a number ('0,5'); use a point for decimals"]),
        (
            "candidate,AUC\nJ48,nan\nJRip,inf\n",
            ["line 2, column AUC: not a number ('nan')", "line 3, column AUC: not a number ('inf')"],
        ),
        ("candidate,AUC\nJ48,1e999\n", ["line 2, column AUC: too large to be a number ('1e999')"]),
        ("candidate,AUC\nJ48,1_000\n", ["line 2, column AUC: not a number ('1_000')"]),
        ("candidate,metric,value\nJ48,AUC,0.5\n\nJ48,AUC,0.6\n", ["line 4: J48 / AUC is already given on line 2"]),
        (
            "candidate,Success rate,AUC\nJ48,0.8,0.9\nJRip,x,0.9\nJ48,,0.7\n",
            ["line 3, column Success rate: not a number ('x')", "line 4: J48 / AUC is already given on line 2"],
        ),
    ],
)
def test_refusals_name_the_line_and_column(text: str, errors: list[str]) -> None:
    assert refusal(text) == errors


def test_every_problem_is_listed_up_to_a_limit_then_counted() -> None:
    lines = "".join(f"J48,AUC,bad{i}\n" for i in range(MAX_ERRORS_SHOWN + 5))
    errors = refusal("candidate,metric,value\n" + lines)
    assert len(errors) == MAX_ERRORS_SHOWN + 1
    assert errors[0] == "line 2, column value: not a number ('bad0')"
    assert errors[-1] == "… and 5 more errors"


def test_too_many_measurements_are_refused() -> None:
    text = "candidate,AUC,Success rate,Training time\n" + "J48,1,2,3\nJRip,1,2,3\n"
    assert refusal(text, max_rows=5) == ["too many measurements: 6 given, the limit is 5 at once"]
    assert len(parse(text, max_rows=6)) == 6


def test_a_quoted_field_left_open_is_reported() -> None:
    errors = refusal('candidate,metric,value\nJ48,AUC,"0.5\nJRip,AUC,0.7\n')
    assert len(errors) == 1 and errors[0].startswith("line ")


@pytest.mark.parametrize(("text", "value"), [("0.85", 0.85), ("-2", -2.0), (".5", 0.5), ("3.", 3.0), ("+1E2", 100.0)])
def test_numbers(text: str, value: float) -> None:
    assert number_parse(text) == value


def test_uploads_must_be_utf8() -> None:
    assert text_decode("candidate,AUC\n".encode("utf-8-sig")) == "candidate,AUC\n"
    with pytest.raises(CsvRefused) as refused:
        text_decode(b"candidate,AUC\nJ\xe448,1\n")
    assert refused.value.errors == ["the file is not UTF-8 text (byte 16 is not valid UTF-8)"]


def test_the_written_wide_csv_reads_back_to_the_same_values() -> None:
    rows = [
        {"candidate__name": "J48", "metric__name": "AUC", "value": 0.9019607843137255},
        {"candidate__name": "J48", "metric__name": "Time", "value": 4.0},
        {"candidate__name": "JRip", "metric__name": "Time", "value": 1e-7},
    ]
    text = measurements_csv_text(candidates=["J48", "JRip", "IBk"], metrics=["AUC", "Time"], rows=rows)
    assert text.splitlines() == ["candidate,AUC,Time", "J48,0.9019607843137255,4.0", "JRip,,1e-07", "IBk,,"]
    parsed = measurements_parse(text, candidates={"J48", "JRip", "IBk"}, metrics={"AUC", "Time"}, max_rows=10)
    assert {(r.candidate, r.metric): r.value for r in parsed} == {
        (r["candidate__name"], r["metric__name"]): r["value"] for r in rows
    }


def test_the_written_csv_disarms_names_a_spreadsheet_would_run() -> None:
    text = measurements_csv_text(candidates=["=cmd()"], metrics=["@AUC"], rows=[])
    assert text.splitlines() == ["candidate,'@AUC", "'=cmd(),"]
