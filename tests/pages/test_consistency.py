"""Issue 16, findings 1 and 7: inconsistent AHP judgments are confirmed by
the expert and flagged from the grid to the reminders; the designer's
default ranges are "not confirmed" until the expert saves or confirms them.
Neither blocks closing the assessment (METHOD.md 3 and 4, Decisions)."""

import html

import pytest
from django.core import mail
from django.test import Client

from engine.prioritisation import prioritise
from engine.rules import CONSISTENCY_THRESHOLD
from workspace import selectors, services
from workspace.models import AttributePrioritisation, Membership, Phase

# Accuracy 9x Consistency, Efficiency 9x Accuracy, Consistency 9x Efficiency: a cycle.
CYCLE = [["Accuracy", "Consistency", 9], ["Efficiency", "Accuracy", 9], ["Consistency", "Efficiency", 9]]
CYCLE_CR = prioritise("ahp", 3, judgments=[(0, 1, 9), (2, 0, 9), (1, 2, 9)]).consistency_ratio


def login(user):
    client = Client()
    client.force_login(user)
    return client


def body(response):
    return html.unescape(response.content.decode())


def pair(built, a, b):
    return f"ahp-{built.attributes[a].pk}-{built.attributes[b].pk}"


def cycle_post(built):
    return {
        f"local-{built.attributes['Accuracy'].pk}-method": "equal",
        "method": "ahp",
        pair(built, "Accuracy", "Consistency"): "9",
        pair(built, "Accuracy", "Efficiency"): "1/9",
        pair(built, "Consistency", "Efficiency"): "9",
    }


def test_the_cycle_is_inconsistent():
    assert CYCLE_CR > CONSISTENCY_THRESHOLD


def test_saving_inconsistent_judgments_asks_first_and_writes_nothing(make_study, cast):
    built = make_study(Phase.ASSESSMENT)
    url = f"/studies/{built.study.pk}/my/priorities/"
    response = login(cast.bob).post(url, cycle_post(built))
    page = body(response)
    assert response.status_code == 200
    assert "Not saved yet: your judgments are inconsistent." in page
    assert f"Attributes: inconsistent (CR {CYCLE_CR:.2f} > 0.10)" in page
    assert 'name="keep_inconsistent" value="1"' in page and "Keep my judgments as they are" in page
    assert not AttributePrioritisation.objects.filter(expert=built.bob).exists()


def test_keeping_inconsistent_judgments_saves_them_and_records_the_choice(make_study, cast):
    built = make_study(Phase.ASSESSMENT)
    url = f"/studies/{built.study.pk}/my/priorities/"
    response = login(cast.bob).post(url, {**cycle_post(built), "keep_inconsistent": "1"})
    assert response.status_code == 302
    saved = AttributePrioritisation.objects.get(expert=built.bob)
    assert saved.consistency_ratio == pytest.approx(CYCLE_CR)
    assert saved.inconsistency_acknowledged_at is not None


def test_consistent_judgments_save_at_once_without_an_acknowledgement(make_study, cast):
    built = make_study(Phase.ASSESSMENT)
    data = {
        f"local-{built.attributes['Accuracy'].pk}-method": "equal",
        "method": "ahp",
        pair(built, "Accuracy", "Consistency"): "3",
        pair(built, "Accuracy", "Efficiency"): "5",
        pair(built, "Consistency", "Efficiency"): "2",
    }
    response = login(cast.bob).post(f"/studies/{built.study.pk}/my/priorities/", data)
    assert response.status_code == 302
    assert AttributePrioritisation.objects.get(expert=built.bob).inconsistency_acknowledged_at is None


@pytest.fixture
def inconsistent_bob(make_study):
    """Every input given; bob's attribute judgments, through the service (as
    the API and bundles give them), are the inconsistent cycle."""
    built = make_study(Phase.ASSESSMENT, inputs=True)
    services.prioritisation_set(expert=built.bob, method="ahp", judgments=CYCLE)
    return built


def test_the_grid_flags_the_inconsistent_expert_with_the_ratio(inconsistent_bob, cast):
    built = inconsistent_bob
    page = body(login(cast.alice).get(f"/studies/{built.study.pk}/"))
    assert "Inconsistent" in page
    assert f"Given (AHP); consistency ratio of {CYCLE_CR:.2f} (at most 0.10)." in page
    assert "1 expert with inconsistent judgments" in page


