"""The expert's four steps (/studies/{id}/my/...): prefilled from what is
stored, saving exactly what the API twin saves, refusals under the field
they are about with nothing written, read-only outside the phase, who may
open them, the live previews against engine.prioritisation and engine.core,
and a fixed number of queries per page."""

import copy
import html
import math
import re
from fractions import Fraction

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from engine.prioritisation import prioritise
from tests.fixtures import CAROL_JUDGMENTS
from workspace import services
from workspace.forms.expert import scale_point
from workspace.models import (
    AcceptableRange,
    AttributePrioritisation,
    Candidate,
    Measurement,
    Membership,
    Metric,
    Phase,
    QualityAttribute,
    Study,
)

PAGES = ["votes", "priorities", "ranges", "peer-weights"]


def url(built, step, preview=False):
    return f"/studies/{built.study.pk}/my/{step}/" + ("preview/" if preview else "")


def api_url(built, step):
    return f"/api/v1/studies/{built.study.pk}/my/{step}/"


@pytest.fixture
def client_of(cast):
    def make(user):
        client = Client()
        client.force_login(user)
        return client

    return make


def body(response):
    return html.unescape(response.content.decode())


def checked(html, name, value):
    """Whether the input ``name`` with ``value`` is rendered checked."""
    for tag in re.findall(r"<input[^>]*>", html):
        if f'name="{name}"' in tag and f'value="{value}"' in tag:
            return " checked" in tag
    raise AssertionError(f"no input {name}={value}")


def input_value(html, name):
    tag = next(t for t in re.findall(r"<input[^>]*>", html) if f'name="{name}"' in t)
    found = re.search(r'value="([^"]*)"', tag)
    return found.group(1) if found else None


def pair(built, a, b, method="ahp", prefix=""):
    return f"{prefix}{method}-{built.attributes[a].pk}-{built.attributes[b].pk}"


def direct(built, name):
    return f"direct-{built.attributes[name].pk}"


# --- prefilled from what is stored ---------------------------------------------------------


def test_votes_page_is_prefilled_with_the_votes_cast(make_study, client_of, cast):
    built = make_study(Phase.VOTING)
    html = body(client_of(cast.bob).get(url(built, "votes")))
    assert checked(html, "attributes", "Efficiency") and not checked(html, "attributes", "Flexibility")
    assert "Efficiency matters" in html  # the definitions are shown
    assert f"/studies/{built.study.pk}/discussion/#attribute-{built.attributes['Efficiency'].pk}" in html
    assert f"/studies/{built.study.pk}/discussion/#metric-{built.metrics['AUC'].pk}" in html
    assert 'aria-current="step"' in html and "Save my votes" in html


def test_priorities_page_is_prefilled_with_the_stored_judgments_and_weights(make_study, client_of, cast):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    carol = body(client_of(cast.carol).get(url(built, "priorities")))
    assert checked(carol, "method", "ahp")
    assert checked(carol, pair(built, "Accuracy", "Consistency"), "3")
    assert checked(carol, pair(built, "Accuracy", "Efficiency"), "5")
    assert checked(carol, pair(built, "Consistency", "Efficiency"), "2")
    expected = prioritise("ahp", 3, judgments=[(0, 1, 3), (0, 2, 5), (1, 2, 2)])
    assert f"CR {expected.consistency_ratio:.2f}" in carol

    bob = body(client_of(cast.bob).get(url(built, "priorities")))
    assert checked(bob, "method", "direct")
    assert [input_value(bob, direct(built, n)) for n in ("Accuracy", "Consistency", "Efficiency")] == ["50", "30", "20"]
    assert "50.0 %" in bob  # the stored result, computed again from the prefill
    assert f"#attribute-{built.attributes['Consistency'].pk}" in bob
    assert f"#metric-{built.metrics['AUC'].pk}" in bob  # Accuracy has two metrics: its local section


def test_a_stored_judgment_off_the_scale_is_shown_at_the_nearest_point_and_said_so(
    make_study,
    client_of,
    cast,
):
    built = make_study(Phase.ASSESSMENT)
    # The API takes any value in 1/9..9; the page's scale has 17 points.
    services.prioritisation_set(
        expert=built.bob,
        method="lpr",
        judgments=[
            ["Accuracy", "Consistency", 2.5],
            ["Efficiency", "Accuracy", 1],
            ["Consistency", "Efficiency", 1],
        ],
    )
    html = body(client_of(cast.bob).get(url(built, "priorities")))
    assert checked(html, "method", "lpr")
    assert checked(html, pair(built, "Accuracy", "Consistency", "lpr"), "3")  # nearest in log space
    assert checked(html, pair(built, "Accuracy", "Efficiency", "lpr"), "1")
    assert "Accuracy / Consistency: 2.5 is shown as the nearest point, 3" in html


