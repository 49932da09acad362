"""The results pages (issue 9): a run's ranking explained, one candidate's
breakdown, the JSON and CSV downloads, and two runs compared, through
Django's test client. The demo study (case study 1) is the reference:
JRip, J48, then IBk and RandomForest, vetoed by all four experts."""

import copy
import csv
import io
import json
import random
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from engine import selectors as engine_selectors
from engine import services as engine_services
from engine.models import Run
from tests.api.test_csrf_tokens_pagination import sized_study
from tests.pages.test_studyhome import as_user, text_of
from workspace import services
from workspace.bundles import study_import_bundle
from workspace.models import Membership, Phase, Study
from workspace.templatetags.numbers import significant

pytestmark = pytest.mark.django_db

EXPERTS = ["statistician", "informatician", "researcher", "clinician"]


def execute(run: Run) -> Run:
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


def launch_and_execute(study: Study) -> Run:
    return execute(engine_services.run_launch(study=study, launched_by=study.designer))


@pytest.fixture
def demo(case_study):
    """The demo study, closed, and a succeeded run of it."""
    study = study_import_bundle(bundle=case_study)
    return study, launch_and_execute(study)


def designer(study: Study):
    return study.designer


# --- the run page -------------------------------------------------------------------------


def test_demo_ranking_jrip_j48_then_the_vetoed_with_sentences_naming_each_expert(client, demo):
    study, run = demo
    page = text_of(as_user(client, designer(study)).get(f"/runs/{run.pk}/"))
    document = engine_selectors.results_document(run=run)
    assert [c["name"] for c in document["candidates"]] == ["JRip", "J48", "IBk", "RandomForest"]
    jrip, j48, ibk, forest = document["candidates"]
    vetoed_by_all = "For statistician, informatician, researcher and clinician the least acceptable"
    assert (
        f"1 JRip {significant(jrip['cef'])} {significant(jrip['weighted_score'])} not vetoed "
        f"2 J48 {significant(j48['cef'])} {significant(j48['weighted_score'])} not vetoed "
        f"3 IBk 0 {significant(ibk['weighted_score'])} Vetoed "
        f"{vetoed_by_all} Comprehensibility rating is 6 (scale 1-10); IBk measured 0. "
        f"3 RandomForest 0 {significant(forest['weighted_score'])} Vetoed "
        f"{vetoed_by_all} Comprehensibility rating is 6 (scale 1-10); RandomForest measured 0."
    ) in page
    # every vetoing expert of the document is named in the sentence
    assert {v["expert"] for v in ibk["vetoes"]} == set(EXPERTS)


def test_run_page_charts_weights_influence_and_convergence(client, demo):
    study, run = demo
    response = as_user(client, designer(study)).get(f"/runs/{run.pk}/")
    body, page = response.content.decode(), text_of(response)
    document = engine_selectors.results_document(run=run)
    # the scores chart: one solid and one hatched bar per candidate, with the values written
    assert body.count('class="bar bar--solid"') == 1 + 4 + 1 + 4  # legends and bars of the two bar charts
    assert "JRip 0.4647 0.4647" in page or f"JRip {document['candidates'][0]['cef']:.4f}" in page
    assert "IBk 0.0000 0.5772 · vetoed" in page.replace(f"{document['candidates'][2]['weighted_score']:.4f}", "0.5772")
    assert '<title id="chart-scores-title">CEF and weighted score per candidate</title>' in body
    # consensus weights, each expert's own, and influence with its meaning
    for name, weight in document["attribute_weights"].items():
        assert name in page and significant(weight) in page
    influence = document["expert_influence"]
    assert "statistician carries the most, 36.8 %, and researcher the least, 17.2 %" in page
    for name, share in influence.items():
        assert f"{name} {significant(share)}" in page
    # the disagreement measures stored with the run: consensus, spread, each expert's weights as dots
    consensus = document["disagreement"]["consensus"]["attribute_weights"]
    shown = significant(consensus["value"])  # DISPLAY_SIGNIFICANT_DIGITS (issue 16, finding 9)
    assert f"Group consensus on the attribute weights: {shown} ({consensus['wording']})" in page
    spread = document["disagreement"]["attribute_weights"]
    assert "Spread standard deviation " + " ".join(significant(s["stdev"]) for s in spread.values()) in page
    assert body.count('<circle class="dot"') == 1 + len(EXPERTS) * len(document["attribute_weights"])
    assert f"Layers {document['iterations']}:" in page
    assert "Snapshot 4 experts, 3 metrics, 4 candidates, copied when the run was launched by designer" in page


