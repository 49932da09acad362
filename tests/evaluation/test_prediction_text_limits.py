"""A prediction file is bounded by what its text expands to, not by what it
weighs (issue 29): a label's length (PREDICTIONS_MAX_LABEL_LENGTH), the
bytes of its distinct values (PREDICTIONS_MAX_DISTINCT_BYTES), its instance
ids' array and a Parquet file's decompressed pages (PREDICTIONS_MAX_ARRAY_BYTES
through the web and the API), each refused before the values are made, with
a message naming the column and the limit; and an error quotes a value cut
to QUOTE_MAX_CHARS, so no refusal is more than a few kilobytes."""

import io
import json
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.utils.html import escape

from evaluation.models import PredictionSet
from evaluation.predictions import (
    QUOTE_MAX_CHARS,
    PredictionFileError,
    PredictionFileTooLong,
    PredictionFileTooManyClasses,
    TextLimits,
    read_predictions,
)
from evaluation.services import prediction_text_limits
from workspace import limits
from workspace.models import Phase

API = "/api/v1"
MIB = 1024 * 1024
LENGTH = limits.PREDICTIONS_MAX_LABEL_LENGTH
# The largest answer a refusal may give (the page's: beyond the page itself).
MAX_ANSWER = 10_000
# A refusal is quick (the file of issue 29 took 27.8 s); generous for a loaded machine.
QUICK_SECONDS = 5


def parquet_bytes(table: pa.Table, **options) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, **options)
    return out.getvalue()