def test_a_stored_judgment_at_a_tie_is_shown_at_the_smaller_point_as_the_engine_rounds_it(
    make_study,
    client_of,
    cast,
):
    built = make_study(Phase.ASSESSMENT)
    # sqrt(12) lies as far from 3 as from 4, sqrt(72) from 8 as from 9
    # (engine.rules.nearest_scale_point: a tie goes to the smaller point).
    services.prioritisation_set(
        expert=built.bob,
        method="ahp",
        judgments=[
            ["Accuracy", "Consistency", math.sqrt(12)],
            ["Accuracy", "Efficiency", math.sqrt(72)],
            ["Consistency", "Efficiency", 1],
        ],
    )
    html = body(client_of(cast.bob).get(url(built, "priorities")))
    assert checked(html, pair(built, "Accuracy", "Consistency"), "3")
    assert checked(html, pair(built, "Accuracy", "Efficiency"), "8")
    assert "Accuracy / Consistency: 3.464 is shown as the nearest point, 3" in html
    assert "Accuracy / Efficiency: 8.485 is shown as the nearest point, 8" in html


def test_ranges_page_is_prefilled_with_mine_or_the_default(make_study, client_of, cast):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    html = body(client_of(cast.bob).get(url(built, "ranges")))
    auc, success, time = (built.metrics[n].pk for n in ("AUC", "Success rate", "Training time"))
    assert (input_value(html, f"least-{auc}"), input_value(html, f"desired-{auc}")) == ("0.7", "0.95")  # mine
    assert (input_value(html, f"least-{success}"), input_value(html, f"desired-{success}")) == ("0.8", "0.95")
    assert "lower is better</span>:\n        least acceptable above desired" in html
    assert f"desired-{built.metrics['Flexibility score'].pk}" not in html  # not selected
    assert "no candidate would be vetoed" in html
    assert f"#metric-{time}" in html


def test_peer_weights_page_is_prefilled_in_percent_with_self_confidence(make_study, client_of, cast):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    html = body(client_of(cast.bob).get(url(built, "peer-weights")))
    assert input_value(html, f"peer-{built.bob.pk}") == "60"
    assert input_value(html, f"peer-{built.carol.pk}") == "40"
    assert "bob, self-confidence (%)" in html and ">carol (%)<" in html
    assert "Total: <output>100</output>" in html


def test_step_indicator_marks_each_step_done_or_missing(make_study, client_of, cast):
    built = make_study(Phase.ASSESSMENT)
    services.peer_weights_set(expert=built.bob, weights={"bob": 0.5, "carol": 0.5})
    steps = client_of(cast.bob).get(url(built, "ranges")).context["steps"]
    # Votes cast; no prioritisation; AUC (no default) has no range; peer weights given.
    assert [s["state"] for s in steps] == ["done", "missing", "missing", "done"]
    carol_steps = client_of(cast.carol).get(url(built, "ranges")).context["steps"]
    assert [s["state"] for s in carol_steps] == ["missing", "missing", "missing", "missing"]


# --- a POST saves exactly what the API twin saves ------------------------------------------


def twin_check(built, api, cast, step, expected):
    """Bob saved through the page: his GET equals what the API answers to
    carol's PUT of ``expected`` (the same input through the API twin)."""
    page_saved = api(cast.bob).get(api_url(built, step))
    assert page_saved.status_code == 200
    twin = api(cast.carol).put(api_url(built, step), expected, format="json")
    assert twin.status_code == 200, twin.json()
    assert page_saved.json() == twin.json()
    return page_saved.json()


