"""approve-predictions/1 read by pyarrow (``evaluation.predictions.arrow``):
a CSV's fast path reads to exactly what the precise reader reads, and the
same columns in a Parquet file read to the same arrays and the same
evaluation; a Parquet file's refusals name the column and the row; the
page, the API and both commands take Parquet."""

import csv
import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluation.models import PredictionSet
from evaluation.predictions import (
    PARQUET_MEDIA_TYPE,
    PredictionData,
    PredictionFileError,
    PredictionFileTooManyClasses,
    arrow,
    precise,
    read_predictions,
)
from evaluation.report import document_json, evaluation_document
from workspace.models import Phase

from .test_limits_and_kept import Pipe
from .test_predictions import BINARY, MULTICLASS, assert_same

API = "/api/v1"


def parquet_bytes(table: pa.Table, **options) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, **options)
    return out.getvalue()


def csv_as_parquet(text: str, numbers=("score", "time")) -> bytes:
    """A CSV's columns as Parquet: numbers as float64, the rest as strings."""
    header, *rows = [line.split(",") for line in text.strip("\n").split("\n")]
    columns = {}
    for position, name in enumerate(header):
        cells = [row[position] for row in rows]
        number = name in numbers or name.startswith("proba:")
        columns[name] = pa.array([float(cell) for cell in cells] if number else cells)
    return parquet_bytes(pa.table(columns))


def assert_same_data(left: PredictionData, right: PredictionData) -> None:
    assert (left.labels, left.positive, left.folds, left.rows) == (
        right.labels,
        right.positive,
        right.folds,
        right.rows,
    )
    assert (left.context_columns, left.contexts) == (right.context_columns, right.contexts)
    assert list(left.candidates) == list(right.candidates)
    for name, candidate in left.candidates.items():
        assert_same(candidate, right.candidates[name])


def refusal(content: bytes, **options) -> list[str]:
    with pytest.raises(PredictionFileError) as refused:
        read_predictions(io.BytesIO(content), **options)
    return refused.value.errors


# --- the CSV's fast path ----------------------------------------------------------------------------

INTERLEAVED = (
    "instance,candidate,fold,y_true,y_pred,proba:x,proba:y,time,context:site,context:device\n"
    "i1,B,f2,y,y,0.25,0.75,0.5,north,\n"
    "i1,A,f2,x,y,0.5,0.5,1,south,phone\n"
    "i2,A,f1,y,x,1,0,0.125,north,\n"
    "i2,B,f1,x,x,0.875,0.125,0,north,phone\n"
    "i3,B,f2,y,x,0.6,0.4,2,south,phone\n"
    "i3,A,f1,x,x,0.9,0.1,3,north,\n"
)


def fast_path_taken(monkeypatch) -> list:
    """A list that gets an item each time pyarrow's reading of a CSV is kept
    (the fast path, not given up on for the precise reader)."""
    taken: list = []
    fast = arrow._Batches.data

    def counting(*args, **kwargs):
        taken.append(True)
        return fast(*args, **kwargs)

    monkeypatch.setattr(arrow._Batches, "data", counting)
    return taken


@pytest.mark.parametrize(
    "content, positive", [(BINARY, "spam"), (MULTICLASS, None), (INTERLEAVED, None)], ids=["binary", "multi", "mixed"]
)
def test_the_fast_path_reads_what_the_precise_reader_reads(content, positive, monkeypatch):
    """Candidates interleaved, an empty context, two context columns,
    probabilities in another order than the labels: the same arrays."""
    taken = fast_path_taken(monkeypatch)
    quick = read_predictions(io.BytesIO(content.encode()), positive=positive)
    assert taken == [True]  # read by pyarrow, not given up on
    precise = read_predictions(Pipe(content.encode()), positive=positive)  # a stream that cannot seek
    assert taken == [True]
    assert_same_data(quick, precise)


# Instance ids as a pipeline writes them and as a person might: ASCII of
# several lengths, accents, an emoji, a space, a comma (quoted in the CSV).
INSTANCE_IDS = st.text(alphabet="ab9 ,é😀", min_size=1, max_size=6).filter(lambda text: text.strip() == text)


