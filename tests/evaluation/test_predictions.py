"""Prediction sets: the reader (``evaluation.predictions``), the storage of
its arrays, the import service and the ``import_predictions`` command.

Every refusal of FORMATS.md is pinned with its exact message, through the
service, with nothing stored; a stored set loads back to the arrays it was
read into; random valid files read back to the arrays they were written
from (Hypothesis).
"""

import csv
import io
import re

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluation.arrays import arrays_pack, arrays_unpack
from evaluation.models import CandidatePredictionArrays, PredictionSet
from evaluation.predictions import (
    CandidatePredictions,
    PredictionFileError,
    PredictionFileTooLarge,
    read_predictions,
)
from evaluation.predictions import precise as reader_module
from evaluation.selectors import prediction_data_get
from evaluation.services import prediction_set_delete, prediction_set_import
from workspace.errors import InvalidInput
from workspace.models import Phase

COLUMNS_HELP = "candidate, y_true, y_pred, score, proba:<label>, fold, time, context:<name>, instance"


def read_text(text, **options):
    return read_predictions(io.BytesIO(text.encode("utf-8")), **options)


def assert_same(actual: CandidatePredictions, expected: CandidatePredictions):
    assert actual.name == expected.name
    for field in ("y_true", *CandidatePredictions.OPTIONAL):
        left, right = getattr(actual, field), getattr(expected, field)
        assert (left is None) == (right is None), field
        if left is not None:
            assert left.dtype.kind == right.dtype.kind, field
            np.testing.assert_array_equal(left, right, err_msg=field)


# --- refusals: each kind with its message, and nothing stored ----------------------------

