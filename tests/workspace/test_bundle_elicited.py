"""Bundles carry elicited metrics (issue 21, item 1; docs/formats.md,
``prediction_sets`` and ``elicited_metrics``): export → import → export is
the identity, a run of the imported study scores as the original's, and
every bad part of the two keys is refused by its path, writing nothing."""

import base64
import copy
import io
import json
import zipfile

import numpy as np
import pytest
from django.core.management import call_command

from engine import services as engine_services
from engine.snapshot import study_snapshot
from evaluation import services as evaluation_services
from evaluation.arrays import arrays_pack, arrays_unpack
from evaluation.models import CandidatePredictionArrays, ElicitationAnswers, ElicitedMetric, PredictionSet
from evaluation.predictions import CandidatePredictions
from tests.api.conftest import finish_run
from tests.evaluation.elicited_fixtures import linear_oracle
from tests.evaluation.test_elicited import TWO_CLASSES, answer_all
from tests.fixtures import VOTES, complete_assessment
from tests.workspace.test_bundles import _paths
from workspace import invitations, services
from workspace.bundles import study_export_bundle, study_import, study_import_bundle
from workspace.errors import InvalidInput
from workspace.models import Invitation, Study

pytestmark = pytest.mark.django_db

# JRip's newer predictions (a set of its own, uploaded after the elicited
# metric's): 3 of 5 of A found, 4 of 5 of B. Its elicited value is read from it.
JRIP_NEWER = "y_true,y_pred\n" + "".join(
    f"{truth},{guess}\n" for truth, guess in [("A", "A")] * 3 + [("A", "B")] * 2 + [("B", "B")] * 4 + [("B", "A")]
)
TRUTH = {"bob": [0.8, 0.2], "carol": [0.3, 0.7]}


def elicited_study(make_study, *, phase="closed", carol_answers=None):
    """The standard study with its AUC elicited from J48's two-class
    probabilities (ε 0.1: 16 questions and the check's 2), a newer set of
    JRip's alone, every input given; bob answers everything, carol too
    (or only ``carol_answers`` of them)."""
    built = make_study()
    first = evaluation_services.prediction_set_import(
        study=built.study, stream=io.BytesIO(TWO_CLASSES.encode()), name="two.csv", uploaded_by=None
    )
    evaluation_services.prediction_set_import(
        study=built.study, stream=io.BytesIO(JRIP_NEWER.encode()), name="jrip.csv", uploaded_by=None, candidate="JRip"
    )
    elicited = evaluation_services.elicited_metric_set(
        metric=built.metrics["AUC"], kind="diagonal", prediction_set=first.pk, reference_candidate="J48", epsilon=0.1
    )
    services.study_open_voting(study=built.study)
    for username, ballot in VOTES.items():
        services.votes_set(expert=built.experts[username], **ballot)
    services.study_close_voting(study=built.study)
    built.refresh()
    complete_assessment(built)
    for expert in (built.bob, built.carol):
        services.ranges_set(expert=expert, ranges={"AUC": [0.1, 0.5]})
    answer_all(elicited, built.bob, linear_oracle(TRUTH["bob"]))
    if carol_answers is None:
        answer_all(elicited, built.carol, linear_oracle(TRUTH["carol"]))
    else:
        for _ in range(carol_answers):
            evaluation_services.elicitation_answer(elicited_metric=elicited, expert=built.carol, answer="first")
    if phase == "closed":
        services.study_close_assessment(study=built.study)
    built.study.refresh_from_db()
    return built


def weights_of(study):
    return dict(
        ElicitationAnswers.objects.filter(elicited_metric__metric__study=study).values_list(
            "expert__user__username", "weights"
        )
    )


def run_results(study):
    run = finish_run(engine_services.run_launch(study=study, launched_by=study.designer).pk)
    assert run.status == "succeeded", run.error
    return run.results


