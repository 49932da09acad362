"""The database itself refuses what the services refuse, for writes that go
around them (admin, shell, a future bug). Each refused write runs in its own
``transaction.atomic()`` so the test database stays usable, and each case
first shows that the valid counterpart is accepted, so the refusal is the
constraint and not some other error."""

import pytest
from django.db import IntegrityError, transaction

from workspace.models import (
    AcceptableRange,
    AttributeJudgment,
    AttributePrioritisation,
    AttributeVote,
    AttributeWeight,
    Measurement,
    Membership,
    Metric,
    MetricJudgment,
    MetricPrioritisation,
    MetricVote,
    PeerWeight,
    QualityAttribute,
    Study,
)

pytestmark = pytest.mark.django_db


def refused_by_database(create):
    """``create()`` must raise IntegrityError and leave no row behind."""
    with pytest.raises(IntegrityError), transaction.atomic():
        create()


@pytest.fixture
def built(make_study):
    return make_study("assessment")


def test_duplicate_attribute_vote(built):
    AttributeVote.objects.create(expert=built.carol, attribute=built.attributes["Flexibility"])
    refused_by_database(
        lambda: AttributeVote.objects.create(expert=built.carol, attribute=built.attributes["Flexibility"])
    )
    assert AttributeVote.objects.filter(expert=built.carol).count() == 1
    # the same attribute by another expert is fine
    AttributeVote.objects.create(expert=built.bob, attribute=built.attributes["Flexibility"])


def test_duplicate_metric_vote(built):
    MetricVote.objects.create(expert=built.bob, metric=built.metrics["AUC"])
    refused_by_database(lambda: MetricVote.objects.create(expert=built.bob, metric=built.metrics["AUC"]))
    assert MetricVote.objects.filter(expert=built.bob).count() == 1


@pytest.fixture
def prioritisation(built):
    return AttributePrioritisation.objects.create(expert=built.bob, method="ahp")


def test_duplicate_judgment_for_a_pair(built, prioritisation):
    accuracy, consistency = built.attributes["Accuracy"], built.attributes["Consistency"]
    AttributeJudgment.objects.create(prioritisation=prioritisation, row=accuracy, column=consistency, value=3)
    refused_by_database(
        lambda: AttributeJudgment.objects.create(
            prioritisation=prioritisation, row=accuracy, column=consistency, value=5
        )
    )
    assert list(AttributeJudgment.objects.filter(prioritisation=prioritisation).values_list("value", flat=True)) == [
        3.0
    ]


def test_duplicate_judgment_in_reverse_orientation(built, prioritisation):
    # (Consistency, Accuracy) is the same pair as (Accuracy, Consistency).
    accuracy, consistency = built.attributes["Accuracy"], built.attributes["Consistency"]
    AttributeJudgment.objects.create(prioritisation=prioritisation, row=accuracy, column=consistency, value=3)
    refused_by_database(
        lambda: AttributeJudgment.objects.create(
            prioritisation=prioritisation, row=consistency, column=accuracy, value=1 / 3
        )
    )
    assert AttributeJudgment.objects.filter(prioritisation=prioritisation).count() == 1


def test_duplicate_metric_judgment_for_a_pair(built):
    local = MetricPrioritisation.objects.create(expert=built.bob, attribute=built.attributes["Accuracy"], method="lpr")
    success, auc = built.metrics["Success rate"], built.metrics["AUC"]
    MetricJudgment.objects.create(prioritisation=local, row=success, column=auc, value=2)
    refused_by_database(lambda: MetricJudgment.objects.create(prioritisation=local, row=success, column=auc, value=2))
    refused_by_database(lambda: MetricJudgment.objects.create(prioritisation=local, row=auc, column=auc, value=1))
    assert MetricJudgment.objects.filter(prioritisation=local).count() == 1


def test_judgment_on_the_diagonal(built, prioritisation):
    accuracy = built.attributes["Accuracy"]
    refused_by_database(
        lambda: AttributeJudgment.objects.create(prioritisation=prioritisation, row=accuracy, column=accuracy, value=1)
    )
    assert not AttributeJudgment.objects.exists()


@pytest.mark.parametrize("value", [10, 0.1, 0, -1])
def test_judgment_off_the_scale(built, prioritisation, value):
    accuracy, consistency = built.attributes["Accuracy"], built.attributes["Consistency"]
    refused_by_database(
        lambda: AttributeJudgment.objects.create(
            prioritisation=prioritisation, row=accuracy, column=consistency, value=value
        )
    )
    # 1/9 typed as 0.1111 and 9 are on the scale
    AttributeJudgment.objects.create(prioritisation=prioritisation, row=accuracy, column=consistency, value=0.1111)
    AttributeJudgment.objects.create(
        prioritisation=prioritisation, row=built.attributes["Flexibility"], column=accuracy, value=9
    )


