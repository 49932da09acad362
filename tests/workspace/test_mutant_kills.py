"""Tests that catch a wrong number (issue 30, item 7): hand-made mutants of
the rounds' bundle limits (``workspace.services.rounds``), of the history's
expert/designer distinction (``workspace.selectors.history``,
``workspace.history_export``) and of the robustness page's numbers
(``workspace.views.robustness``, its templates, ``workspace.api.robustness``)
survived the suite; each test here fails under one of them."""

import copy
import csv
import io
import re
from html.parser import HTMLParser

import pytest
from django.template.defaultfilters import floatformat
from django.urls import reverse

from engine import analyses, sensitivity
from engine import services as engine_services
from engine.analysis_words import with_words
from engine.models import Analysis
from tests.api.conftest import launch_and_finish
from tests.fixtures import CAROL_JUDGMENTS, PASSWORD, VOTES, complete_assessment, db_snapshot
from tests.workspace.test_rounds import panel  # noqa: F401  (a fixture)
from workspace import history, invitations, services
from workspace.bundles import study_export_bundle, study_import_bundle
from workspace.errors import InvalidInput
from workspace.limits import ROUND_MESSAGE_MAX_CHARS, ROUND_REASON_MAX_CHARS, ROUNDS_MAX
from workspace.models import Phase, RevisionRound, RoundResponse
from workspace.selectors import history as records

pytestmark = pytest.mark.django_db


# --- 3. the rounds in a bundle ----------------------------------------------------------------


@pytest.fixture
def rounds_bundle(panel, cast):  # noqa: F811
    """The panel's study exported with one closed round, bob's reason given."""
    services.round_open(study=panel.study, by=cast.alice)
    services.round_respond(expert=panel.bob, step="ranges", reason="Kept")
    services.round_close(study=panel.study, by=cast.alice)
    return study_export_bundle(study=panel.study)


def _import_refused(bundle: dict) -> dict:
    before = db_snapshot()
    with pytest.raises(InvalidInput) as refused:
        study_import_bundle(bundle=bundle, importer=None)
    assert db_snapshot() == before
    return refused.value.errors


def test_a_bundle_may_carry_rounds_max_rounds_and_not_one_more(rounds_bundle):
    (closed,) = rounds_bundle["rounds"]
    rounds = [{**copy.deepcopy(closed), "number": n} for n in range(1, ROUNDS_MAX + 1)]
    study = study_import_bundle(bundle={**rounds_bundle, "rounds": rounds, "title": "Fifty"}, importer=None)
    assert list(RevisionRound.objects.filter(study=study).values_list("number", flat=True)) == list(
        range(1, ROUNDS_MAX + 1)
    )
    assert RoundResponse.objects.filter(round__study=study).count() == ROUNDS_MAX
    more = rounds + [{**copy.deepcopy(closed), "number": ROUNDS_MAX + 1}]
    assert _import_refused({**rounds_bundle, "rounds": more}) == {
        "rounds": [f"too many rounds: {ROUNDS_MAX + 1} given, the limit is {ROUNDS_MAX}"]
    }


def test_a_round_s_message_may_be_max_chars_long_in_a_bundle_and_when_opened(rounds_bundle, panel, cast):  # noqa: F811
    longest = "m" * ROUND_MESSAGE_MAX_CHARS
    rounds = copy.deepcopy(rounds_bundle["rounds"])
    rounds[0]["message"] = longest
    study = study_import_bundle(bundle={**rounds_bundle, "rounds": rounds, "title": "Longest"}, importer=None)
    assert RevisionRound.objects.get(study=study).message == longest
    rounds[0]["message"] = longest + "m"
    assert _import_refused({**rounds_bundle, "rounds": rounds}) == {
        "rounds[0].message": [f"must be at most {ROUND_MESSAGE_MAX_CHARS} characters"]
    }
    assert services.round_open(study=panel.study, by=cast.alice, message=longest).message == longest


def test_a_response_s_reason_may_be_max_chars_long_in_a_bundle_and_when_given(rounds_bundle, panel, cast):  # noqa: F811
    longest = "r" * ROUND_REASON_MAX_CHARS
    rounds = copy.deepcopy(rounds_bundle["rounds"])
    rounds[0]["responses"]["bob"]["ranges"]["reason"] = longest
    study = study_import_bundle(bundle={**rounds_bundle, "rounds": rounds, "title": "Longest"}, importer=None)
    assert RoundResponse.objects.get(round__study=study).reason == longest
    rounds[0]["responses"]["bob"]["ranges"]["reason"] = longest + "r"
    assert _import_refused({**rounds_bundle, "rounds": rounds}) == {
        "rounds[0].responses.bob.ranges.reason": [f"must be at most {ROUND_REASON_MAX_CHARS} characters"]
    }
    services.round_open(study=panel.study, by=cast.alice)
    assert services.round_respond(expert=panel.bob, step="ranges", reason=longest).reason == longest
    with pytest.raises(InvalidInput) as refused:
        services.round_respond(expert=panel.bob, step="ranges", reason=longest + "r")
    assert refused.value.errors == {"reason": [f"must be at most {ROUND_REASON_MAX_CHARS} characters"]}


