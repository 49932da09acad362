"""Issue 31 (item 2, finding 1): a metric made elicited once the experts
have set their ranges. Its values become each expert's own, on another
scale (an expected cost, lower is better), so every expert's range of it
is asked again: the close check names them, the ranges page shows each
expert's values against their old range, and once confirmed or changed
the run is not all-vetoed (docs/method.md 7.4)."""

import copy
import io
import json

import pytest
from django.urls import reverse

from evaluation import services
from evaluation.models import ElicitationAnswers
from tests.api.conftest import launch_and_finish
from tests.fixtures import VOTES, complete_assessment
from workspace import selectors
from workspace import services as workspace_services
from workspace.bundles import study_export_bundle, study_import_bundle
from workspace.errors import InvalidInput, PhaseConflict
from workspace.models import AcceptableRange

from .test_elicited import TWO_CLASSES

pytestmark = pytest.mark.django_db

# Each expert's costs of taking A for B and B for A (the stored weights are minus them).
COSTS = {"bob": [0.8, 0.6], "carol": [0.6, 0.8]}
# By hand: J48 takes 1 of 10 instances from A to B and 3 from B to A; JRip 3 and 0.
OWN = {
    "bob": {"J48": 0.8 * 0.1 + 0.6 * 0.3, "JRip": 0.8 * 0.3},
    "carol": {"J48": 0.6 * 0.1 + 0.8 * 0.3, "JRip": 0.6 * 0.3},
}
UNIT = "expected cost per instance"


KINDS_RULE = "(weighted accuracy is higher-is-better, expected cost lower-is-better)"


def ready_study(make_study):
    """The standard study in assessment, every input given (AUC ranges on the
    typed AUC, 0.88 and 0.9), a two-class prediction set uploaded."""
    built = make_study()
    prediction_set = services.prediction_set_import(
        study=built.study, stream=io.BytesIO(TWO_CLASSES.encode()), name="two.csv", uploaded_by=None
    )
    workspace_services.study_open_voting(study=built.study)
    for username, ballot in VOTES.items():
        workspace_services.votes_set(expert=built.experts[username], **ballot)
    workspace_services.study_close_voting(study=built.study)
    built.refresh()
    complete_assessment(built)
    return built, prediction_set


def made_elicited(built, prediction_set):
    """AUC made an off-diagonal (cost) elicited metric in the assessment, and both experts' answers finished."""
    elicited = services.elicited_metric_set(
        metric=built.metrics["AUC"], kind="offdiagonal", prediction_set=prediction_set.pk,
        reference_candidate="J48", epsilon=0.1,
    )  # fmt: skip
    for name, costs in COSTS.items():
        ElicitationAnswers.objects.create(
            elicited_metric=elicited, expert=built.experts[name], answers="1", weights=[-c for c in costs]
        )
    return elicited


def test_made_elicited_the_ranges_are_asked_again_and_closing_names_them(make_study):
    built, prediction_set = ready_study(make_study)
    assert selectors.missing_input_list(study=built.study) == {}  # "Ready to close"
    made_elicited(built, prediction_set)
    auc = built.metrics["AUC"]
    auc.refresh_from_db()
    # The metric follows its values: an expected cost, lower is better, no default range for the old scale.
    assert (auc.better, auc.unit, auc.default_range) == ("lower", UNIT, None)
    # Each old range is kept, flipped to stay a valid lower-is-better range, and to confirm.
    stored = {r.expert.user.username: (r.least_acceptable, r.desired, r.needs_confirmation) for r in auc.ranges.all()}
    assert stored == {"bob": (0.95, 0.7, True), "carol": (0.9, 0.75, True)}
    gaps = selectors.missing_input_list(study=built.study)
    words = (
        "confirmation of their acceptable range for AUC (its values changed: it was made elicited, or its "
        "elicitation changed or stopped)"
    )
    assert gaps == {"bob": [words], "carol": [words]}
    with pytest.raises(PhaseConflict) as refused:
        workspace_services.study_close_assessment(study=built.study)
    assert f"bob: {words}; carol: {words}" in str(refused.value)
    # The expert sees their own values against the old range, and a proposal from their spread.
    [to_confirm] = selectors.ranges_to_confirm_list(study=built.study, expert=built.bob)
    assert to_confirm.range == [0.95, 0.7]
    assert to_confirm.own_values == pytest.approx(OWN["bob"])
    assert to_confirm.proposed == [0.262, 0.24]  # a tenth of the spread beyond the worst; the best