def measured(bundle: dict, name: str, run: Run) -> list[float]:
    """The candidate's measurements in the bundle, for the run's selected metrics."""
    candidate = next(c for c in bundle["candidates"] if c["name"] == name)
    return [candidate["measurements"][metric] for metric in run.results["metrics"]]


def test_the_breakdown_shows_each_experts_score_and_how_the_cef_adds_up(client, demo, case_study):
    study, run = demo
    as_user(client, designer(study))
    response = client.get(f"/runs/{run.pk}/?candidate=IBk")
    breakdown = response.context["results"]["breakdown"]
    scores = engine_selectors.candidate_individual_scores(run=run, candidate_name="IBk")
    assert [row["expert"] for row in breakdown["heat"]] == EXPERTS
    for row in breakdown["heat"]:
        assert [cell.score for cell in row["cells"]] == list(scores[row["expert"]].values())
        assert [cell.vetoed for cell in row["cells"]] == [v == 0 for v in scores[row["expert"]].values()]
    ibk = next(c for c in engine_selectors.results_document(run=run)["candidates"] if c["name"] == "IBk")
    contributions = breakdown["contributions"]
    assert sum(row["contribution"] for row in contributions) == pytest.approx(ibk["weighted_score"], abs=1e-12)
    assert [row["measured"] for row in contributions] == [f"{value:g}" for value in measured(case_study, "IBk", run)]
    page = text_of(response)
    assert "Why IBk scored 0 Vetoed by statistician, informatician, researcher and clinician." in page
    assert page.count(" 0 ✕ (veto)") == 4  # one vetoing cell per expert, marked in words too
    # every other cell with four significant digits, not floatformat's three decimals (issue 16, finding 9)
    for row in breakdown["heat"]:
        for cell in row["cells"]:
            assert f"{significant(cell.score)}{' ✕' if cell.vetoed else ''}" in page
    # the share of experts vetoing, per metric, as stored with the run
    assert [row["veto_share"] for row in contributions] == list(ibk["veto_shares"].values()) == [0, 0, 1]
    assert "Comprehensibility rating 0 0.2432 0 0 100 %" in page
    # without a choice the page explains the best candidate
    assert client.get(f"/runs/{run.pk}/").context["results"]["breakdown"]["candidate"]["name"] == "JRip"
    # an unknown name falls back to the best too
    assert client.get(f"/runs/{run.pk}/?candidate=C4.5").context["results"]["breakdown"]["candidate"]["name"] == "JRip"


def test_a_candidates_breakdown_alone_for_htmx(client, demo):
    study, run = demo
    as_user(client, designer(study))
    partial = client.get(f"/runs/{run.pk}/candidates/J48/", headers={"HX-Request": "true"})
    assert partial.status_code == 200 and "<html" not in partial.content.decode()
    assert text_of(partial).startswith("Why J48 scored")
    # without JavaScript (issue 19): the section as a page of its own, back to the run
    plain = client.get(f"/runs/{run.pk}/candidates/J48/")
    assert plain.status_code == 200 and "<html" in plain.content.decode()
    assert f"Run {run.number}: Why J48 scored as it did Back to run {run.number}" in text_of(plain)
    assert text_of(partial) in text_of(plain)
    assert client.get(f"/runs/{run.pk}/candidates/C4.5/", headers={"HX-Request": "true"}).status_code == 404


def _with_28_more_candidates(built, spread: float) -> Run:
    """A run of ``built``'s study with 28 candidates more, measured alike
    (each ``spread`` apart, so that they rank apart when it is not 0)."""
    names = [f"Extra {i:02d}" for i in range(28)]
    for name in names:
        services.candidate_add(study=built.study, name=name)
    values = {"Success rate": 0.8, "AUC": 0.85, "Fold stdev": 0.02, "Training time": 2, "Flexibility score": 6}
    services.measurements_set(
        study=built.study,
        measurements=[
            {"candidate": n, "metric": m, "value": v * (1 + spread * i)}
            for i, n in enumerate(names)
            for m, v in values.items()
        ],
    )
    return launch_and_execute(built.study)


