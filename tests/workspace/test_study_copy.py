"""A study's copy (issue 31, item 3): ``bundles.study_copy`` makes a new
draft study of its designer's with the setup, the measurements unless asked
not to, the prediction sets when asked; never anyone's inputs, nor the
experts. The original is left as it was."""

import base64

import pytest

from evaluation.models import CandidatePredictionArrays, ElicitationAnswers, ElicitedMetric, PredictionSet
from tests.api.test_access import predictions_add
from tests.fixtures import VOTES, complete_assessment
from tests.workspace.test_bundle_elicited import elicited_study
from workspace import services
from workspace.bundles import copy_title, study_copy, study_export_bundle
from workspace.errors import InvalidInput, RoleRequired
from workspace.models import (
    AttributeVote,
    Invitation,
    Measurement,
    Membership,
    Metric,
    Phase,
    RevisionRound,
    Study,
)

pytestmark = pytest.mark.django_db

SETUP = ("description", "attribute_threshold", "metric_threshold", "attributes", "metrics", "candidates")


@pytest.fixture
def closed(make_study, cast):
    """The standard study, closed, with a weighting, a quorum and a standard
    error of its own, every input given and a revision round kept."""
    built = make_study(Phase.DRAFT)
    study = built.study
    services.study_update(study=study, ahp_weighting="eigenvector", quorum=2)
    services.measurements_set(
        study=study, measurements=[{"candidate": "J48", "metric": "AUC", "value": 0.81, "standard_error": 0.012}]
    )
    services.study_open_voting(study=study)
    for username, ballot in VOTES.items():
        services.votes_set(expert=built.experts[username], **ballot)
    services.study_close_voting(study=study)
    built.refresh()
    complete_assessment(built)
    services.round_open(study=study, by=cast.alice, message="Check the units")
    services.round_close(study=study, by=cast.alice)
    services.study_close_assessment(study=study)
    built.refresh()
    return built


def test_the_copy_has_the_setup_exactly_and_nobodys_inputs(closed, cast):
    original = study_export_bundle(study=closed.study)
    copy = study_copy(study=closed.study, designer=cast.alice)
    assert (copy.phase, copy.designer, copy.title) == (Phase.DRAFT, cast.alice, "Copy of Choosing a classifier")
    assert (copy.ahp_weighting, copy.quorum) == ("eigenvector", 2)
    copied = study_export_bundle(study=copy)
    assert {key: copied[key] for key in SETUP} == {key: original[key] for key in SETUP}
    assert copied["candidates"][0]["standard_errors"] == {"AUC": 0.012}
    assert Measurement.objects.filter(study=copy).count() == Measurement.objects.filter(study=closed.study).count()
    # No experts, no invitations, no inputs, no rounds: the designer invites the experts again.
    assert copied["experts"] == [] and copied["votes"] == {"attributes": {}, "metrics": {}}
    assert (copied["priorities"], copied["ranges"], copied["peer_weights"]) == ({}, {}, {})
    assert "rounds" not in copied and "absent" not in copied
    assert list(Membership.objects.filter(study=copy).values_list("user__username", "role")) == [("alice", "designer")]
    assert not Invitation.objects.filter(study=copy).exists()
    assert not AttributeVote.objects.filter(expert__study=copy).exists()
    assert not RevisionRound.objects.filter(study=copy).exists()
    # The original is as it was.
    assert study_export_bundle(study=closed.study) == original


def test_the_options_leave_out_the_measurements_and_name_the_copy(closed, cast):
    copy = study_copy(study=closed.study, designer=cast.alice, title="  Second panel  ", measurements=False)
    assert copy.title == "Second panel"
    candidates = study_export_bundle(study=copy)["candidates"]
    assert [(c["name"], c["measurements"], "standard_errors" in c) for c in candidates] == [
        ("J48", {}, False),
        ("JRip", {}, False),
    ]
    assert not Measurement.objects.filter(study=copy).exists()
    assert Metric.objects.filter(study=copy).count() == 5


def test_a_drafts_own_thresholds_are_copied(make_study, cast):
    built = make_study(Phase.DRAFT, attribute_threshold=3, metric_threshold=2)
    copy = study_copy(study=built.study, designer=cast.alice, title="Thresholds")
    assert (copy.attribute_threshold, copy.metric_threshold, copy.phase) == (3, 2, Phase.DRAFT)


