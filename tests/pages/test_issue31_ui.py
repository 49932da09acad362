"""Issue 31's page findings 5, 6, 12 and 13: every what-if slider re-ranks,
an inconsistent save lands on its question and the repair hints say what
they replace (the smallest change first), the consistency table and the
AHP scale fit a phone, the Monte Carlo legend names only ranks that exist,
runs are numbered per study, open-round steps read "to revise", the
reference candidate's removal is refused before confirming, the demo's
experts have e-mail addresses, and tables that scroll say so."""

import html
import re
import threading
from fractions import Fraction
from pathlib import Path

import pytest
from django.db import IntegrityError, connection, transaction
from django.urls import reverse

from engine import analyses
from engine import services as engine_services
from engine.models import Run
from engine.prioritisation import consistency, pairwise_matrix, smallest_repairs
from engine.rules import SCALE_POINTS, is_consistent
from workspace import charts
from workspace.bundles import study_import_bundle
from workspace.forms.expert import point_label
from workspace.models import Phase

from ..engine.test_runs import case_study_bundle

# --- 5. every what-if slider triggers the live ranking --------------------------------


def _tag(html: str, pattern: str) -> str:
    found = re.search(pattern, html)
    assert found, f"no tag matching {pattern!r}"
    return found.group(0)


def _listened_inputs(form_tag: str, inputs: list[str]) -> set[str]:
    """The inputs whose ``input`` event reaches a listener of the form's
    hx-trigger, with htmx's meaning of ``from:``: none, the form itself
    (which every input inside it bubbles to); ``find <selector>``, the first
    matching input only; a plain selector, every matching element."""
    trigger = re.search(r'hx-trigger="([^"]*)"', form_tag)
    assert trigger, "the what-if form has no hx-trigger"
    listened: set[str] = set()
    for spec in (part.strip() for part in trigger.group(1).split(",")):
        if spec.split()[0] != "input":
            continue
        origin = re.search(r"from:(.+?)(?:\s+(?:delay|throttle|queue|target|changed|once|consume)\b|$)", spec)
        if origin is None:
            listened.update(inputs)  # the form: every input inside it bubbles up
        elif origin.group(1).startswith("find "):
            listened.update(inputs[:1])  # querySelector: the first match only
        elif origin.group(1).strip() in ("input", "input[type=range]", "closest form"):
            listened.update(inputs)
    return listened


@pytest.fixture
def run(db):
    study = study_import_bundle(bundle=case_study_bundle())
    run = engine_services.run_launch(study=study, launched_by=study.designer)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_every_what_if_slider_triggers_the_live_ranking(client, run):
    client.force_login(run.study.designer)
    html = client.get(reverse("run_robustness", args=[run.pk])).content.decode()
    form = _tag(html, r'<form[^>]*class="what-if"[^>]*>')
    body = html[html.index(form) : html.index("</form>", html.index(form))]
    sliders = re.findall(r'<input type="range" id="(w\d+)"', body)
    attributes = run.results["selected_attributes"]
    assert sliders == [f"w{i}" for i in range(len(attributes))] and len(sliders) >= 2
    assert _listened_inputs(form, sliders) == set(sliders)
    # Reset puts each slider back at the run's weight (static/js/robustness.js).
    at_run = [100 * w for w in run.results["attribute_weights"]]
    drawn = [float(v) for v in re.findall(r'data-run-value="([^"]+)"', body)]
    assert drawn == pytest.approx(at_run, abs=0.05)
    assert "data-what-if-reset" in body


# --- 6. an inconsistent save lands on its question; hints say what they replace ----------

NAMES = ["Accuracy", "Consistency", "Efficiency"]


def _pair(built, a: str, b: str) -> str:
    return f"ahp-{built.attributes[a].pk}-{built.attributes[b].pk}"


def _judged(built, judgments) -> dict:
    return {"method": "ahp", **{_pair(built, NAMES[i], NAMES[j]): v for i, j, v in judgments}}