def test_the_ranking_is_paged_and_its_chart_follows(client, cast, make_study):
    run = _with_28_more_candidates(make_study(Phase.CLOSED), 0)
    as_user(client, cast.bob)
    first = client.get(f"/runs/{run.pk}/").context["results"]["ranking"]
    second = client.get(f"/runs/{run.pk}/?page=2").context["results"]["ranking"]
    total = len(run.results["candidates"])
    assert len(first["candidates"]) == 25 and len(second["candidates"]) == total - 25
    assert [row.label for row in second["chart"].rows] == [c["name"] for c in second["candidates"]]
    assert f"Candidates 26–{total} of {total}" in text_of(client.get(f"/runs/{run.pk}/?page=2"))


def test_the_run_page_reads_the_entries_of_the_candidates_it_shows_only(client, cast, make_study):
    """Issue 33, item 6: the run page of a thousand candidates decoded all
    of them to show 25. Now the database gives every candidate's name,
    rank, veto and CEF, and the entries of the page's candidates (and of
    the one whose breakdown is open) alone; what the page shows is what the
    whole stored results give (the literal reference, read here)."""
    run = _with_28_more_candidates(make_study(Phase.CLOSED), 0.01)
    whole = engine_selectors.results_document(run=run)["candidates"]  # every entry, in rank order
    as_user(client, cast.bob)
    for page, chosen in ((1, None), (2, None), (2, whole[3]["name"])):
        url = f"/runs/{run.pk}/?page={page}" + (f"&candidate={chosen}" if chosen else "")
        with CaptureQueriesContext(connection) as queries:
            context = client.get(url).context["results"]
        shown = whole[(page - 1) * 25 : page * 25]
        assert [c["name"] for c in context["ranking"]["candidates"]] == [c["name"] for c in shown]
        for entry, expected in zip(context["ranking"]["candidates"], shown, strict=True):
            assert {key: entry[key] for key in expected} == expected
        assert context["ranking"]["count"] == len(whole)
        assert context["breakdown"]["candidate"]["name"] == (chosen or whole[0]["name"])
        # the run's row is read without the candidates' entries; one query picks those shown
        # (the database walks the candidates' list twice: the ranking, then the page's entries)
        walks = [q["sql"] for q in queries.captured_queries if "json_each" in q["sql"] or "jsonb_array_el" in q["sql"]]
        assert len(walks) == 2, walks
        # (the column itself is never selected: the model's next column follows it when it is)
        wholes = [
            q["sql"][:300]
            for q in queries.captured_queries
            if '"engine_run"."results", "engine_run"."error"' in q["sql"]
        ]
        assert not wholes, wholes
    got = engine_selectors.run_candidates_get(run=run, names={whole[-1]["name"], whole[2]["name"], "nobody"})
    assert [c["name"] for c in got] == [whole[2]["name"], whole[-1]["name"]]  # rank order, unknown names left out
    stored = {c["name"]: c for c in run.results["candidates"]}
    assert got == [stored[whole[2]["name"]], stored[whole[-1]["name"]]]


# --- downloads --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_downloads_agree_with_run_validation_json(client, case_study, eager_celery):
    study = study_import_bundle(bundle=case_study)
    printed = StringIO()
    call_command("run_validation", str(study.pk), "--json", "--timeout", "30", stdout=printed)
    run = Run.objects.get(study=study)
    as_user(client, study.designer)

    response = client.get(f"/runs/{run.pk}/results.json")
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="approve-run-{run.pk}-results.json"'
    assert response.content.decode() + "\n" == printed.getvalue()
    document = json.loads(printed.getvalue())

    response = client.get(f"/runs/{run.pk}/results.csv")
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="approve-run-{run.pk}-results.csv"'
    rows = list(csv.reader(io.StringIO(response.content.decode("utf-8-sig"))))
    header, *body = rows
    assert header == ["rank", "name", "cef", "weighted_score", "vetoed", "veto_reasons", *document["metrics"]]
    assert len(body) == len(document["candidates"])
    for row, candidate in zip(body, document["candidates"], strict=True):
        rank, name, cef, weighted, vetoed, reasons, *group_scores = row
        assert (int(rank), name) == (candidate["rank"], candidate["name"])
        # full precision: the very floats of the JSON document
        assert float(cef) == candidate["cef"] and float(weighted) == candidate["weighted_score"]
        assert vetoed == ("true" if candidate["vetoed"] else "false")
        assert [float(s) for s in group_scores] == list(candidate["group_scores"].values())
        for veto in candidate["vetoes"]:
            assert veto["expert"] in reasons and veto["metric"] in reasons
        assert bool(reasons) == candidate["vetoed"]