def test_votes_post_saves_what_the_api_saves(make_study, client_of, cast, api):
    built = make_study(Phase.VOTING)
    ballot = {"attributes": ["Flexibility"], "metrics": ["AUC", "Fold stdev"]}
    response = client_of(cast.bob).post(url(built, "votes"), ballot)
    assert response.status_code == 302 and response["Location"] == url(built, "votes")
    saved = twin_check(built, api, cast, "votes", ballot)
    assert saved["attributes"] == ["Flexibility"] and sorted(saved["metrics"]) == ["AUC", "Fold stdev"]
    # Come back: kept, and said so.
    follow = client_of(cast.bob).get(url(built, "votes"))
    assert checked(body(follow), "metrics", "Fold stdev") and checked(body(follow), "attributes", "Flexibility")


def test_priorities_post_saves_what_the_api_saves(make_study, client_of, cast, api):
    built = make_study(Phase.ASSESSMENT)
    accuracy, success, auc = built.attributes["Accuracy"].pk, built.metrics["Success rate"].pk, built.metrics["AUC"].pk
    local = {f"local-{accuracy}-method": "lpr", f"local-{accuracy}-lpr-{success}-{auc}": "1/4"}
    data = {
        "method": "ahp",
        pair(built, "Accuracy", "Consistency"): "3",
        pair(built, "Accuracy", "Efficiency"): "5",
        pair(built, "Consistency", "Efficiency"): "1/2",
        # The other methods' fields are on the page too; only the chosen one's are used.
        direct(built, "Accuracy"): "99",
        **local,
        # These judgments are inconsistent (CR 0.14): saved once the expert keeps them.
        "keep_inconsistent": "1",
    }
    response = client_of(cast.bob).post(url(built, "priorities"), data)
    assert response.status_code == 302
    expected = {
        "method": "ahp",
        "judgments": [["Accuracy", "Consistency", 3], ["Accuracy", "Efficiency", 5], ["Efficiency", "Consistency", 2]],
        "metric_priorities": {"Accuracy": {"method": "lpr", "judgments": [["AUC", "Success rate", 4]]}},
    }
    saved = twin_check(built, api, cast, "priorities", expected)
    assert saved["judgments"] == expected["judgments"]
    assert saved["metric_priorities"] == expected["metric_priorities"]
    assert saved["result"]["consistency_ratio"] == pytest.approx(
        prioritise("ahp", 3, judgments=[(0, 1, 3), (0, 2, 5), (2, 1, 2)]).consistency_ratio
    )


def test_direct_priorities_post_saves_what_the_api_saves(make_study, client_of, cast, api):
    built = make_study(Phase.ASSESSMENT)
    data = {
        "method": "direct",
        direct(built, "Accuracy"): "45.5",
        direct(built, "Consistency"): "30",
        direct(built, "Efficiency"): "20",
        f"local-{built.attributes['Accuracy'].pk}-method": "equal",
    }
    assert client_of(cast.bob).post(url(built, "priorities"), data).status_code == 302
    expected = {"method": "direct", "weights": {"Accuracy": 45.5, "Consistency": 30, "Efficiency": 20}}
    assert twin_check(built, api, cast, "priorities", expected)["weights"] == expected["weights"]


def test_ranges_post_saves_what_the_api_saves(make_study, client_of, cast, api):
    built = make_study(Phase.ASSESSMENT)
    m = {name: metric.pk for name, metric in built.metrics.items()}
    data = {
        f"least-{m['AUC']}": "0.75",
        f"desired-{m['AUC']}": "0.9",
        f"least-{m['Training time']}": "30",
        f"desired-{m['Training time']}": "2",
        # Both empty: left out, its default applies.
        f"least-{m['Success rate']}": "",
        f"desired-{m['Success rate']}": "",
        f"least-{m['Fold stdev']}": "0.15",
        f"desired-{m['Fold stdev']}": "0.05",
    }
    assert client_of(cast.bob).post(url(built, "ranges"), data).status_code == 302
    expected = {"AUC": [0.75, 0.9], "Fold stdev": [0.15, 0.05], "Training time": [30, 2]}
    assert twin_check(built, api, cast, "ranges", expected) == expected


def test_peer_weights_post_saves_what_the_api_saves(make_study, client_of, cast, api):
    built = make_study(Phase.ASSESSMENT)
    data = {f"peer-{built.bob.pk}": "35", f"peer-{built.carol.pk}": "65"}
    assert client_of(cast.bob).post(url(built, "peer-weights"), data).status_code == 302
    assert twin_check(built, api, cast, "peer-weights", {"bob": 0.35, "carol": 0.65}) == {"bob": 0.35, "carol": 0.65}


# --- every refusal names the field, nothing written --------------------------------------


