"""The service rules of workspace.services (METHOD.md sections 1-5).

Every refusal is checked twice: the error names the exact field (or says why
the phase forbids it), and the database is exactly as it was before the call
(``unchanged`` compares row counts and the rows that can change in place).
"""

import pytest

from engine import prioritisation as engine
from tests.fixtures import CAROL_JUDGMENTS, MEASUREMENTS, SELECTED_ATTRIBUTES, SELECTED_METRICS
from workspace import selectors, services
from workspace.errors import InvalidInput, PhaseConflict
from workspace.models import (
    AcceptableRange,
    AttributeJudgment,
    AttributePrioritisation,
    AttributeVote,
    AttributeWeight,
    Candidate,
    Measurement,
    Membership,
    Metric,
    MetricPrioritisation,
    MetricVote,
    MetricWeight,
    PeerWeight,
    Phase,
    QualityAttribute,
    Study,
)

pytestmark = pytest.mark.django_db

PHASES = [Phase.DRAFT, Phase.VOTING, Phase.ASSESSMENT, Phase.CLOSED]
NAN, INF = float("nan"), float("inf")


def refused(unchanged, call):
    """Run ``call``; it must raise InvalidInput and write nothing. Returns the errors."""
    with unchanged(), pytest.raises(InvalidInput) as info:
        call()
    return info.value.errors


def conflict(unchanged, call):
    """Run ``call``; it must raise PhaseConflict and write nothing. Returns the message."""
    with unchanged(), pytest.raises(PhaseConflict) as info:
        call()
    return str(info.value)


# --- the study -------------------------------------------------------------------


def test_study_create_stores_the_study_and_the_designer_membership(cast):
    study = services.study_create(
        designer=cast.alice, title="  Spam filter  ", description="d", attribute_threshold=2, metric_threshold=0
    )
    study.refresh_from_db()
    assert (study.title, study.description, study.phase) == ("Spam filter", "d", "draft")
    assert (study.attribute_threshold, study.metric_threshold) == (2, 0)
    assert list(Membership.objects.filter(study=study).values_list("user__username", "role")) == [("alice", "designer")]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"title": ""}, "title"),
        ({"title": "   "}, "title"),
        ({"title": None}, "title"),
        ({"title": 42}, "title"),
        ({"title": "x" * 201}, "title"),
        ({"description": 5}, "description"),
        ({"attribute_threshold": -1}, "attribute_threshold"),
        ({"attribute_threshold": 1.0}, "attribute_threshold"),
        ({"attribute_threshold": 1.5}, "attribute_threshold"),
        ({"attribute_threshold": "2"}, "attribute_threshold"),
        ({"attribute_threshold": True}, "attribute_threshold"),
        ({"attribute_threshold": None}, "attribute_threshold"),
        ({"metric_threshold": -3}, "metric_threshold"),
        ({"metric_threshold": 0.5}, "metric_threshold"),
        ({"metric_threshold": False}, "metric_threshold"),
        ({"metric_threshold": "0"}, "metric_threshold"),
    ],
)
def test_study_create_refuses(cast, unchanged, kwargs, field):
    arguments = {"designer": cast.alice, "title": "Spam filter", **kwargs}
    errors = refused(unchanged, lambda: services.study_create(**arguments))
    assert set(errors) == {field}
    assert Study.objects.count() == 0 and Membership.objects.count() == 0


def test_study_create_accepts_zero_thresholds(cast):
    study = services.study_create(designer=cast.alice, title="t", attribute_threshold=0, metric_threshold=0)
    assert (study.attribute_threshold, study.metric_threshold) == (0, 0)


@pytest.mark.parametrize("phase", PHASES)
def test_study_update_title_and_description_in_any_phase(make_study, phase):
    built = make_study(phase)
    services.study_update(study=built.study, title="New title", description="new")
    built.study.refresh_from_db()
    assert (built.study.title, built.study.description, built.study.phase) == ("New title", "new", phase)


@pytest.mark.parametrize(
    "phase, allowed", [("draft", True), ("voting", True), ("assessment", False), ("closed", False)]
)
def test_study_update_thresholds_only_until_voting_closes(make_study, unchanged, phase, allowed):
    built = make_study(phase)
    for name in ("attribute_threshold", "metric_threshold"):
        if allowed:
            services.study_update(study=built.study, **{name: 3})
            built.study.refresh_from_db()
            assert getattr(built.study, name) == 3
        else:
            message = conflict(unchanged, lambda name=name: services.study_update(study=built.study, **{name: 3}))
            assert "threshold" in message and "draft or voting phase" in message


def test_study_update_with_an_unchanged_threshold_is_allowed_after_voting(make_study):
    built = make_study("assessment")
    services.study_update(study=built.study, attribute_threshold=built.study.attribute_threshold, title="Renamed")
    built.study.refresh_from_db()
    assert built.study.title == "Renamed"


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"phase": "closed"}, "phase"),
        ({"designer": None}, "designer"),
        ({"title": ""}, "title"),
        ({"attribute_threshold": -1}, "attribute_threshold"),
        ({"metric_threshold": 2.5}, "metric_threshold"),
        ({"title": "Fine", "metric_threshold": "1"}, "metric_threshold"),
    ],
)
def test_study_update_refuses(make_study, unchanged, changes, field):
    built = make_study("draft")
    errors = refused(unchanged, lambda: services.study_update(study=built.study, **changes))
    assert set(errors) == {field}


# --- experts -----------------------------------------------------------------------


def test_expert_add_and_remove_in_draft(make_study, cast):
    built = make_study("draft")
    membership = services.expert_add(study=built.study, user=cast.charlie)
    assert (membership.user, membership.role, membership.study_id) == (cast.charlie, "expert", built.study.pk)
    services.expert_remove(study=built.study, user=cast.bob)
    experts = set(Membership.objects.filter(study=built.study, role="expert").values_list("user__username", flat=True))
    assert experts == {"carol", "charlie"}


def test_the_designer_may_also_be_an_expert(make_study, cast):
    built = make_study("draft")
    services.expert_add(study=built.study, user=cast.alice)
    roles = set(Membership.objects.filter(study=built.study, user=cast.alice).values_list("role", flat=True))
    assert roles == {"designer", "expert"}


def test_expert_add_refuses_a_duplicate(make_study, cast, unchanged):
    built = make_study("draft")
    errors = refused(unchanged, lambda: services.expert_add(study=built.study, user=cast.bob))
    assert set(errors) == {"username"}
    assert "bob is already an expert" in errors["username"][0]


def test_expert_remove_refuses_a_non_expert(make_study, cast, unchanged):
    built = make_study("draft")
    errors = refused(unchanged, lambda: services.expert_remove(study=built.study, user=cast.charlie))
    assert set(errors) == {"username"}
    assert "charlie is not an expert" in errors["username"][0]
    # The designer is not an expert either: removing her as one is refused too.
    errors = refused(unchanged, lambda: services.expert_remove(study=built.study, user=cast.alice))
    assert set(errors) == {"username"}


# --- attributes and metrics -----------------------------------------------------


def test_attribute_add_stores_it_in_order(make_study):
    built = make_study("draft")
    attribute = services.attribute_add(study=built.study, name=" Robustness ", kind="complementary", description="d")
    attribute.refresh_from_db()
    assert (attribute.name, attribute.kind, attribute.description, attribute.is_selected) == (
        "Robustness",
        "complementary",
        "d",
        False,
    )
    names = list(QualityAttribute.objects.filter(study=built.study).values_list("name", flat=True))
    assert names == ["Accuracy", "Consistency", "Efficiency", "Flexibility", "Robustness"]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"name": "Accuracy"}, "name"),
        ({"name": " Accuracy "}, "name"),
        ({"name": ""}, "name"),
        ({"name": None}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "Robustness", "kind": "primary"}, "kind"),
        ({"name": "Robustness", "kind": None}, "kind"),
        ({"name": "Robustness", "description": 3}, "description"),
    ],
)
def test_attribute_add_refuses(make_study, unchanged, kwargs, field):
    built = make_study("draft")
    errors = refused(unchanged, lambda: services.attribute_add(study=built.study, **kwargs))
    assert set(errors) == {field}


def test_attribute_update_refuses_a_name_clash(make_study, unchanged):
    built = make_study("draft")
    errors = refused(
        unchanged, lambda: services.attribute_update(attribute=built.attributes["Efficiency"], name="Accuracy")
    )
    assert set(errors) == {"name"}
    errors = refused(
        unchanged, lambda: services.attribute_update(attribute=built.attributes["Efficiency"], kind="other")
    )
    assert set(errors) == {"kind"}
    errors = refused(
        unchanged, lambda: services.attribute_update(attribute=built.attributes["Efficiency"], is_selected=True)
    )
    assert set(errors) == {"is_selected"}
    # Keeping its own name is no clash.
    services.attribute_update(attribute=built.attributes["Efficiency"], name="Efficiency", kind="main")
    built.attributes["Efficiency"].refresh_from_db()
    assert built.attributes["Efficiency"].kind == "main"


def test_metric_add_stores_it(make_study):
    built = make_study("draft")
    metric = services.metric_add(
        study=built.study,
        attribute=built.attributes["Efficiency"],
        name="Memory",
        better="lower",
        unit="MB",
        default_range=[512, 64],
    )
    metric.refresh_from_db()
    assert (metric.name, metric.attribute, metric.better, metric.unit) == (
        "Memory",
        built.attributes["Efficiency"],
        "lower",
        "MB",
    )
    assert metric.default_range == (512.0, 64.0)
    no_range = services.metric_add(study=built.study, attribute=built.attributes["Efficiency"], name="Disk")
    assert (no_range.better, no_range.default_range) == ("higher", None)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"name": "Success rate"}, "name"),  # unique within the study, across attributes
        ({"name": "AUC"}, "name"),
        ({"name": ""}, "name"),
        ({"better": "sideways"}, "better"),
        ({"better": None}, "better"),
        ({"unit": 7}, "unit"),
        ({"default_range": [0.9, 0.9]}, "default_range"),  # equal bounds
        ({"default_range": [0.95, 0.8]}, "default_range"),  # higher is better, least above desired
        ({"better": "lower", "default_range": [1, 60]}, "default_range"),  # lower is better, least below desired
        ({"better": "lower", "default_range": [5, 5]}, "default_range"),
        ({"default_range": [NAN, 1]}, "default_range"),
        ({"default_range": [0, NAN]}, "default_range"),
        ({"default_range": [0, INF]}, "default_range"),
        ({"default_range": [-INF, 0]}, "default_range"),
        ({"default_range": [0.8]}, "default_range"),
        ({"default_range": [0.1, 0.5, 0.9]}, "default_range"),
        ({"default_range": 0.8}, "default_range"),
        ({"default_range": "0.8,0.95"}, "default_range"),
        ({"default_range": "ab"}, "default_range"),
        ({"default_range": ["0.8", "0.95"]}, "default_range"),
        ({"default_range": [False, True]}, "default_range"),
        ({"default_range": {"low": 0.8, "high": 0.95}}, "default_range"),
    ],
)
def test_metric_add_refuses(make_study, unchanged, kwargs, field):
    built = make_study("draft")
    arguments = {"study": built.study, "attribute": built.attributes["Efficiency"], "name": "Memory", **kwargs}
    errors = refused(unchanged, lambda: services.metric_add(**arguments))
    assert set(errors) == {field}