def test_export_import_export_is_the_identity_and_runs_score_the_same(make_study):
    built = elicited_study(make_study)
    first = study_export_bundle(study=built.study)
    # Both sets, oldest first, each whole; the design, and each expert's stored answers.
    assert [(s["name"], [c["candidate"] for c in s["candidates"]]) for s in first["prediction_sets"]] == [
        ("two.csv", ["J48", "JRip"]),
        ("jrip.csv", ["JRip"]),
    ]
    two = first["prediction_sets"][0]
    assert (two["labels"], two["positive"], two["folds"], two["contexts"]) == (["A", "B"], None, [], [])
    assert two["candidates"][0]["columns"] == ["y_pred", "proba"]
    stored = CandidatePredictionArrays.objects.get(prediction_set__name="two.csv", candidate__name="J48")
    assert base64.b64decode(two["candidates"][0]["arrays"]) == bytes(stored.arrays)
    answers = dict(
        ElicitationAnswers.objects.filter(elicited_metric__metric__study=built.study).values_list(
            "expert__user__username", "answers"
        )
    )
    assert len(answers["bob"]) == len(answers["carol"]) == 16 + 2
    assert first["elicited_metrics"] == {
        "AUC": {
            "kind": "diagonal",
            "epsilon": 0.1,
            "prediction_set": 0,
            "reference_candidate": "J48",
            "answers": {"bob": answers["bob"], "carol": answers["carol"]},
        }
    }

    copy_ = study_import_bundle(bundle=copy.deepcopy(first))
    second = study_export_bundle(study=copy_)
    assert json.dumps(second) == json.dumps(first)
    # The weights are the answers' replayed here, equal to those the experts' own answering stored.
    assert weights_of(copy_) == weights_of(built.study) and None not in weights_of(copy_).values()
    restored = PredictionSet.objects.get(study=copy_, name="jrip.csv")
    assert (restored.row_count, restored.uploaded_by) == (10, None)

    original, imported = run_results(built.study), run_results(copy_)
    for field in ("metrics", "metric_weights", "expert_influence"):
        assert imported[field] == original[field]
    assert [(c["name"], c["cef"], c["group_scores"], c["vetoed"]) for c in imported["candidates"]] == [
        (c["name"], c["cef"], c["group_scores"], c["vetoed"]) for c in original["candidates"]
    ]
    # JRip's value is read from its newer set, as by hand: w_A 3/10 + w_B 4/10 for each expert.
    snapshot = study_snapshot(study=copy_)
    [entry] = snapshot["expert_values"]
    weights = weights_of(copy_)
    assert entry["values"]["JRip"] == pytest.approx(
        [weights[name][0] * 0.3 + weights[name][1] * 0.4 for name in snapshot["experts"]]
    )


def test_an_unfinished_expert_round_trips_in_assessment(make_study):
    built = elicited_study(make_study, phase="assessment", carol_answers=5)
    first = study_export_bundle(study=built.study)
    assert first["elicited_metrics"]["AUC"]["answers"]["carol"] == "11111"
    copy_ = study_import_bundle(bundle=copy.deepcopy(first))
    assert json.dumps(study_export_bundle(study=copy_)) == json.dumps(first)
    assert weights_of(copy_)["carol"] is None and weights_of(copy_)["bob"] == weights_of(built.study)["bob"]


def test_a_draft_bundle_carries_the_design_without_answers(make_study):
    built = elicited_study(make_study)
    bundle = study_export_bundle(study=built.study)
    draft = {
        **{key: bundle[key] for key in ("format", "title", "designer", "experts", "attributes", "metrics")},
        "candidates": bundle["candidates"],
        "prediction_sets": bundle["prediction_sets"],
        "elicited_metrics": {"AUC": {**bundle["elicited_metrics"]["AUC"], "answers": {}}},
    }
    copy_ = study_import_bundle(bundle=draft)
    elicited = ElicitedMetric.objects.get(metric__study=copy_)
    assert (elicited.kind, elicited.epsilon, elicited.reference_candidate.name) == ("diagonal", 0.1, "J48")
    assert elicited.prediction_set.name == "two.csv"
    assert study_export_bundle(study=copy_)["elicited_metrics"] == draft["elicited_metrics"]
    # Answers in a draft bundle are refused: experts answer from the assessment on.
    draft["elicited_metrics"]["AUC"]["answers"] = {"bob": "1"}
    with pytest.raises(InvalidInput) as refused:
        study_import_bundle(bundle=draft)
    assert refused.value.errors == {
        "elicited_metrics.AUC.answers": [
            "a study imported in the draft phase has no answers yet (they start in the assessment phase)"
        ]
    }