def _instance_file(ids_by_candidate: list[list[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["candidate", "instance", "y_true", "y_pred"])
    for index, ids in enumerate(ids_by_candidate):
        writer.writerows([f"m{index}", id_, "ab"[position % 2], "ab"[position % 2]] for position, id_ in enumerate(ids))
    return out.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(INSTANCE_IDS, min_size=1, max_size=8), min_size=1, max_size=3))
def test_instance_ids_read_by_arrow_are_the_precise_readers(ids_by_candidate):
    """Issue 33, item 1: the Arrow reader makes the ids' array from Arrow's
    buffers (no Python string per id) and tells repeats by a hash: the same
    array, of the same width, as the precise reader's, and the same refusal
    of a repeated id, whatever the ids' lengths and characters."""
    content = _instance_file(ids_by_candidate).encode()
    try:
        expected = read_predictions(Pipe(content))  # the precise reader (a stream that cannot seek)
    except PredictionFileError as refused:
        assert any(len(set(ids)) < len(ids) for ids in ids_by_candidate)
        assert refusal(content) == refused.errors
        assert refusal(content, instances=False) == refused.errors
        return
    assert all(len(set(ids)) == len(ids) for ids in ids_by_candidate)
    taken: list = []
    original = arrow._Batches.data
    try:
        arrow._Batches.data = lambda *args, **kwargs: taken.append(True) or original(*args, **kwargs)
        quick = read_predictions(io.BytesIO(content))
    finally:
        arrow._Batches.data = original
    assert taken == [True]
    assert_same_data(quick, expected)
    unkept = read_predictions(io.BytesIO(content), instances=False)
    assert [arrays.instance for arrays in unkept.candidates.values()] == [None] * len(ids_by_candidate)
    for name, ids in zip(quick.candidates, ids_by_candidate, strict=True):
        assert quick.candidates[name].instance.tolist() == ids
        assert quick.candidates[name].instance.dtype == expected.candidates[name].instance.dtype


def test_a_hash_collision_leaves_the_ids_compared_themselves(monkeypatch):
    """The repeats' hash (``precise.id_hashes``) only says "surely
    distinct"; made to collide on every id (a multiplier of 0 hashes an id
    to its first character), distinct ids are still read and a repeat still
    refused, by the ids themselves; kept or not (``instances=False``)."""
    monkeypatch.setattr(precise, "HASH_MULTIPLIER", np.uint64(0))
    ids = np.array(["ax", "ay", "az"])
    assert not precise._surely_distinct(ids)
    distinct = _instance_file([["ax", "ay", "az"]]).encode()
    assert read_predictions(io.BytesIO(distinct)).candidates["m0"].instance.tolist() == ["ax", "ay", "az"]
    assert read_predictions(io.BytesIO(distinct), instances=False).candidates["m0"].instance is None
    repeated = _instance_file([["ax", "ay", "ax"]]).encode()
    expected = ["line 4, column instance: the candidate 'm0' has the instance 'ax' already, on line 2"]
    assert refusal(repeated) == expected
    assert refusal(repeated, instances=False) == expected
    monkeypatch.undo()
    assert precise._surely_distinct(ids)


def test_a_hash_does_not_depend_on_the_arrays_width():
    """Batches of ids are made arrays of their own widths (``instances=False``
    hashes each batch's): an id hashes alike in any of them, and a repeat
    across two batches of different widths is found."""
    narrow, wide = np.array(["ab", "c"], dtype="U2"), np.array(["ab", "c"], dtype="U9")
    assert precise.id_hashes(narrow).tolist() == precise.id_hashes(wide).tolist()
    assert precise.id_hashes(np.array(["ba"]))[0] != precise.id_hashes(narrow)[0]
    ids = [f"{index}" for index in range(arrow.CHUNK_ROWS + 5)] + ["7"]  # "7" again, in the second batch
    content = _instance_file([ids]).encode()
    lines = f"line {len(ids) + 1}, column instance: the candidate 'm0' has the instance '7' already, on line 9"
    assert refusal(content, instances=False) == [lines]