def refused(client, target, data, unchanged, field, *fragments):
    """POST ``data``: the page answers with the form, ``field`` carries an
    error containing every fragment, the summary above the form names it,
    and the database is untouched."""
    with unchanged():
        response = client.post(target, data)
    assert response.status_code == 200
    form = response.context["form"]
    messages = " ".join(form.errors.get(field, []))
    for fragment in fragments:
        assert fragment in messages, (field, form.errors)
    if field != "__all__":
        label = form.fields[field].label
        assert label, field
        html = body(response)
        assert f'id="id_{field}_error"' in html or f'id="{field}_error"' in html, html
    return response


def test_vote_refusals_name_the_field(make_study, client_of, cast, unchanged):
    built = make_study(Phase.VOTING)
    client = client_of(cast.bob)
    response = refused(
        client,
        url(built, "votes"),
        {"attributes": ["Accuracy"]},
        unchanged,
        "attributes",
        "Accuracy is not one of the available choices",
    )
    assert "Complementary attributes</a>:" in body(response)
    refused(client, url(built, "votes"), {"metrics": ["Nonsense"]}, unchanged, "metrics", "Nonsense")


def test_priority_refusals_name_the_field(make_study, client_of, cast, unchanged):
    built = make_study(Phase.ASSESSMENT)
    client = client_of(cast.bob)
    local_method = f"local-{built.attributes['Accuracy'].pk}-method"
    base = {local_method: "equal"}
    refused(client, url(built, "priorities"), base, unchanged, "method", "This field is required")
    weights = {direct(built, "Accuracy"): "50", direct(built, "Consistency"): "0", direct(built, "Efficiency"): "20"}
    response = refused(
        client,
        url(built, "priorities"),
        {**base, "method": "direct", **weights},
        unchanged,
        direct(built, "Consistency"),
        "must be positive",
    )
    assert "Weight of Consistency (%)</a>: must be positive" in body(response)
    page = url(built, "priorities")
    refused(
        client,
        page,
        {**base, "method": "direct", **weights, direct(built, "Consistency"): "x"},
        unchanged,
        direct(built, "Consistency"),
        "Enter a number",
    )
    refused(
        client,
        page,
        {**base, "method": "ahp", pair(built, "Accuracy", "Consistency"): "3"},
        unchanged,
        pair(built, "Accuracy", "Efficiency"),
        "Choose a point on the scale",
    )
    lpr = pair(built, "Accuracy", "Consistency", "lpr")
    refused(client, page, {**base, "method": "lpr", lpr: "10"}, unchanged, lpr, "Select a valid choice")
    local_weight = f"local-{built.attributes['Accuracy'].pk}-direct-{built.metrics['AUC'].pk}"
    local = {
        local_method: "direct",
        local_weight: "-1",
        f"local-{built.attributes['Accuracy'].pk}-direct-{built.metrics['Success rate'].pk}": "1",
    }
    weights[direct(built, "Consistency")] = "30"
    refused(client, page, {**base, "method": "direct", **weights, **local}, unchanged, local_weight, "must be positive")


def test_range_refusals_name_the_field(make_study, client_of, cast, unchanged):
    built = make_study(Phase.ASSESSMENT)
    client = client_of(cast.bob)
    auc, time = built.metrics["AUC"].pk, built.metrics["Training time"].pk
    refused(client, url(built, "ranges"), {f"least-{auc}": "0.7"}, unchanged, f"desired-{auc}", "Give both values")
    refused(
        client,
        url(built, "ranges"),
        {f"least-{auc}": "0.9", f"desired-{auc}": "0.7"},
        unchanged,
        f"least-{auc}",
        "higher is better, so the least acceptable value (0.9) must be below the desired value (0.7)",
    )
    refused(
        client,
        url(built, "ranges"),
        {f"least-{time}": "5", f"desired-{time}": "5"},
        unchanged,
        f"least-{time}",
        "must differ",
    )
    refused(
        client,
        url(built, "ranges"),
        {f"least-{time}": "1e400", f"desired-{time}": "5"},
        unchanged,
        f"least-{time}",
        "Enter a number",
    )