def test_metric_add_refuses_an_attribute_of_another_study(make_study, unchanged):
    built, other = make_study("draft"), make_study("draft", title="Other")
    errors = refused(
        unchanged,
        lambda: services.metric_add(study=built.study, attribute=other.attributes["Efficiency"], name="Memory"),
    )
    assert set(errors) == {"attribute"}


def test_metric_update_rechecks_the_default_range_against_a_new_direction(make_study, unchanged):
    built = make_study("draft")
    metric = built.metrics["Success rate"]
    errors = refused(unchanged, lambda: services.metric_update(metric=metric, better="lower"))
    assert set(errors) == {"default_range"}
    services.metric_update(metric=metric, better="lower", default_range=[0.95, 0.8])
    metric.refresh_from_db()
    assert (metric.better, metric.default_range) == ("lower", (0.95, 0.8))
    services.metric_update(metric=metric, default_range=None)
    metric.refresh_from_db()
    assert metric.default_range is None


def test_metric_update_refuses_a_name_clash_and_unknown_fields(make_study, unchanged):
    built = make_study("draft")
    errors = refused(unchanged, lambda: services.metric_update(metric=built.metrics["AUC"], name="Success rate"))
    assert set(errors) == {"name"}
    errors = refused(unchanged, lambda: services.metric_update(metric=built.metrics["AUC"], is_selected=True))
    assert set(errors) == {"is_selected"}
    errors = refused(unchanged, lambda: services.metric_update(metric=built.metrics["AUC"], default_range=[1, 1]))
    assert set(errors) == {"default_range"}


# --- candidates and measurements --------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"name": "J48"}, "name"),
        ({"name": ""}, "name"),
        ({"name": 3}, "name"),
        ({"name": "SVM", "description": None}, "description"),
    ],
)
def test_candidate_add_refuses(make_study, unchanged, kwargs, field):
    built = make_study("draft")
    errors = refused(unchanged, lambda: services.candidate_add(study=built.study, **kwargs))
    assert set(errors) == {field}


def test_candidate_update_refuses_a_name_clash(make_study, unchanged):
    built = make_study("voting")
    errors = refused(unchanged, lambda: services.candidate_update(candidate=built.candidates["JRip"], name="J48"))
    assert set(errors) == {"name"}
    errors = refused(unchanged, lambda: services.candidate_update(candidate=built.candidates["JRip"], position=0))
    assert set(errors) == {"position"}


def test_candidate_names_are_unique_per_study_only(make_study):
    make_study("draft")
    other = make_study("draft", title="Other")
    assert services.candidate_add(study=other.study, name="SVM").name == "SVM"
    assert Candidate.objects.filter(name="J48").count() == 2


def _values(built):
    return {
        (m.candidate.name, m.metric.name): m.value
        for m in Measurement.objects.filter(candidate__study=built.study).select_related("candidate", "metric")
    }


def test_measurements_set_upserts(make_study):
    built = make_study("draft")
    services.candidate_add(study=built.study, name="SVM")
    before = Measurement.objects.count()
    services.measurements_set(
        study=built.study,
        measurements=[
            {"candidate": "J48", "metric": "AUC", "value": 0.5},  # update
            {"candidate": "SVM", "metric": "AUC", "value": 0.75},  # create
            {"candidate": "SVM", "metric": "Training time", "value": -2},
        ],
    )
    values = _values(built)
    assert Measurement.objects.count() == before + 2
    assert values[("J48", "AUC")] == 0.5
    assert values[("SVM", "AUC")] == 0.75
    assert values[("SVM", "Training time")] == -2.0
    assert values[("JRip", "AUC")] == MEASUREMENTS["JRip"]["AUC"]  # untouched


def test_measurements_set_changes_one_value_of_a_closed_study(make_study):
    built = make_study("closed")
    services.measurements_set(
        study=built.study, measurements=[{"candidate": "JRip", "metric": "Fold stdev", "value": 0.2}]
    )
    values = _values(built)
    assert values[("JRip", "Fold stdev")] == 0.2
    assert values[("J48", "Fold stdev")] == MEASUREMENTS["J48"]["Fold stdev"]


@pytest.mark.parametrize(
    "entry, field",
    [
        ({"candidate": "SVM", "metric": "AUC", "value": 0.5}, "measurements[1].candidate"),
        ({"candidate": "J48", "metric": "Recall", "value": 0.5}, "measurements[1].metric"),
        ({"candidate": ["J48"], "metric": "AUC", "value": 0.5}, "measurements[1].candidate"),
        ({"candidate": "J48", "metric": {"AUC": 1}, "value": 0.5}, "measurements[1].metric"),
        ({"candidate": "J48", "metric": "AUC", "value": NAN}, "measurements[1].value"),
        ({"candidate": "J48", "metric": "AUC", "value": INF}, "measurements[1].value"),
        ({"candidate": "J48", "metric": "AUC", "value": -INF}, "measurements[1].value"),
        ({"candidate": "J48", "metric": "AUC", "value": True}, "measurements[1].value"),
        ({"candidate": "J48", "metric": "AUC", "value": 10**400}, "measurements[1].value"),
        ({"candidate": "J48", "metric": "AUC", "value": "0.5"}, "measurements[1].value"),
        ({"candidate": "J48", "metric": "AUC", "value": None}, "measurements[1].value"),
        ({"candidate": "J48", "metric": "AUC"}, "measurements[1]"),
        ({"candidate": "J48", "metric": "AUC", "value": 1, "unit": "s"}, "measurements[1]"),
        (["J48", "AUC", 0.5], "measurements[1]"),
        # the same (candidate, metric) as entry 0
        ({"candidate": "J48", "metric": "Success rate", "value": 0.9}, "measurements[1]"),
    ],
)
def test_measurements_set_refuses_and_writes_nothing(make_study, unchanged, entry, field):
    built = make_study("assessment")
    # Entry 0 is valid and would change a value: it must not be written either.
    valid = {"candidate": "J48", "metric": "Success rate", "value": 0.5}
    errors = refused(unchanged, lambda: services.measurements_set(study=built.study, measurements=[valid, entry]))
    assert set(errors) == {field}
    assert _values(built)[("J48", "Success rate")] == MEASUREMENTS["J48"]["Success rate"]


def test_measurements_set_reports_every_bad_entry(make_study, unchanged):
    built = make_study("draft")
    errors = refused(
        unchanged,
        lambda: services.measurements_set(
            study=built.study,
            measurements=[
                {"candidate": "SVM", "metric": "Recall", "value": NAN},
                {"candidate": "J48", "metric": "AUC", "value": 0.1},
                {"candidate": "JRip", "metric": "AUC", "value": "high"},
            ],
        ),
    )
    assert set(errors) == {
        "measurements[0].candidate",
        "measurements[0].metric",
        "measurements[0].value",
        "measurements[2].value",
    }


@pytest.mark.parametrize("measurements", [{"candidate": "J48", "metric": "AUC", "value": 1}, "J48", None])
def test_measurements_set_refuses_a_non_list(make_study, unchanged, measurements):
    built = make_study("draft")
    errors = refused(unchanged, lambda: services.measurements_set(study=built.study, measurements=measurements))
    assert set(errors) == {"measurements"}


def test_measurements_set_refuses_a_metric_of_another_study(make_study, unchanged):
    built = make_study("draft")
    other = make_study("draft", title="Other")
    services.attribute_add(study=other.study, name="Robustness")
    services.metric_add(
        study=other.study,
        attribute=QualityAttribute.objects.get(study=other.study, name="Robustness"),
        name="Noise tolerance",
    )
    errors = refused(
        unchanged,
        lambda: services.measurements_set(
            study=built.study, measurements=[{"candidate": "J48", "metric": "Noise tolerance", "value": 1}]
        ),
    )
    assert set(errors) == {"measurements[0].metric"}


# --- votes -----------------------------------------------------------------------------


def _votes(membership):
    return (
        sorted(AttributeVote.objects.filter(expert=membership).values_list("attribute__name", flat=True)),
        sorted(MetricVote.objects.filter(expert=membership).values_list("metric__name", flat=True)),
    )


def test_votes_set_stores_and_replaces_the_expert_votes(make_study):
    built = make_study("voting")  # bob voted for Efficiency
    assert _votes(built.bob) == (["Efficiency"], [])
    services.votes_set(expert=built.bob, attributes=["Flexibility", "Efficiency"], metrics=["AUC", "Flexibility score"])
    assert _votes(built.bob) == (["Efficiency", "Flexibility"], ["AUC", "Flexibility score"])
    services.votes_set(expert=built.bob, attributes=["Flexibility"])
    assert _votes(built.bob) == (["Flexibility"], [])
    services.votes_set(expert=built.carol, metrics=["Training time"])
    assert _votes(built.bob) == (["Flexibility"], [])  # one expert's votes never touch another's
    assert _votes(built.carol) == ([], ["Training time"])