REFUSED = [
    # (id, file, options, errors under "file")
    (
        "missing-y_true",
        "candidate,y_pred\nJ48,spam\n",
        {},
        ["line 1: missing column y_true (the true label of each row)"],
    ),
    (
        "missing-candidate",
        "y_true,y_pred\nspam,spam\n",
        {},
        ["line 1: missing column candidate (the candidate of each row), or upload the file for one candidate"],
    ),
    (
        "missing-predictions",
        "candidate,y_true,fold\nJ48,spam,1\n",
        {},
        ["line 1: missing predictions: give a y_pred, score or proba:<label> column"],
    ),
    (
        "unknown-column",
        "candidate,y_true,y_prd\nJ48,spam,spam\n",
        {},
        [
            f"line 1, column y_prd: unknown column; did you mean 'y_pred'? (the columns are {COLUMNS_HELP})",
            "line 1: missing predictions: give a y_pred, score or proba:<label> column",
        ],
    ),
    (
        "duplicate-column",
        "candidate,y_true,y_pred,y_true\nJ48,spam,spam,spam\n",
        {},
        ["line 1, column y_true: the column is given twice (columns 2 and 4)"],
    ),
    (
        "unnamed-column",
        "candidate,y_true,,y_pred\nJ48,spam,x,spam\n",
        {},
        ["line 1, column 3: the column has no name"],
    ),
    (
        "empty-file",
        "",
        {},
        [
            "the file is empty: give a header row (candidate,y_true,y_pred, ...), then one row per candidate and "
            "test instance"
        ],
    ),
    (
        "no-header",
        "J48,spam,spam\nJ48,ham,spam\n",
        {},
        [f"line 1: no header: the first line must name the columns ({COLUMNS_HELP}); it reads 'J48', 'spam', 'spam'"],
    ),
    (
        "header-only",
        "candidate,y_true,y_pred\n",
        {},
        ["the file has a header but no rows: add one row per candidate and test instance"],
    ),
    (
        "wrong-field-count",
        "candidate,y_true,y_pred\nJ48,spam,spam\nJ48,ham\nJ48,ham,ham,extra\n",
        {},
        ["line 3: 2 values, but the header has 3 columns", "line 4: 4 values, but the header has 3 columns"],
    ),
    (
        "not-utf8",
        b"candidate,y_true,y_pred\nJ48,spam,spam\nJ48,caf\xe9,spam\n",
        {},
        ["line 3: the file is not UTF-8 text (byte 46 is not valid UTF-8); save it as UTF-8"],
    ),
    (
        "nul-character",
        "candidate,y_true,y_pred\nJ48,spam,spam\nJ48,s\x00pam,spam\n",
        {},
        ["line 3: holds a NUL character, which is not text (a binary file?)"],
    ),
    (
        "unknown-candidate",
        "candidate,y_true,y_pred\nJ48,spam,spam\nC4.5,spam,spam\nC4.5,ham,spam\n",
        {},
        ["line 3, column candidate: no candidate named 'C4.5' in this study"],
    ),
    (
        "another-candidate-in-a-one-candidate-file",
        "candidate,y_true,y_pred\nJ48,spam,spam\nJRip,spam,spam\n",
        {"candidate": "J48"},
        ["line 3, column candidate: 'JRip', but the file is for the candidate 'J48'"],
    ),
    (
        "empty-y_true",
        "candidate,y_true,y_pred\nJ48,spam,spam\nJ48,,spam\nJ48,,ham\n",
        {},
        ["line 3, column y_true: empty: give the true label"],
    ),
    (
        "undeclared-label",
        "candidate,y_true,y_pred\nJ48,spam,spam\nJ48,ham,eggs\nJRip,ham,eggs\n",
        {},
        [
            "line 3, column y_pred: the label 'eggs' is not in y_true and not declared (as a proba:<label> column "
            "or the positive label)"
        ],
    ),
    (
        "probabilities-not-summing-to-1",
        "candidate,y_true,proba:spam,proba:ham\nJ48,spam,0.7,0.3\nJ48,ham,0.6,0.3\nJ48,ham,0.5,0.5000001\n",
        {},
        ["line 3: the probabilities sum to 0.9, not 1 (within 1e-06)"],
    ),
    (
        "probability-out-of-range",
        "candidate,y_true,proba:spam,proba:ham\nJ48,spam,1.5,-0.5\n",
        {},
        [
            "line 2, column proba:spam: a probability is between 0 and 1, got 1.5",
            "line 2, column proba:ham: a probability is between 0 and 1, got -0.5",
        ],
    ),
    (
        "proba-columns-missing-a-label",
        "candidate,y_true,y_pred,proba:spam,proba:ham\nJ48,spam,spam,0.9,0.1\nJ48,eggs,ham,0.5,0.5\n",
        {},
        [
            "line 3, column y_true: the label 'eggs' has no proba:eggs column (with probabilities, every label "
            "needs its column)"
        ],
    ),
    (
        "not-a-number",
        "candidate,y_true,proba:benign,proba:malignant\nJ48,benign,0.9,0.1\nJ48,benign,abc,0.1\nJ48,benign,0,5,0.5\n",
        {},
        ["line 3, column proba:benign: not a number ('abc')", "line 4: 5 values, but the header has 4 columns"],
    ),
    (
        "decimal-comma-and-empty-number",
        "candidate\ty_true\ty_pred\ttime\nJ48\tspam\tspam\t0,5\nJ48\tham\tham\t\n",
        {},
        [
            "line 2, column time: not a number ('0,5'); use a point for decimals",
            "line 3, column time: empty: give a number",
        ],
    ),
    (
        "non-finite-number",
        "candidate,y_true,score\nJ48,spam,inf\nJ48,ham,nan\nJ48,ham,1e999\n",
        {"positive": "spam"},
        [
            "line 2, column score: not a finite number ('inf')",
            "line 3, column score: not a finite number ('nan')",
            "line 4, column score: not a finite number ('1e999')",
        ],
    ),
    (
        "negative-time",
        "candidate,y_true,y_pred,time\nJ48,spam,spam,0.25\nJ48,ham,ham,-0.5\n",
        {},
        ["line 3, column time: a time cannot be negative, got -0.5"],
    ),
    (
        "fold-missing-for-a-candidate",
        "candidate,fold,y_true,y_pred\nJ48,1,spam,spam\nJ48,2,ham,ham\nJRip,1,spam,ham\nJRip,1,ham,ham\n",
        {},
        [
            "line 4, column fold: the candidate 'JRip' has no rows in fold '2' (every candidate needs rows in every "
            "fold: '1', '2')"
        ],
    ),
    (
        "score-with-three-labels",
        "candidate,y_true,score\nJ48,spam,0.9\nJ48,ham,0.1\nJ48,eggs,0.4\n",
        {"positive": "spam"},
        ["line 1, column score: a score is for two labels (a binary task), but the file has 3: 'spam', 'ham', 'eggs'"],
    ),
    (
        "score-without-positive",
        "candidate,y_true,score\nJ48,spam,0.9\n",
        {},
        ["line 1, column score: a score is the positive label's: name the positive label"],
    ),
    (
        "positive-not-a-label",
        "candidate,y_true,score\nJ48,spam,0.9\nJ48,ham,0.2\n",
        {"positive": "Spam"},
        ["positive: 'Spam' is not a label of the file (its labels are 'spam', 'ham')"],
    ),
    (
        "duplicate-instance",
        "candidate,instance,y_true,y_pred\nJ48,a,spam,spam\nJRip,a,spam,spam\nJ48,b,ham,ham\nJ48,a,ham,spam\n",
        {},
        ["line 5, column instance: the candidate 'J48' has the instance 'a' already, on line 2"],
    ),
    (
        "over-the-size-limit",
        "candidate,y_true,y_pred\n" + "J48,spam,spam\n" * 10,
        {"max_bytes": 100},
        ["the file is more than 100 bytes; the limit for a prediction file is 100 bytes (9.53674e-05 MB)"],
    ),
    (
        "too-many-rows",
        "candidate,y_true,y_pred\n" + "J48,spam,spam\n" * 3,
        {"max_rows": 2},
        ["too many rows: more than 2, the limit for a prediction file"],
    ),
]