def test_the_close_confirmation_lists_the_inconsistent_expert_but_closing_is_allowed(inconsistent_bob, cast):
    built = inconsistent_bob
    client = login(cast.alice)
    page = body(client.get(f"/studies/{built.study.pk}/phase/closed/"))
    assert "Every expert has given every input." in page
    assert f"bob:</strong> judgments inconsistent, consistency ratio of {CYCLE_CR:.2f} (at most 0.10)" in page
    assert "carol:</strong> judgments" not in page
    assert client.post(f"/studies/{built.study.pk}/phase/closed/").status_code == 302
    built.study.refresh_from_db()
    assert built.study.phase == Phase.CLOSED


def test_a_reminder_asks_the_inconsistent_expert_to_revise(
    inconsistent_bob, cast, django_capture_on_commit_callbacks, eager_celery
):
    built = inconsistent_bob
    experts = body(login(cast.alice).get(f"/studies/{built.study.pk}/experts/"))
    assert f"To review: judgments inconsistent, consistency ratio of {CYCLE_CR:.2f} (at most 0.10)" in experts
    assert experts.count("To review:") == 1
    cast.bob.email, cast.carol.email = "bob@example.org", "carol@example.org"
    cast.bob.save(), cast.carol.save()
    with django_capture_on_commit_callbacks(execute=True):  # the mails are sent by a task after the commit
        login(cast.alice).post(f"/studies/{built.study.pk}/experts/remind/", {"experts": ["bob", "carol"], "note": ""})
    bodies = {message.to[0]: message.body for message in mail.outbox}
    assert (
        f"Your priorities have a consistency ratio of {CYCLE_CR:.2f} (at most 0.10): please revise them."
        in bodies["bob@example.org"]
    )
    assert "consistency ratio" not in bodies["carol@example.org"]


# --- finding 7: default ranges -------------------------------------------------------------


def test_default_ranges_are_not_confirmed_until_the_expert_saves_them(make_study, cast):
    built = make_study(Phase.ASSESSMENT)
    # Every metric without a default has a range: nothing is missing, the defaults are unconfirmed.
    AUC = {"AUC": [0.7, 0.95]}
    services.ranges_set(expert=built.carol, ranges=AUC)
    Membership.objects.filter(pk=built.bob.pk).update(ranges_confirmed_at=None)
    from workspace.models import AcceptableRange, Metric

    AcceptableRange.objects.create(
        expert=built.bob, metric=Metric.objects.get(study=built.study, name="AUC"), least_acceptable=0.7, desired=0.95
    )
    grid = body(login(cast.alice).get(f"/studies/{built.study.pk}/"))
    assert "Default ranges (not confirmed)" in grid
    assert "1 expert not yet confirmed the default ranges." in grid
    steps = body(login(cast.bob).get(f"/studies/{built.study.pk}/my/ranges/"))
    assert "default ranges (not confirmed)" in steps and "Confirm these ranges" in steps
    home = body(login(cast.bob).get(f"/studies/{built.study.pk}/"))
    assert "Default ranges (not confirmed)" in home
    dashboard = body(login(cast.bob).get("/"))
    assert "Acceptable ranges: the designer's defaults, not confirmed yet" in dashboard
    assert not any("acceptable range" in gap for gap in selectors.missing_input_list(study=built.study)["bob"])
    page = body(login(cast.alice).get(f"/studies/{built.study.pk}/phase/closed/"))
    assert "bob:</strong> default ranges not confirmed (3 metrics)" in page
    assert "carol:</strong> default" not in page  # saving through the service confirms

    ranges = body(login(cast.bob).get(f"/studies/{built.study.pk}/my/ranges/"))
    assert "Confirm these ranges" in ranges
    posted = {}
    for metric in Metric.objects.filter(study=built.study, is_selected=True):
        pair = (0.7, 0.95) if metric.name == "AUC" else metric.default_range
        posted[f"least-{metric.pk}"], posted[f"desired-{metric.pk}"] = pair
    assert login(cast.bob).post(f"/studies/{built.study.pk}/my/ranges/", posted).status_code == 302
    grid = body(login(cast.alice).get(f"/studies/{built.study.pk}/"))
    assert "Default ranges (not confirmed)" not in grid
    assert Membership.objects.get(pk=built.bob.pk).ranges_confirmed_at is not None