@pytest.mark.parametrize(
    "kwargs, field, fragment",
    [
        ({"attributes": ["Robustness"]}, "attributes", "no attribute named 'Robustness'"),
        ({"attributes": ["Accuracy"]}, "attributes", "'Accuracy' is a main attribute"),
        ({"attributes": ["Efficiency", "Efficiency"]}, "attributes", "given twice: Efficiency"),
        ({"attributes": "Efficiency"}, "attributes", "list of names"),
        ({"attributes": [1]}, "attributes", "list of names"),
        ({"attributes": None}, "attributes", "list of names"),
        ({"metrics": ["Recall"]}, "metrics", "no metric named 'Recall'"),
        ({"metrics": ["AUC", "AUC"]}, "metrics", "given twice: AUC"),
        ({"metrics": [["AUC"]]}, "metrics", "list of names"),
    ],
)
def test_votes_set_refuses(make_study, unchanged, kwargs, field, fragment):
    built = make_study("voting")
    # A valid vote beside the bad one is not written either.
    ballot = {"attributes": ["Flexibility"], "metrics": ["Success rate"], **kwargs}
    errors = refused(unchanged, lambda: services.votes_set(expert=built.bob, **ballot))
    assert set(errors) == {field}
    assert fragment in " ".join(errors[field])
    assert _votes(built.bob) == (["Efficiency"], [])


def test_votes_set_reports_both_lists(make_study, unchanged):
    built = make_study("voting")
    errors = refused(
        unchanged, lambda: services.votes_set(expert=built.bob, attributes=["Consistency", "Nope"], metrics=["Nope"])
    )
    assert set(errors) == {"attributes", "metrics"}
    assert len(errors["attributes"]) == 2


# --- every input only in its own phase ------------------------------------------------


def _prioritise_bob(built):
    services.prioritisation_set(
        expert=built.bob, method="direct", weights={"Accuracy": 2, "Consistency": 1, "Efficiency": 1}
    )


def _local_bob(built):
    services.metric_prioritisation_set(
        expert=built.bob, attribute=built.attributes["Accuracy"], method="direct", weights={"Success rate": 1, "AUC": 1}
    )


ACTIONS = {
    # name: (call, phases in which it is allowed)
    "expert_add": (lambda b, c: services.expert_add(study=b.study, user=c.charlie), {"draft"}),
    "expert_remove": (lambda b, c: services.expert_remove(study=b.study, user=c.carol), {"draft"}),
    "attribute_add": (lambda b, c: services.attribute_add(study=b.study, name="Robustness"), {"draft"}),
    "attribute_update": (
        lambda b, c: services.attribute_update(attribute=b.attributes["Flexibility"], description="x"),
        {"draft"},
    ),
    "attribute_remove": (lambda b, c: services.attribute_remove(attribute=b.attributes["Flexibility"]), {"draft"}),
    "metric_add": (
        lambda b, c: services.metric_add(study=b.study, attribute=b.attributes["Efficiency"], name="Memory"),
        {"draft"},
    ),
    "metric_update": (lambda b, c: services.metric_update(metric=b.metrics["AUC"], unit="%"), {"draft"}),
    "metric_update_default_range": (
        lambda b, c: services.metric_update(metric=b.metrics["AUC"], default_range=[0.6, 0.9]),
        {"draft", "voting"},
    ),
    "metric_remove": (lambda b, c: services.metric_remove(metric=b.metrics["Flexibility score"]), {"draft"}),
    "study_update_thresholds": (
        lambda b, c: services.study_update(study=b.study, attribute_threshold=2),
        {"draft", "voting"},
    ),
    "votes_set": (lambda b, c: services.votes_set(expert=b.carol, attributes=["Flexibility"]), {"voting"}),
    "prioritisation_set": (lambda b, c: _prioritise_bob(b), {"assessment"}),
    "metric_prioritisation_set": (lambda b, c: _local_bob(b), {"assessment"}),
    "metric_prioritisation_clear": (
        lambda b, c: services.metric_prioritisation_clear(expert=b.bob, attribute=b.attributes["Accuracy"]),
        {"assessment"},
    ),
    "ranges_set": (lambda b, c: services.ranges_set(expert=b.bob, ranges={"AUC": [0.6, 0.9]}), {"assessment"}),
    "peer_weights_set": (
        lambda b, c: services.peer_weights_set(expert=b.bob, weights={"bob": 0.3, "carol": 0.7}),
        {"assessment"},
    ),
    "study_update_title": (lambda b, c: services.study_update(study=b.study, title="Other"), set(PHASES)),
    "candidate_add": (lambda b, c: services.candidate_add(study=b.study, name="SVM"), set(PHASES)),
    "candidate_update": (
        lambda b, c: services.candidate_update(candidate=b.candidates["J48"], description="C4.5"),
        set(PHASES),
    ),
    "candidate_remove": (lambda b, c: services.candidate_remove(candidate=b.candidates["JRip"]), set(PHASES)),
    "measurements_set": (
        lambda b, c: services.measurements_set(
            study=b.study, measurements=[{"candidate": "J48", "metric": "AUC", "value": 0.5}]
        ),
        set(PHASES),
    ),
}


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_every_input_only_in_its_own_phase(make_study, cast, unchanged, action, phase):
    call, allowed = ACTIONS[action]
    built = make_study(phase)
    if phase in allowed:
        call(built, cast)
        built.study.refresh_from_db()
        assert built.study.phase == phase
    else:
        message = conflict(unchanged, lambda: call(built, cast))
        assert f"the study is in the {phase} phase" in message
        assert "only possible in the" in message


# --- prioritisation ----------------------------------------------------------------------


def _weights_of(prioritisation):
    return {
        w.attribute.name: (w.given, w.weight)
        for w in AttributeWeight.objects.filter(prioritisation=prioritisation).select_related("attribute")
    }


def test_direct_percentages_are_normalised_and_given_kept(make_study):
    built = make_study("assessment")
    result = services.prioritisation_set(
        expert=built.bob, method="direct", weights={"Accuracy": 63, "Consistency": 20, "Efficiency": 17}
    )
    stored = AttributePrioritisation.objects.get(expert=built.bob)
    assert (stored.method, stored.consistency_ratio) == ("direct", None)
    weights = _weights_of(stored)
    assert set(weights) == {"Accuracy", "Consistency", "Efficiency"}
    assert weights["Accuracy"][0] == 63 and weights["Consistency"][0] == 20 and weights["Efficiency"][0] == 17
    assert weights["Accuracy"][1] == pytest.approx(0.63, abs=1e-12)
    assert weights["Consistency"][1] == pytest.approx(0.20, abs=1e-12)
    assert weights["Efficiency"][1] == pytest.approx(0.17, abs=1e-12)
    assert stored.result_record == result.result_record
    assert stored.result_record["weights"] == {
        "Accuracy": pytest.approx(0.63, abs=1e-12),
        "Consistency": pytest.approx(0.20, abs=1e-12),
        "Efficiency": pytest.approx(0.17, abs=1e-12),
    }
    assert stored.result_record["consistency_ratio"] is None and stored.result_record["most_inconsistent"] == []


def test_direct_weights_replace_a_previous_prioritisation(make_study):
    built = make_study("assessment")
    services.prioritisation_set(expert=built.bob, method="ahp", judgments=[list(j) for j in CAROL_JUDGMENTS])
    services.prioritisation_set(
        expert=built.bob, method="direct", weights={"Accuracy": 0.5, "Consistency": 0.25, "Efficiency": 0.25}
    )
    assert AttributePrioritisation.objects.filter(expert=built.bob).count() == 1
    stored = AttributePrioritisation.objects.get(expert=built.bob)
    assert stored.method == "direct" and not stored.judgments.exists()
    assert {n: w for n, (g, w) in _weights_of(stored).items()} == pytest.approx(
        {"Accuracy": 0.5, "Consistency": 0.25, "Efficiency": 0.25}
    )


GOOD_DIRECT = {"Accuracy": 63, "Consistency": 20, "Efficiency": 17}


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"weights": {**GOOD_DIRECT, "Accuracy": 0}}, "weights.Accuracy"),
        ({"weights": {**GOOD_DIRECT, "Consistency": -20}}, "weights.Consistency"),
        ({"weights": {**GOOD_DIRECT, "Efficiency": NAN}}, "weights.Efficiency"),
        ({"weights": {**GOOD_DIRECT, "Efficiency": INF}}, "weights.Efficiency"),
        ({"weights": {**GOOD_DIRECT, "Efficiency": "17"}}, "weights.Efficiency"),
        ({"weights": {**GOOD_DIRECT, "Efficiency": True}}, "weights.Efficiency"),
        ({"weights": {**GOOD_DIRECT, "Efficiency": None}}, "weights.Efficiency"),
        ({"weights": {"Accuracy": 63, "Consistency": 20}}, "weights"),  # Efficiency missing
        ({"weights": {**GOOD_DIRECT, "Speed": 5}}, "weights.Speed"),  # unknown
        ({"weights": {**GOOD_DIRECT, "Flexibility": 5}}, "weights.Flexibility"),  # not selected
        ({"weights": [63, 20, 17]}, "weights"),
        ({"weights": None}, "weights"),
        ({"weights": {}}, "weights"),
        ({"weights": GOOD_DIRECT, "judgments": [["Accuracy", "Consistency", 3]]}, "judgments"),
        ({"weights": GOOD_DIRECT, "method": "topsis"}, "method"),
        ({"weights": GOOD_DIRECT, "method": None}, "method"),
        # positive, but the share of the tiny one rounds to 0 (a subnormal in the DB)
        ({"weights": {**GOOD_DIRECT, "Efficiency": 5e-324}}, "weights.Efficiency"),
    ],
)
def test_direct_weights_refused(make_study, unchanged, kwargs, field):
    built = make_study("assessment", inputs=True)  # bob already has a prioritisation: it must survive
    arguments = {"expert": built.bob, "method": "direct", **kwargs}
    errors = refused(unchanged, lambda: services.prioritisation_set(**arguments))
    assert set(errors) == {field}


def test_direct_weights_report_every_bad_item(make_study, unchanged):
    built = make_study("assessment")
    errors = refused(
        unchanged,
        lambda: services.prioritisation_set(
            expert=built.bob, method="direct", weights={"Accuracy": 0, "Consistency": NAN, "Speed": 1}
        ),
    )
    assert set(errors) == {"weights.Accuracy", "weights.Consistency", "weights.Speed", "weights"}
    assert "Efficiency" in errors["weights"][0]