def _written_by_pyarrow(content: str) -> str:
    """``content`` as pyarrow's CSV writer writes it: every text cell, the
    header's included, in quotes."""
    import pyarrow.csv as pa_csv

    table = pa_csv.read_csv(
        io.BytesIO(content.encode()),
        convert_options=pa_csv.ConvertOptions(strings_can_be_null=False, column_types={"fold": pa.string()}),
    )
    out = io.BytesIO()
    pa_csv.write_csv(table, out)
    return out.getvalue().decode()


@pytest.mark.parametrize("content, positive", [(BINARY, "spam"), (INTERLEAVED, None)], ids=["binary", "mixed"])
def test_a_quoted_header_is_read_by_the_fast_path_too(content, positive, monkeypatch):
    """Issue 33, item 7: pyarrow's and R's CSV writers quote the header, and
    such a file fell back to the precise reader (4.2x slower) without a
    word. Now pyarrow reads it, to what the precise reader reads; a header
    whose quote goes on past its line is still the precise reader's."""
    written = _written_by_pyarrow(content)
    assert written.startswith('"') and written.splitlines()[0].count('"') >= 6
    quoted_by_hand = "\n".join(
        [",".join(f'"{cell}"' for cell in content.splitlines()[0].split(",")), *content.splitlines()[1:], ""]
    )
    taken = fast_path_taken(monkeypatch)
    for text in (written, quoted_by_hand):
        taken.clear()
        quick = read_predictions(io.BytesIO(text.encode()), positive=positive)
        assert taken == [True], text[:80]  # read by pyarrow, not given up on
        assert_same_data(quick, read_predictions(Pipe(content.encode()), positive=positive))
    taken.clear()
    unclosed = '"candidate,y_true\n",y_pred\nJ48,spam,ham\n'
    with pytest.raises(PredictionFileError):
        read_predictions(io.BytesIO(unclosed.encode()))
    assert taken == []  # left to the precise reader, which refuses it as before


def test_a_file_the_fast_path_gives_up_on_is_read_by_the_precise_reader():
    """A quoted line break and a header after a blank line: pyarrow does not
    take them; the precise reader does, with the same arrays."""
    quoted = 'candidate,y_true,y_pred\nJ48,"sp\nam",ham\nJ48,ham,ham\n'
    data = read_predictions(io.BytesIO(quoted.encode()))
    assert data.labels == ["sp\nam", "ham"] and data.rows == 2
    blank = "\n" + BINARY
    assert_same_data(read_predictions(io.BytesIO(blank.encode()), positive="spam"), read_text_precise(BINARY))


def read_text_precise(text: str) -> PredictionData:
    return read_predictions(Pipe(text.encode()), positive="spam")


# --- Parquet: what it reads to -----------------------------------------------------------------------


@pytest.mark.parametrize("content, positive", [(BINARY, "spam"), (MULTICLASS, None)], ids=["binary", "multiclass"])
def test_parquet_reads_to_the_arrays_and_the_evaluation_of_the_same_csv(content, positive):
    from_csv = read_predictions(io.BytesIO(content.encode()), positive=positive)
    from_parquet = read_predictions(io.BytesIO(csv_as_parquet(content)), positive=positive)
    assert_same_data(from_parquet, from_csv)
    assert document_json(evaluation_document(from_parquet)) == document_json(evaluation_document(from_csv))


def test_integer_labels_and_folds_read_as_the_text_a_csv_holds(tmp_path):
    """What an ML pipeline writes: integer labels, folds and ids; float32
    scores. The same as the CSV of the same values."""
    table = pa.table(
        {
            "candidate": pa.array(["m1", "m1", "m2", "m2"]).dictionary_encode(),
            "y_true": pa.array([1, 0, 1, 0], pa.int8()),
            "y_pred": pa.array([1, 1, 0, 0], pa.int64()),
            "score": pa.array([0.75, 0.5, 0.25, 0.125], pa.float32()),
            "fold": pa.array([10, 2, 10, 2], pa.int32()),
            "instance": pa.array([7, 8, 7, 8], pa.int64()),
        }
    )
    path = tmp_path / "pipeline.parquet"
    pq.write_table(table, path)
    csv = (
        "candidate,y_true,y_pred,score,fold,instance\n"
        "m1,1,1,0.75,10,7\nm1,0,1,0.5,2,8\nm2,1,0,0.25,10,7\nm2,0,0,0.125,2,8\n"
    )
    from_parquet = read_predictions(path, positive="1")
    assert from_parquet.labels == ["1", "0"] and from_parquet.folds == ["10", "2"]
    assert_same_data(from_parquet, read_predictions(io.BytesIO(csv.encode()), positive="1"))