def _least_change(judgments) -> tuple[int, float]:
    """By brute force, one changed judgment at a time (engine.prioritisation.
    consistency, not the repair search): the fewest points along the scale a
    single change needs to make the judgments consistent, and the lowest
    ratio among the changes of that size."""
    best: tuple[int, float] | None = None
    for position, (i, j, value) in enumerate(judgments):
        start = SCALE_POINTS.index(Fraction(value))
        for index, point in enumerate(SCALE_POINTS):
            if index == start:
                continue
            changed = [(a, b, float(Fraction(v))) for a, b, v in judgments]
            changed[position] = (i, j, float(point))
            ratio = consistency(pairwise_matrix(3, changed)).ratio
            if is_consistent(ratio):
                candidate = (abs(index - start), ratio)
                best = candidate if best is None or candidate < best else best
    assert best is not None
    return best


@pytest.mark.parametrize(
    "judgments",
    [
        [(0, 1, "3"), (0, 2, "5"), (1, 2, "1/2")],  # CR 0.14
        [(0, 1, "5"), (1, 2, "3"), (0, 2, "1/3")],  # a cycle: A > B > C > A
    ],
)
def test_the_first_repair_is_the_smallest_change_and_says_what_it_replaces(make_study, cast, client, judgments):
    built = make_study(Phase.ASSESSMENT)
    client.force_login(cast.bob)
    response = client.post(f"/studies/{built.study.pk}/my/priorities/preview/", _judged(built, judgments))
    result = response.context["results"][0]
    assert result["consistent"] is False and result["hint_kind"] == "repair"
    first = result["hints"][0]
    steps, ratio = _least_change(judgments)
    assert first["steps"] == steps
    i, j = NAMES.index(first["row"]), NAMES.index(first["column"])
    changed = [(a, b, float(Fraction(first["suggested"] if (a, b) == (i, j) else v))) for a, b, v in judgments]
    assert consistency(pairwise_matrix(3, changed)).ratio == pytest.approx(ratio)
    said = next(v for a, b, v in judgments if (a, b) == (i, j))
    text = html.unescape(response.content.decode())
    assert (
        f"{first['row']} / {first['column']}</strong>: replaces your "
        f"“{point_label('ahp', first['row'], first['column'], said)}” by "
        f"“{point_label('ahp', first['row'], first['column'], first['suggested'])}” "
        f"({steps} point{'s' if steps > 1 else ''} along the scale); your judgments would then be "
        f"consistent (CR {ratio:.2f} ≤ 0.10)."
    ) in text
    # Every hint after the first changes at least as much.
    assert [h["steps"] for h in result["hints"]] == sorted(h["steps"] for h in result["hints"])


def test_the_cycle_no_longer_turns_the_strongest_judgment_into_equal_unsaid(make_study, cast, client):
    """The finding: with A 5 × B, B 3 × C, C 3 × A, the first Apply set the 5
    to "equally important" (the value the near-equal weights imply), which
    leaves the judgments inconsistent (CR 0.75). Now every hint offered
    makes them consistent and names the judgment it replaces."""
    built = make_study(Phase.ASSESSMENT)
    client.force_login(cast.bob)
    judgments = [(0, 1, "5"), (1, 2, "3"), (0, 2, "1/3")]
    response = client.post(f"/studies/{built.study.pk}/my/priorities/preview/", _judged(built, judgments))
    for hint in response.context["results"][0]["hints"]:
        assert hint["consistent_after"] and hint["suggested"] != "1"
        assert "replaces your" in html.unescape(response.content.decode())


def test_an_inconsistent_save_opens_the_page_on_its_question(make_study, cast, client):
    built = make_study(Phase.ASSESSMENT)
    client.force_login(cast.bob)
    data = _judged(built, [(0, 1, "3"), (0, 2, "5"), (1, 2, "1/2")])
    data[f"local-{built.attributes['Accuracy'].pk}-method"] = "equal"
    response = client.post(f"/studies/{built.study.pk}/my/priorities/", data)
    assert response.status_code == 200
    text = response.content.decode()
    box = _tag(text, r'<div[^>]*id="confirm-inconsistent"[^>]*>')
    assert 'tabindex="-1"' in box and " autofocus" in box
    assert len(re.findall(r"\sautofocus[\s>]", text)) == 1, "the box is the page's only autofocus"
    assert "Not saved yet: your judgments are inconsistent." in text
    # A page that saved nothing inconsistent has no such focus.
    assert " autofocus" not in client.get(f"/studies/{built.study.pk}/my/priorities/").content.decode()