def _matrix(judgments, items=SELECTED_ATTRIBUTES):
    index = {name: position for position, name in enumerate(items)}
    return engine.pairwise_matrix(len(items), [(index[r], index[c], v) for r, c, v in judgments])


INCONSISTENT = [["Accuracy", "Consistency", 5], ["Efficiency", "Accuracy", 3], ["Consistency", "Efficiency", 1 / 4]]


@pytest.mark.parametrize("method", ["ahp", "lpr"])
@pytest.mark.parametrize("judgments", [CAROL_JUDGMENTS, INCONSISTENT], ids=["consistent", "inconsistent"])
def test_pairwise_prioritisation_stores_the_engine_result(make_study, method, judgments):
    built = make_study("assessment")
    saved = services.prioritisation_set(expert=built.carol, method=method, judgments=[list(j) for j in judgments])
    matrix = _matrix(judgments)
    expected_weights = engine.ahp_weights(matrix) if method == "ahp" else engine.lpr_weights(matrix)
    expected_ratio = engine.consistency(matrix).ratio
    stored = AttributePrioritisation.objects.get(expert=built.carol)
    assert stored.method == method
    assert stored.consistency_ratio == pytest.approx(expected_ratio, rel=1e-12, abs=1e-15)
    assert saved.consistency_ratio == stored.consistency_ratio
    weights = _weights_of(stored)
    for name, expected in zip(SELECTED_ATTRIBUTES, expected_weights, strict=False):
        assert weights[name] == (None, pytest.approx(float(expected), rel=1e-12))
    # The result is stored with it, by name, for reading without recomputing.
    assert stored.result_record == saved.result_record
    assert list(stored.result_record["weights"]) == SELECTED_ATTRIBUTES
    assert list(stored.result_record["weights"].values()) == pytest.approx(list(expected_weights), rel=1e-12)
    assert stored.result_record["consistency_ratio"] == pytest.approx(expected_ratio, rel=1e-12, abs=1e-15)
    hints = engine.most_inconsistent(matrix, expected_weights)
    stored_hints = [
        (h["row"], h["column"], h["value"], h["error"], h["suggested_value"])
        for h in stored.result_record["most_inconsistent"]
    ]
    assert stored_hints == [
        (
            SELECTED_ATTRIBUTES[h.row],
            SELECTED_ATTRIBUTES[h.column],
            pytest.approx(h.value),
            pytest.approx(h.error),
            h.suggested_value,
        )
        for h in hints
    ]
    assert len(stored.result_record["most_inconsistent"]) == 3
    # Judgments kept as given, orientation included.
    assert sorted(stored.judgments.values_list("row__name", "column__name", "value")) == sorted(
        (r, c, float(v)) for r, c, v in judgments
    )


def test_an_inconsistent_matrix_is_a_warning_not_a_refusal(make_study):
    built = make_study("assessment")
    saved = services.prioritisation_set(expert=built.carol, method="ahp", judgments=[list(j) for j in INCONSISTENT])
    assert saved.consistency_ratio > 0.10
    assert saved.result_record["most_inconsistent"][0]["error"] > 1


@pytest.mark.parametrize("value", [1 / 9, 9, 1, 0.5, 1 / 3, 0.1111])
def test_pairwise_values_on_the_scale_are_accepted(make_study, value):
    built = make_study("assessment")
    # A consistent matrix: Accuracy is `value` times as important as the two others.
    judgments = [
        ["Accuracy", "Consistency", value],
        ["Accuracy", "Efficiency", value],
        ["Consistency", "Efficiency", 1],
    ]
    saved = services.prioritisation_set(expert=built.carol, method="ahp", judgments=judgments)
    stored = AttributeJudgment.objects.get(prioritisation=saved, row__name="Accuracy", column__name="Consistency")
    assert stored.value == value  # kept as typed
    weights = list(saved.result_record["weights"].values())
    assert weights[0] / weights[1] == pytest.approx(max(value, 1 / 9), rel=1e-12)
    assert weights[1] == pytest.approx(weights[2], rel=1e-12)
    assert saved.consistency_ratio == pytest.approx(0, abs=1e-12)


GOOD_JUDGMENTS = [["Accuracy", "Consistency", 3], ["Accuracy", "Efficiency", 5], ["Consistency", "Efficiency", 2]]


def _with(position, judgment):
    judgments = [list(j) for j in GOOD_JUDGMENTS]
    judgments[position] = judgment
    return judgments


@pytest.mark.parametrize("method", ["ahp", "lpr"])
@pytest.mark.parametrize(
    "judgments, field, fragment",
    [
        (_with(0, ["Accuracy", "Consistency", 10]), "judgments[0]", "outside the scale"),
        (_with(0, ["Accuracy", "Consistency", 0.1]), "judgments[0]", "outside the scale"),
        (_with(0, ["Accuracy", "Consistency", 0.111]), "judgments[0]", "outside the scale"),
        (_with(0, ["Accuracy", "Consistency", 9.0001]), "judgments[0]", "outside the scale"),
        (_with(0, ["Accuracy", "Consistency", 0]), "judgments[0]", "outside the scale"),
        (_with(0, ["Accuracy", "Consistency", -3]), "judgments[0]", "outside the scale"),
        (_with(0, ["Accuracy", "Consistency", NAN]), "judgments[0]", "finite"),
        (_with(0, ["Accuracy", "Consistency", INF]), "judgments[0]", "finite"),
        (_with(0, ["Accuracy", "Consistency", "3"]), "judgments[0]", "number"),
        (_with(0, ["Accuracy", "Consistency", True]), "judgments[0]", "number"),
        (GOOD_JUDGMENTS[:2], "judgments", "missing comparisons: Consistency / Efficiency"),
        (
            [],
            "judgments",
            "missing comparisons: Accuracy / Consistency, Accuracy / Efficiency, Consistency / Efficiency",
        ),
        (GOOD_JUDGMENTS + [["Accuracy", "Consistency", 3]], "judgments[3]", "already judged in judgments[0]"),
        (GOOD_JUDGMENTS + [["Consistency", "Accuracy", 1 / 3]], "judgments[3]", "already judged in judgments[0]"),
        (_with(2, ["Accuracy", "Accuracy", 1]), "judgments[2]", "with itself"),
        (_with(1, ["Accuracy", "Speed", 2]), "judgments[1]", "'Speed' is not one of the items"),
        (_with(1, ["Flexibility", "Accuracy", 2]), "judgments[1]", "'Flexibility' is not one of the items"),
        (_with(1, ["Accuracy", "Efficiency"]), "judgments[1]", "must be [row, column, value]"),
        (_with(1, ["Accuracy", "Efficiency", 5, 1]), "judgments[1]", "must be [row, column, value]"),
        (_with(1, "Accuracy>Efficiency"), "judgments[1]", "must be [row, column, value]"),
        # An object is read as [row, column, value] (issue 18) when it has exactly those keys.
        (
            _with(1, {"row": "Accuracy", "column": "Efficiency", "weight": 5}),
            "judgments[1]",
            "must be [row, column, value] or an object with exactly row, column and value",
        ),
        (
            _with(1, {"row": "Accuracy", "column": "Efficiency", "value": 5, "note": ""}),
            "judgments[1]",
            "an object with exactly row, column and value",
        ),
        (_with(1, {"row": "Accuracy", "column": "Efficiency", "value": "5"}), "judgments[1]", "number"),
        (_with(1, [["Accuracy"], "Efficiency", 5]), "judgments[1]", ""),
        (_with(1, [0, 2, 5]), "judgments[1]", ""),
        ({"Accuracy": {"Consistency": 3}}, "judgments", "must be a list"),
        (None, "judgments", "must be a list"),
        ("Accuracy,Consistency,3", "judgments", "must be a list"),
    ],
)
def test_pairwise_judgments_refused(make_study, unchanged, method, judgments, field, fragment):
    built = make_study("assessment", inputs=True)
    errors = refused(
        unchanged, lambda: services.prioritisation_set(expert=built.carol, method=method, judgments=judgments)
    )
    assert set(errors) == {field}
    assert fragment in " ".join(errors[field])


def test_pairwise_method_refuses_weights(make_study, unchanged):
    built = make_study("assessment")
    errors = refused(
        unchanged,
        lambda: services.prioritisation_set(
            expert=built.carol, method="ahp", weights=GOOD_DIRECT, judgments=GOOD_JUDGMENTS
        ),
    )
    assert set(errors) == {"weights"}


def test_pairwise_errors_are_all_reported(make_study, unchanged):
    built = make_study("assessment")
    errors = refused(
        unchanged,
        lambda: services.prioritisation_set(
            expert=built.carol,
            method="ahp",
            judgments=[["Accuracy", "Consistency", 10], ["Accuracy", "Speed", 2], ["Consistency", "Efficiency", 2]],
        ),
    )
    assert set(errors) == {"judgments[0]", "judgments[1]"}


# --- metric prioritisation ------------------------------------------------------------


def test_metric_prioritisation_for_an_attribute_with_two_selected_metrics(make_study):
    built = make_study("assessment")
    saved = services.metric_prioritisation_set(
        expert=built.bob, attribute=built.attributes["Accuracy"], method="direct", weights={"Success rate": 3, "AUC": 1}
    )
    stored = MetricPrioritisation.objects.get(expert=built.bob, attribute=built.attributes["Accuracy"])
    assert stored.pk == saved.pk
    weights = {w.metric.name: (w.given, w.weight) for w in MetricWeight.objects.filter(prioritisation=stored)}
    assert weights == {"Success rate": (3.0, pytest.approx(0.75)), "AUC": (1.0, pytest.approx(0.25))}
    saved = services.metric_prioritisation_set(
        expert=built.bob, attribute=built.attributes["Accuracy"], method="ahp", judgments=[["AUC", "Success rate", 4]]
    )
    assert MetricPrioritisation.objects.filter(expert=built.bob).count() == 1
    assert MetricPrioritisation.objects.get(pk=saved.pk).result_record["weights"] == {
        "Success rate": pytest.approx(0.2),
        "AUC": pytest.approx(0.8),
    }
    assert saved.consistency_ratio == 0
    services.metric_prioritisation_clear(expert=built.bob, attribute=built.attributes["Accuracy"])
    assert not MetricPrioritisation.objects.filter(expert=built.bob).exists()