@pytest.mark.parametrize("content, options, errors", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_a_refused_file_says_why_line_by_line_and_stores_nothing(
    content, options, errors, make_study, cast, nothing_stored
):
    built = make_study(Phase.DRAFT)
    data = content if isinstance(content, bytes) else content.encode("utf-8")
    with nothing_stored(), pytest.raises(InvalidInput) as refused:
        prediction_set_import(
            study=built.study, stream=io.BytesIO(data), name="bad.csv", uploaded_by=cast.alice, **options
        )
    assert refused.value.errors == {"file": errors}


def test_the_kinds_of_refusal_are_all_different():
    """Each refusal kind above has its own message, not a catch-all: they
    differ even with their lines, columns, quoted values and numbers left out."""

    def kind(message):
        return re.sub(
            r"'[^']*'|-?\d+(\.\d+)?(e-?\d+)?",
            "_",
            message.split(": ", 1)[-1] if message.startswith("line") else message,
        )

    kinds = [kind(errors[0]) for _, _, _, errors in REFUSED]
    assert len(REFUSED) >= 25
    assert len(set(kinds)) == len(kinds), sorted(kinds)


def test_a_file_over_the_size_limit_is_refused_from_its_size_before_it_is_read(make_study, cast, nothing_stored):
    built = make_study(Phase.DRAFT)
    upload = SimpleUploadedFile("big.csv", b"candidate,y_true,y_pred\n" + b"J48,spam,spam\n" * 100)
    upload.file = io.BytesIO()  # read, it would be "empty": its size alone decides
    with nothing_stored(), pytest.raises(InvalidInput) as refused:
        prediction_set_import(study=built.study, stream=upload, name="big.csv", uploaded_by=cast.alice, max_bytes=1024)
    assert refused.value.errors == {
        "file": ["the file is 1424 bytes; the limit for a prediction file is 1024 bytes (0.000976562 MB)"]
    }


def test_the_size_error_is_its_own_kind_for_the_api_to_answer_413():
    with pytest.raises(PredictionFileTooLarge):
        read_text("candidate,y_true,y_pred\nJ48,spam,spam\n", max_bytes=10)


def test_an_unknown_candidate_named_for_the_upload_is_an_error_of_that_field(make_study, cast, nothing_stored):
    built = make_study(Phase.DRAFT)
    with nothing_stored(), pytest.raises(InvalidInput) as refused:
        prediction_set_import(
            study=built.study,
            stream=io.BytesIO(b"y_true,y_pred\nspam,spam\n"),
            name="one.csv",
            uploaded_by=cast.alice,
            candidate="C4.5",
        )
    assert refused.value.errors == {"candidate": ["no candidate named 'C4.5' in this study"]}


def test_errors_stop_at_twenty(make_study, cast, nothing_stored):
    built = make_study(Phase.DRAFT)
    content = "candidate,y_true,y_pred,time\n" + "".join(f"J48,spam,spam,-{n}\n" for n in range(1, 31))
    with nothing_stored(), pytest.raises(InvalidInput) as refused:
        prediction_set_import(
            study=built.study, stream=io.BytesIO(content.encode()), name="bad.csv", uploaded_by=cast.alice
        )
    errors = refused.value.errors["file"]
    assert len(errors) == 21
    assert errors[0] == "line 2, column time: a time cannot be negative, got -1"
    assert errors[19] == "line 21, column time: a time cannot be negative, got -20"
    assert errors[20] == "stopped after 20 errors; there may be more"


def test_errors_name_the_line_a_row_starts_on_past_quoted_line_breaks_and_blank_lines():
    content = 'candidate,y_true,y_pred,time\r\nJ48,"two\nlines","two\nlines",1\r\n\r\nJ48,"a\r\nb","a\r\nb",-1\r\n'
    with pytest.raises(PredictionFileError) as refused:
        read_text(content)
    assert refused.value.errors == ["line 6, column time: a time cannot be negative, got -1"]


def test_line_numbers_carry_across_chunks(monkeypatch):
    monkeypatch.setattr(reader_module, "CHUNK_ROWS", 3)
    rows = ["J48,spam,spam,1"] * 7 + ["J48,spam,spam,x"]
    with pytest.raises(PredictionFileError) as refused:
        read_text("candidate,y_true,y_pred,time\n" + "\n".join(rows) + "\n")
    assert refused.value.errors == ["line 9, column time: not a number ('x')"]


def test_a_utf8_error_past_the_first_block_names_its_line(monkeypatch):
    monkeypatch.setattr(reader_module, "BLOCK_BYTES", 16)
    content = b"candidate,y_true,y_pred\n" + b"J48,spam,spam\n" * 5 + b"J48,\xff,spam\n"
    with pytest.raises(PredictionFileError) as refused:
        read_predictions(io.BytesIO(content))
    assert refused.value.errors == [
        f"line 7: the file is not UTF-8 text (byte {len(content) - 6} is not valid UTF-8); save it as UTF-8"
    ]


# --- what a good file reads to ------------------------------------------------------------


BINARY = (
    "instance,candidate,fold,y_true,y_pred,score,time,context:site,context:device\n"
    "a,J48,1,spam,spam,0.9,0.01,north,phone\n"
    "a,JRip,1,spam,ham,0.4,0.02,north,phone\n"
    "b,J48,2,ham,ham,0.2,0.03,south,phone\n"
    "b,JRip,2,ham,ham,0.1,0,south,phone\n"
    "c,J48,1,ham,spam,0.7,0.05,north,phone\n"
    "c,JRip,2,ham,ham,0.3,0.5,north,laptop\n"
)

MULTICLASS = (
    "candidate,y_true,y_pred,proba:c,proba:a,proba:b\n"
    "J48,b,b,0.1,0.2,0.7\n"
    "J48,a,c,0.5,0.4,0.1\n"
    "JRip,b,a,0,0.6,0.4\n"
    "JRip,b,b,0.25,0.25,0.5\n"
)


def test_a_binary_file_reads_to_codes_in_the_documented_order():
    data = read_text(BINARY, positive="spam")
    assert data.labels == ["spam", "ham"]
    assert (data.positive, data.rows, data.folds) == ("spam", 6, ["1", "2"])
    assert data.context_columns == ["site", "device"]
    assert data.contexts == [("north", "phone"), ("south", "phone"), ("north", "laptop")]
    assert list(data.candidates) == ["J48", "JRip"]
    assert_same(
        data.candidates["J48"],
        CandidatePredictions(
            name="J48",
            y_true=np.array([0, 1, 1], dtype=np.int32),
            y_pred=np.array([0, 1, 0], dtype=np.int32),
            score=np.array([0.9, 0.2, 0.7]),
            fold=np.array([0, 1, 0], dtype=np.int32),
            time=np.array([0.01, 0.03, 0.05]),
            context=np.array([0, 1, 0], dtype=np.int32),
            instance=np.array(["a", "b", "c"]),
        ),
    )
    assert_same(
        data.candidates["JRip"],
        CandidatePredictions(
            name="JRip",
            y_true=np.array([0, 1, 1], dtype=np.int32),
            y_pred=np.array([1, 1, 1], dtype=np.int32),
            score=np.array([0.4, 0.1, 0.3]),
            fold=np.array([0, 1, 1], dtype=np.int32),
            time=np.array([0.02, 0.0, 0.5]),
            context=np.array([0, 1, 2], dtype=np.int32),
            instance=np.array(["a", "b", "c"]),
        ),
    )
    assert data.candidates["J48"].columns == ["y_pred", "score", "fold", "time", "context", "instance"]


def test_labels_of_y_true_come_first_then_the_declared_ones_and_proba_follows_them():
    """y_true gives b, a; the proba columns declare c; the probabilities are
    reordered to the labels' order."""
    data = read_text(MULTICLASS)
    assert data.labels == ["b", "a", "c"]
    assert data.positive is None
    j48 = data.candidates["J48"]
    np.testing.assert_array_equal(j48.proba, [[0.7, 0.2, 0.1], [0.1, 0.4, 0.5]])
    np.testing.assert_array_equal(j48.y_pred, [0, 2])
    np.testing.assert_array_equal(data.candidates["JRip"].y_pred, [1, 0])
    assert j48.columns == ["y_pred", "proba"]


def test_the_positive_label_declares_a_label_seen_only_in_y_pred():
    data = read_text("candidate,y_true,y_pred\nJ48,ham,spam\nJ48,ham,ham\n", positive="spam")
    assert data.labels == ["ham", "spam"]
    np.testing.assert_array_equal(data.candidates["J48"].y_pred, [1, 0])


def test_labels_are_text_as_written():
    data = read_text("candidate,y_true,y_pred\nJ48,1,1.0\nJ48,1.0,1\nJ48, 1,1\n")
    assert data.labels == ["1", "1.0", " 1"]


def test_an_empty_context_is_a_context_like_any_other():
    data = read_text("candidate,y_true,y_pred,context:site\nJ48,spam,spam,\nJ48,ham,ham,north\nJRip,ham,ham,\n")
    assert data.contexts == [("",), ("north",)]
    np.testing.assert_array_equal(data.candidates["JRip"].context, [0])


def test_a_one_candidate_file_needs_no_candidate_column_and_may_name_it():
    without = read_text("y_true,y_pred\nspam,spam\nham,spam\n", candidate="J48", candidates=["J48", "JRip"])
    named = read_text("candidate,y_true,y_pred\nJ48,spam,spam\nJ48,ham,spam\n", candidate="J48")
    for data in (without, named):
        assert list(data.candidates) == ["J48"]
        np.testing.assert_array_equal(data.candidates["J48"].y_true, [0, 1])
        np.testing.assert_array_equal(data.candidates["J48"].y_pred, [0, 0])


def test_paths_text_streams_tabs_and_a_byte_order_mark_read_alike(tmp_path):
    path = tmp_path / "predictions.tsv"
    path.write_bytes(b"\xef\xbb\xbf" + BINARY.replace(",", "\t").encode("utf-8"))
    expected = read_text(BINARY, positive="spam")
    for source in (path, str(path), io.StringIO(BINARY)):
        data = read_predictions(source, positive="spam")
        assert (data.labels, data.folds, data.contexts) == (expected.labels, expected.folds, expected.contexts)
        for name, arrays in expected.candidates.items():
            assert_same(data.candidates[name], arrays)


def test_chunks_concatenate_to_the_same_arrays(monkeypatch):
    whole = read_text(BINARY, positive="spam")
    monkeypatch.setattr(reader_module, "CHUNK_ROWS", 2)
    monkeypatch.setattr(reader_module, "BLOCK_BYTES", 7)
    chunked = read_text(BINARY, positive="spam")
    assert (chunked.labels, chunked.contexts, chunked.rows) == (whole.labels, whole.contexts, whole.rows)
    for name, arrays in whole.candidates.items():
        assert_same(chunked.candidates[name], arrays)


def test_an_unreadable_path_is_refused(tmp_path):
    with pytest.raises(PredictionFileError) as refused:
        read_predictions(tmp_path / "missing.csv")
    assert refused.value.errors == [f"cannot read {tmp_path / 'missing.csv'}: No such file or directory"]


# --- storage: packed, stored and loaded back ---------------------------------------------


def test_arrays_pack_and_unpack_without_pickle():
    data = read_text(BINARY, positive="spam")
    archive, columns = arrays_pack(data.candidates["J48"])
    assert columns == ["y_pred", "score", "fold", "time", "context", "instance"]
    assert_same(arrays_unpack("J48", archive), data.candidates["J48"])
    with np.load(io.BytesIO(archive), allow_pickle=False) as stored:
        assert stored["instance"].dtype.kind == "U"


@pytest.mark.parametrize("content, positive", [(BINARY, "spam"), (MULTICLASS, None)], ids=["binary", "multiclass"])
def test_a_stored_set_loads_back_to_the_arrays_it_was_read_into(content, positive, make_study, cast):
    built = make_study(Phase.CLOSED)  # any phase: measurements may come from predictions at any time
    read = read_text(content, positive=positive)
    prediction_set = prediction_set_import(
        study=built.study,
        stream=io.BytesIO(content.encode("utf-8")),
        name="holdout.csv",
        uploaded_by=cast.alice,
        positive=positive,
    )
    prediction_set = PredictionSet.objects.get(pk=prediction_set.pk)
    assert (prediction_set.name, prediction_set.uploaded_by, prediction_set.row_count) == (
        "holdout.csv",
        cast.alice,
        6 if positive else 4,
    )
    assert prediction_set.byte_count == len(content.encode("utf-8"))
    assert prediction_set.positive_label == (positive or "")
    loaded = prediction_data_get(prediction_set=prediction_set)
    assert (loaded.labels, loaded.positive, loaded.folds) == (read.labels, read.positive, read.folds)
    assert (loaded.context_columns, loaded.contexts, loaded.rows) == (read.context_columns, read.contexts, read.rows)
    assert list(loaded.candidates) == list(read.candidates)
    for name, arrays in read.candidates.items():
        assert_same(loaded.candidates[name], arrays)
    stored = CandidatePredictionArrays.objects.filter(prediction_set=prediction_set).order_by("id")
    assert [(row.candidate.name, row.instance_count, row.columns) for row in stored] == [
        (name, len(arrays), arrays.columns) for name, arrays in read.candidates.items()
    ]


def test_a_one_candidate_upload_stores_that_candidate_only(make_study, cast):
    built = make_study(Phase.ASSESSMENT)
    prediction_set = prediction_set_import(
        study=built.study,
        stream=io.BytesIO(b"y_true,y_pred,fold\nspam,spam,1\nham,spam,2\n"),
        name="jrip.csv",
        uploaded_by=cast.alice,
        candidate="JRip",
    )
    loaded = prediction_data_get(prediction_set=prediction_set)
    assert list(loaded.candidates) == ["JRip"]
    assert loaded.folds == ["1", "2"]
    np.testing.assert_array_equal(loaded.candidates["JRip"].y_pred, [0, 0])


def test_deleting_a_set_deletes_its_arrays_and_a_candidate_takes_its_own(make_study, cast):
    built = make_study(Phase.DRAFT)
    kept, gone = (
        prediction_set_import(
            study=built.study, stream=io.BytesIO(BINARY.encode()), name=name, uploaded_by=cast.alice, positive="spam"
        )
        for name in ("kept.csv", "gone.csv")
    )
    prediction_set_delete(prediction_set=gone)
    assert list(PredictionSet.objects.values_list("name", flat=True)) == ["kept.csv"]
    assert CandidatePredictionArrays.objects.count() == 2
    built.candidates["J48"].delete()
    assert list(kept.candidate_arrays.values_list("candidate__name", flat=True)) == ["JRip"]


# --- the command ------------------------------------------------------------------------


def test_import_predictions_prints_the_sets_id_without_the_web_limits(make_study, tmp_path, monkeypatch):
    built = make_study(Phase.DRAFT)
    path = tmp_path / "holdout.csv"
    path.write_text(BINARY, encoding="utf-8")
    monkeypatch.setattr("workspace.limits.PREDICTIONS_MAX_ROWS", 1)  # not applied to the operator
    out = io.StringIO()
    call_command("import_predictions", str(built.study.pk), str(path), "--positive", "spam", stdout=out)
    prediction_set = PredictionSet.objects.get()
    assert out.getvalue() == f"{prediction_set.pk}\n"
    assert (prediction_set.name, prediction_set.uploaded_by, prediction_set.row_count) == ("holdout.csv", None, 6)

    one = tmp_path / "j48.csv"
    one.write_text("y_true,y_pred\nspam,ham\nham,ham\n", encoding="utf-8")
    call_command(
        "import_predictions", str(built.study.pk), str(one), "--candidate", "J48", "--name", "J48 only", stdout=out
    )
    assert PredictionSet.objects.get(name="J48 only").candidate_arrays.get().candidate.name == "J48"


def test_import_predictions_lists_the_errors_and_stores_nothing(make_study, tmp_path, nothing_stored):
    built = make_study(Phase.DRAFT)
    path = tmp_path / "bad.csv"
    path.write_text("candidate,y_true,y_pred,time\nJ48,spam,spam,-1\nC4.5,spam,spam,1\n", encoding="utf-8")
    with nothing_stored(), pytest.raises(CommandError) as refused:
        call_command("import_predictions", str(built.study.pk), str(path))
    assert str(refused.value) == (
        "the file was refused, nothing was stored:\n"
        "  line 2, column time: a time cannot be negative, got -1\n"
        "  line 3, column candidate: no candidate named 'C4.5' in this study"
    )
    with pytest.raises(CommandError, match="^no study with id 999999$"):
        call_command("import_predictions", "999999", str(path))
    with pytest.raises(CommandError, match="^cannot read .*nowhere.csv: No such file or directory$"):
        call_command("import_predictions", str(built.study.pk), str(tmp_path / "nowhere.csv"))
    with pytest.raises(CommandError) as unknown:
        call_command("import_predictions", str(built.study.pk), str(path), "--candidate", "C4.5")
    assert str(unknown.value).endswith("\n  candidate: no candidate named 'C4.5' in this study")


# --- property: random valid files read back to what they were written from ----------------

# Labels, names and contexts with what CSV must quote: commas, quotes, line breaks.
TEXT = st.text(alphabet='ab ,"\n\r\té1', min_size=1, max_size=4)
OPTIONAL_COLUMNS = ("y_pred", "proba", "time", "context", "instance")


@st.composite
def prediction_files(draw):
    """A valid file, its rows as written, its optional columns and the labels
    in the order the reader must give them. Every candidate has rows in
    every fold; the candidates' rows are interleaved in a random order."""
    names = draw(st.lists(TEXT, min_size=1, max_size=3, unique=True))
    true_labels = draw(st.lists(TEXT, min_size=1, max_size=3, unique=True))
    columns = draw(st.sets(st.sampled_from(OPTIONAL_COLUMNS)))
    if not {"y_pred", "proba"} & columns:
        columns.add("y_pred")
    extra = []  # labels declared by proba columns alone
    if "proba" in columns:
        extra = draw(st.lists(TEXT.filter(lambda label: label not in true_labels), max_size=2, unique=True))
    folds = draw(st.lists(st.sampled_from(["1", "2", "x y"]), min_size=1, max_size=3, unique=True))
    per_candidate = draw(st.integers(len(folds), len(folds) + 3))
    rows = [
        {"candidate": name, "y_true": draw(st.sampled_from(true_labels)), "fold": folds[index % len(folds)]}
        | {"instance": f"{name}-{index}"}
        for name in names
        for index in range(per_candidate)
    ]
    rows = draw(st.permutations(rows))
    labels = list(dict.fromkeys(row["y_true"] for row in rows)) + extra
    for row in rows:
        row["y_pred"] = draw(st.sampled_from(labels))
        weights = draw(st.lists(st.floats(0.01, 1), min_size=len(labels), max_size=len(labels)))
        row["proba"] = {label: weight / sum(weights) for label, weight in zip(labels, weights, strict=True)}
        row["time"] = draw(st.floats(0, 1e6))
        row["context"] = (draw(TEXT), draw(st.sampled_from(["x", "y"])))
    proba_order = draw(st.permutations(labels))  # the header's order need not be the labels'
    # The labels the proba columns alone declare come in the header's order.
    labels = labels[: len(labels) - len(extra)] + [label for label in proba_order if label in extra]

    header = ["candidate", "y_true"] + (["y_pred"] if "y_pred" in columns else [])
    header += [f"proba:{label}" for label in proba_order] if "proba" in columns else []
    header += ["fold"] + (["time"] if "time" in columns else [])
    header += ["context:site", "context:kind"] if "context" in columns else []
    header += ["instance"] if "instance" in columns else []
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    for row in rows:
        cells = [row["candidate"], row["y_true"]] + ([row["y_pred"]] if "y_pred" in columns else [])
        cells += [repr(row["proba"][label]) for label in proba_order] if "proba" in columns else []
        cells += [row["fold"]] + ([repr(row["time"])] if "time" in columns else [])
        cells += list(row["context"]) if "context" in columns else []
        cells += [row["instance"]] if "instance" in columns else []
        writer.writerow(cells)
    return out.getvalue(), rows, columns, labels


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prediction_files())
def test_random_valid_files_read_to_the_arrays_they_were_written_from(case):
    content, rows, columns, labels = case
    data = read_predictions(io.StringIO(content, newline=""))
    assert (data.labels, data.positive, data.rows) == (labels, None, len(rows))
    assert data.folds == list(dict.fromkeys(row["fold"] for row in rows))
    contexts = list(dict.fromkeys(row["context"] for row in rows)) if "context" in columns else []
    assert data.contexts == contexts
    assert list(data.candidates) == list(dict.fromkeys(row["candidate"] for row in rows))
    code = {label: index for index, label in enumerate(labels)}
    for name, arrays in data.candidates.items():
        own = [row for row in rows if row["candidate"] == name]
        expected = CandidatePredictions(
            name=name,
            y_true=np.array([code[row["y_true"]] for row in own], dtype=np.int32),
            fold=np.array([data.folds.index(row["fold"]) for row in own], dtype=np.int32),
        )
        if "y_pred" in columns:
            expected.y_pred = np.array([code[row["y_pred"]] for row in own], dtype=np.int32)
        if "proba" in columns:
            expected.proba = np.array([[row["proba"][label] for label in labels] for row in own])
        if "time" in columns:
            expected.time = np.array([row["time"] for row in own])
        if "context" in columns:
            expected.context = np.array([contexts.index(row["context"]) for row in own], dtype=np.int32)
        if "instance" in columns:
            expected.instance = np.array([row["instance"] for row in own])
        assert_same(arrays, expected)