def test_csv_text_that_a_spreadsheet_would_run_is_defused(client, cast, make_study):
    built = make_study(Phase.CLOSED)
    formula = '=HYPERLINK("http://evil.example","x")'
    services.candidate_add(study=built.study, name=formula)
    values = {"Success rate": 0.9, "AUC": 0.9, "Fold stdev": 0.01, "Training time": 1, "Flexibility score": 8}
    services.measurements_set(
        study=built.study, measurements=[{"candidate": formula, "metric": m, "value": v} for m, v in values.items()]
    )
    run = launch_and_execute(built.study)
    download = as_user(client, cast.bob).get(f"/runs/{run.pk}/results.csv").content.decode("utf-8-sig")
    names = [row[1] for row in csv.reader(io.StringIO(download))][1:]
    assert "'" + formula in names
    assert not any(name.startswith("=") for name in names)


def test_downloads_are_for_members_of_a_succeeded_run(client, cast, make_study):
    built = make_study(Phase.CLOSED)
    queued = engine_services.run_launch(study=built.study, launched_by=cast.alice)
    for suffix in ("results.json", "results.csv"):
        assert as_user(client, cast.charlie).get(f"/runs/{queued.pk}/{suffix}").status_code == 404
        response = as_user(client, cast.bob).get(f"/runs/{queued.pk}/{suffix}")
        assert response.status_code == 409
        said = f"Run {queued.number} has no results yet It is queued: its results exist once it has succeeded."
        assert said in text_of(response)
    client.logout()
    assert client.get(f"/runs/{queued.pk}/results.csv").status_code == 302  # to the log-in page


# --- comparison -------------------------------------------------------------------------------


def reopen_change_close(study: Study, change) -> None:
    services.study_reopen_assessment(study=study)
    change()
    services.study_close_assessment(study=study)


def test_comparison_shows_which_expert_changed_what_and_how_the_ranking_moved(client, demo):
    study, first = demo
    statistician = Membership.objects.get(study=study, user__username="statistician", role=Membership.Role.EXPERT)
    # the demo's experts take the default ranges; the statistician now asks more of the success rate
    ranges = {"Success rate": [0.86, 0.95]}
    reopen_change_close(study, lambda: services.ranges_set(expert=statistician, ranges=ranges))
    second = launch_and_execute(study)
    as_user(client, study.designer)

    chosen = client.get(f"/runs/{second.pk}/compare/?other={first.pk}")
    assert chosen.status_code == 302 and chosen["Location"] == f"/runs/{second.pk}/compare/{first.pk}/"
    response = client.get(chosen["Location"])
    assert response.status_code == 200
    page = text_of(response)
    assert f"Run {first.number} → run {second.number}" in page  # the earlier run is "before", whatever the URL's order
    assert "statistician's inputs What Before After acceptable range of Success rate [0.8, 0.95] [0.86, 0.95]" in page
    comparison = response.context["comparison"]
    assert [(c.who, c.what) for c in comparison.changes] == [("statistician", "acceptable range of Success rate")]
    before = {c["name"]: c for c in engine_selectors.results_document(run=first)["candidates"]}
    after = {c["name"]: c for c in engine_selectors.results_document(run=second)["candidates"]}
    jrip = next(m for m in comparison.candidates if m.name == "JRip")
    assert jrip.cef_delta == pytest.approx(after["JRip"]["cef"] - before["JRip"]["cef"])
    assert jrip.cef_delta < 0  # the statistician asks more of the success rate now
    # the same page whichever run the URL names first
    assert client.get(f"/runs/{first.pk}/compare/{second.pk}/").context["comparison"].changes == comparison.changes
    # the run page offers the other run to compare with
    offered = text_of(client.get(f"/runs/{second.pk}/"))
    assert f"Compare with another run Run of this study Run {Run.objects.get(pk=first.pk).number}, launched" in offered


def test_comparison_of_runs_with_identical_inputs_says_nothing_changed(client, demo):
    study, first = demo
    second = launch_and_execute(study)
    page = text_of(as_user(client, study.designer).get(f"/runs/{first.pk}/compare/{second.pk}/"))
    assert "0 candidates changed rank; 0 inputs changed." in page
    assert "Nothing changed in the inputs between the two snapshots." in page