def test_metric_prioritisation_refused(make_study, unchanged):
    built = make_study("assessment")
    other = make_study("assessment", title="Other")
    cases = [
        (
            built.attributes["Consistency"],
            {"method": "direct", "weights": {"Fold stdev": 1}},
            "attribute",
            "one selected metric",
        ),
        (
            built.attributes["Flexibility"],
            {"method": "direct", "weights": {"Flexibility score": 1}},
            "attribute",
            "not a selected attribute",
        ),
        (
            other.attributes["Accuracy"],
            {"method": "direct", "weights": {"Success rate": 1, "AUC": 1}},
            "attribute",
            "not a selected",
        ),
        (
            built.attributes["Accuracy"],
            {"method": "direct", "weights": {"Success rate": 1, "AUC": 0}},
            "weights.AUC",
            "positive",
        ),
        (
            built.attributes["Accuracy"],
            {"method": "direct", "weights": {"Success rate": 1}},
            "weights",
            "missing weights for AUC",
        ),
        (
            built.attributes["Accuracy"],
            {"method": "direct", "weights": {"Success rate": 1, "AUC": 1, "Fold stdev": 1}},
            "weights.Fold stdev",
            "",
        ),
        (
            built.attributes["Accuracy"],
            {"method": "ahp", "judgments": [["AUC", "Success rate", 12]]},
            "judgments[0]",
            "outside the scale",
        ),
        (built.attributes["Accuracy"], {"method": "lpr", "judgments": []}, "judgments", "missing comparisons"),
    ]
    for attribute, kwargs, field, fragment in cases:
        errors = refused(
            unchanged,
            lambda attribute=attribute, kwargs=kwargs: services.metric_prioritisation_set(
                expert=built.bob, attribute=attribute, **kwargs
            ),
        )
        assert set(errors) == {field}, (attribute, kwargs)
        assert fragment in " ".join(errors[field])


# --- acceptable ranges ---------------------------------------------------------------------


def _ranges(membership):
    return {
        r.metric.name: (r.least_acceptable, r.desired)
        for r in AcceptableRange.objects.filter(expert=membership).select_related("metric")
    }


def test_ranges_set_stores_and_replaces(make_study):
    built = make_study("assessment")
    services.ranges_set(
        expert=built.bob, ranges={"AUC": [0.6, 0.9], "Fold stdev": [0.2, 0.01], "Training time": (30, 2)}
    )
    assert _ranges(built.bob) == {"AUC": (0.6, 0.9), "Fold stdev": (0.2, 0.01), "Training time": (30.0, 2.0)}
    services.ranges_set(expert=built.bob, ranges={"AUC": [0.5, 0.8]})
    assert _ranges(built.bob) == {"AUC": (0.5, 0.8)}
    services.ranges_set(expert=built.carol, ranges={"Success rate": [0.7, 0.8]})
    assert _ranges(built.bob) == {"AUC": (0.5, 0.8)}  # another expert's ranges are separate
    services.ranges_set(expert=built.bob, ranges={})
    assert _ranges(built.bob) == {}


@pytest.mark.parametrize(
    "ranges, field",
    [
        ({"Success rate": [0.95, 0.8]}, "ranges.Success rate"),  # higher is better: least must be below
        ({"Fold stdev": [0.05, 0.15]}, "ranges.Fold stdev"),  # lower is better: least must be above
        ({"AUC": [0.7, 0.7]}, "ranges.AUC"),
        ({"AUC": [NAN, 0.9]}, "ranges.AUC"),
        ({"AUC": [0.7, INF]}, "ranges.AUC"),
        ({"AUC": [0.7]}, "ranges.AUC"),
        ({"AUC": 0.7}, "ranges.AUC"),
        ({"AUC": ["0.7", "0.9"]}, "ranges.AUC"),
        ({"AUC": None}, "ranges.AUC"),
        ({"Flexibility score": [5, 8]}, "ranges.Flexibility score"),  # metric of an unselected attribute
        ({"Recall": [0.5, 0.8]}, "ranges.Recall"),
        ({"AUC": [-1e308, 1e308]}, "ranges.AUC"),  # finite bounds, but the width overflows
    ],
)
def test_ranges_set_refuses(make_study, unchanged, ranges, field):
    built = make_study("assessment", inputs=True)  # the existing ranges must survive
    previous = _ranges(built.bob)
    errors = refused(
        unchanged, lambda: services.ranges_set(expert=built.bob, ranges={"Training time": [30, 2], **ranges})
    )
    assert set(errors) == {field}
    assert _ranges(built.bob) == previous


@pytest.mark.parametrize("ranges", [[["AUC", 0.6, 0.9]], None, "AUC"])
def test_ranges_set_refuses_a_non_object(make_study, unchanged, ranges):
    built = make_study("assessment")
    assert set(refused(unchanged, lambda: services.ranges_set(expert=built.bob, ranges=ranges))) == {"ranges"}


def test_ranges_set_refuses_a_metric_unselected_by_the_metric_threshold(make_study, unchanged):
    built = make_study(
        "assessment",
        metric_threshold=1,
        votes={
            "bob": {"attributes": ["Efficiency"], "metrics": ["Success rate", "Fold stdev", "Training time"]},
            "carol": {"attributes": [], "metrics": []},
        },
    )
    assert not Metric.objects.get(pk=built.metrics["AUC"].pk).is_selected
    errors = refused(unchanged, lambda: services.ranges_set(expert=built.bob, ranges={"AUC": [0.6, 0.9]}))
    assert set(errors) == {"ranges.AUC"}


# --- peer weights ------------------------------------------------------------------------


def _row(membership):
    return {
        p.ratee.user.username: p.weight
        for p in PeerWeight.objects.filter(rater=membership).select_related("ratee__user")
    }


def test_peer_weights_set_stores_and_replaces(make_study):
    built = make_study("assessment")
    services.peer_weights_set(expert=built.bob, weights={"bob": 0.7, "carol": 0.3})
    assert _row(built.bob) == {"bob": 0.7, "carol": 0.3}
    services.peer_weights_set(expert=built.bob, weights={"bob": 0.25, "carol": 0.75})
    assert _row(built.bob) == {"bob": 0.25, "carol": 0.75}
    assert _row(built.carol) == {}


@pytest.mark.parametrize(
    "weights",
    [
        {"bob": 0.6 + 5e-7, "carol": 0.4},
        {"bob": 0.6 - 9e-7, "carol": 0.4},
        {"bob": 0.1 + 0.2, "carol": 0.7},
        {"bob": 0.2 + 0.2 + 0.2, "carol": 0.4},
    ],
)
def test_peer_weights_summing_to_1_within_1e_6_are_accepted_as_given(make_study, weights):
    built = make_study("assessment")
    services.peer_weights_set(expert=built.carol, weights=weights)
    assert _row(built.carol) == weights


@pytest.mark.parametrize(
    "weights, field, fragment",
    [
        ({"bob": 0, "carol": 1}, "weights.bob", "positive"),
        ({"bob": 0.0, "carol": 1.0}, "weights.bob", "positive"),
        ({"bob": -0.2, "carol": 1.2}, "weights.bob", "positive"),
        ({"bob": 1, "carol": 1e-9}, "weights.bob", "below 1"),
        ({"bob": 1.5, "carol": -0.5}, "weights.bob", "below 1"),
        ({"bob": NAN, "carol": 0.5}, "weights.bob", "finite"),
        ({"bob": INF, "carol": 0.5}, "weights.bob", "finite"),
        ({"bob": "0.5", "carol": 0.5}, "weights.bob", "number"),
        ({"bob": True, "carol": 0.5}, "weights.bob", "number"),
        ({"bob": 0.5, "carol": 0.5, "charlie": 0.1}, "weights.charlie", "not an expert"),
        (
            {"bob": 0.5, "carol": 0.4, "alice": 0.1},
            "weights.alice",
            "not an expert",
        ),  # the designer, not an expert here
        ({"bob": 0.5, "carol": 0.4}, "weights", "row sums to 0.9, must be 1"),
        ({"bob": 0.2 + 0.2 + 0.2 + 0.3, "carol": 0.2}, "weights", "row sums to 1.1, must be 1"),
        ({"bob": 0.6 + 2e-6, "carol": 0.4}, "weights", "must be 1"),
        ({"bob": 0.5}, "weights", "missing weights for carol"),
        ({}, "weights", "missing weights for bob, carol"),
        ([0.5, 0.5], "weights", "must map"),
        (None, "weights", "must map"),
    ],
)
def test_peer_weights_refused(make_study, unchanged, weights, field, fragment):
    built = make_study("assessment", inputs=True)  # bob's existing row must survive
    previous = _row(built.bob)
    errors = refused(unchanged, lambda: services.peer_weights_set(expert=built.bob, weights=weights))
    assert field in errors
    assert fragment in " ".join(errors[field])
    assert _row(built.bob) == previous


def test_peer_weights_row_sum_message_exactly(make_study, unchanged):
    built = make_study("assessment")
    errors = refused(
        unchanged, lambda: services.peer_weights_set(expert=built.carol, weights={"bob": 0.45, "carol": 0.45})
    )
    assert errors == {"weights": ["row sums to 0.9, must be 1"]}


def test_peer_weights_incomplete_row_lists_every_missing_username(make_study, unchanged):
    built = make_study("assessment", experts=("bob", "carol", "alice"))
    errors = refused(unchanged, lambda: services.peer_weights_set(expert=built.bob, weights={"bob": 0.5}))
    assert errors == {"weights": ["missing weights for carol, alice: the row must rate every expert"]}


def test_a_lone_expert_gives_themself_weight_1(make_study, unchanged):
    built = make_study("assessment", experts=("bob",), votes={"bob": {"attributes": ["Efficiency"]}})
    services.peer_weights_set(expert=built.bob, weights={"bob": 1})
    assert _row(built.bob) == {"bob": 1.0}
    errors = refused(unchanged, lambda: services.peer_weights_set(expert=built.bob, weights={"bob": 1.2}))
    assert set(errors) == {"weights.bob"}