# --- the run: recorded in the snapshot, stated on the run page and in the document --------------


def test_the_run_records_each_ratio_and_flags_the_inconsistent_one(inconsistent_bob, cast):
    from engine import selectors as engine_selectors
    from engine import services as engine_services

    built = inconsistent_bob
    carol_cr = AttributePrioritisation.objects.get(expert=built.carol).consistency_ratio
    services.study_close_assessment(study=built.study)
    run = engine_services.run_launch(study=built.study, launched_by=cast.alice)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert [(e["expert"], e["attribute"]) for e in run.snapshot["consistency"]] == [("bob", None), ("carol", None)]
    # Changing live inputs after the launch does not change what the run states.
    AttributePrioritisation.objects.filter(expert=built.bob).update(consistency_ratio=0.01)
    document = engine_selectors.results_document(run=run)
    assert document["consistency"] == {
        "threshold": CONSISTENCY_THRESHOLD,
        "prioritisations": [
            {
                "expert": "bob",
                "attribute": None,
                "method": "ahp",
                "consistency_ratio": pytest.approx(CYCLE_CR),
                "inconsistent": True,
                "acknowledged_at": None,
            },
            {
                "expert": "carol",
                "attribute": None,
                "method": "ahp",
                "consistency_ratio": pytest.approx(carol_cr),
                "inconsistent": False,
                "acknowledged_at": None,
            },
        ],
    }
    assert list(document)[-2:] == ["consistency", "candidates"]
    # The stored bytes say the same.
    import json

    assert json.loads(engine_selectors.results_json(run=run))["consistency"]["prioritisations"][0]["inconsistent"]
    page = body(login(cast.alice).get(f"/runs/{run.pk}/"))
    assert "Consistency of the judgments" in page
    assert f"{CYCLE_CR:.3f}" in page and f"{carol_cr:.3f}" in page
    assert page.count("badge--step-inconsistent") == 1
    assert "Inconsistent judgments:</strong> bob prioritised with a consistency ratio above 0.10" in page


def test_the_api_accepts_inconsistent_judgments_and_flags_them(make_study, cast, api):
    built = make_study(Phase.ASSESSMENT)
    response = api(cast.bob).put(
        f"/api/v1/studies/{built.study.pk}/my/priorities/", {"method": "ahp", "judgments": CYCLE}, format="json"
    )
    assert response.status_code == 200, response.content
    saved = api(cast.bob).get(f"/api/v1/studies/{built.study.pk}/my/priorities/").json()
    assert saved["result"]["consistency_ratio"] == pytest.approx(CYCLE_CR)
    assert saved["result"]["inconsistent"] is True
    # The designer reads the same ratio and flag with the expert's inputs.
    read = api(cast.alice).get(f"/api/v1/studies/{built.study.pk}/inputs/bob/").json()
    assert read["priorities"]["result"]["consistency_ratio"] == pytest.approx(CYCLE_CR)
    assert read["priorities"]["result"]["inconsistent"] is True


def test_ranges_in_a_bundle_count_as_confirmed_and_an_expert_without_stays_unconfirmed(case_study, db):
    from workspace.bundles import study_import_bundle

    experts = case_study["experts"]
    metric = case_study["metrics"][0]
    # In assessment, every expert but the first gives a range; the first keeps the defaults.
    case_study["phase"] = "assessment"
    case_study["ranges"] = {name: {metric["name"]: metric["default_range"]} for name in experts[1:]}
    study = study_import_bundle(bundle=case_study)
    confirmed = {m.user.username: m.ranges_confirmed_at is not None for m in selectors.expert_list(study=study)}
    assert confirmed == {name: name != experts[0] for name in experts}
    selected = selectors.selected_metrics(study).count()  # every metric of the demo has a default range
    assert selectors.input_note_list(study=study) == {experts[0]: {"ranges_unconfirmed": float(selected)}}


def test_a_closed_bundle_confirms_every_experts_ranges(case_study, db):
    from workspace.bundles import study_import_bundle

    assert case_study["phase"] == "closed" and case_study["ranges"] == {}  # the demo: defaults only
    study = study_import_bundle(bundle=case_study)
    assert all(m.ranges_confirmed_at is not None for m in selectors.expert_list(study=study))
    assert selectors.input_note_list(study=study) == {}