def test_comparison_is_refused_in_words(client, cast, make_study, case_study):
    study = make_study(Phase.CLOSED).study
    run = launch_and_execute(study)
    other_study = study_import_bundle(bundle={**case_study, "title": "Another choice", "designer": "alice"})
    other = launch_and_execute(other_study)
    as_user(client, cast.alice)  # she designs both
    response = client.get(f"/runs/{run.pk}/compare/{other.pk}/")
    assert response.status_code == 400
    assert (
        f"These runs cannot be compared. {run.label} belongs to the study 'Choosing a classifier' "
        f"and {other.label.lower()} to 'Another choice': only runs of the same study can be compared."
    ) in text_of(response)
    itself = client.get(f"/runs/{run.pk}/compare/{run.pk}/")
    assert itself.status_code == 409 and "compared with itself changes nothing" in text_of(itself)
    queued = engine_services.run_launch(study=study, launched_by=cast.alice)
    unfinished = client.get(f"/runs/{run.pk}/compare/{queued.pk}/")
    assert unfinished.status_code == 409
    assert f"{queued.label} has not succeeded (it is queued), so it has no results to compare yet." in text_of(
        unfinished
    )
    # someone outside either study learns nothing of it: bob is an expert of
    # the first study only, charlie of neither
    assert as_user(client, cast.bob).get(f"/runs/{run.pk}/compare/{other.pk}/").status_code == 404
    assert as_user(client, cast.charlie).get(f"/runs/{run.pk}/compare/{other.pk}/").status_code == 404
    assert as_user(client, cast.bob).get(f"/runs/{run.pk}/compare/999999/").status_code == 404


# --- query counts -----------------------------------------------------------------------------

# Every page of a run starts with: 1. the session, 2. its user, 3. the run
# among the studies the user is a member of (a subquery), 4. the study with
# its designer, 5. the user's memberships of it (their roles).
RUN_PAGE = 5
RESULTS_QUERIES = {
    # (3. the run with its ranking, no candidate's entry: issue 33, item 6)
    # 6. the entries of the candidates shown (a page of 25 reads 25),
    # 7. the parts of the snapshot the sentences and the breakdown need,
    # 8. the study's other succeeded runs (to compare with), 9. its robustness analyses' sentences
    # 10. the header's unread notifications (a page with the site header)
    "/runs/{run}/": RUN_PAGE + 4 + 1,
    # the run without its JSON: the status alone (issue 19; was RUN_PAGE + 2)
    "/runs/{run}/status/": RUN_PAGE,
    # 6. the snapshot's parts (one candidate's individual scores)
    "/runs/{run}/candidates/Candidate 1/": RUN_PAGE + 1,
    "/runs/{run}/candidates/Candidate 1/scores.csv": RUN_PAGE + 1,
    # the section read from the run's stored results
    "/runs/{run}/weights/": RUN_PAGE,
    # the run without its JSON (its version, for a 304; no study, no roles),
    # then its stored document's text extracted
    "/runs/{run}/results.json": 2 + 2,
    # 6. the metrics' units and directions, for the veto sentences
    "/runs/{run}/results.csv": RUN_PAGE + 1,
    # 3. both runs with their studies, snapshots and results, 4.-5. the study and my roles
    "/runs/{run}/compare/{other}/": RUN_PAGE + 1,  # + the header's unread notifications
    "/runs/{run}/compare/{other}/compared.csv": RUN_PAGE,
}


@pytest.mark.parametrize("path", list(RESULTS_QUERIES))
def test_results_pages_query_counts_do_not_grow_with_experts_candidates_or_runs(
    path, client, cast, django_assert_num_queries
):
    as_user(client, cast.alice)
    sizes = {}
    for size in (2, 12):
        study = sized_study(size, cast.alice)
        first, second = Run.objects.filter(study=study).order_by("pk")[:2]
        url = path.format(run=first.pk, other=second.pk)
        headers = {"HX-Request": "true"} if "/candidates/" in path or "/weights/" in path else {}
        with django_assert_num_queries(RESULTS_QUERIES[path]):
            response = client.get(url, headers=headers)
        assert response.status_code == 200, url
        sizes[size] = len(response.content)
    if path.endswith("/status/"):
        assert abs(sizes[12] - sizes[2]) < 16  # the status alone, whatever the study's size
    else:
        assert sizes[12] > sizes[2]  # the bigger study's page shows more, with the same queries