# --- transitions ---------------------------------------------------------------------------


def test_open_voting_refused_without_experts(make_study, unchanged):
    built = make_study("draft", experts=())
    message = conflict(unchanged, lambda: services.study_open_voting(study=built.study))
    assert message == "Voting cannot open yet: invite at least one expert."


def test_open_voting_refused_without_attributes(cast, unchanged):
    study = services.study_create(designer=cast.alice, title="Empty")
    services.expert_add(study=study, user=cast.bob)
    message = conflict(unchanged, lambda: services.study_open_voting(study=study))
    assert message == "Voting cannot open yet: add at least one quality attribute."


def test_open_voting_refused_with_an_attribute_lacking_metrics(make_study, unchanged):
    built = make_study("draft")
    services.attribute_add(study=built.study, name="Robustness", kind="complementary")
    services.attribute_add(study=built.study, name="Scalability")
    message = conflict(unchanged, lambda: services.study_open_voting(study=built.study))
    assert "give every attribute at least one metric" in message
    assert "(none yet: Robustness, Scalability)" in message
    assert "expert" not in message  # experts are there


def test_open_voting_lists_every_problem(cast, unchanged):
    study = services.study_create(designer=cast.alice, title="Empty")
    message = conflict(unchanged, lambda: services.study_open_voting(study=study))
    assert message == "Voting cannot open yet: invite at least one expert; add at least one quality attribute."


def test_open_voting(make_study):
    built = make_study("draft")
    returned = services.study_open_voting(study=built.study)
    built.study.refresh_from_db()
    assert returned.phase == built.study.phase == "voting"


def _selection(built):
    return (
        sorted(QualityAttribute.objects.filter(study=built.study, is_selected=True).values_list("name", flat=True)),
        sorted(Metric.objects.filter(study=built.study, is_selected=True).values_list("name", flat=True)),
    )


def test_close_voting_selects_by_at_least_c_votes(make_study):
    every_metric = ["Success rate", "AUC", "Fold stdev", "Training time", "Flexibility score"]
    built = make_study(
        "voting",
        attribute_threshold=2,
        metric_threshold=2,
        votes={
            # Efficiency: 2 votes (= c, selected); Flexibility: 1 vote (not selected).
            "bob": {"attributes": ["Efficiency", "Flexibility"], "metrics": every_metric},
            # AUC: 1 vote (not selected); Flexibility score: 2 votes but its attribute is not selected.
            "carol": {
                "attributes": ["Efficiency"],
                "metrics": ["Success rate", "Fold stdev", "Training time", "Flexibility score"],
            },
        },
    )
    assert _selection(built) == ([], [])  # nothing fixed before voting closes
    services.study_close_voting(study=built.study)
    built.study.refresh_from_db()
    assert built.study.phase == "assessment"
    assert _selection(built) == (
        ["Accuracy", "Consistency", "Efficiency"],
        ["Fold stdev", "Success rate", "Training time"],
    )


def test_close_voting_main_attributes_need_no_vote_and_threshold_0_selects_everything(make_study):
    built = make_study("voting", attribute_threshold=0, metric_threshold=0, votes={})
    services.study_close_voting(study=built.study)
    assert _selection(built) == (
        ["Accuracy", "Consistency", "Efficiency", "Flexibility"],
        ["AUC", "Flexibility score", "Fold stdev", "Success rate", "Training time"],
    )


def test_close_voting_with_one_vote_below_threshold_2(make_study):
    built = make_study("voting", attribute_threshold=2, votes={"bob": {"attributes": ["Efficiency", "Flexibility"]}})
    services.study_close_voting(study=built.study)
    assert _selection(built) == (["Accuracy", "Consistency"], ["AUC", "Fold stdev", "Success rate"])


def test_close_voting_refused_when_a_selected_attribute_has_no_selected_metric(make_study, unchanged):
    built = make_study(
        "voting",
        metric_threshold=1,
        votes={
            "bob": {"attributes": ["Efficiency"], "metrics": ["Success rate", "Fold stdev", "Flexibility score"]},
            "carol": {"attributes": [], "metrics": []},
        },
    )
    message = conflict(unchanged, lambda: services.study_close_voting(study=built.study))
    assert "the selected attribute(s) 'Efficiency' would have no selected metric" in message
    assert "metric threshold of 1 votes" in message
    assert "Accuracy" not in message and "Flexibility" not in message
    built.study.refresh_from_db()
    assert built.study.phase == "voting"
    assert _selection(built) == ([], [])
    # Lowering the threshold resolves it.
    services.study_update(study=built.study, metric_threshold=0)
    services.study_close_voting(study=built.study)
    assert _selection(built)[0] == ["Accuracy", "Consistency", "Efficiency"]


def test_close_voting_refused_when_nothing_is_selected(cast, unchanged):
    study = services.study_create(designer=cast.alice, title="All complementary", attribute_threshold=1)
    expert = services.expert_add(study=study, user=cast.bob)
    attribute = services.attribute_add(study=study, name="Efficiency", kind="complementary")
    services.metric_add(study=study, attribute=attribute, name="Time", better="lower")
    services.study_open_voting(study=study)
    services.votes_set(expert=expert, attributes=[])
    message = conflict(unchanged, lambda: services.study_close_voting(study=study))
    assert "no attribute is selected" in message


def test_missing_inputs_of_a_fresh_assessment(make_study):
    built = make_study("assessment")
    everything = ["prioritisation of the attributes", "acceptable range for AUC", "weights for fellow experts"]
    # AUC is the only selected metric without a default range; Flexibility
    # score has none either but is not selected.
    assert selectors.missing_input_list(study=built.study) == {"bob": everything, "carol": everything}


def test_close_assessment_refused_with_the_exact_gaps(make_study, unchanged):
    built = make_study("assessment", experts=("bob", "carol", "alice"))
    # alice (also an expert) gives everything; bob lacks one range and one peer-weight row;
    # carol gives only her AUC range.
    services.prioritisation_set(expert=built.experts["alice"], method="direct", weights=GOOD_DIRECT)
    services.ranges_set(expert=built.experts["alice"], ranges={"AUC": [0.5, 0.9]})
    services.peer_weights_set(expert=built.experts["alice"], weights={"alice": 0.5, "bob": 0.25, "carol": 0.25})
    services.prioritisation_set(expert=built.bob, method="ahp", judgments=GOOD_JUDGMENTS)
    services.ranges_set(expert=built.carol, ranges={"AUC": [0.5, 0.9]})
    expected = {
        "bob": ["acceptable range for AUC", "weights for fellow experts"],
        "carol": ["prioritisation of the attributes", "weights for fellow experts"],
    }
    assert selectors.missing_input_list(study=built.study) == expected
    message = conflict(unchanged, lambda: services.study_close_assessment(study=built.study))
    assert message == (
        "Assessment cannot close, inputs are missing: "
        "bob: acceptable range for AUC, weights for fellow experts; "
        "carol: prioritisation of the attributes, weights for fellow experts."
    )
    assert "alice" not in message


def test_missing_inputs_names_every_range_without_default(make_study):
    # With threshold 0 Flexibility is selected too, and its metric has no default range.
    built = make_study("assessment", attribute_threshold=0)
    assert selectors.missing_input_list(study=built.study)["bob"][1] == "acceptable range for AUC, Flexibility score"
    services.ranges_set(expert=built.bob, ranges={"Flexibility score": [3, 8]})
    assert selectors.missing_input_list(study=built.study)["bob"][1] == "acceptable range for AUC"


def test_close_assessment_with_default_ranges_standing_in(make_study):
    built = make_study("assessment", inputs=True)
    # bob set a range only for AUC; Success rate, Fold stdev and Training time use their defaults.
    assert set(_ranges(built.bob)) == {"AUC"}
    assert selectors.missing_input_list(study=built.study) == {}
    services.study_close_assessment(study=built.study)
    built.study.refresh_from_db()
    assert built.study.phase == "closed"


def test_reopen_from_closed_goes_back_to_assessment(make_study):
    built = make_study("closed")
    services.study_reopen_assessment(study=built.study)
    built.study.refresh_from_db()
    assert built.study.phase == "assessment"
    # inputs can change again, then it closes again
    services.peer_weights_set(expert=built.bob, weights={"bob": 0.1, "carol": 0.9})
    services.study_close_assessment(study=built.study)
    built.study.refresh_from_db()
    assert built.study.phase == "closed"


@pytest.mark.parametrize(
    "phase, to, expected",
    [("draft", "voting", "voting"), ("voting", "assessment", "assessment"), ("closed", "assessment", "assessment")],
)
def test_study_transition_follows_the_one_path(make_study, phase, to, expected):
    built = make_study(phase)
    services.study_transition(study=built.study, to=to)
    built.study.refresh_from_db()
    assert built.study.phase == expected


def test_study_transition_assessment_to_closed(make_study):
    built = make_study("assessment", inputs=True)
    services.study_transition(study=built.study, to="closed")
    built.study.refresh_from_db()
    assert built.study.phase == "closed"


@pytest.mark.parametrize("to", ["archived", "", None, "Voting"])
def test_study_transition_refuses_an_unknown_phase(make_study, unchanged, to):
    built = make_study("draft")
    errors = refused(unchanged, lambda: services.study_transition(study=built.study, to=to))
    assert set(errors) == {"to"}


@pytest.mark.parametrize(
    "phase, to",
    [
        ("draft", "draft"),
        ("draft", "assessment"),
        ("draft", "closed"),
        ("voting", "draft"),
        ("voting", "closed"),
        ("assessment", "voting"),
        ("assessment", "draft"),
        ("closed", "voting"),
        ("closed", "draft"),
        ("closed", "closed"),
    ],
)
def test_study_transition_refuses_an_invalid_path(make_study, unchanged, phase, to):
    built = make_study(phase)
    message = conflict(unchanged, lambda: services.study_transition(study=built.study, to=to))
    assert message == f"A study in the {phase} phase cannot move to {to}."


def test_close_assessment_only_from_assessment(make_study, unchanged):
    built = make_study("voting")
    message = conflict(unchanged, lambda: services.study_close_assessment(study=built.study))
    assert "only possible in the assessment phase" in message
    message = conflict(unchanged, lambda: services.study_reopen_assessment(study=built.study))
    assert "only possible in the closed phase" in message