# --- 4. the history: an expert's and the designer's ---------------------------------------------

# What every member sees of the others' doings (docs/architecture.md, "History"): the
# study's design, phases, measurements, prediction sets, computations, rounds and runs.
PUBLIC = {
    "study",
    "attribute",
    "metric",
    "candidate",
    "measurement",
    "prediction_set",
    "computation",
    "measurement_source",
    "elicited_metric",
    "revision_round",
    "run",
}


@pytest.fixture
def recorded(make_study, cast):
    """A study with records of many kinds: an invitation in the draft, both
    experts' votes and inputs, a revision round answered by both, and a run."""
    built = make_study(Phase.DRAFT)
    study = built.study
    invitations.invitation_create(study=study, created_by=cast.alice, username="charlie")
    services.study_open_voting(study=study)
    services.votes_set(expert=built.bob, attributes=["Efficiency"], metrics=[])
    services.votes_set(expert=built.carol, attributes=["Efficiency"], metrics=[])
    services.study_close_voting(study=study)
    built.refresh()
    complete_assessment(built)
    services.round_open(study=study, by=cast.alice)
    services.round_respond(expert=built.bob, step="ranges", reason="bob's reason")
    services.round_respond(expert=built.carol, step="ranges", reason="carol's reason")
    services.round_close(study=study, by=cast.alice)
    services.study_close_assessment(study=study)
    engine_services.run_launch(study=study, launched_by=cast.alice)
    return built


def _all_records(study_id: int) -> list[tuple[str, int, int | None]]:
    """Every record of the study, read from the history tables themselves: (kind, id, expert)."""
    return [
        (kind, history_id, expert_id)
        for kind, model in history.KINDS.items()
        for history_id, expert_id in model.history.filter(history_study_id=study_id).values_list(
            "history_id", "history_expert_id"
        )
    ]


def _seen(study, user) -> list[records.HistoryEntry]:
    return list(records.history_all(study=study, user=user, filters=records.HistoryFilter()))


def test_an_expert_sees_the_public_kinds_and_their_own_records_and_the_designer_every_record(recorded, cast):
    study = recorded.study
    every = _all_records(study.pk)
    kinds = {kind for kind, _, _ in every}
    assert kinds >= {"invitation", "membership", "peer_weight", "round_response", "revision_round", "run"}
    bob = recorded.bob.pk
    expected = {(kind, pk) for kind, pk, expert in every if kind in PUBLIC or expert == bob}
    shown_to_bob = _seen(study, cast.bob)
    assert {(e.kind, e.id) for e in shown_to_bob} == expected
    assert len(shown_to_bob) == len(expected)
    assert {e.expert for e in shown_to_bob} == {"bob", None}
    shown_to_alice = _seen(study, cast.alice)
    assert sorted((e.kind, e.id) for e in shown_to_alice) == sorted((kind, pk) for kind, pk, _ in every)

    # The values: bob reads his own reason, never carol's; the designer reads both, each named.
    def reasons(entries):
        return {
            (e.expert, change.new)
            for e in entries
            if e.kind == "round_response"
            for change in e.changes
            if change.field == "reason"
        }

    assert reasons(shown_to_bob) == {("bob", "bob's reason")}
    assert reasons(shown_to_alice) == {("bob", "bob's reason"), ("carol", "carol's reason")}


def test_an_expert_s_history_download_holds_what_they_see_and_the_designer_s_everything(recorded, cast, client):
    study = recorded.study
    url = reverse("study_history", args=[study.pk])
    for user, shown_experts in ((cast.bob, {"bob", ""}), (cast.alice, {"bob", "carol", ""})):
        client.login(username=user.get_username(), password=PASSWORD)
        rows = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv"}).content.decode())))
        entries = _seen(study, user)
        assert [(row["kind"], int(row["object_id"]), row["expert"]) for row in rows] == [
            (e.kind, e.object_id, e.expert or "") for e in entries
        ]
        assert {row["expert"] for row in rows} == shown_experts
        document = client.get(url, {"format": "json"}).json()["history"]
        assert [(row["id"], row["kind"], row["expert"]) for row in document] == [
            (e.id, e.kind, e.expert) for e in entries
        ]
        client.logout()
    assert any("carol's reason" in row["changes"] for row in rows)  # the designer's download