def test_peer_weight_refusals_name_the_field(make_study, client_of, cast, unchanged):
    built = make_study(Phase.ASSESSMENT)
    client = client_of(cast.bob)
    bob, carol = f"peer-{built.bob.pk}", f"peer-{built.carol.pk}"
    response = refused(
        client,
        url(built, "peer-weights"),
        {bob: "100", carol: "0"},
        unchanged,
        carol,
        "must be positive (no expert may silence another)",
    )
    assert "carol (%)</a>: must be positive" in body(response)
    response = refused(client, url(built, "peer-weights"), {bob: "50", carol: "40"}, unchanged, "__all__")
    assert "Total: the weights add up to 90%, not 100%" in body(response)
    refused(client, url(built, "peer-weights"), {bob: "50"}, unchanged, carol, "This field is required")


# --- read-only outside the phase ------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "step", "reason"),
    [
        (Phase.DRAFT, "votes", "Voting has not opened yet"),
        (Phase.ASSESSMENT, "votes", "Voting has closed; your votes are shown as cast."),
        (Phase.VOTING, "priorities", "This step opens when voting closes"),
        (Phase.VOTING, "ranges", "This step opens when voting closes"),
        (Phase.CLOSED, "priorities", "The assessment has closed; your priorities are shown as saved."),
        (Phase.CLOSED, "ranges", "The assessment has closed; your acceptable ranges are shown as saved."),
        (Phase.CLOSED, "peer-weights", "The assessment has closed; your peer weights are shown as saved."),
    ],
)
def test_a_step_outside_its_phase_is_read_only_with_the_reason(
    make_study,
    client_of,
    cast,
    unchanged,
    phase,
    step,
    reason,
):
    built = make_study(phase)
    client = client_of(cast.bob)
    response = client.get(url(built, step))
    html = body(response)
    assert response.status_code == 200
    assert "Read-only." in html and reason in html
    assert "Save my" not in html and "hx-post" not in html
    assert all(field.disabled for field in response.context["form"].fields.values())
    # A POST anyway (the page was open when the phase moved) is refused by the service.
    data = {"method": "direct", "attributes": ["Flexibility"]}
    with unchanged():
        response = client.post(url(built, step), data)
    if response.status_code == 409:
        assert "phase" in " ".join(response.context["form"].non_field_errors())
    else:  # nothing to save: an empty form is of the wrong shape
        assert response.status_code == 200


def test_votes_after_closing_show_tallies_and_selection(make_study, client_of, cast):
    built = make_study(Phase.ASSESSMENT)
    response = client_of(cast.carol).get(url(built, "votes"))
    html = body(response)
    assert "the tallies and the selection" in html
    efficiency = next(g for g in response.context["groups"] if g["attribute"].name == "Efficiency")
    flexibility = next(g for g in response.context["groups"] if g["attribute"].name == "Flexibility")
    assert (efficiency["attribute"].vote_count, efficiency["attribute"].is_selected) == (1, True)
    assert (flexibility["attribute"].vote_count, flexibility["attribute"].is_selected) == (0, False)
    assert '1 <span class="muted">(1 needed)</span>' in html
    assert "✓ selected" in html and "not selected" in html


def test_votes_are_not_tallied_while_voting(make_study, client_of, cast):
    built = make_study(Phase.VOTING)
    html = body(client_of(cast.carol).get(url(built, "votes")))
    assert "needed)" not in html and not checked(html, "attributes", "Efficiency")  # bob's vote is his


# --- who may open the steps -------------------------------------------------------------------


@pytest.mark.parametrize("step", PAGES)
def test_the_designer_who_is_not_an_expert_gets_403_and_an_outsider_404(make_study, client_of, cast, step):
    built = make_study(Phase.ASSESSMENT)
    designer = client_of(cast.alice)
    response = designer.get(url(built, step))
    assert response.status_code == 403
    assert "Only the experts of this study can" in body(response)
    assert client_of(cast.charlie).get(url(built, step)).status_code == 404
    assert Client().get(url(built, step)).status_code == 302  # to the login page
    assert client_of(cast.charlie).get(f"/studies/{built.study.pk + 999}/my/{step}/").status_code == 404


@pytest.mark.parametrize("step", ["priorities", "ranges"])
def test_previews_check_access_too(make_study, client_of, cast, step):
    built = make_study(Phase.ASSESSMENT)
    assert client_of(cast.alice).post(url(built, step, preview=True), {}).status_code == 403
    assert client_of(cast.charlie).post(url(built, step, preview=True), {}).status_code == 404
    assert client_of(cast.bob).get(url(built, step, preview=True)).status_code == 405