# --- accounts ------------------------------------------------------------------------------


def test_user_get_or_create_makes_an_account_without_usable_password(db):
    user = services.user_get_or_create(username=" dora ")
    assert user.username == "dora" and not user.has_usable_password()
    assert services.user_get_or_create(username="dora").pk == user.pk


@pytest.mark.parametrize("username", ["", "   ", None, 7, "has space", "semi;colon", "x" * 151])
def test_user_get_or_create_refuses(unchanged, username):
    errors = refused(unchanged, lambda: services.user_get_or_create(username=username, field="experts[2]"))
    assert set(errors) == {"experts[2]"}


def test_vote_selection_is_what_closing_would_fix(make_study):
    built = make_study("voting")
    attribute_ids, metric_ids = selectors.vote_selection_get(study=built.study)
    assert {a.name for a in QualityAttribute.objects.filter(pk__in=attribute_ids)} == set(SELECTED_ATTRIBUTES)
    assert {m.name for m in Metric.objects.filter(pk__in=metric_ids)} == set(SELECTED_METRICS)


# --- priorities_set: an expert's whole "priorities" section ----------------------------


def _local(membership):
    return {
        p.attribute.name: (p.method, sorted((w.metric.name, round(w.weight, 12)) for w in p.weights.all()))
        for p in MetricPrioritisation.objects.filter(expert=membership).select_related("attribute")
    }


def test_priorities_set_stores_attributes_and_metric_priorities(make_study):
    built = make_study("assessment")
    saved = services.priorities_set(
        expert=built.bob,
        method="direct",
        weights=GOOD_DIRECT,
        metric_priorities={"Accuracy": {"method": "direct", "weights": {"Success rate": 1, "AUC": 3}}},
    )
    assert AttributePrioritisation.objects.get(expert=built.bob).pk == saved.pk
    local = MetricPrioritisation.objects.get(expert=built.bob, attribute__name="Accuracy")
    assert local.result_record["weights"] == {"Success rate": pytest.approx(0.25), "AUC": pytest.approx(0.75)}
    assert _local(built.bob) == {"Accuracy": ("direct", [("AUC", 0.75), ("Success rate", 0.25)])}
    # Local prioritisations left out are cleared (equal split again).
    services.priorities_set(expert=built.bob, method="direct", weights=GOOD_DIRECT)
    assert _local(built.bob) == {}


@pytest.mark.parametrize(
    "metric_priorities, field",
    [
        ([["Accuracy", "direct"]], "metric_priorities"),
        ({"Speed": {"method": "direct", "weights": {}}}, "metric_priorities.Speed"),
        ({"Accuracy": "direct"}, "metric_priorities.Accuracy"),
        ({"Accuracy": {"weights": {"Success rate": 1, "AUC": 1}}}, "metric_priorities.Accuracy"),
        (
            {"Accuracy": {"method": "direct", "weights": {"Success rate": 1, "AUC": 1}, "note": 1}},
            "metric_priorities.Accuracy",
        ),
        (
            {"Accuracy": {"method": "direct", "weights": {"Success rate": 1, "AUC": 0}}},
            "metric_priorities.Accuracy.weights.AUC",
        ),
        (
            {"Accuracy": {"method": "ahp", "judgments": [["AUC", "Success rate", 10]]}},
            "metric_priorities.Accuracy.judgments[0]",
        ),
        (
            {"Consistency": {"method": "direct", "weights": {"Fold stdev": 1}}},
            "metric_priorities.Consistency.attribute",
        ),
        (
            {"Flexibility": {"method": "direct", "weights": {"Flexibility score": 1}}},
            "metric_priorities.Flexibility.attribute",
        ),
    ],
)
def test_priorities_set_is_all_or_nothing(make_study, unchanged, metric_priorities, field):
    built = make_study("assessment", inputs=True)
    services.metric_prioritisation_set(
        expert=built.bob, attribute=built.attributes["Accuracy"], method="direct", weights={"Success rate": 2, "AUC": 1}
    )
    before = _local(built.bob)
    # The attribute weights are valid and would replace bob's: they must not either.
    errors = refused(
        unchanged,
        lambda: services.priorities_set(
            expert=built.bob,
            method="direct",
            weights={"Accuracy": 1, "Consistency": 1, "Efficiency": 1},
            metric_priorities=metric_priorities,
        ),
    )
    assert set(errors) == {field}
    assert _local(built.bob) == before


def test_direct_weights_near_the_largest_double_are_normalised(make_study):
    built = make_study("assessment")
    result = services.prioritisation_set(
        expert=built.bob, method="direct", weights={"Accuracy": 1e308, "Consistency": 1e308, "Efficiency": 5e307}
    )
    assert list(result.result_record["weights"].values()) == pytest.approx([0.4, 0.4, 0.2])


def test_direct_weights_out_of_proportion_name_every_offender(make_study, unchanged):
    built = make_study("assessment")
    errors = refused(
        unchanged,
        lambda: services.prioritisation_set(
            expert=built.bob, method="direct", weights={"Accuracy": 1e20, "Consistency": 1e-20, "Efficiency": 1}
        ),
    )
    # 1e20 would take the whole weight (its share rounds to 1.0), leaving
    # shares of 1e-40 and 1e-20 to the others.
    assert set(errors) == {"weights.Accuracy", "weights.Consistency", "weights.Efficiency"}
    assert "strictly between 0 and 1" in errors["weights.Accuracy"][0]


# --- several experts at once (the bundle importer) -------------------------------------


def _inputs(built):
    return selectors.expert_inputs_list(study=built.study, with_results=True)


def test_the_many_services_store_what_the_one_expert_services_store(make_study):
    """Each *_many service, given bob's and carol's inputs, leaves exactly the
    rows (and the stored prioritisation results) of the one-expert services,
    replacing what was there."""
    priorities = {
        "bob": {
            "method": "direct",
            "weights": GOOD_DIRECT,
            "metric_priorities": {"Accuracy": {"method": "ahp", "judgments": [["AUC", "Success rate", 3]]}},
        },
        "carol": {"method": "lpr", "judgments": CAROL_JUDGMENTS},
    }
    ranges = {"bob": {"AUC": [0.6, 0.9]}, "carol": {"AUC": [0.7, 0.8], "Fold stdev": [0.2, 0.1]}}
    weights = {"bob": {"bob": 0.7, "carol": 0.3}, "carol": {"bob": 0.25, "carol": 0.75}}
    one, many = make_study("assessment", inputs=True), make_study("assessment", inputs=True, title="Many")
    for name in ("bob", "carol"):
        services.priorities_set(expert=one.experts[name], **priorities[name])
        services.ranges_set(expert=one.experts[name], ranges=ranges[name])
        services.peer_weights_set(expert=one.experts[name], weights=weights[name])
    # Local prioritisations not given are cleared, as priorities_set clears them.
    services.metric_prioritisation_set(
        expert=many.carol, attribute=many.attributes["Accuracy"], method="direct", weights={"Success rate": 1, "AUC": 2}
    )
    services.priorities_set_many(study=many.study, priorities={many.experts[n]: p for n, p in priorities.items()})
    services.ranges_set_many(study=many.study, ranges={many.experts[n]: r for n, r in ranges.items()})
    services.peer_weights_set_many(study=many.study, weights={many.experts[n]: w for n, w in weights.items()})
    assert _inputs(many) == _inputs(one)
    assert _inputs(many)["carol"]["priorities"]["result"]["consistency_ratio"] is not None
    assert _local(many.carol) == {}
    assert AttributeWeight.objects.filter(prioritisation__expert__study=many.study).count() == 6


def test_votes_set_many_stores_what_votes_set_stores(make_study):
    one, many = make_study("voting"), make_study("voting", title="Many")
    services.votes_set(expert=one.bob, attributes=["Flexibility"], metrics=["AUC"])
    services.votes_set(expert=one.carol, attributes=["Efficiency"])
    services.votes_set_many(
        study=many.study,
        attributes={many.bob: ["Flexibility"], many.carol: ["Efficiency"]},
        metrics={many.bob: ["AUC"]},
    )
    assert [_votes(many.bob), _votes(many.carol)] == [_votes(one.bob), _votes(one.carol)]
    assert _votes(many.carol) == (["Efficiency"], [])


@pytest.mark.parametrize(
    "call, field, fragment",
    [
        (
            lambda b: services.votes_set_many(
                study=b.study, attributes={b.bob: ["Accuracy"], b.carol: ["Nope"]}, metrics={}
            ),
            "attributes.bob",
            "main attribute",
        ),
        (
            lambda b: services.votes_set_many(study=b.study, attributes={b.bob: []}, metrics={b.carol: ["AUC", "AUC"]}),
            "metrics.carol",
            "given twice: AUC",
        ),
    ],
)
def test_votes_set_many_refuses_the_first_expert_in_order(make_study, unchanged, call, field, fragment):
    built = make_study("voting")
    errors = refused(unchanged, lambda: call(built))
    assert list(errors) == [field] and fragment in errors[field][0]