def test_confirmed_or_changed_on_the_page_the_run_is_not_all_vetoed(make_study, client):
    built, prediction_set = ready_study(make_study)
    made_elicited(built, prediction_set)
    auc = built.metrics["AUC"]
    # The study home is not "Ready to close": it names the ranges to confirm.
    client.force_login(built.study.designer)
    home = client.get(reverse("study_home", args=[built.study.pk])).content.decode()
    assert "Ready to close" not in home
    assert "Ranges to confirm, their metric&#x27;s values having changed (made elicited): bob: AUC; carol: AUC." in home
    client.force_login(built.bob.user)
    url = reverse("expert_ranges", args=[built.study.pk])
    page = client.get(url).content.decode()
    assert "Ranges to confirm: AUC." in page
    assert "Your range, 0.95 to 0.7, was set before AUC" in page
    assert "run from <strong>0.24</strong> to <strong>0.26</strong> expected cost per instance" in page
    assert "least acceptable <strong>0.262</strong>, desired <strong>0.24</strong>" in page
    # Bob changes his range on the page: his J48 (0.26) is vetoed, his JRip (0.24) is not.
    saved = client.post(url, {f"least-{auc.pk}": "0.25", f"desired-{auc.pk}": "0.2"})
    assert saved.status_code == 302
    assert AcceptableRange.objects.get(expert=built.bob, metric=auc).needs_confirmation is False
    assert "Ranges to confirm" not in client.get(url).content.decode()
    assert list(selectors.missing_input_list(study=built.study)) == ["carol"]
    # Carol confirms hers as proposed, through the service the API uses.
    [carol] = selectors.ranges_to_confirm_list(study=built.study, expert=built.carol)
    workspace_services.ranges_set(expert=built.carol, ranges={"AUC": carol.proposed, "Success rate": [0.82, 0.9]})
    assert selectors.missing_input_list(study=built.study) == {}
    workspace_services.study_close_assessment(study=built.study)
    run = launch_and_finish(built, built.study.designer)
    by_name = {c["name"]: c for c in run.results["candidates"]}
    assert not by_name["JRip"]["vetoed"] and by_name["JRip"]["cef"] > 0
    column = run.results["metrics"].index("AUC")
    # J48 is vetoed by bob (expert 0) alone, on his own value.
    assert by_name["J48"]["vetoes"] == [[0, column, pytest.approx(OWN["bob"]["J48"]), 0.25, 0.2]]


def test_the_design_changed_again_asks_again_and_removing_it_too(make_study):
    built, prediction_set = ready_study(make_study)
    elicited = made_elicited(built, prediction_set)
    workspace_services.ranges_set(expert=built.bob, ranges={"AUC": [0.3, 0.2]})
    confirmed = AcceptableRange.objects.get(expert=built.bob, metric=built.metrics["AUC"])
    assert not confirmed.needs_confirmation
    services.elicited_metric_set(
        metric=elicited.metric, kind="diagonal", prediction_set=prediction_set.pk, reference_candidate="J48",
        epsilon=0.1,
    )  # fmt: skip
    confirmed.refresh_from_db()
    # A weighted accuracy: higher is better again, the range flipped back, to confirm.
    assert (confirmed.least_acceptable, confirmed.desired, confirmed.needs_confirmation) == (0.2, 0.3, True)
    assert elicited.metric.unit == "weighted accuracy"
    workspace_services.ranges_set(expert=built.bob, ranges={"AUC": [0.2, 0.3]})
    services.elicited_metric_remove(metric=elicited.metric)
    # The measured values again (saving ranges replaces the rows).
    assert AcceptableRange.objects.get(expert=built.bob, metric=elicited.metric).needs_confirmation