# --- the live previews: the engine's own results, nothing saved -----------------------------


@pytest.mark.parametrize(
    "judgments",
    [
        [(0, 1, "3"), (0, 2, "5"), (1, 2, "1/2")],  # CR 0.14: inconsistent
        [(0, 1, "9"), (0, 2, "1/9"), (1, 2, "9")],  # far from consistent
        [(0, 1, "2"), (0, 2, "4"), (1, 2, "2")],  # consistent
    ],
)
def test_ahp_preview_reports_the_engines_ratio_and_repairs(make_study, client_of, cast, unchanged, judgments):
    built = make_study(Phase.ASSESSMENT)
    names = ["Accuracy", "Consistency", "Efficiency"]
    data = {"method": "ahp", **{pair(built, names[i], names[j]): v for i, j, v in judgments}}
    with unchanged():
        response = client_of(cast.bob).post(url(built, "priorities", preview=True), data)
    assert response.status_code == 200
    engine = prioritise("ahp", 3, judgments=[(i, j, float(Fraction(v))) for i, j, v in judgments], repairs=True)
    result = response.context["results"][0]
    assert result["consistency_ratio"] == pytest.approx(engine.consistency_ratio, rel=1e-12)
    assert [w["percent"] / 100 for w in result["weights"]] == pytest.approx(list(engine.weights), rel=1e-12)
    comparison = "≤" if engine.consistency_ratio <= 0.10 else ">"
    verdict = "consistent" if engine.consistency_ratio <= 0.10 else "inconsistent"
    assert f"{verdict} (CR {engine.consistency_ratio:.2f} {comparison} 0.10)" in body(response)
    # Inconsistent judgments: the smallest repairs (issue 31, finding 6); consistent ones: Saaty's hints.
    offered = engine.most_inconsistent if engine.consistency_ratio <= 0.10 else engine.repairs
    expected_hints = [
        (names[h.row], names[h.column], scale_point(h.suggested_value)[0])
        for h in offered
        if scale_point(h.value)[0] != scale_point(h.suggested_value)[0]
    ]
    assert [(h["row"], h["column"], h["suggested"]) for h in result["hints"]] == expected_hints
    for row, column, suggested in expected_hints:
        apply = f'value="{pair(built, row, column)}={suggested}"'
        assert apply in body(response)


def test_priorities_page_applies_a_repair_without_javascript_and_saves_nothing(
    make_study,
    client_of,
    cast,
    unchanged,
):
    built = make_study(Phase.ASSESSMENT)
    data = {
        "method": "ahp",
        pair(built, "Accuracy", "Consistency"): "3",
        pair(built, "Accuracy", "Efficiency"): "5",
        pair(built, "Consistency", "Efficiency"): "1/2",
        "apply": f"{pair(built, 'Accuracy', 'Efficiency')}=3",
    }
    with unchanged():
        response = client_of(cast.bob).post(url(built, "priorities"), data)
    html = body(response)
    assert checked(html, pair(built, "Accuracy", "Efficiency"), "3")
    assert 'Judgments: <span class="consistency__text">consistent (CR 0.05 ≤ 0.10)</span>' in html
    assert "Not saved yet" in html


def test_ranges_preview_vetoes_as_engine_core_scores(make_study, client_of, cast, unchanged):
    built = make_study(Phase.ASSESSMENT)
    time = built.metrics["Training time"].pk
    with unchanged():
        response = client_of(cast.bob).post(
            url(built, "ranges", preview=True), {f"least-{time}": "5", f"desired-{time}": "1"}
        )
    html = body(response)
    assert "1 candidate would be vetoed:" in html and "JRip (by Training time)" in html
    assert f'id="range-outcome-{time}" class="range-outcome" hx-swap-oob="true"' in html
    outcome = next(r["outcome"] for r in response.context["rows"] if r["metric"].pk == time)
    # Training time is lower-is-better: (4.1 - 5) / (1 - 5) = 0.225; 6.3 is beyond 5, a veto.
    assert [(c["name"], c["vetoed"]) for c in outcome["candidates"]] == [("J48", False), ("JRip", True)]
    assert outcome["candidates"][0]["score"] == pytest.approx(0.225)
    # A range refused by the service's rule is said so, not scored.
    backwards = {f"least-{time}": "1", f"desired-{time}": "5"}
    response = client_of(cast.bob).post(url(built, "ranges", preview=True), backwards)
    assert "lower is better, so the least acceptable value (1) must be above the desired value (5)" in body(response)