@pytest.mark.parametrize(
    "title, message",
    [
        ("", "must not be empty"),
        ("x" * 201, "must be at most 200 characters"),
        ("Copy\u200bof", "must be a single line of visible text: it contains an invisible character (U+200B)"),
    ],
)
def test_a_bad_title_is_refused_naming_it_and_nothing_is_written(closed, cast, unchanged, title, message):
    with unchanged(), pytest.raises(InvalidInput) as refused:
        study_copy(study=closed.study, designer=cast.alice, title=title)
    assert list(refused.value.errors) == ["title"]
    assert refused.value.errors["title"][0].startswith(message)


def test_the_default_title_is_cut_to_the_longest_a_title_may_be():
    assert copy_title("Panel") == "Copy of Panel"
    long = copy_title("x" * 200)
    assert len(long) == 200 and long == "Copy of " + "x" * 191 + "…"
    assert len(copy_title("x" * 192)) == 200 and copy_title("x" * 192).endswith("x")


def test_only_the_designer_copies_the_study(closed, cast, unchanged):
    for who in (cast.bob, cast.charlie):
        with unchanged(), pytest.raises(RoleRequired, match="Only the designer of this study can copy the study."):
            study_copy(study=closed.study, designer=who)


def test_the_prediction_sets_come_only_when_asked(make_study, cast):
    built = elicited_study(make_study)
    original = study_export_bundle(study=built.study)
    without = study_copy(study=built.study, designer=cast.alice)
    assert not PredictionSet.objects.filter(study=without).exists()
    # Without its prediction set, the elicited metric is an ordinary one.
    assert not ElicitedMetric.objects.filter(metric__study=without).exists()
    assert Metric.objects.filter(study=without, name="AUC").exists()

    with_sets = study_copy(study=built.study, designer=cast.alice, predictions=True)
    copied = study_export_bundle(study=with_sets)
    assert copied["prediction_sets"] == original["prediction_sets"]
    assert [s["name"] for s in copied["prediction_sets"]] == ["two.csv", "jrip.csv"]
    # The design whole, no one's answers.
    assert copied["elicited_metrics"] == {"AUC": {**original["elicited_metrics"]["AUC"], "answers": {}}}
    assert original["elicited_metrics"]["AUC"]["answers"]
    assert not ElicitationAnswers.objects.filter(elicited_metric__metric__study=with_sets).exists()


def test_every_prediction_set_is_copied_without_an_elicited_metric(make_study, cast):
    built = make_study(Phase.ASSESSMENT)
    first, second = predictions_add(built.study), predictions_add(built.study, name="again.csv")
    copy = study_copy(study=built.study, designer=cast.alice, predictions=True)
    sets = list(PredictionSet.objects.filter(study=copy).order_by("uploaded_at", "id"))
    assert [(s.name, s.labels, s.positive) for s in sets] == [
        (first.name, first.labels, first.positive),
        (second.name, second.labels, second.positive),
    ]
    arrays = {
        (a.prediction_set.name, a.candidate.name): base64.b64encode(bytes(a.arrays))
        for a in CandidatePredictionArrays.objects.filter(prediction_set__study__in=[built.study, copy])
        if a.prediction_set.study_id == copy.pk
    }
    originals = {
        (a.prediction_set.name, a.candidate.name): base64.b64encode(bytes(a.arrays))
        for a in CandidatePredictionArrays.objects.filter(prediction_set__study=built.study)
    }
    assert arrays == originals and len(arrays) == 4
    # Not asked: none.
    assert not PredictionSet.objects.filter(study=study_copy(study=built.study, designer=cast.alice)).exists()


def test_a_staff_designer_copies_the_same(closed, cast):
    cast.alice.is_staff = True
    cast.alice.save(update_fields=["is_staff"])
    copy = study_copy(study=closed.study, designer=cast.alice)
    assert copy.phase == Phase.DRAFT and not Membership.objects.filter(study=copy, role="expert").exists()
    assert Study.objects.filter(designer=cast.alice).count() == 2
