"""The robustness page (/runs/{run}/robustness/): the weights' stability,
the what-if, and the analyses launched, polled, cancelled and downloaded."""

import csv
import io
from pathlib import Path

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape

from engine import analyses, core, selectors, sensitivity, services
from engine.analysis_words import with_words
from engine.models import Analysis
from engine.snapshot import snapshot_arrays
from workspace.bundles import study_import_bundle

from ..engine.test_runs import case_study_bundle


@pytest.fixture
def run(db):
    study = study_import_bundle(bundle=case_study_bundle())
    run = services.run_launch(study=study, launched_by=study.designer)
    services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def login(client, run, who="designer"):
    user = run.study.designer if who == "designer" else run.study.memberships.filter(role="expert").first().user
    client.force_login(user)
    return user


def execute_all(analysis):
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    return analysis


def test_page_shows_each_attribute_weights_stability(client, run):
    login(client, run)
    response = client.get(reverse("run_robustness", args=[run.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "How far each weight can move" in html
    for attribute in run.results["selected_attributes"]:
        assert attribute in html
    stored = sensitivity.stored_ranking(run.results, run.snapshot["metrics"])
    reports = sensitivity.weight_reports(stored)
    assert escape(sensitivity.fragility_sentence(reports, "JRip")) in html
    # each attribute's row: its weight and its intervals, as the engine gives them
    for report in reports[: len(run.results["selected_attributes"])]:
        assert f"{report.ranking[0]:.3f} – {report.ranking[1]:.3f}" in html


def test_leave_one_out_through_the_page(client, run, django_capture_on_commit_callbacks):
    login(client, run)
    response = client.post(reverse("run_robustness", args=[run.pk]), {"kind": "leave_one_out"})
    assert response.status_code == 302
    analysis = Analysis.objects.get()
    execute_all(analysis)
    assert analysis.status == "succeeded"
    html = client.get(reverse("run_robustness", args=[run.pk])).content.decode()
    assert escape(with_words(analysis.kind, analysis.result["summary"])["sentence"]) in html


def literal_ranking(run, attribute_weights):
    """The CEFs at other attribute weights, computed plainly from the stored
    results: each metric keeps its share of its attribute's weight."""
    results = run.results
    metrics = run.snapshot["metrics"]
    attribute_of = [m["attribute"] for m in metrics]
    stored_attribute = {
        name: sum(w for w, a in zip(results["metric_weights"], attribute_of, strict=True) if a == name)
        for name in results["selected_attributes"]
    }
    total = sum(attribute_weights.values())
    cef = {}
    for candidate in results["candidates"]:
        score = 0.0
        for j, weight in enumerate(results["metric_weights"]):
            attribute = attribute_of[j]
            share = weight / stored_attribute[attribute]
            score += attribute_weights[attribute] / total * share * candidate["group_scores"][j]
        cef[candidate["name"]] = 0.0 if candidate["vetoed"] else score
    return cef


def test_what_if_fragment_ranks_at_the_weights_asked_for(client, run):
    login(client, run, "expert")
    attributes = run.results["selected_attributes"]
    asked = dict.fromkeys(attributes, 10.0)
    asked[attributes[-1]] = 80.0
    query = {f"w{i}": asked[name] for i, name in enumerate(attributes)}
    response = client.get(reverse("run_robustness_what_if", args=[run.pk]), query, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.startswith('<div id="what-if-ranking"')
    expected = literal_ranking(run, asked)
    rows = response.context["what_if_rows"]
    assert {row.name: row.cef for row in rows} == pytest.approx(expected)
    assert [row.cef for row in rows] == sorted((row.cef for row in rows), reverse=True)


def test_what_if_without_javascript_redirects_to_the_page_which_shows_it(client, run):
    login(client, run)
    attributes = run.results["selected_attributes"]
    query = {f"w{i}": 50 if i == 0 else 0 for i in range(len(attributes))}
    response = client.get(reverse("run_robustness_what_if", args=[run.pk]), query)
    assert response.status_code == 302 and response["Location"].endswith("#what-if")
    page = client.get(response["Location"])
    expected = literal_ranking(run, {name: (50 if i == 0 else 0) for i, name in enumerate(attributes)})
    assert {row.name: row.cef for row in page.context["what_if_rows"]} == pytest.approx(expected)
    assert page.context["changed"] is True


@pytest.mark.parametrize("value", ["-1", "101", "lots"])
def test_what_if_refuses_a_weight_out_of_range_naming_the_attribute(client, run, value):
    login(client, run)
    attribute = run.results["selected_attributes"][0]
    response = client.get(reverse("run_robustness_what_if", args=[run.pk]), {"w0": value}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response.context["what_if_errors"] == [f"{attribute}: a weight from 0 to 100"]
    assert response.context["what_if_rows"] == []


def test_all_weights_zero_is_refused(client, run):
    login(client, run)
    query = {f"w{i}": 0 for i in range(len(run.results["selected_attributes"]))}
    response = client.get(reverse("run_robustness_what_if", args=[run.pk]), query, HTTP_HX_REQUEST="true")
    assert response.context["what_if_errors"] == ["At least one attribute weight must be above 0."]


def test_an_expert_reads_but_cannot_launch_or_cancel(client, run):
    login(client, run, "expert")
    page = client.get(reverse("run_robustness", args=[run.pk]))
    assert page.status_code == 200
    assert b'name="kind"' not in page.content  # no launch forms
    refused = client.post(reverse("run_robustness", args=[run.pk]), {"kind": "leave_one_out"})
    assert refused.status_code == 403
    assert not Analysis.objects.exists()
    analysis = analyses.analysis_launch(run=run, kind="leave_one_out", launched_by=run.study.designer)
    refused = client.post(reverse("run_analysis_cancel", args=[run.pk, analysis.pk]))
    assert refused.status_code == 403
    analysis.refresh_from_db()
    assert analysis.status == "queued"


def test_outsiders_get_404_everywhere(client, run, django_user_model):
    analysis = analyses.analysis_launch(run=run, kind="leave_one_out", launched_by=run.study.designer)
    client.force_login(django_user_model.objects.create_user("outsider", password="x-long-password-9"))
    for url in (
        reverse("run_robustness", args=[run.pk]),
        reverse("run_robustness_what_if", args=[run.pk]),
        reverse("run_analysis_status", args=[run.pk, analysis.pk]),
        reverse("run_analysis_csv", args=[run.pk, analysis.pk]),
    ):
        assert client.get(url).status_code == 404, url
    assert client.post(reverse("run_analysis_cancel", args=[run.pk, analysis.pk])).status_code == 404


def test_a_run_that_has_not_succeeded_has_no_robustness_page(client, run):
    queued = services.run_launch(study=run.study, launched_by=run.study.designer)
    login(client, run)
    assert client.get(reverse("run_robustness", args=[queued.pk])).status_code == 404


def test_monte_carlo_form_refuses_bad_samples_naming_the_field(client, run):
    login(client, run)
    response = client.post(
        reverse("run_robustness", args=[run.pk]), {"kind": "monte_carlo", "samples": "0", "judgments": "on"}
    )
    assert response.status_code == 400
    assert response.context["form"].errors == {"samples": ["Ensure this value is greater than or equal to 1."]}
    assert not Analysis.objects.exists()


def test_progress_is_polled_then_the_result_is_shown_and_downloadable(client, run, settings):
    settings.ENGINE_ANALYSIS_CHUNK_EXPERTS = 2
    login(client, run)
    client.post(reverse("run_robustness", args=[run.pk]), {"kind": "leave_one_out"})
    analysis = Analysis.objects.get()
    status_url = reverse("run_analysis_status", args=[run.pk, analysis.pk])
    first = analysis.chunks.order_by("index").first()
    analyses.chunk_execute(chunk_id=first.pk)
    polled = client.get(status_url).content.decode()
    assert 'hx-trigger="every 2s"' in polled
    assert "2 of 4 experts done" in polled
    assert '<progress max="4" value="2"' in polled
    execute_all(analysis)
    done = client.get(status_url).content.decode()
    assert "hx-trigger" not in done
    assert escape(with_words(analysis.kind, analysis.result["summary"])["sentence"]) in done
    csv_response = client.get(reverse("run_analysis_csv", args=[run.pk, analysis.pk]))
    rows = list(csv.reader(io.StringIO(csv_response.content.decode())))
    assert rows[0] == ["expert_left_out", "winner", "top_three", "kendall_tau", "changes_winner"]
    assert [row[0] for row in rows[1:]] == run.snapshot["experts"]


def test_the_page_reads_the_newest_analyses_summaries_not_their_counts(client, run, settings):
    """Issue 33, item 6: the robustness page decoded each newest analysis's
    whole result (its merged counts, the most of it at a thousand
    candidates) to show its summary. The database now gives the summary
    alone, and the page shows what the whole result says."""
    login(client, run)
    client.post(reverse("run_robustness", args=[run.pk]), {"kind": "monte_carlo", "samples": "60", "judgments": "on"})
    analysis = Analysis.objects.get()
    execute_all(analysis)
    analysis.refresh_from_db()
    assert set(analysis.result) == {"counts", "summary"} and analysis.result["counts"]
    latest = selectors.analysis_latest(run=run, kind=Analysis.Kind.MONTE_CARLO)
    assert latest.pk == analysis.pk and latest.result == {"summary": analysis.result["summary"]}
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("run_robustness", args=[run.pk]))
    assert page.status_code == 200
    # the column itself is never selected whole (the model's next column follows it when it is)
    assert not [
        q["sql"]
        for q in queries.captured_queries
        if '"engine_analysis"."result", "engine_analysis"."error"' in q["sql"]
    ]
    text = page.content.decode()
    for row in analysis.result["summary"]["candidates"][:3]:
        assert escape(row["name"]) in text


def test_cancel_through_the_page(client, run):
    login(client, run)
    client.post(reverse("run_robustness", args=[run.pk]), {"kind": "leave_one_out"})
    analysis = Analysis.objects.get()
    response = client.post(reverse("run_analysis_cancel", args=[run.pk, analysis.pk]))
    assert response.status_code == 302
    analysis.refresh_from_db()
    assert analysis.status == "cancelled"
    page = client.get(reverse("run_robustness", args=[run.pk])).content.decode()
    assert f"Analysis {analysis.pk} was cancelled after 0 of 4 experts." in page


def test_leave_one_out_equals_a_run_without_that_expert(run):
    """Each row's winner and top three are those of the engine run on the
    snapshot without that expert, built literally."""
    analysis = execute_all(analyses.analysis_launch(run=run, kind="leave_one_out", launched_by=None))
    weights, peer, lower, upper, measurements = snapshot_arrays(run.snapshot)
    names = run.snapshot["candidates"]
    for i, row in enumerate(analysis.result["summary"]["rows"]):
        keep = [e for e in range(len(weights)) if e != i]
        sub_peer = peer[np.ix_(keep, keep)]
        sub_peer = sub_peer / sub_peer.sum(axis=1, keepdims=True)
        result = core.evaluate(
            weights=weights[keep],
            peer_weights=sub_peer,
            lower=lower[keep],
            upper=upper[keep],
            measurements=measurements,
        )
        best = max(result.cef)
        assert row["expert"] == run.snapshot["experts"][i]
        assert sorted(row["winner"]) == sorted(n for n, c in zip(names, result.cef, strict=True) if c == best)


def test_page_queries_do_not_grow_with_analyses(client, run, django_assert_num_queries):
    """Session and user, the run, the study, its snapshot's metrics, each
    kind's newest analysis and the list, and for the designer what limits a
    launch would meet (the caps in one query, the last hour's launches in
    another: engine.analyses.launch_refusals): eleven, however many analyses."""
    login(client, run)
    url = reverse("run_robustness", args=[run.pk])
    execute_all(analyses.analysis_launch(run=run, kind="leave_one_out", launched_by=None))
    with django_assert_num_queries(12):  # with the header's unread notifications
        assert client.get(url).status_code == 200
    for _ in range(3):
        execute_all(analyses.analysis_launch(run=run, kind="leave_one_out", launched_by=None))
    with django_assert_num_queries(12):  # with the header's unread notifications
        assert client.get(url).status_code == 200


DEMO_PREDICTIONS = Path(__file__).resolve().parents[2] / "workspace" / "demo" / "case-study-1-predictions.csv"


@pytest.fixture
def computed_run(run):
    """The case study with Success rate computed as accuracy from the
    shipped predictions, and a run of it."""
    from evaluation import services as evaluation_services
    from workspace.models import Metric

    study = run.study
    with DEMO_PREDICTIONS.open("rb") as stream:
        evaluation_services.prediction_set_import(
            study=study, stream=stream, name="holdout.csv", uploaded_by=study.designer, positive="tumour"
        )
    evaluation_services.metric_computation_set(
        metric=Metric.objects.get(study=study, name="Success rate"), computation="accuracy"
    )
    evaluation_services.measurements_compute(study=study)
    computed = services.run_launch(study=study, launched_by=study.designer)
    services.run_execute(run_id=computed.pk)
    computed.refresh_from_db()
    return computed


def test_monte_carlo_with_bootstrap_through_the_page(client, computed_run, settings):
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 150
    run = computed_run
    login(client, run)
    response = client.post(
        reverse("run_robustness", args=[run.pk]),
        {
            "kind": "monte_carlo",
            "samples": "400",
            "seed": "7",
            "judgments": "on",
            "peer_weights": "on",
            "ranges_percent": "5",
            "measurements": "on",
        },
    )
    assert response.status_code == 302
    analysis = Analysis.objects.get()
    assert analysis.spec["bootstrap"] == [
        {
            "metric": "Success rate",
            "kind": "accuracy",
            "prediction_set": analysis.spec["bootstrap"][0]["prediction_set"],
            "parameters": {},
        }
    ]
    assert [item["metric"] for item in analysis.spec["fixed"]] == ["Fold accuracy stdev", "Comprehensibility rating"]
    assert analysis.chunks.count() == 3
    execute_all(analysis)
    summary = analysis.result["summary"]
    assert summary["samples"] == 400
    rows = {row["name"]: row for row in summary["candidates"]}
    assert sum(row["p_best"] for row in rows.values()) >= 1.0  # ties share first place
    for row in rows.values():
        assert row["se_best"] == pytest.approx((row["p_best"] * (1 - row["p_best"]) / 400) ** 0.5)
    html = client.get(reverse("run_robustness", args=[run.pk])).content.decode()
    assert escape(with_words(analysis.kind, summary)["sentence"]) in html
    assert "Measurements held fixed (2)" in html
    # the same analysis in one chunk gives the same counts
    settings.ENGINE_ANALYSIS_CHUNK_SAMPLES = 1000
    again = execute_all(
        analyses.analysis_launch(
            run=run,
            kind="monte_carlo",
            launched_by=None,
            samples=400,
            seed=7,
            spec={"judgments": True, "peer_weights": True, "ranges_percent": 5, "measurements": True},
        )
    )
    assert again.chunks.count() == 1
    assert again.result == analysis.result


def test_monte_carlo_refuses_an_empty_choice_and_a_range_beyond_half(client, run):
    login(client, run)
    url = reverse("run_robustness", args=[run.pk])
    nothing = client.post(url, {"kind": "monte_carlo", "samples": "10"})
    assert nothing.status_code == 400
    assert nothing.context["form"].non_field_errors() == ["choose at least one input to sample"]
    wide = client.post(url, {"kind": "monte_carlo", "samples": "10", "ranges_percent": "60"})
    assert wide.status_code == 400
    assert "ranges_percent" in wide.context["form"].errors
    assert not Analysis.objects.exists()


def test_the_run_page_says_how_sure_and_links_here(client, run):
    login(client, run, "expert")
    page = client.get(reverse("run_page", args=[run.pk])).content.decode()
    assert f'href="{reverse("run_robustness", args=[run.pk])}"' in page
    assert "How sure is this ranking?" in page
    analysis = execute_all(
        analyses.analysis_launch(
            run=run, kind="monte_carlo", launched_by=None, samples=50, seed=3, spec={"peer_weights": True}
        )
    )
    page = client.get(reverse("run_page", args=[run.pk])).content.decode()
    assert escape(with_words(analysis.kind, analysis.result["summary"])["sentence"]) in page


def _measurements_only(run, seed=3):
    return execute_all(
        analyses.analysis_launch(
            run=run,
            kind="monte_carlo",
            launched_by=None,
            samples=600,
            seed=seed,
            spec={"measurements": True},
        )
    )


def test_monte_carlo_samples_a_typed_metric_from_its_standard_errors(db):
    """J48 and JRip are close on Success rate (0.847, 0.865): with a large
    standard error on it both win in some samples; without, the measurements
    are the run's in every sample and the winner is certain."""
    bundle = case_study_bundle()
    plain = study_import_bundle(bundle={**bundle, "title": "Without standard errors"})
    for candidate in bundle["candidates"]:
        candidate["standard_errors"] = {"Success rate": 0.05}
    uncertain = study_import_bundle(bundle=bundle)
    p_best = {}
    for name, study in (("plain", plain), ("uncertain", uncertain)):
        run = services.run_launch(study=study, launched_by=study.designer)
        services.run_execute(run_id=run.pk)
        run.refresh_from_db()
        analysis = _measurements_only(run)
        summary = analysis.result["summary"]
        p_best[name] = {row["name"]: row["p_best"] for row in summary["candidates"]}
        if name == "plain":
            assert "standard_errors" not in analysis.spec
            assert with_words(analysis.kind, summary)["sampled"] == "the measurements (none could be)"
            assert {item["metric"] for item in summary["fixed"]} >= {"Success rate"}
        else:
            assert analysis.spec["standard_errors"] == ["Success rate"]
            assert (
                with_words(analysis.kind, summary)["sampled"]
                == "the measurements (Success rate from their standard errors)"
            )
            assert "Success rate" not in {item["metric"] for item in summary["fixed"]}
            # the same seed gives the same counts
            assert _measurements_only(run).result == analysis.result
    assert p_best["plain"]["JRip"] == 1.0 and p_best["plain"]["J48"] == 0.0
    assert 0 < p_best["uncertain"]["JRip"] < 1
    assert 0 < p_best["uncertain"]["J48"] < 1


def test_monte_carlo_shows_a_wilson_interval_beside_each_standard_error(client, run):
    # Issue 31: a share never seen read "0.0 % ± 0.0 %"; its 95 % Wilson interval says how high it may be.
    analysis = analyses.analysis_launch(
        run=run,
        kind="monte_carlo",
        launched_by=None,
        samples=200,
        seed=3,
        spec={"judgments": True, "peer_weights": True, "ranges_percent": 0, "measurements": False},
    )
    execute_all(analysis)
    analysis.refresh_from_db()
    rows = {row["name"]: row for row in analysis.result["summary"]["candidates"]}
    never = rows["IBk"]  # vetoed: never best, never ranked above a candidate that is not
    assert (never["p_best"], never["se_best"]) == (0.0, 0.0)
    z2 = 1.959963984540054**2
    assert never["wilson_best"] == [0.0, pytest.approx(z2 / (200 + z2))]  # 1.9 %
    login(client, run)
    html = client.get(reverse("run_robustness", args=[run.pk])).content.decode()
    assert '0.0 % <span class="muted">± 0.0 %</span><br><span class="small muted">95 %: 0.0–1.9 %</span>' in html
    for row in rows.values():
        low, high = row["wilson_best"]
        assert f"95 %: {100 * low:.1f}–{100 * high:.1f} %" in html
        for low, high in row["wilson_ranks"][:5]:
            assert f'title="95 %: {100 * low:.1f}–{100 * high:.1f} %"' in html
    csv_response = client.get(reverse("run_analysis_csv", args=[run.pk, analysis.pk]))
    table = list(csv.reader(io.StringIO(csv_response.content.decode())))
    assert table[0][:5] == ["candidate", "p_best", "se_best", "p_best_low_95", "p_best_high_95"]
    ibk = next(line for line in table if line[0] == "IBk")
    assert [float(value) for value in ibk[3:5]] == pytest.approx(never["wilson_best"])