# --- a fixed number of queries ---------------------------------------------------------------------


def grow(built):
    """Three more experts, two more selected attributes of two metrics each,
    five more candidates measured on every metric: nothing a page's query
    count may depend on."""
    User = get_user_model()
    study = built.study
    for n in range(3):
        user = User.objects.create_user(username=f"extra{n}")
        Membership.objects.create(study=study, user=user, role=Membership.Role.EXPERT)
    for n in range(2):
        attribute = QualityAttribute.objects.create(
            study=study, name=f"Extra {n}", kind="complementary", position=10 + n, is_selected=True
        )
        for k in range(2):
            Metric.objects.create(
                study=study,
                attribute=attribute,
                name=f"Extra {n}.{k}",
                position=10 + k,
                is_selected=True,
                default_least_acceptable=0,
                default_desired=1,
            )
    metrics = list(Metric.objects.filter(study=study))
    for n in range(5):
        candidate = Candidate.objects.create(study=study, name=f"Extra {n}", position=10 + n)
        Measurement.objects.bulk_create(
            [Measurement(study=candidate.study, candidate=candidate, metric=m, value=0.5) for m in metrics]
        )
    AcceptableRange.objects.create(expert=built.bob, metric=metrics[-1], least_acceptable=0.1, desired=0.9)


# Every page: the session and its user (2), the header's unread notifications
# (1, notifications.context_processors), the study and my memberships in
# it (2, study_for_member); the pages add the step indicator (1) and the
# elicited metrics I answer, with my progress (1). In the assessment the
# priorities, ranges and peer-weights pages look for an open revision round
# (1; tests/pages/test_rounds.py counts them during one).
@pytest.mark.parametrize(
    ("phase", "step", "queries"),
    [
        # + the attributes and their metrics (2), my attribute and metric votes (2)
        (Phase.VOTING, "votes", 7 + 4),
        (Phase.ASSESSMENT, "votes", 7 + 4),  # the tallies are annotations of the same two queries
        # + selected attributes, selected metrics (2), my prioritisation with its weights and
        # judgments (3), my local prioritisations (1: there are none, so no weights or judgments)
        (Phase.ASSESSMENT, "priorities", 7 + 6 + 1),
        # + selected metrics, my ranges, the measurements of the selected metrics (3), the
        # elicited metrics whose values are my own (1; my answers only when there are some),
        # my ranges to confirm (1)
        (Phase.ASSESSMENT, "ranges", 7 + 4 + 1 + 1),
        # + the experts with their users, my peer weights (2)
        (Phase.ASSESSMENT, "peer-weights", 7 + 2 + 1),
    ],
)
def test_each_page_has_a_fixed_number_of_queries(
    make_study,
    client_of,
    cast,
    django_assert_num_queries,
    phase,
    step,
    queries,
):
    built = make_study(phase, inputs=phase == Phase.ASSESSMENT)
    client = client_of(cast.bob)
    with django_assert_num_queries(queries):
        assert client.get(url(built, step)).status_code == 200
    grow(built)
    with django_assert_num_queries(queries):
        assert client.get(url(built, step)).status_code == 200


@pytest.mark.parametrize(
    ("step", "data", "queries"),
    [
        # session, user, study, memberships (4); selected attributes and metrics (2)
        ("priorities", {"method": "ahp"}, 6),
        # session, user, study, memberships (4); selected metrics, their measurements (2); my
        # saved ranges (1), against which the preview names the candidates a range newly vetoes;
        # the elicited metrics whose values are my own (1)
        ("ranges", {}, 8),
    ],
)
def test_each_preview_has_a_fixed_number_of_queries(
    make_study,
    client_of,
    cast,
    django_assert_num_queries,
    step,
    data,
    queries,
):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    client = client_of(cast.bob)
    judgments = copy.deepcopy(CAROL_JUDGMENTS)
    data = {**data, **{pair(built, a, b): str(v) for a, b, v in judgments}} if step == "priorities" else data
    with django_assert_num_queries(queries):
        assert client.post(url(built, step, preview=True), data).status_code == 200
    grow(built)
    with django_assert_num_queries(queries):
        assert client.post(url(built, step, preview=True), data).status_code == 200