MANY_REFUSED = [
    # (service, its per-expert argument, entries by username, first field named, fragment of its message)
    ("priorities_set_many", "priorities", {"bob": {"weights": GOOD_DIRECT}}, "priorities.bob.method", "is required"),
    (
        "priorities_set_many",
        "priorities",
        {"bob": {"method": "direct", "weights": GOOD_DIRECT, "note": 1}},
        "priorities.bob.note",
        "is not a field",
    ),
    ("priorities_set_many", "priorities", {"bob": "direct"}, "priorities.bob", "must be an object"),
    (
        "priorities_set_many",
        "priorities",
        {"bob": {"method": "topsis"}},
        "priorities.bob.method",
        "'direct', 'ahp' or 'lpr'",
    ),
    (
        "priorities_set_many",
        "priorities",
        {
            "bob": {"method": "direct", "weights": GOOD_DIRECT},
            "carol": {"method": "ahp", "judgments": CAROL_JUDGMENTS[:2]},
        },
        "priorities.carol.judgments",
        "missing comparisons",
    ),
    (
        "priorities_set_many",
        "priorities",
        {"carol": {"method": "direct", "weights": {**GOOD_DIRECT, "Accuracy": 0}}, "bob": {"method": "x"}},
        "priorities.carol.weights.Accuracy",
        "must be positive",
    ),
    (
        "priorities_set_many",
        "priorities",
        {
            "bob": {
                "method": "direct",
                "weights": GOOD_DIRECT,
                "metric_priorities": {"Consistency": {"method": "direct"}},
            }
        },
        "priorities.bob.metric_priorities.Consistency.attribute",
        "one selected metric",
    ),
    ("ranges_set_many", "ranges", {"bob": {"AUC": [0.9, 0.9]}, "carol": {"AUC": "x"}}, "ranges.bob.AUC", "must differ"),
    (
        "ranges_set_many",
        "ranges",
        {"bob": {"AUC": [0.6, 0.9]}, "carol": [[0.6, 0.9]]},
        "ranges.carol",
        "must map metric names",
    ),
    (
        "ranges_set_many",
        "ranges",
        {"carol": {"Flexibility score": [1, 9]}},
        "ranges.carol.Flexibility score",
        "not a selected metric",
    ),
    (
        "peer_weights_set_many",
        "weights",
        {"bob": {"bob": 0.5, "carol": 0.5}, "carol": {"bob": 0.5, "carol": 0.4}},
        "weights.carol",
        "row sums to 0.9, must be 1",
    ),
    (
        "peer_weights_set_many",
        "weights",
        {"carol": {"bob": 0.5}, "bob": {"bob": 0.5, "carol": 0.4}},
        "weights.carol",
        "missing weights for carol: the row must rate every expert",
    ),
    (
        "peer_weights_set_many",
        "weights",
        {"bob": {"bob": 0.5, "dave": 0.5, "carol": 0}},
        "weights.bob.dave",
        "not an expert of this study",
    ),
    ("peer_weights_set_many", "weights", {"bob": 0.5}, "weights.bob", "must map every expert's username to a weight"),
]


@pytest.mark.parametrize("service, argument, entries, field, fragment", MANY_REFUSED)
def test_the_many_services_refuse_the_first_expert_naming_them(
    make_study, unchanged, service, argument, entries, field, fragment
):
    """The first expert refused, in the order given, is named with every
    message the one-expert service gives them; nothing is written."""
    built = make_study("assessment", inputs=True)
    inputs = {built.experts[name]: value for name, value in entries.items()}
    errors = refused(unchanged, lambda: getattr(services, service)(study=built.study, **{argument: inputs}))
    assert list(errors)[0] == field and fragment in " ".join(errors[field])
    assert {name.split(".")[1] for name in errors} == {field.split(".")[1]}


def test_the_many_services_refuse_an_expert_of_another_study(make_study, unchanged):
    built, other = make_study("assessment", inputs=True), make_study("assessment", inputs=True, title="Other")
    calls = [
        lambda: services.priorities_set_many(study=built.study, priorities={other.bob: {"method": "direct"}}),
        lambda: services.ranges_set_many(study=built.study, ranges={other.bob: {}}),
        lambda: services.peer_weights_set_many(study=built.study, weights={other.bob: {}}),
    ]
    for call in calls:
        errors = refused(unchanged, call)
        assert f"membership {other.bob.pk} is not an expert of this study" in " ".join(sum(errors.values(), []))


def test_the_many_services_keep_the_phase_rules(make_study, unchanged):
    built = make_study("voting")
    message = conflict(unchanged, lambda: services.ranges_set_many(study=built.study, ranges={built.bob: {}}))
    assert "Setting acceptable ranges is only possible in the assessment phase" in message
    closed = make_study("closed", title="Closed")
    message = conflict(
        unchanged, lambda: services.votes_set_many(study=closed.study, attributes={closed.bob: []}, metrics={})
    )
    assert "Voting is only possible in the voting phase" in message


@pytest.mark.parametrize("experts", [2, 6])
def test_the_many_services_queries_do_not_grow_with_the_experts(cast, django_assert_num_queries, experts):
    from django.contrib.auth import get_user_model

    study = services.study_create(designer=cast.alice, title="Many")
    users = [get_user_model().objects.create(username=f"e{i}") for i in range(experts)]
    # savepoint, lock, the accounts taken, one INSERT, its history (one INSERT), release
    with django_assert_num_queries(6):
        members = services.experts_add(study=study, users=users)
    accuracy = services.attribute_add(study=study, name="Accuracy")
    for name in ("AUC", "Recall"):
        services.metric_add(study=study, attribute=accuracy, name=name)
    services.study_open_voting(study=study)
    with django_assert_num_queries(10):  # 9, and the votes' history (one INSERT)
        services.votes_set_many(study=study, attributes={}, metrics={m: ["AUC"] for m in members})
    services.study_close_voting(study=study)
    share = {f"e{i}": 1 / experts for i in range(experts)}
    local = {"Accuracy": {"method": "direct", "weights": {"AUC": 1, "Recall": 2}}}
    priorities = {"method": "direct", "weights": {"Accuracy": 1}, "metric_priorities": local}
    with django_assert_num_queries(16):  # 12, and one history INSERT per table written
        services.priorities_set_many(study=study, priorities=dict.fromkeys(members, priorities))
    # 7, one SELECT and UPDATE confirming the ranges (issue 16), the history of both (two INSERTs)
    with django_assert_num_queries(11):
        services.ranges_set_many(study=study, ranges={m: {"AUC": [0.5, 0.9]} for m in members})
    with django_assert_num_queries(8):  # 6, and the history: the old weights deleted, the new
        services.peer_weights_set_many(study=study, weights=dict.fromkeys(members, share))
    assert PeerWeight.objects.filter(rater__study=study).count() == experts * experts
    assert MetricPrioritisation.objects.filter(expert__study=study).count() == experts


def test_experts_add_refuses_as_expert_add_does(make_study, cast, unchanged):
    built = make_study("draft")
    errors = refused(unchanged, lambda: services.experts_add(study=built.study, users=[cast.charlie, cast.bob]))
    assert errors == {"username": ["bob is already an expert of this study"]}
    errors = refused(unchanged, lambda: services.experts_add(study=built.study, users=[cast.charlie, cast.charlie]))
    assert errors == {"username": ["charlie is already an expert of this study"]}
    added = services.experts_add(study=built.study, users=[cast.charlie])
    assert [(m.user, m.role, m.status) for m in added] == [(cast.charlie, "expert", "active")]


def test_users_get_or_create_finds_and_creates_in_three_queries(cast, django_assert_num_queries):
    # The accounts, the look-alikes of the new names (usernames_taken), one INSERT.
    with django_assert_num_queries(3):
        users = services.users_get_or_create(usernames=["bob", "newcomer", "bob"])
    assert users[0] == cast.bob == users[2]
    assert users[1].username == "newcomer" and users[1].pk and not users[1].has_usable_password()


# --- measurements belong to their study ------------------------------------------------------


def test_measurements_carry_their_study(make_study):
    built = make_study("draft")
    other = make_study("draft", title="Other")
    services.measurements_set(study=built.study, measurements=[{"candidate": "J48", "metric": "AUC", "value": 0.5}])
    studies = Measurement.objects.filter(candidate__study=built.study).values_list("study_id", flat=True)
    assert set(studies) == {built.study.pk}
    assert Measurement.objects.filter(study=other.study).count() == len(MEASUREMENTS) * len(MEASUREMENTS["J48"])
    # Saved one at a time (the admin), a row takes its candidate's study.
    services.candidate_add(study=built.study, name="SVM")
    svm = Candidate.objects.get(study=built.study, name="SVM")
    row = Measurement(candidate=svm, metric=built.metrics["AUC"], value=0.3)
    row.save()
    assert row.study_id == built.study.pk


def test_measurement_list_reads_its_study_in_one_query(make_study, django_assert_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    built = make_study("draft")
    make_study("draft", title="Other")
    with django_assert_num_queries(1), CaptureQueriesContext(connection) as queries:
        rows = list(selectors.measurement_list(study=built.study))
    assert [row["candidate__name"] for row in rows] == ["J48"] * 5 + ["JRip"] * 5
    assert {(row["candidate__name"], row["metric__name"]): row["value"] for row in rows} == {
        (candidate, metric): value for candidate, values in MEASUREMENTS.items() for metric, value in values.items()
    }
    where = queries.captured_queries[0]["sql"].split("WHERE", 1)[1].split("ORDER BY")[0]
    assert where.strip() == f'"workspace_measurement"."study_id" = {built.study.pk}'


def test_measurements_set_upserts_in_a_constant_number_of_queries(make_study, django_assert_num_queries):
    built = make_study("draft")
    for count in (2, 6):
        entries = [
            {"candidate": c, "metric": m, "value": 0.1 * count}
            for c in MEASUREMENTS
            for m in list(MEASUREMENTS[c])[: count // 2]
        ]
        # savepoint, lock, candidates, metrics, the values before (the history's
        # old values), one upsert, its history (one INSERT), release
        with django_assert_num_queries(8):
            services.measurements_set(study=built.study, measurements=entries)
    assert _values(built)[("JRip", "Fold stdev")] == pytest.approx(0.6)
    assert _values(built)[("JRip", "Training time")] == MEASUREMENTS["JRip"]["Training time"]


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_existing_measurements_their_candidates_study():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("workspace", "0006_consent")], [("workspace", "0008_measurement_study")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(before).apps
        designer = apps.get_model("auth", "User").objects.create(username="designer")
        rows = {}
        for title in ("One", "Two"):
            study = apps.get_model("workspace", "Study").objects.create(title=title, designer=designer)
            attribute = apps.get_model("workspace", "QualityAttribute").objects.create(study=study, name="Accuracy")
            metric = apps.get_model("workspace", "Metric").objects.create(study=study, attribute=attribute, name="AUC")
            for name in ("J48", "JRip"):
                candidate = apps.get_model("workspace", "Candidate").objects.create(study=study, name=name)
                measurement = apps.get_model("workspace", "Measurement").objects.create(
                    candidate=candidate, metric=metric, value=0.5
                )
                rows[measurement.pk] = study.pk
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        measurements = executor.loader.project_state(after).apps.get_model("workspace", "Measurement")
        assert dict(measurements.objects.values_list("pk", "study_id")) == rows
        assert len(set(rows.values())) == 2
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