@pytest.fixture(scope="module")
def one_label() -> bytes:
    """Issue 29's file: 400 rows whose dictionary-encoded y_pred holds one
    5 MiB label, zstd: 1.2 KB that decode to 2 GB."""
    rows = 400
    label = "x" * (5 * MIB)
    table = pa.table(
        {
            "candidate": ["J48"] * rows,
            "y_true": ["a", "b"] * (rows // 2),
            "y_pred": pa.array([label] * rows).dictionary_encode(),
        }
    )
    return parquet_bytes(table, compression="zstd", use_dictionary=True)


@pytest.fixture(scope="module")
def million_labels() -> bytes:
    """A dictionary of 1,000,000 short labels (one dictionary page), a few MB."""
    rows = 1_000_000
    labels = pa.array([f"c{index:07d}" for index in range(rows)]).dictionary_encode()
    table = pa.table({"candidate": pa.array(["J48"] * rows).dictionary_encode(), "y_true": labels, "y_pred": labels})
    return parquet_bytes(table, compression="zstd", dictionary_pagesize_limit=1 << 30)


@pytest.fixture(scope="module")
def plain_column() -> bytes:
    """A zstd column of one 5 MiB value repeated, plainly encoded (no
    dictionary): 70 KB whose pages decode to 2 GB."""
    rows = 400
    table = pa.table(
        {"candidate": ["J48"] * rows, "y_true": ["a", "b"] * (rows // 2), "y_pred": pa.array(["y" * (5 * MIB)] * rows)}
    )
    return parquet_bytes(table, compression="zstd", use_dictionary=False)


# What each file's refusal says (the column and the limit named).
EXPECTED = {
    "one_label": (
        "column y_pred: its dictionary holds 1 value in 5,242,880 bytes, so one is longer than 1,000 characters, "
        "the limit for a label, a fold, a context's value, a candidate's name or an instance id"
    ),
    "million_labels": (
        "column y_true: its dictionary holds 1,000,000 labels; at most 100 are allowed in a prediction set "
        "(labels of y_true and y_pred, proba:<label> columns and the positive label, together)"
    ),
    "plain_column": (
        "column y_pred: its values take 2,097,153,635 bytes once decompressed (as the file's pages say), more than "
        "400 values can take (1,668,736 bytes) when each is at most 1,000 characters, the limit for a label, a "
        "fold, a context's value, a candidate's name or an instance id"
    ),
}
FILES = list(EXPECTED)


def refused(content: bytes, **options) -> list[str]:
    started = time.perf_counter()
    with pytest.raises(PredictionFileError) as refusal:
        read_predictions(io.BytesIO(content), **options)
    assert time.perf_counter() - started < QUICK_SECONDS
    return refusal.value.errors


def test_the_files_are_small(one_label, million_labels, plain_column):
    assert len(one_label) < 1300
    assert len(million_labels) < limits.PREDICTIONS_MAX_BYTES
    assert len(plain_column) < 100_000


@pytest.mark.parametrize("name", FILES)
def test_each_file_is_refused_before_it_is_decoded(name, request):
    content = request.getfixturevalue(name)
    errors = refused(
        content,
        max_bytes=limits.PREDICTIONS_MAX_BYTES,
        max_rows=limits.PREDICTIONS_MAX_ROWS,
        max_classes=limits.PREDICTIONS_MAX_CLASSES,
        text_limits=prediction_text_limits(web=True),
    )
    assert errors == [EXPECTED[name]]
    # The operator's limits (no size, rows or memory limit) refuse them the same way.
    errors = refused(content, max_classes=limits.PREDICTIONS_MAX_CLASSES, text_limits=prediction_text_limits(web=False))
    assert errors == [EXPECTED[name]]


def test_a_long_label_within_the_pages_bounds_is_refused_on_the_arrow_dictionary_with_its_row():
    # 5,000 rows may hold 5,000 values of 1,000 characters: the pages pass, the dictionary's value does not.
    rows = 5000
    y_pred = ["a"] * 4321 + ["é" * 2000] * (rows - 4321)
    table = pa.table({"candidate": ["J48"] * rows, "y_true": ["a", "b"] * (rows // 2), "y_pred": y_pred})
    for options in ({}, {"use_dictionary": False}):
        errors = refused(parquet_bytes(table, **options), text_limits=prediction_text_limits(web=True))
        assert errors == [
            f"row 4322, column y_pred: a value of 2,000 characters ({'é' * QUOTE_MAX_CHARS!r}…); a label, a fold, a "
            "context's value, a candidate's name or an instance id is at most 1,000 characters"
        ]


def test_a_value_of_a_csv_over_the_length_is_refused_on_its_line():
    csv = "candidate,y_true,y_pred,fold\n" + "J48,a,a,1\n" * 3 + f"J48,a,a,{'f' * (LENGTH + 1)}\n"
    assert refused(csv.encode(), text_limits=prediction_text_limits(web=False)) == [
        f"line 5, column fold: a value of 1,001 characters ({'f' * QUOTE_MAX_CHARS!r}…); a label, a fold, a "
        "context's value, a candidate's name or an instance id is at most 1,000 characters"
    ]
    # Past the csv module's own bound (131,072 characters) the message still names the limit.
    huge = "candidate,y_true,y_pred\n" + f"J48,a,{'z' * (200_000)}\n"
    assert refused(huge.encode(), text_limits=prediction_text_limits(web=False)) == [
        "line 2: a value of more than 131,072 characters; a label, a fold, a context's value, a candidate's name "
        "or an instance id is at most 1,000 characters"
    ]


def test_a_label_declared_by_a_proba_column_over_the_length_is_refused():
    label = "p" * (LENGTH + 5)
    csv = f"candidate,y_true,proba:{label}\nJ48,{label},1\n"
    errors = refused(csv.encode(), text_limits=prediction_text_limits(web=False))
    assert errors == [
        f"line 1, column {('proba:' + label)[:QUOTE_MAX_CHARS]}… (1,011 characters): a value of 1,005 characters "
        f"({'p' * QUOTE_MAX_CHARS!r}…); a label, a fold, a context's value, a candidate's name or an instance id is "
        "at most 1,000 characters"
    ]


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_the_distinct_values_bytes_are_bounded(kind):
    folds = [f"fold-{index:04d}" for index in range(200)]  # 200 x 9 bytes
    table = pa.table({"candidate": ["J48"] * 200, "y_true": ["a"] * 200, "y_pred": ["a"] * 200, "fold": folds})
    if kind == "csv":
        content = "candidate,y_true,y_pred,fold\n" + "".join(f"J48,a,a,{fold}\n" for fold in folds)
        content = content.encode()
    else:
        content = parquet_bytes(table, use_dictionary=False)
    assert refused(content, text_limits=TextLimits(distinct_bytes=1000)) == [
        "column fold: the file's distinct labels, folds, contexts and candidates' names take more than 1,000 bytes "
        "together, the limit for a prediction set"
    ]
    assert read_predictions(io.BytesIO(content), text_limits=TextLimits(distinct_bytes=2000)).folds == folds


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_the_instance_ids_array_is_bounded_before_it_is_made(kind):
    # NumPy gives every id the longest one's width: 3,000 rows x 900 characters x 4 bytes = 10.8 MB.
    ids = [str(index) for index in range(2999)] + ["i" * 900]
    if kind == "csv":
        content = ("candidate,y_true,y_pred,instance\n" + "".join(f"J48,a,a,{id_}\n" for id_ in ids)).encode()
    else:
        table = pa.table({"candidate": ["J48"] * 3000, "y_true": ["a"] * 3000, "y_pred": ["a"] * 3000, "instance": ids})
        content = parquet_bytes(table)
    assert refused(content, text_limits=TextLimits(array_bytes=10 * MIB)) == [
        "column instance: the instance ids would take 10,800,000 bytes in memory (3,000 rows, each as long as the "
        "longest id, 900 characters, at 4 bytes a character); the limit is 10,485,760 bytes: give shorter ids"
    ]
    assert len(read_predictions(io.BytesIO(content), text_limits=TextLimits(array_bytes=11 * MIB)).candidates) == 1


def test_the_decompressed_pages_are_bounded_through_the_web():
    rows = 100_000
    table = pa.table({"candidate": ["J48"] * rows, "y_true": ["a"] * rows, "score": [0.5] * rows})
    content = parquet_bytes(table, compression="zstd", use_dictionary=False)
    assert len(content) < 5000
    errors = refused(content, positive="a", text_limits=TextLimits(array_bytes=100_000))
    assert len(errors) == 1 and errors[0].startswith("the file's columns take ")
    assert errors[0].endswith(
        "bytes once decompressed (as its pages say); the limit for a prediction file is 100,000 bytes once read "
        "(import_predictions, run by the operator, has none)"
    )


def test_a_quoted_value_is_cut_and_a_refusal_stays_small():
    # Twenty-five rows, each with a long number cell and a long unknown label: errors stop at 20, each short.
    long = "9" * 900 + "x"
    csv = "candidate,y_true,y_pred,score\n" + "".join(f"J48,a,{'q' * 900}{row},{long}\n" for row in range(25))
    errors = refused(csv.encode(), positive="a")
    assert errors[0] == f"line 2, column score: not a number ({long[:QUOTE_MAX_CHARS]!r}… (901 characters))"
    assert len(json.dumps(errors)) < MAX_ANSWER
    assert all(len(error) < 400 for error in errors)


# --- through the page, the API and the commands ---------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("name", FILES)
def test_the_page_refuses_each_file_with_a_small_answer(name, request, client, make_study):
    content = request.getfixturevalue(name)
    study = make_study(Phase.VOTING).study
    client.force_login(study.designer)
    url = f"/studies/{study.pk}/predictions/"
    page = client.get(url)
    started = time.perf_counter()
    response = client.post(url, {"file": SimpleUploadedFile(f"{name}.parquet", content)})
    assert time.perf_counter() - started < QUICK_SECONDS
    assert response.status_code == 400
    assert escape(EXPECTED[name]) in response.content.decode()
    assert len(response.content) - len(page.content) < MAX_ANSWER
    assert not PredictionSet.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", FILES)
def test_the_api_refuses_each_file_with_a_small_answer(name, request, make_study, clients):
    content = request.getfixturevalue(name)
    study = make_study(Phase.VOTING).study
    url = f"{API}/studies/{study.pk}/predictions/"
    started = time.perf_counter()
    response = clients["alice"].generic("POST", url, content, content_type="application/vnd.apache.parquet")
    assert time.perf_counter() - started < QUICK_SECONDS
    assert response.status_code == 400
    assert response.json()["fields"] == {"file": [EXPECTED[name]]}
    assert len(response.content) < MAX_ANSWER
    assert not PredictionSet.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", FILES)
def test_the_commands_refuse_each_file(name, request, make_study, tmp_path):
    path = tmp_path / f"{name}.parquet"
    path.write_bytes(request.getfixturevalue(name))
    study = make_study(Phase.VOTING).study
    for command, arguments in (("evaluate_predictions", []), ("import_predictions", [str(study.pk)])):
        started = time.perf_counter()
        with pytest.raises(CommandError) as refusal:
            call_command(command, *arguments, str(path), stdout=io.StringIO())
        assert time.perf_counter() - started < QUICK_SECONDS
        assert EXPECTED[name] in str(refusal.value) and len(str(refusal.value)) < MAX_ANSWER
    assert not PredictionSet.objects.exists()


def test_the_limits_are_what_the_reader_is_given():
    web = prediction_text_limits(web=True)
    assert (web.length, web.distinct_bytes, web.array_bytes) == (
        limits.PREDICTIONS_MAX_LABEL_LENGTH,
        limits.PREDICTIONS_MAX_DISTINCT_BYTES,
        limits.PREDICTIONS_MAX_ARRAY_BYTES,
    )
    assert prediction_text_limits(web=False).array_bytes is None
    with pytest.raises(PredictionFileTooLong):
        read_predictions(io.BytesIO(b"candidate,y_true,y_pred\nJ48,a," + b"b" * 1001 + b"\n"), text_limits=web)
    with pytest.raises(PredictionFileTooManyClasses):
        read_predictions(io.BytesIO(b"candidate,y_true,y_pred\nJ48,a,b\nJ48,c,d\n"), max_classes=2, text_limits=web)