# --- 5. the robustness page's numbers -----------------------------------------------------------


class _Tables(HTMLParser):
    """Each table's rows of cell texts (whitespace collapsed), by the id of
    the section that holds it: ``{section id: [[row, ...], ...]}``."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[list[str]]]] = {}
        self.section: str | None = None
        self.row: list[str] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self.section = dict(attrs).get("id")
        elif tag == "table":
            self.tables.setdefault(self.section or "", []).append([])
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.row is not None:
            self.row.append(re.sub(r"\s+", " ", "".join(self.cell)).strip())
            self.cell = None
        elif tag == "tr" and self.row is not None:
            self.tables[self.section or ""][-1].append(self.row)
            self.row = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def _tables(html: str) -> dict[str, list[list[list[str]]]]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def three(value: float) -> str:
    """``floatformat:3``, as the page writes a weight."""
    return str(floatformat(value, 3))


def share(value: float) -> str:
    """A share as the page writes it: a percentage with one decimal."""
    return f"{100 * value:.1f} %"


NAIVE_BAYES = {"Success rate": 0.86, "AUC": 0.89, "Fold stdev": 0.104, "Training time": 8.0, "Flexibility score": 6}


@pytest.fixture
def analysed(make_study, cast):
    """A succeeded run of the standard study with a third candidate
    (NaiveBayes: accurate and slow), in which bob, who weighs Efficiency
    most, carries the most peer weight, and Success rate has a standard
    error: its weights move only so far before the ranking changes, and a
    little further before J48 overtakes JRip; leaving carol out hands J48
    the win; a Monte Carlo of the inputs and the measurements gives each
    candidate a share of first places. With its leave-one-out and Monte
    Carlo analyses computed."""
    built = make_study(Phase.DRAFT)
    services.candidate_add(study=built.study, name="NaiveBayes")
    services.measurements_set(
        study=built.study,
        measurements=[
            {"candidate": "NaiveBayes", "metric": name, "value": value}
            for name, value in NAIVE_BAYES.items()
            if name != "Success rate"
        ]
        + [
            {"candidate": name, "metric": "Success rate", "value": value, "standard_error": 0.02}
            for name, value in (("J48", 0.847), ("JRip", 0.865), ("NaiveBayes", NAIVE_BAYES["Success rate"]))
        ],
    )
    services.study_open_voting(study=built.study)
    for username, ballot in VOTES.items():
        services.votes_set(expert=built.experts[username], **ballot)
    services.study_close_voting(study=built.study)
    built.refresh()
    services.prioritisation_set(
        expert=built.bob, method="direct", weights={"Accuracy": 10, "Consistency": 5, "Efficiency": 85}
    )
    services.prioritisation_set(expert=built.carol, method="ahp", judgments=copy.deepcopy(CAROL_JUDGMENTS))
    services.ranges_set(expert=built.bob, ranges={"AUC": [0.7, 0.95]})
    services.ranges_set(expert=built.carol, ranges={"AUC": [0.75, 0.9], "Success rate": [0.82, 0.9]})
    services.peer_weights_set(expert=built.bob, weights={"bob": 0.7, "carol": 0.3})
    services.peer_weights_set(expert=built.carol, weights={"bob": 0.6, "carol": 0.4})
    services.study_close_assessment(study=built.study)
    run = launch_and_finish(built, cast.alice)
    done = []
    everything = {"judgments": True, "peer_weights": True, "ranges_percent": 20.0, "measurements": True}
    for kind, spec, samples in (
        (Analysis.Kind.LEAVE_ONE_OUT, None, None),
        (Analysis.Kind.MONTE_CARLO, everything, 300),
    ):
        analysis = analyses.analysis_launch(run=run, kind=kind, launched_by=None, spec=spec, samples=samples, seed=11)
        for chunk_id in analysis.chunks.values_list("pk", flat=True):
            analyses.chunk_execute(chunk_id=chunk_id)
        analysis.refresh_from_db()
        assert analysis.status == Analysis.Status.SUCCEEDED, analysis.error
        done.append(analysis)
    return run, *done


def test_the_stability_tables_show_each_weight_and_its_intervals_to_three_decimals(analysed, client):
    run, _, _ = analysed
    client.force_login(run.study.designer)
    tables = _tables(client.get(reverse("run_robustness", args=[run.pk])).content.decode())
    attributes, metrics = tables["stability"]
    reports = sensitivity.weight_reports(sensitivity.stored_ranking(run.results, run.snapshot["metrics"]))
    leader = run.results["candidates"][0]["name"]

    def beyond(report):
        ends = [f"below {three(report.below.at)}: {report.below.overtaker} first"] if report.below else []
        ends += [f"above {three(report.above.at)}: {report.above.overtaker} first"] if report.above else []
        return "; ".join(ends) or f"{leader} first from 0 to 1"

    def intervals(report):
        return [
            report.name,
            three(report.share),
            f"{three(report.ranking[0])} – {three(report.ranking[1])}",
            f"{three(report.winner[0])} – {three(report.winner[1])}",
        ]

    assert attributes[1:] == [intervals(r) + [beyond(r)] for r in reports if r.kind == "attribute"]
    assert metrics[1:] == [intervals(r) for r in reports if r.kind == "metric"]
    # Numbers that tell the columns apart: the ranking's interval narrower than the winner's, which is not
    # all of [0, 1], with a candidate overtaking below one weight and above another.
    assert any(r.ranking != r.winner for r in reports) and {r.winner for r in reports} != {(0.0, 1.0)}
    assert any(r.below for r in reports) and any(r.above for r in reports)


def test_the_leave_one_out_table_shows_each_stored_row_and_its_tau(analysed, client):
    run, leave_one_out, _ = analysed
    client.force_login(run.study.designer)
    (table,) = _tables(client.get(reverse("run_robustness", args=[run.pk])).content.decode())["analysis-leave_one_out"]
    rows = leave_one_out.result["summary"]["rows"]
    assert table[0] == ["Without", "Winner", "Top three", "Kendall τ"]
    assert table[1:] == [
        [
            row["expert"],
            ", ".join(row["winner"]) + (" winner changes" if row["changes_winner"] else ""),
            ", ".join(row["top_three"]),
            "undefined" if row["tau"] is None else three(row["tau"]),
        ]
        for row in rows
    ]
    # A tau that needs its three decimals, one row where the winner changes and one where it does not.
    assert any(row["tau"] not in (1.0, -1.0) for row in rows)
    assert {row["changes_winner"] for row in rows} == {True, False}


def _interval(row):
    """The stored Wilson interval of a best-in share, as the page writes it."""
    low, high = row["wilson_best"]
    return f"{share(low)[:-2]}–{share(high)}"


def test_the_monte_carlo_table_shows_each_stored_share_and_its_standard_error(analysed, client):
    run, _, monte_carlo = analysed
    client.force_login(run.study.designer)
    html = client.get(reverse("run_robustness", args=[run.pk])).content.decode()
    (table,) = _tables(html)["analysis-monte_carlo"]
    summary = monte_carlo.result["summary"]
    candidates = summary["candidates"]
    shown = min(len(candidates), 5)  # only the ranks that exist (issue 31, finding 13)
    assert table[0] == ["Candidate", "Best in", *(f"Rank {rank}" for rank in range(1, shown + 1))]
    assert table[1:] == [
        [
            row["name"],
            # the share, its standard error, then its 95 % Wilson interval (issue 31, finding 9)
            f"{share(row['p_best'])} ± {share(row['se_best'])}95 %: {_interval(row)}",
            *map(share, row["ranks"][:shown]),
        ]
        for row in candidates[:10]
    ]
    assert 0 < candidates[0]["p_best"] < 1  # a share that is neither none nor all of the samples
    assert f"{summary['samples']} samples, seed {monte_carlo.seed}" in html


def test_the_api_gives_each_analysis_s_stored_summary_with_its_words(analysed, client):
    run, *done = analysed
    client.force_login(run.study.designer)
    for analysis in done:
        body = client.get(f"/api/v1/analyses/{analysis.pk}/").json()
        stored = analysis.result["summary"]
        assert body["summary"] == with_words(analysis.kind, stored)
        assert {key: value for key, value in body["summary"].items() if key not in ("sentence", "sampled")} == stored
        assert (body["units"], body["units_done"], body["seed"]) == (analysis.units, analysis.units, 11)


def test_a_running_analysis_shows_the_units_done_of_all_on_its_card_and_in_the_api(analysed, client, settings):
    run, *_ = analysed
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 100
    analysis = analyses.analysis_launch(
        run=run, kind=Analysis.Kind.MONTE_CARLO, launched_by=None, spec={"peer_weights": True}, samples=300, seed=1
    )
    for chunk_id in analysis.chunks.order_by("index").values_list("pk", flat=True)[:2]:
        analyses.chunk_execute(chunk_id=chunk_id)
    client.force_login(run.study.designer)
    card = client.get(reverse("run_analysis_status", args=[run.pk, analysis.pk])).content.decode()
    assert "Running: 200 of 300 samples done." in card
    assert '<progress max="300" value="200"' in card
    body = client.get(f"/api/v1/analyses/{analysis.pk}/").json()
    assert (body["status"], body["units_done"], body["units"], body["summary"]) == ("running", 200, 300, None)