def test_a_bundle_carries_the_ranges_to_confirm(make_study):
    """export → import → export is the identity with ranges to confirm
    (``ranges_to_confirm``), and the imported study asks them again."""
    built, prediction_set = ready_study(make_study)
    made_elicited(built, prediction_set)
    workspace_services.ranges_set(expert=built.carol, ranges={"AUC": [0.35, 0.1]})  # carol confirms hers
    first = study_export_bundle(study=built.study)
    assert first["ranges_to_confirm"] == {"bob": ["AUC"]}
    assert first["ranges"]["bob"] == {"AUC": [0.95, 0.7]}
    assert [m for m in first["metrics"] if m["name"] == "AUC"][0]["better"] == "lower"
    copied = study_import_bundle(bundle=copy.deepcopy(first))
    assert json.dumps(study_export_bundle(study=copied)) == json.dumps(first)
    asked = selectors.to_confirm().filter(expert__study=copied)
    assert list(asked.values_list("expert__user__username", "metric__name")) == [("bob", "AUC")]
    bad = copy.deepcopy(first)
    bad["ranges_to_confirm"] = {"bob": ["Success rate"]}
    with pytest.raises(InvalidInput) as refused:
        study_import_bundle(bundle=bad)
    assert refused.value.errors == {"ranges_to_confirm.bob": ["no range of theirs in the bundle for Success rate"]}


@pytest.mark.django_db(transaction=True)
def test_the_migration_turns_an_off_diagonal_metric_into_a_cost_and_asks_its_ranges_again():
    """evaluation 0008: an off-diagonal metric's default range and ranges,
    on minus the cost until then, are negated onto the cost (lower is
    better), and in a study still open its ranges are to confirm."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("evaluation", "0007_elicitation_typed_ratios"), ("workspace", "0020_range_needs_confirmation")]
    after = [("evaluation", "0008_elicited_units")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(before).apps
        model = apps.get_model
        designer = model("auth", "User").objects.create(username="designer")
        bob = model("auth", "User").objects.create(username="bob")
        study = model("workspace", "Study").objects.create(title="One", designer=designer, phase="assessment")
        attribute = model("workspace", "QualityAttribute").objects.create(study=study, name="Accuracy")
        metric = model("workspace", "Metric").objects.create(
            study=study, attribute=attribute, name="Cost", default_least_acceptable=-0.3, default_desired=-0.1
        )
        candidate = model("workspace", "Candidate").objects.create(study=study, name="J48")
        expert = model("workspace", "Membership").objects.create(study=study, user=bob, role="expert")
        model("workspace", "AcceptableRange").objects.create(
            expert=expert, metric=metric, least_acceptable=-0.2, desired=-0.05
        )
        prediction_set = model("evaluation", "PredictionSet").objects.create(
            study=study, name="p.csv", row_count=1, byte_count=1
        )
        model("evaluation", "ElicitedMetric").objects.create(
            metric=metric, kind="offdiagonal", prediction_set=prediction_set, reference_candidate=candidate, epsilon=0.1
        )
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        apps = executor.loader.project_state(after).apps
        migrated = apps.get_model("workspace", "Metric").objects.get(pk=metric.pk)
        assert (migrated.better, migrated.unit) == ("lower", UNIT)
        assert (migrated.default_least_acceptable, migrated.default_desired) == (0.3, 0.1)
        stored = apps.get_model("workspace", "AcceptableRange").objects.get(metric_id=metric.pk)
        assert (stored.least_acceptable, stored.desired, stored.needs_confirmation) == (0.2, 0.05, True)
        assert apps.get_model("workspace", "Study").objects.get(pk=study.pk).input_version == 1
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def test_an_elicited_metric_s_unit_and_direction_follow_its_kind_only(make_study):
    built = make_study()
    prediction_set = services.prediction_set_import(
        study=built.study, stream=io.BytesIO(TWO_CLASSES.encode()), name="two.csv", uploaded_by=None
    )
    auc = built.metrics["AUC"]
    services.elicited_metric_set(
        metric=auc, kind="offdiagonal", prediction_set=prediction_set.pk, reference_candidate="J48", epsilon=0.1
    )
    with pytest.raises(InvalidInput) as refused:
        workspace_services.metric_update(metric=auc, better="higher", unit="ratio")
    assert refused.value.errors == {
        "better": [f"AUC is elicited: its direction follows its kind {KINDS_RULE}"],
        "unit": [f"AUC is elicited: its unit follows its kind {KINDS_RULE}"],
    }
    # The designer's form sends them unchanged with a new name: accepted.
    workspace_services.metric_update(metric=auc, name="Cost", better="lower", unit=UNIT, default_range=[0.4, 0.1])
    auc.refresh_from_db()
    assert (auc.name, auc.better, auc.default_range) == ("Cost", "lower", (0.4, 0.1))