def test_a_parquet_file_is_told_by_its_first_bytes_whatever_its_name(tmp_path):
    path = tmp_path / "predictions.csv"  # misnamed: still Parquet
    path.write_bytes(csv_as_parquet(MULTICLASS))
    assert read_predictions(path).rows == 4
    # Through a stream that cannot seek (standard input), read into memory.
    assert read_predictions(Pipe(csv_as_parquet(MULTICLASS))).rows == 4


# --- Parquet: refusals -------------------------------------------------------------------------------


def test_a_missing_column_is_refused_without_a_line():
    content = parquet_bytes(pa.table({"candidate": ["J48"], "y_pred": ["spam"]}))
    assert refusal(content) == ["missing column y_true (the true label of each row)"]


def test_a_column_of_the_wrong_type_is_refused_by_name():
    content = parquet_bytes(pa.table({"candidate": ["J48"], "y_true": [1.0], "y_pred": ["spam"], "score": ["high"]}))
    assert refusal(content, positive="spam") == [
        "column y_true: the column holds double; give text (string) or integers (a label is text: 1 and 1.0 are two)",
        "column score: the column holds string; give numbers (floating-point or integer)",
    ]


def test_bad_values_are_refused_by_row_and_column():
    table = pa.table(
        {
            "candidate": ["J48", "J48", "J48", "J48"],
            "y_true": ["a", "b", None, "a"],
            "y_pred": ["a", "b", "a", "a"],
            "proba:a": [float("nan"), 0.5, 1.0, 1.0],
            "proba:b": [0.5, 0.5, 0.0, 0.25],
            "time": [0.1, None, 0.0, -1.0],
        }
    )
    assert refusal(parquet_bytes(table)) == [
        "row 1, column proba:a: not a finite number ('nan')",
        "row 2, column time: empty: give a number",
        "row 3, column y_true: empty: give the true label",
        "row 4, column time: a time cannot be negative, got -1",
        "row 4: the probabilities sum to 1.25, not 1 (within 1e-06)",
    ]


def test_duplicate_instances_name_both_rows():
    table = pa.table({"candidate": ["J48"] * 3, "y_true": ["a", "b", "a"], "y_pred": ["a"] * 3, "instance": [1, 2, 1]})
    assert refusal(parquet_bytes(table)) == [
        "row 3, column instance: the candidate 'J48' has the instance '1' already, on row 1"
    ]


def test_too_many_labels_are_refused_as_in_a_csv():
    table = pa.table({"candidate": ["J48"] * 5, "y_true": ["a", "b", "c", "d", "e"], "y_pred": ["a"] * 5})
    with pytest.raises(PredictionFileTooManyClasses) as refused:
        read_predictions(io.BytesIO(parquet_bytes(table, use_dictionary=False)), max_classes=3)
    assert refused.value.errors[0].startswith("the file has 5 distinct labels; at most 3 are allowed")


def test_a_label_dictionary_over_the_limit_is_refused_from_its_page_header():
    # (Before any page is decoded: a dictionary of a million labels weighs a few megabytes.)
    table = pa.table({"candidate": ["J48"] * 5, "y_true": ["a", "b", "c", "d", "e"], "y_pred": ["a"] * 5})
    with pytest.raises(PredictionFileTooManyClasses) as refused:
        read_predictions(io.BytesIO(parquet_bytes(table)), max_classes=3)
    assert refused.value.errors == [
        "column y_true: its dictionary holds 5 labels; at most 3 are allowed in a prediction set (labels of y_true "
        "and y_pred, proba:<label> columns and the positive label, together)"
    ]


def test_an_unknown_candidate_and_too_many_rows_are_refused():
    table = pa.table({"candidate": ["J48", "C4.5"], "y_true": ["a", "b"], "y_pred": ["a", "a"]})
    assert refusal(parquet_bytes(table), candidates=["J48"]) == [
        "row 2, column candidate: no candidate named 'C4.5' in this study"
    ]
    assert refusal(parquet_bytes(table), max_rows=1) == ["too many rows: more than 1, the limit for a prediction file"]