def test_studies_without_elicited_metrics_export_as_before(make_study):
    built = make_study("closed")
    evaluation_services.prediction_set_import(
        study=built.study, stream=io.BytesIO(TWO_CLASSES.encode()), name="two.csv", uploaded_by=None
    )
    bundle = study_export_bundle(study=built.study)
    assert "prediction_sets" not in bundle and "elicited_metrics" not in bundle


# --- refusals ------------------------------------------------------------------------------


def archive_of(**arrays):
    """An .npz archive of ``arrays`` as given (``np.save``'s, objects allowed), in base64."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for key, values in arrays.items():
            with archive.open(f"{key}.npy", "w") as member:
                np.lib.format.write_array(member, np.asanyarray(values), allow_pickle=True)
    return base64.b64encode(buffer.getvalue()).decode()


def j48(bundle):
    """J48's arrays in the first set, as stored."""
    entry = bundle["prediction_sets"][0]["candidates"][0]
    return arrays_unpack("J48", base64.b64decode(entry["arrays"]))


def with_j48(**changes):
    def mutate(bundle):
        arrays = j48(bundle)
        fields = {"y_true": arrays.y_true, "y_pred": arrays.y_pred, "proba": arrays.proba, **changes}
        bundle["prediction_sets"][0]["candidates"][0]["arrays"] = archive_of(**fields)

    return mutate


def setting(*path, value):
    def mutate(bundle):
        target = bundle
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return mutate


def reference_in_newer_set(bundle):
    bundle["elicited_metrics"]["AUC"].update(prediction_set=1, reference_candidate="JRip")


def too_many_answers(bundle):
    bundle["elicited_metrics"]["AUC"]["answers"]["bob"] += "1"