def test_page_views_never_rerun_the_evaluation(client, demo, case_study, monkeypatch):
    study, run = demo
    calls = []

    def forbidden(*args, **kwargs):
        raise AssertionError("a page view must read the stored results")

    monkeypatch.setattr("engine.core.evaluate", forbidden)
    real = engine_services.core.individual_scores
    monkeypatch.setattr("engine.core.individual_scores", lambda *a, **k: calls.append(a[2].tolist()) or real(*a, **k))
    as_user(client, study.designer)
    for path in (f"/runs/{run.pk}/?candidate=IBk", f"/runs/{run.pk}/results.csv", f"/runs/{run.pk}/results.json"):
        assert client.get(path).status_code == 200
    # only the one candidate shown was scored, from its own measurements
    assert calls == [measured(case_study, "IBk", run)]


def test_outsiders_and_the_anonymous_see_nothing(client, cast, demo):
    _, run = demo
    as_user(client, cast.charlie)
    for path in (f"/runs/{run.pk}/", f"/runs/{run.pk}/results.json", f"/runs/{run.pk}/candidates/IBk/"):
        assert client.get(path).status_code == 404
    client.logout()
    assert client.get(f"/runs/{run.pk}/results.json")["Location"].startswith("/accounts/login/")
    assert get_user_model().objects.filter(username="charlie").exists()


def test_the_runs_list_links_each_succeeded_run_to_a_comparison_with_the_one_before(client, demo):
    study, first = demo
    queued = engine_services.run_launch(study=study, launched_by=study.designer)
    Run.objects.filter(pk=queued.pk).update(status=Run.Status.FAILED, error="lost")
    third = launch_and_execute(study)
    response = as_user(client, study.designer).get(f"/studies/{study.pk}/runs/")
    body = response.content.decode()
    # the failed run in between is skipped; the first run has nothing before it
    assert body.count('href="/runs/') == 3 + 1
    assert f'href="/runs/{first.pk}/compare/{third.pk}/">with run {first.number}</a>' in body
    rows = {run.pk: run.previous_succeeded for run in response.context["runs"]}
    assert rows == {third.pk: first.pk, queued.pk: None, first.pk: None}


def test_the_influence_chart_shows_the_most_influential_of_many_experts(client, cast):
    study = sized_study(33, cast.alice)
    run = Run.objects.filter(study=study).first()
    chart = as_user(client, cast.alice).get(f"/runs/{run.pk}/").context["results"]["influence"]["chart"]
    assert chart.frame.title == "Expert influence: the 30 most influential of 33 experts"
    assert len(chart.rows) == 30
    assert len(as_user(client, cast.alice).get(f"/runs/{run.pk}/").context["results"]["influence"]["rows"]) == 33


def test_the_results_page_says_the_consensus_weights_in_plain_words(client, demo):
    """Issue 16, finding 10, then issue 31, finding 11: no file of the
    method's documents named on the page, the rule said in words."""
    study, run = demo
    page = text_of(as_user(client, designer(study)).get(f"/runs/{run.pk}/"))
    assert "METHOD.md" not in page
    assert "docs/" not in page
    assert "the more the panel trusts an expert, the more their weights count" in page


def test_comparison_moves_nobody_when_a_tie_forms_around_vetoed_candidates(client, demo):
    # issue 16, finding 8: J48 is vetoed by the statistician's stricter range and
    # joins IBk and RandomForest at CEF 0; their rank number goes 3 -> 2 but no
    # candidate passed another.
    study, first = demo
    statistician = Membership.objects.get(study=study, user__username="statistician", role=Membership.Role.EXPERT)
    ranges = {"Success rate": [0.86, 0.95]}
    reopen_change_close(study, lambda: services.ranges_set(expert=statistician, ranges=ranges))
    second = launch_and_execute(study)
    response = as_user(client, study.designer).get(f"/runs/{first.pk}/compare/{second.pk}/")
    page = text_of(response)
    assert "0 candidates changed rank;" in page
    moves = {m.name: (m.before_rank, m.after_rank, m.status) for m in response.context["comparison"].candidates}
    assert moves == {
        "JRip": (1, 1, "same"),
        "J48": (2, 2, "same"),
        "IBk": (3, 2, "same"),
        "RandomForest": (3, 2, "same"),
    }
    assert "IBk Vetoed 3 → 2 = tie no move: a tie formed or broke around it" in page
    assert "▲" not in page and "▼" not in page


# --- issue 19: pages whose cost does not grow with the study -------------------------------------