def test_a_damaged_or_misnamed_parquet_file_is_refused(tmp_path):
    damaged = csv_as_parquet(MULTICLASS)[:-20]
    assert refusal(damaged)[0].startswith("not a readable Parquet file (")
    named = tmp_path / "predictions.parquet"
    named.write_bytes(MULTICLASS.encode())
    with pytest.raises(PredictionFileError) as refused:
        read_predictions(named)
    assert refused.value.errors == [
        f"the file is named {named.name!r} but is not a Parquet file (a Parquet file starts with the bytes PAR1)"
    ]


# --- the page, the API and the commands ----------------------------------------------------------------


@pytest.mark.django_db
def test_the_page_uploads_a_parquet_file(client, make_study):
    built = make_study(Phase.VOTING)
    client.force_login(built.study.designer)
    content = csv_as_parquet(BINARY)
    response = client.post(
        f"/studies/{built.study.pk}/predictions/",
        {"file": SimpleUploadedFile("holdout.parquet", content), "positive": "spam"},
    )
    assert response.status_code == 302, response.content.decode()
    stored = PredictionSet.objects.get()
    assert (stored.name, stored.row_count, stored.byte_count, stored.labels) == (
        "holdout.parquet",
        6,
        len(content),
        ["spam", "ham"],
    )


@pytest.mark.django_db
def test_the_api_uploads_a_parquet_file_and_lists_its_refusals_by_row(make_study, clients):
    study = make_study(Phase.VOTING).study
    url = f"{API}/studies/{study.pk}/predictions/"
    content = csv_as_parquet(BINARY)
    upload = SimpleUploadedFile("holdout.parquet", content, content_type=PARQUET_MEDIA_TYPE)
    response = clients["alice"].post(url, {"file": upload, "positive": "spam"}, format="multipart")
    assert response.status_code == 201, response.content
    assert (response.json()["rows"], response.json()["bytes"]) == (6, len(content))
    bad = parquet_bytes(pa.table({"candidate": ["J48"], "y_true": ["spam"], "y_pred": ["spam"], "time": [-2.0]}))
    refused = clients["alice"].post(
        url, {"file": SimpleUploadedFile("bad.parquet", bad), "positive": "spam"}, format="multipart"
    )
    assert refused.status_code == 400
    assert PredictionSet.objects.count() == 1
    assert "row 1, column time: a time cannot be negative, got -2" in json.dumps(refused.json())
    # The file itself as the body, its options as query parameters.
    raw = clients["alice"].generic("POST", f"{url}?positive=spam&name=raw", content, content_type=PARQUET_MEDIA_TYPE)
    assert raw.status_code == 201, raw.content
    assert (raw.json()["name"], raw.json()["rows"], raw.json()["bytes"]) == ("raw", 6, len(content))


@pytest.mark.django_db
def test_the_commands_take_parquet(make_study, tmp_path):
    path = tmp_path / "holdout.parquet"
    path.write_bytes(csv_as_parquet(BINARY))
    csv_path = tmp_path / "holdout.csv"
    csv_path.write_text(BINARY, encoding="utf-8")
    documents = []
    for source in (path, csv_path):
        out = io.StringIO()
        call_command("evaluate_predictions", str(source), "--positive", "spam", "--json", stdout=out)
        documents.append(out.getvalue())
    assert documents[0] == documents[1] and json.loads(documents[0])["candidates"]["J48"]["accuracy"] == 2 / 3
    built = make_study(Phase.VOTING)
    parquet = tmp_path / "c45.parquet"
    parquet.write_bytes(csv_as_parquet(BINARY))
    out = io.StringIO()
    call_command("import_predictions", str(built.study.pk), str(parquet), "--positive", "spam", stdout=out)
    stored = PredictionSet.objects.get()
    assert (out.getvalue().strip(), stored.name, stored.row_count) == (str(stored.pk), "c45.parquet", 6)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(parquet_bytes(pa.table({"candidate": ["J48"], "y_pred": ["spam"]})))
    with pytest.raises(CommandError, match="missing column y_true"):
        call_command("evaluate_predictions", str(bad))