SET = "prediction_sets[0].candidates[0]"
REFUSALS = [
    ("bad-base64", setting("prediction_sets", 0, "candidates", 0, "arrays", value="not base64!"), f"{SET}.arrays",
     "not base64"),
    ("not-an-archive", setting("prediction_sets", 0, "candidates", 0, "arrays", value="aGVsbG8="), f"{SET}.arrays",
     "not an archive of predictions: not a NumPy .npz archive"),
    ("pickled-objects", with_j48(y_true=np.array([0, 1] * 5, dtype=object)), f"{SET}.arrays",
     "not an archive of predictions: y_true holds Python objects (pickled), which are never read"),
    ("unknown-array", with_j48(weights=np.zeros(10)), f"{SET}.arrays",
     "it holds 'weights.npy', which is not one of a candidate's arrays"),
    ("proba-shape", with_j48(proba=np.full((10, 3), 1 / 3)), f"{SET}.arrays",
     "proba has 3 columns; the set has 2 labels"),
    ("proba-rows", with_j48(proba=np.array([[0.6, 0.6]] * 10)), f"{SET}.arrays",
     "proba's row 1 sums to 1.2, not 1 (within 1e-06)"),
    ("short-array", with_j48(y_pred=np.zeros(9, dtype=np.int32)), f"{SET}.arrays", "y_pred has 9 rows, y_true 10"),
    ("code-out-of-range", with_j48(y_true=np.array([0, 1, 2, 0, 1, 0, 1, 0, 1, 0], dtype=np.int32)), f"{SET}.arrays",
     "y_true: code 2 is out of range (the set has 2)"),
    ("unknown-candidate", setting("prediction_sets", 0, "candidates", 0, "candidate", value="C4.5"),
     f"{SET}.candidate", "no candidate named 'C4.5' in the bundle"),
    ("columns-mismatch", setting("prediction_sets", 0, "candidates", 0, "columns", value=["proba"]),
     f"{SET}.columns", "must be the archive's optional arrays, ['y_pred', 'proba']"),
    ("labels-twice", setting("prediction_sets", 0, "labels", value=["A", "A"]), "prediction_sets[0].labels",
     "'A' is listed twice"),
    ("positive-unknown", setting("prediction_sets", 0, "positive", value="C"), "prediction_sets[0].positive",
     "must be one of the labels or null"),
    ("label-too-long", setting("prediction_sets", 0, "labels", value=["A", "x" * 5_000_000]),
     "prediction_sets[0].labels[1]",
     "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'… (5,000,000 characters) is 5,000,000 characters long; a label, "
     "a fold or a context is at most 1,000 characters"),
    ("uploaded-at", setting("prediction_sets", 0, "uploaded_at", value="yesterday"), "prediction_sets[0].uploaded_at",
     "must be a date and time (ISO 8601)"),
    ("unknown-expert", setting("elicited_metrics", "AUC", "answers", "dave", value="1"),
     "elicited_metrics.AUC.answers.dave", "is not one of the bundle's experts"),
    ("bad-code", setting("elicited_metrics", "AUC", "answers", "bob", value="1231"),
     "elicited_metrics.AUC.answers.bob", "answer 3 is '3': each answer is 1 (the first outcome), 2 (the second) or 0"),
    ("too-many-answers", too_many_answers, "elicited_metrics.AUC.answers.bob",
     "19 answers, more than the search's 16 questions and the check's 2"),
    ("unknown-metric", setting("elicited_metrics", "Recall", value={}), "elicited_metrics.Recall",
     "no metric of that name in the bundle"),
    ("set-index", setting("elicited_metrics", "AUC", "prediction_set", value=2), "elicited_metrics.AUC.prediction_set",
     "must be an index into prediction_sets (0 to 1), got 2"),
    ("set-index-bool", setting("elicited_metrics", "AUC", "prediction_set", value=True),
     "elicited_metrics.AUC.prediction_set", "got True"),
    ("kind", setting("elicited_metrics", "AUC", "kind", value="ordinal"), "elicited_metrics.AUC.kind",
     "must be one of diagonal, offdiagonal, got 'ordinal'"),
    ("reference-without-proba", reference_in_newer_set, "elicited_metrics.AUC.reference_candidate",
     "the reference candidate's predictions have no class probabilities"),
    ("reference-not-in-set", setting("elicited_metrics", "AUC", "prediction_set", value=1),
     "elicited_metrics.AUC.reference_candidate", "the reference candidate has no predictions in the chosen set"),
    ("weights-not-trusted", setting("elicited_metrics", "AUC", "weights", value={"bob": [1, 0]}),
     "elicited_metrics.AUC.weights", "is not a field of this object"),
]  # fmt: skip


def counts():
    return [m.objects.count() for m in (Study, PredictionSet, CandidatePredictionArrays, ElicitedMetric,
                                        ElicitationAnswers)]  # fmt: skip


@pytest.fixture
def exported(make_study):
    return study_export_bundle(study=elicited_study(make_study).study)


@pytest.mark.parametrize(("mutate", "field", "fragment"), [pytest.param(*r[1:], id=r[0]) for r in REFUSALS])
def test_a_bad_part_is_refused_by_its_path_and_writes_nothing(exported, unchanged, mutate, field, fragment):
    bundle = copy.deepcopy(exported)
    mutate(bundle)
    before = counts()
    with unchanged(), pytest.raises(InvalidInput) as refused:
        study_import_bundle(bundle=bundle)
    assert list(refused.value.errors) == [field], refused.value.errors
    assert fragment in refused.value.errors[field][0], refused.value.errors
    assert counts() == before