def wide_bundle(experts=30, attributes=3, metrics_per_attribute=5, candidates=30, seed=19):
    """A closed study past the on-demand threshold: 30 experts x 15 metrics
    (450 heat cells, 540 weights) and 30 candidates, about a third vetoed."""
    rng = random.Random(seed)
    names = [f"expert{i:02d}" for i in range(experts)]
    attribute_names = [f"Attribute {a}" for a in range(attributes)]
    metrics = [
        {"name": f"metric {a}.{j}", "attribute": attribute, "better": "higher", "unit": "", "default_range": None}
        for a, attribute in enumerate(attribute_names)
        for j in range(metrics_per_attribute)
    ]

    def shares(items):
        raw = [rng.uniform(0.2, 1.0) for _ in items]
        return {item: value / sum(raw) for item, value in zip(items, raw, strict=True)}

    return {
        "format": "approve-study/1",
        "title": "Wide",
        "description": "",
        "phase": "closed",
        "attribute_threshold": 1,
        "metric_threshold": 0,
        "designer": "wide-designer",
        "experts": names,
        "attributes": [{"name": name, "kind": "main", "description": ""} for name in attribute_names],
        "metrics": metrics,
        "candidates": [
            {
                "name": f"candidate {c:02d}",
                "description": "",
                "measurements": {m["name"]: rng.uniform(0.03, 1.0) for m in metrics},
            }
            for c in range(candidates)
        ],
        "votes": {"attributes": {}, "metrics": {}},
        "priorities": {e: {"method": "direct", "weights": shares(attribute_names)} for e in names},
        "ranges": {e: {m["name"]: [rng.uniform(0.0, 0.06), rng.uniform(0.8, 1.0)] for m in metrics} for e in names},
        "peer_weights": {e: shares(names) for e in names},
    }


@pytest.fixture
def wide():
    """The wide study with two runs (its ranges changed in between)."""
    bundle = wide_bundle()
    study = study_import_bundle(bundle=copy.deepcopy(bundle))
    first = launch_and_execute(study)
    expert = Membership.objects.get(study=study, user__username="expert00")
    stricter = {**bundle["ranges"]["expert00"], "metric 0.0": [0.5, 0.9]}
    reopen_change_close(study, lambda: services.ranges_set(expert=expert, ranges=stricter))
    return study, first, launch_and_execute(study)


def test_a_large_studys_heavy_sections_load_on_demand(client, wide):
    study, _, run = wide
    as_user(client, study.designer)
    response = client.get(f"/runs/{run.pk}/")
    raw, results = response.content.decode(), response.context["results"]
    assert results["weights"] is None and results["breakdown"] is None
    best = run.results["candidates"][0]["name"]
    weights_url, candidate_url = f"/runs/{run.pk}/weights/", reverse("run_candidate", args=[run.pk, best])
    assert candidate_url == f"/runs/{run.pk}/candidates/{best.replace(' ', '%20')}/"
    # each section's heading stands in its place, loaded when revealed, with a plain link
    assert f'hx-get="{weights_url}" hx-trigger="revealed" hx-swap="outerHTML"' in raw
    assert f'<a href="{weights_url}">Show what the experts weighed</a>' in raw
    assert f'hx-get="{candidate_url}" hx-trigger="revealed" hx-swap="outerHTML"' in raw
    assert f'<a href="{candidate_url}">Show why {best} scored as it did</a>' in raw
    assert "weights-table" not in raw and "heat-table" not in raw
    page = text_of(response)
    assert "What the experts weighed The consensus weights beside each of the 30 experts' own load" in page
    # what htmx loads: the sections alone, each expert's weights and the first 25 experts' scores
    section = client.get(weights_url, headers={"HX-Request": "true"})
    body = section.content.decode()
    assert "<html" not in body and body.count('<tr><th scope="row">expert') == 2 * 30
    assert section.context["run"].results["candidates"] == []  # the section reads no candidate
    breakdown = client.get(candidate_url, headers={"HX-Request": "true"})
    assert "<html" not in breakdown.content.decode()
    assert len(breakdown.context["breakdown"]["heat"]) == 25
    # without JavaScript: the same sections as pages of their own
    alone = client.get(weights_url)
    assert f"Run {run.number}: What the experts weighed Back to run {run.number}" in text_of(alone)
    assert text_of(section) in text_of(alone)


def test_a_small_studys_sections_stay_on_the_page(client, demo):
    study, run = demo
    results = as_user(client, study.designer).get(f"/runs/{run.pk}/").context["results"]
    assert results["weights"] is not None and results["breakdown"] is not None
    assert not results["weights_on_demand"] and results["breakdown_on_demand"] is None