def test_smallest_repairs_edges_and_a_large_matrix():
    consistent = pairwise_matrix(3, [(0, 1, 2), (0, 2, 4), (1, 2, 2)])
    inconsistent = pairwise_matrix(3, [(0, 1, 3), (0, 2, 5), (1, 2, 0.5)])
    assert smallest_repairs(consistent) == [] and smallest_repairs(pairwise_matrix(2, [(0, 1, 9)])) == []
    assert smallest_repairs(inconsistent, top=0) == [] and len(smallest_repairs(inconsistent, top=10)) == 3
    with pytest.raises(ValueError, match="top must be a non-negative integer"):
        smallest_repairs(inconsistent, top=-1)
    # 12 items (66 pairs, more than are searched): one slip in a consistent matrix is found and undone.
    n = 12
    weights = [2.0 ** (k % 4) for k in range(n)]
    judgments = [(i, j, weights[i] / weights[j]) for i in range(n) for j in range(i + 1, n)]
    judgments[5] = (0, 6, 9.0)  # was 1/4: CR 0.11
    matrix = pairwise_matrix(n, judgments)
    assert not is_consistent(consistency(matrix).ratio)
    first = smallest_repairs(matrix)[0]
    repaired = matrix.copy()
    repaired[first.row, first.column], repaired[first.column, first.row] = (
        first.suggested_value,
        1 / first.suggested_value,
    )
    assert (first.row, first.column) == (0, 6) and first.ratio == pytest.approx(consistency(repaired).ratio)
    assert is_consistent(first.ratio) and (first.suggested_value, first.steps) == (8.0, 1)


# --- 12. the consistency table and the AHP scale on a phone -----------------------------

STATIC = Path(__file__).resolve().parents[2] / "static" / "css"


def _rule(css: str, selector: str) -> str:
    """The declarations of the first rule whose selector list is exactly ``selector``."""
    found = re.search(r"(?:^|\})\s*" + re.escape(selector) + r"\s*\{([^}]*)\}", css, re.MULTILINE)
    assert found, f"no rule for {selector}"
    return found.group(1)