def test_rows_are_limited_as_an_upload_s_but_not_on_the_command_line(exported, unchanged, monkeypatch, tmp_path):
    monkeypatch.setitem(study_import_bundle.__kwdefaults__, "max_rows", 15)
    before = counts()
    with unchanged(), pytest.raises(InvalidInput) as refused:
        study_import_bundle(bundle=copy.deepcopy(exported))
    # J48's 10 instances fit; JRip's 10 more pass the set's 15.
    assert refused.value.errors == {
        "prediction_sets[0].candidates[1].arrays": [
            "too many rows: the set's candidates hold more than 15 instances together, the limit for a prediction "
            "set (import_study, run by the operator, has none)"
        ]
    }
    assert counts() == before
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(exported), encoding="utf-8")
    out = io.StringIO()
    call_command("import_study", str(path), stdout=out)
    assert json.dumps(study_export_bundle(study=Study.objects.get(pk=int(out.getvalue())))) == json.dumps(exported)


def test_a_staff_import_keeps_others_answers_pending_and_anyone_else_s_leaves_them_out(exported, cast):
    # Only the answers: a staff import's pending experts hold up the vote when they carry votes.
    assessment = {**copy.deepcopy(exported), "phase": "assessment", "attribute_threshold": 0}
    for key in ("votes", "priorities", "ranges", "peer_weights"):
        del assessment[key]
    # Not staff: the answers are left out, the elicited metric kept, the study a draft.
    imported = study_import(bundle=copy.deepcopy(assessment), importer=cast.alice)
    assert imported.inputs_left_out == ["bob", "carol"] and imported.study.phase == "draft"
    assert not ElicitationAnswers.objects.filter(elicited_metric__metric__study=imported.study).exists()
    draft = study_export_bundle(study=imported.study)["elicited_metrics"]
    assert draft == {"AUC": {**exported["elicited_metrics"]["AUC"], "answers": {}}}
    cast.alice.is_staff = True
    cast.alice.save()
    copy_ = study_import_bundle(bundle=assessment, importer=cast.alice)
    assert set(weights_of(copy_)) == {"bob", "carol"}
    assert study_export_bundle(study=copy_)["elicited_metrics"] == exported["elicited_metrics"]
    # Bob sees his imported answers, and accepting needs his confirmation of them.
    invitation = Invitation.objects.get(study=copy_, username="bob")
    inputs = invitations.invitation_inputs(invitation=invitation)
    assert inputs["imported_by"] == "alice"
    assert inputs["elicitation_answers"] == {"AUC": exported["elicited_metrics"]["AUC"]["answers"]["bob"]}
    with pytest.raises(InvalidInput) as refused:
        invitations.invitation_accept(invitation=invitation, user=cast.bob)
    assert list(refused.value.errors) == ["confirm_inputs"]
    invitations.invitation_accept(invitation=invitation, user=cast.bob, confirm_inputs=True)


def test_arrays_checked_returns_the_reader_s_types():
    """An archive of int64 codes and float32 probabilities is stored as an upload's: int32 and float64."""
    from evaluation.arrays import arrays_checked

    proba = np.array([[0.25, 0.75], [1.0, 0.0]], dtype=np.float32)
    archive = base64.b64decode(archive_of(y_true=np.array([1, 0], dtype=np.int64), proba=proba))
    checked = arrays_checked("J48", archive, labels=2, folds=0, contexts=0)
    assert checked.y_true.dtype == np.int32 and checked.proba.dtype == np.float64
    packed, columns = arrays_pack(CandidatePredictions("J48", checked.y_true, proba=checked.proba))
    assert columns == ["proba"] and arrays_unpack("J48", packed).y_true.tolist() == [1, 0]