def test_zero_attribute_weight(built):
    prioritisation = AttributePrioritisation.objects.create(expert=built.bob, method="direct")
    refused_by_database(
        lambda: AttributeWeight.objects.create(
            prioritisation=prioritisation, attribute=built.attributes["Accuracy"], given=5, weight=0
        )
    )
    refused_by_database(
        lambda: AttributeWeight.objects.create(
            prioritisation=prioritisation, attribute=built.attributes["Accuracy"], given=0, weight=0.5
        )
    )
    AttributeWeight.objects.create(
        prioritisation=prioritisation, attribute=built.attributes["Accuracy"], given=5, weight=0.5
    )


def test_duplicate_range_for_an_expert_and_metric(built):
    AcceptableRange.objects.create(expert=built.bob, metric=built.metrics["AUC"], least_acceptable=0.6, desired=0.9)
    refused_by_database(
        lambda: AcceptableRange.objects.create(
            expert=built.bob, metric=built.metrics["AUC"], least_acceptable=0.5, desired=0.8
        )
    )
    assert list(AcceptableRange.objects.values_list("least_acceptable", "desired")) == [(0.6, 0.9)]
    AcceptableRange.objects.create(expert=built.carol, metric=built.metrics["AUC"], least_acceptable=0.5, desired=0.8)


def test_range_with_equal_bounds(built):
    refused_by_database(
        lambda: AcceptableRange.objects.create(
            expert=built.bob, metric=built.metrics["AUC"], least_acceptable=0.7, desired=0.7
        )
    )
    assert not AcceptableRange.objects.exists()


@pytest.mark.parametrize("weight", [0, 0.0, -0.1, 1.5])
def test_peer_weight_out_of_range(built, weight):
    refused_by_database(lambda: PeerWeight.objects.create(rater=built.bob, ratee=built.carol, weight=weight))
    assert not PeerWeight.objects.exists()


def test_duplicate_peer_weight(built):
    PeerWeight.objects.create(rater=built.bob, ratee=built.carol, weight=0.5)
    refused_by_database(lambda: PeerWeight.objects.create(rater=built.bob, ratee=built.carol, weight=0.4))
    assert PeerWeight.objects.count() == 1


def test_second_designer_membership(built, cast):
    refused_by_database(lambda: Membership.objects.create(study=built.study, user=cast.charlie, role="designer"))
    assert list(
        Membership.objects.filter(study=built.study, role="designer").values_list("user__username", flat=True)
    ) == ["alice"]
    # charlie may be an expert, and designer of another study
    Membership.objects.create(study=built.study, user=cast.charlie, role="expert")


def test_same_role_twice(built, cast):
    refused_by_database(lambda: Membership.objects.create(study=built.study, user=cast.bob, role="expert"))
    refused_by_database(lambda: Membership.objects.create(study=built.study, user=cast.bob, role="reviewer"))


def test_duplicate_measurement(built):
    refused_by_database(
        lambda: Measurement.objects.create(candidate=built.candidates["J48"], metric=built.metrics["AUC"], value=0.1)
    )
    assert Measurement.objects.get(candidate=built.candidates["J48"], metric=built.metrics["AUC"]).value == 0.88


def test_duplicate_names(built):
    refused_by_database(lambda: QualityAttribute.objects.create(study=built.study, name="Accuracy"))
    refused_by_database(lambda: QualityAttribute.objects.create(study=built.study, name=""))
    refused_by_database(lambda: QualityAttribute.objects.create(study=built.study, name="Speed", kind="primary"))
    refused_by_database(
        lambda: Metric.objects.create(study=built.study, attribute=built.attributes["Accuracy"], name="AUC")
    )


@pytest.mark.parametrize(
    "better, least, desired",
    [
        ("higher", 0.9, 0.8),
        ("lower", 0.8, 0.9),
        ("higher", 0.8, 0.8),
        ("sideways", None, None),
        ("higher", 0.8, None),
        ("lower", None, 0.8),
    ],
)
def test_metric_default_range_against_its_direction(built, better, least, desired):
    refused_by_database(
        lambda: Metric.objects.create(
            study=built.study,
            attribute=built.attributes["Accuracy"],
            name="Recall",
            better=better,
            default_least_acceptable=least,
            default_desired=desired,
        )
    )


def test_study_phase_must_be_known(built):
    refused_by_database(lambda: Study.objects.filter(pk=built.study.pk).update(phase="archived"))
    built.study.refresh_from_db()
    assert built.study.phase == "assessment"