def _rem(length: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(rem|px)", length.strip()).groups()
    return float(value) * (16 if unit == "rem" else 1) / 16


def test_the_run_pages_consistency_table_stacks_on_a_phone(make_study, cast, client):
    built = make_study(Phase.CLOSED)  # carol prioritises by AHP
    run = engine_services.run_launch(study=built.study, launched_by=cast.alice)
    engine_services.run_execute(run_id=run.pk)
    client.force_login(cast.alice)
    text = client.get(f"/runs/{run.pk}/").content.decode()
    section = text[text.index('<section class="card run-consistency"') :]
    section = section[: section.index("</section>")]
    wrapper = _tag(section, r'<div class="table-scroll"[^>]*>')
    assert 'role="region"' in wrapper and 'tabindex="0"' in wrapper
    assert "table--stack" in _tag(section, r"<table[^>]*>")
    cells = re.findall(r"<td[^>]*>", section)
    assert cells and all("data-label=" in cell for cell in cells)
    assert re.findall(r'data-label="([^"]+)"', section)[:4] == ["Prioritisation", "Method", "CR", "Verdict"]
    # The stacked row's header cell heads its card instead of keeping its table layout.
    assert "display: block" in _rule((STATIC / "approve.css").read_text(), ".table--stack tbody th")


def test_the_ahp_scale_points_are_24_px_targets_in_the_css():
    css = (STATIC / "pages" / "expert.css").read_text()
    radio = _rule(css, ".pair__point input")
    for side in ("width", "height"):
        assert _rem(re.search(side + r":\s*([^;]+);", radio).group(1)) >= 1.5
    point = _rule(css, ".pair__point")
    assert _rem(re.search(r"min-width:\s*([^;]+);", point).group(1)) >= 1.5
    assert _rem(re.search(r"min-height:\s*([^;]+);", point).group(1)) >= 1.5
    columns = re.search(r"grid-template-columns:\s*repeat\(17,\s*minmax\(([^,]+),", _rule(css, ".pair__points"))
    assert columns and _rem(columns.group(1)) >= 1.5
    # Below 17 such points the scale folds onto rows of eight, "equal" alone between them.
    assert "repeat(8, minmax(1.5rem, 1fr))" in css and "@container (max-width: 27rem)" in css


# --- 13. smaller findings --------------------------------------------------------------


def _monte_carlo(run):
    analysis = analyses.analysis_launch(
        run=run, kind="monte_carlo", launched_by=None, samples=50, seed=3, spec={"peer_weights": True}
    )
    for chunk_id in analysis.chunks.values_list("pk", flat=True):
        analyses.chunk_execute(chunk_id=chunk_id)
    analysis.refresh_from_db()
    return analysis


def test_the_monte_carlo_card_names_only_ranks_that_exist(client, run):
    candidates = len(run.results["candidates"])
    assert candidates == 4
    analysis = _monte_carlo(run)
    client.force_login(run.study.designer)
    for url in (
        reverse("run_robustness", args=[run.pk]),
        reverse("run_analysis_status", args=[run.pk, analysis.pk]),
    ):
        response = client.get(url)
        text = response.content.decode()
        card = text[text.index('id="analysis-monte_carlo"') :]
        legend = re.findall(r'<text x="[\d.]+" y="16">([^<]+)</text>', card)
        assert legend == ["rank 1", "rank 2", "rank 3", "rank 4"]
        assert "or lower" not in card and "Rank 5" not in card
        assert re.findall(r'<th scope="col" class="number">Rank (\d)</th>', card) == ["1", "2", "3", "4"]
        chart = response.context["monte_carlo_chart"]
        # Each bar is its candidate's four rank shares, no rest.
        assert len(chart.legend) == 4 and all(len(row.segments) <= 4 for row in chart.rows)


def test_a_long_legend_starts_at_the_charts_left_edge():
    long_names = ["LogisticRegression (149b846f)", "RandomForestClassifier (a0b1c2d3)"]
    chart = charts.stacked_bar_chart(
        chart_id="c",
        title="t",
        description="d",
        labels=long_names,
        parts=[f"rank {r}" for r in range(1, 6)],
        values=[[0.2] * 5, [0.1] * 5],
        rest_label="rank 6 or lower",
    )
    last = chart.legend[-1]
    assert last.series.name == "rank 6 or lower"
    assert last.text_x + len(last.series.name) * charts.FONT_WIDTH <= charts.WIDTH


def _runs_of(study, count):
    runs = []
    for _ in range(count):
        run = engine_services.run_launch(study=study, launched_by=study.designer)
        engine_services.run_execute(run_id=run.pk)
        runs.append(run)
    return runs


def test_runs_are_numbered_within_their_study(make_study, cast, client, api):
    other = make_study(Phase.CLOSED, title="Another study")
    _runs_of(other.study, 3)  # runs of another study come first: ids 1 to 3
    built = make_study(Phase.CLOSED)
    client.force_login(cast.alice)
    response = client.post(f"/studies/{built.study.pk}/runs/", follow=True)
    first = Run.objects.filter(study=built.study).get()
    assert (first.number, first.pk) == (1, 4)
    text = response.content.decode()
    assert "Run 1 was launched." in text and '<h2 class="run-head__title">Run 1</h2>' in text
    engine_services.run_execute(run_id=first.pk)
    (second,) = _runs_of(built.study, 1)
    assert second.number == 2
    runs = client.get(f"/studies/{built.study.pk}/runs/").content.decode()
    assert f'<a class="table__title" href="/runs/{first.pk}/">Run 1</a>' in runs
    assert f'<a class="table__title" href="/runs/{second.pk}/">Run 2</a>' in runs
    assert f'href="/runs/{first.pk}/compare/{second.pk}/">with run 1</a>' in runs
    compared = client.get(f"/runs/{first.pk}/compare/{second.pk}/").content.decode()
    assert "Run 1 → run 2" in compared
    assert "How sure is run 2's ranking?" in html.unescape(
        client.get(f"/runs/{second.pk}/robustness/").content.decode()
    )
    # The API keeps the id and adds the number.
    body = api(cast.alice).get(f"/api/v1/runs/{second.pk}/").json()
    assert (body["id"], body["number"]) == (second.pk, 2)
    listed = api(cast.alice).get(f"/api/v1/studies/{built.study.pk}/runs/").json()["results"]
    assert [(r["id"], r["number"]) for r in listed] == [(second.pk, 2), (first.pk, 1)]
    # The results document's "run" stays the id.
    assert client.get(f"/runs/{second.pk}/results.json").json()["run"] == second.pk


def test_a_studys_runs_never_share_a_number(make_study):
    built = make_study(Phase.CLOSED)
    run = engine_services.run_launch(study=built.study, launched_by=built.study.designer)
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(study=built.study, number=run.number)
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(study=built.study, number=0)
    assert Run.objects.create(study=built.study).number == 2


@pytest.mark.django_db(transaction=True)
def test_the_migration_numbers_existing_runs_per_study_by_id():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("engine", "0011_snapshot_expert_values")], [("engine", "0012_run_number")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    # the other apps stay at their latest migrations (workspace's study has its quorum)
    others = [node for node in executor.loader.graph.leaf_nodes() if node[0] != "engine"]
    try:
        apps = executor.loader.project_state(before + others).apps
        designer = apps.get_model("auth", "User").objects.create(username="designer")
        Study, OldRun = apps.get_model("workspace", "Study"), apps.get_model("engine", "Run")
        one, two = (Study.objects.create(title=title, designer=designer) for title in ("One", "Two"))
        order = [one, two, one, one, two]
        ids = [OldRun.objects.create(study=study).pk for study in order]
        History = apps.get_model("engine", "HistoricalRun")
        NOW = "2026-01-01T00:00:00Z"
        for pk, study in zip(ids, order, strict=True):
            History.objects.create(id=pk, study_id=study.pk, launched_at=NOW, history_date=NOW, history_type="+")
        History.objects.create(id=999, study_id=one.pk, launched_at=NOW, history_date=NOW, history_type="-")
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        apps = executor.loader.project_state(after + others).apps
        numbers = dict(apps.get_model("engine", "Run").objects.values_list("pk", "number"))
        assert [numbers[pk] for pk in ids] == [1, 1, 2, 3, 2]
        copies = dict(apps.get_model("engine", "HistoricalRun").objects.values_list("id", "number"))
        assert copies == {**numbers, 999: 0}
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.skipif(connection.vendor != "postgresql", reason="launches at once: PostgreSQL (SQLite serialises writes)")
@pytest.mark.django_db(transaction=True)
def test_launches_at_once_take_the_numbers_in_turn(monkeypatch):
    """Eight launches of one study at once, after a first (so that each
    copies its snapshot and none waits to check the inputs; each its own
    connection, the study's row lock only shared between them), each slow to
    commit once its run is written: runs numbered 2 to 9, none refused."""
    from tests.engine.test_snapshot_reuse import _at_once

    monkeypatch.setattr(engine_services, "_enqueue", lambda run_id, *priority: True)
    study = study_import_bundle(bundle=case_study_bundle())
    first = engine_services.run_launch(study=study, launched_by=study.designer)
    real_on_commit = transaction.on_commit

    def slow_commit(function, *args, **kwargs):
        threading.Event().wait(0.2)  # the run is written, not yet committed
        return real_on_commit(function, *args, **kwargs)

    monkeypatch.setattr(engine_services.transaction, "on_commit", slow_commit)
    try:
        runs = _at_once(8, lambda i: engine_services.run_launch(study=study, launched_by=study.designer).pk)
        assert first.number == 1
        assert sorted(Run.objects.filter(pk__in=runs).values_list("number", flat=True)) == list(range(2, 10))
    finally:
        Run.objects.filter(study=study).delete()
        study.delete()