def test_direct_weights_given_as_shares_of_one_are_shown_as_percentages(make_study, client_of, cast):
    """The API and bundles often give direct weights as shares of 1 (the demo
    does); the page shows the percentages they amount to, so its running
    total reads 100 %, not 1 %."""
    built = make_study(Phase.ASSESSMENT)
    services.prioritisation_set(
        expert=built.bob, method="direct", weights={"Accuracy": 0.63, "Consistency": 0.2, "Efficiency": 0.17}
    )
    html = body(client_of(cast.bob).get(url(built, "priorities")))
    assert [input_value(html, direct(built, n)) for n in ("Accuracy", "Consistency", "Efficiency")] == [
        "63",
        "20",
        "17",
    ]


def test_the_priorities_forms_default_button_is_disabled_so_enter_submits_nothing(make_study, client_of, cast):
    """Implicit submission (Enter in a judgment's radio or a weight) clicks the
    form's first submit button: a disabled one submits nothing, so Save is the
    only submit; the result, with the repair hints' Apply buttons, comes before
    Save in the page's order and so in the tab order."""
    built = make_study(Phase.ASSESSMENT, inputs=True)
    page = body(client_of(cast.carol).get(url(built, "priorities")))
    form = page[page.index('<form method="post" class="priorities-form"') :]
    buttons = re.findall(r"<button[^>]*>", form)
    assert "disabled" in buttons[0] and 'type="submit"' in buttons[0] and "hidden" in buttons[0]
    assert form.index('id="priorities-result"') < form.index("Save my priorities")
    assert 'hx-sync="this:queue last"' in form  # fast answers queue, none is aborted
    # The live wording only with JavaScript; without it the result is the one saved or checked.
    assert '<span class="muted small js-only">(updates as you answer)</span>' in form
    assert '<span class="muted small no-js-only">(as saved or checked)</span>' in form


# --- the study's AHP weighting (issue 16, finding 13) ----------------------------------------------


@pytest.mark.parametrize(
    ("weighting", "sentence"),
    [
        ("column_means", "the row means of the column-normalised matrix (the method's own way, the default)"),
        ("eigenvector", "the principal eigenvector (as AHP-OS, AHPy and Expert Choice do)"),
        ("geometric_mean", "the normalised geometric means of the rows"),
    ],
)
def test_the_priorities_page_names_the_weighting_and_saving_uses_it(make_study, client_of, cast, weighting, sentence):
    built = make_study(Phase.ASSESSMENT)
    # chosen while the design could change (the setup page refuses it now; set as the draft would have)
    Study.objects.filter(pk=built.study.pk).update(ahp_weighting=weighting)
    client = client_of(cast.bob)
    page = html.unescape(body(client.get(url(built, "priorities"))))
    assert f"Weights from your judgments are computed by {sentence}" in page
    accuracy, success, auc = built.attributes["Accuracy"].pk, built.metrics["Success rate"].pk, built.metrics["AUC"].pk
    data = {
        "method": "ahp",
        pair(built, "Accuracy", "Consistency"): "3",
        pair(built, "Accuracy", "Efficiency"): "5",
        pair(built, "Consistency", "Efficiency"): "1/2",
        f"local-{accuracy}-method": "lpr",
        f"local-{accuracy}-lpr-{success}-{auc}": "1/4",
    }
    # These judgments are inconsistent (CR above 0.10): saving them asks first, then keeps them.
    assert client.post(url(built, "priorities"), data).status_code == 200
    assert client.post(url(built, "priorities"), {**data, "keep_inconsistent": "1"}).status_code == 302
    judgments = [(0, 1, 3), (0, 2, 5), (2, 1, 2)]
    expected = prioritise("ahp", 3, judgments=judgments, weighting=weighting)
    bob = Membership.objects.get(study=built.study, user=cast.bob, role=Membership.Role.EXPERT)
    saved = AttributePrioritisation.objects.get(expert=bob).result_record
    assert list(saved["weights"].values()) == pytest.approx(list(expected.weights), abs=1e-15)
    assert saved["consistency_ratio"] == pytest.approx(expected.consistency_ratio)
    # the live preview computes the same
    preview = client.post(url(built, "priorities", preview=True), data, headers={"HX-Request": "true"})
    assert preview.status_code == 200
    assert preview.context["results"][0]["weights"][0]["percent"] == pytest.approx(100 * expected.weights[0])