def test_a_mangled_archive_or_key_is_imported_or_refused_cleanly(exported):
    """Whatever is put anywhere in the two keys (a truncated or flipped
    archive too), the import succeeds or raises InvalidInput having written
    nothing: never another exception."""
    from django.db import transaction
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    archive = exported["prediction_sets"][0]["candidates"][0]["arrays"]
    raw = base64.b64decode(archive)
    damaged = st.builds(
        lambda cut, flip: (
            base64.b64encode(raw[:cut] + bytes([raw[cut] ^ 0xFF]) + raw[cut + 1 :]).decode()
            if flip
            else base64.b64encode(raw[:cut]).decode()
        ),
        st.integers(0, len(raw) - 1),
        st.booleans(),
    )
    values = st.none() | st.booleans() | st.integers(-3, 3) | st.floats() | st.text(max_size=6) | damaged
    values = (
        values | st.lists(st.text(max_size=3), max_size=3) | st.dictionaries(st.text(max_size=3), st.text(max_size=3))
    )
    paths = [p for key in ("prediction_sets", "elicited_metrics") for p in _paths(exported[key], (key,))]

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(path=st.sampled_from(paths), value=values, delete=st.booleans())
    def mangled(path, value, delete):
        bundle = copy.deepcopy(exported)
        target = bundle
        for step in path[:-1]:
            target = target[step]
        if delete:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        with transaction.atomic():
            before = counts()
            try:
                study_import_bundle(bundle=bundle)
            except InvalidInput as error:
                assert all(isinstance(m, str) for ms in error.errors.values() for m in ms)
                assert counts() == before
            transaction.set_rollback(True)

    mangled()


def test_the_case_study_imports_and_exports_without_the_keys(case_study):
    """An old bundle (workspace/demo/case-study-1.json, the shared FORMATS.md example) is as before."""
    exported = study_export_bundle(study=study_import_bundle(bundle=copy.deepcopy(case_study)))
    assert "prediction_sets" not in exported and "elicited_metrics" not in exported
    assert PredictionSet.objects.count() == ElicitedMetric.objects.count() == 0


@pytest.mark.parametrize(
    ("bundle", "field", "message"),
    [
        ({"prediction_sets": [{}] * 1201}, "prediction_sets",
         "too many prediction sets: 1201 given, the limit is 1200"),
        ({"prediction_sets": [{"candidates": [{}] * 1001}]}, "prediction_sets[0].candidates",
         "too many candidates: 1001 given, the limit is 1000"),
        ({"elicited_metrics": {f"m{i}": {} for i in range(201)}}, "elicited_metrics",
         "too many metrics: 201 given, the limit is 200"),
        ({"elicited_metrics": {"AUC": {"answers": {f"e{i}": "1" for i in range(201)}}}},
         "elicited_metrics.AUC.answers", "too many experts: 201 given, the limit is 200"),
    ],
)  # fmt: skip
def test_the_sizes_are_limited_before_the_import(bundle, field, message):
    from workspace.limits import bundle_check_limits

    with pytest.raises(InvalidInput) as refused:
        bundle_check_limits({"format": "approve-study/1", "title": "t", **bundle})
    assert refused.value.errors == {field: [message]}


def test_an_archive_announcing_more_memory_than_allowed_is_refused_before_any_array_is_read(exported, unchanged):
    """A few hundred bytes may announce gigabytes (here ten instance ids of
    100 million characters each, 4 GB once read, and no data at all): the
    headers alone refuse it, through the web's and the API's limits."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        with archive.open("y_true.npy", "w") as member:
            np.lib.format.write_array(member, np.array([0, 1] * 5, dtype=np.int32))
        with archive.open("instance.npy", "w") as member:
            header = {"descr": "<U100000000", "fortran_order": False, "shape": (10,)}
            np.lib.format.write_array_header_1_0(member, header)
    assert len(buffer.getvalue()) < 1000
    bundle = copy.deepcopy(exported)
    bundle["prediction_sets"][0]["candidates"][0]["arrays"] = base64.b64encode(buffer.getvalue()).decode()
    before = counts()
    with unchanged(), pytest.raises(InvalidInput) as refused:
        study_import_bundle(bundle=bundle)
    assert refused.value.errors == {
        f"{SET}.arrays": [
            "too large: the set's arrays would take more than 167,772,160 bytes once read, the limit for a "
            "prediction set brought in a bundle (import_study, run by the operator, has none)"
        ]
    }
    assert counts() == before