def test_the_heat_table_is_paged_and_its_csv_has_every_expert(client, wide):
    study, _, run = wide
    as_user(client, study.designer)
    name = "candidate 07"
    url = reverse("run_candidate", args=[run.pk, name])
    first = client.get(url, headers={"HX-Request": "true"})
    second = client.get(f"{url}?page=2", headers={"HX-Request": "true"})
    experts = run.snapshot["experts"]
    assert [row["expert"] for row in first.context["breakdown"]["heat"]] == experts[:25]
    assert [row["expert"] for row in second.context["breakdown"]["heat"]] == experts[25:]
    assert "Experts 26–30 of 30" in text_of(second)
    assert f'hx-get="{url}?page=1" hx-target="#candidate"' in second.content.decode()
    # without JavaScript the pager opens the section's page
    assert "Experts 26–30 of 30" in text_of(client.get(f"{url}?page=2"))

    download = client.get(f"{url}scores.csv")
    assert download.status_code == 200 and download["Content-Type"] == "text/csv; charset=utf-8"
    assert download["Content-Disposition"] == f'attachment; filename="approve-run-{run.pk}-scores-candidate-07.csv"'
    assert download.content.startswith(b"\xef\xbb\xbf")
    rows = list(csv.reader(io.StringIO(download.content.decode("utf-8-sig"))))
    metrics = [m["name"] for m in run.snapshot["metrics"]]
    assert rows[0] == ["expert", *metrics]
    scores = engine_selectors.candidate_individual_scores(run=run, candidate_name=name)
    assert [row[0] for row in rows[1:]] == experts
    for row in rows[1:]:
        assert [float(v) for v in row[1:]] == [scores[row[0]][m] for m in metrics]
    assert any(float(v) == 0 for row in rows[1:] for v in row[1:])  # a veto among them
    assert client.get(f"/runs/{run.pk}/candidates/nobody/scores.csv").status_code == 404


def test_the_comparison_is_paged_and_its_csv_has_every_candidate(client, wide):
    study, first, second = wide
    as_user(client, study.designer)
    url = f"/runs/{second.pk}/compare/{first.pk}/"
    page_one, page_two = client.get(url), client.get(f"{url}?page=2")
    comparison = page_one.context["comparison"]
    assert [m.name for m in page_one.context["moves"]] == [m.name for m in comparison.candidates[:25]]
    assert [m.name for m in page_two.context["moves"]] == [m.name for m in comparison.candidates[25:]]
    assert "Candidates 26–30 of 30" in text_of(page_two)
    assert page_one.content.decode().count('<tr>\n            <th scope="row">candidate') == 25

    download = client.get(f"{url}compared.csv")
    assert download.status_code == 200
    assert download["Content-Disposition"] == (
        f'attachment; filename="approve-runs-{first.pk}-{second.pk}-compared.csv"'
    )
    rows = list(csv.DictReader(io.StringIO(download.content.decode("utf-8-sig"))))
    assert len(rows) == 30
    for row, move in zip(rows, comparison.candidates, strict=True):
        assert row["name"] == move.name and row["move"] == move.status and int(row["places"]) == move.places
        assert (int(row["before_rank"]), int(row["after_rank"])) == (move.before_rank, move.after_rank)
        assert float(row["after_cef"]) == move.after_cef and float(row["cef_change"]) == move.cef_delta
        assert row["after_vetoed"] == ("true" if move.after_vetoed else "false")
    assert any(row["move"] in ("up", "down") for row in rows)  # the change moved someone
    # refused in words as the page is
    assert client.get(f"/runs/{first.pk}/compare/{first.pk}/compared.csv").status_code == 409


def test_the_pages_read_the_results_without_their_stored_document_text(client, demo):
    """Issue 19: the stored document text is most of a large run's results;
    the pages never serve it, so the database leaves it out."""
    study, run = demo
    as_user(client, study.designer)
    assert "document" in Run.objects.get(pk=run.pk).results
    shown = client.get(f"/runs/{run.pk}/").context["run"].results
    assert "document" not in shown and shown == {k: v for k, v in run.results.items() if k != "document"}
    other = launch_and_execute(study)
    compared = client.get(f"/runs/{other.pk}/compare/{run.pk}/").context
    assert "document" not in compared["before"].results and "document" not in compared["after"].results
