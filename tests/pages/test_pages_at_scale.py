"""Pages whose size does not grow with the study (issue 19): the ranges
step's binned strip beyond limits.STRIP_MARKS_MAX candidates, the candidates
a range would newly veto (recomputed literally here) named a page at a time,
the preview sending only the outcomes that changed, and the measurements
table paged with a CSV of every value."""

import csv
import html
import io
import math
import re

import pytest
from django.test import Client

from workspace import limits
from workspace.models import AcceptableRange, Candidate, Measurement, Metric, Phase

EXTRA = 60  # more than limits.STRIP_MARKS_MAX, fewer than three pages of CANDIDATES_PER_PAGE


def body(response):
    return html.unescape(response.content.decode())


def text(response):
    """The page as read: tags dropped, white space collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", body(response)).split()).replace(" ,", ",").replace(" .", ".")


def login(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def crowded(make_study):
    """The standard study in assessment with 60 more candidates measured on
    Success rate only (0.40, 0.41, ... 0.99), so its strip is binned; bob's
    saved range of it is [0.5, 0.95]."""
    assert limits.STRIP_MARKS_MAX < EXTRA + 2
    built = make_study(Phase.ASSESSMENT, inputs=True)
    success = built.metrics["Success rate"]
    for n in range(EXTRA):
        candidate = Candidate.objects.create(study=built.study, name=f"Extra {n:02d}", position=100 + n)
        Measurement.objects.create(study=built.study, candidate=candidate, metric=success, value=0.40 + n / 100)
    AcceptableRange.objects.update_or_create(
        expert=built.bob, metric=success, defaults={"least_acceptable": 0.5, "desired": 0.95}
    )
    return built


def measured(built, metric_name):
    """Every (candidate, value) of a metric, in the study's order: the literal input."""
    return [
        (m.candidate.name, m.value)
        for m in Measurement.objects.filter(metric__name=metric_name, study=built.study)
        .select_related("candidate")
        .order_by("candidate__position", "candidate_id")
    ]


def saved_range(built, metric_name):
    stored = AcceptableRange.objects.filter(expert=built.bob, metric__name=metric_name).first()
    if stored:
        return stored.least_acceptable, stored.desired
    return tuple(built.metrics[metric_name].default_range)


def literally_vetoed(values, least, desired):
    """METHOD.md 4: at or beyond the least acceptable value, away from the desired one."""
    if desired > least:
        return [name for name, value in values if value <= least]
    return [name for name, value in values if value >= least]


def typed(built, **changes):
    """The ranges form as saved, with ``changes`` (metric name -> (least, desired))."""
    data = {}
    for name in ("Success rate", "AUC", "Fold stdev", "Training time"):
        metric = built.metrics[name]
        least, desired = changes.get(name) or saved_range(built, name)
        data[f"least-{metric.pk}"], data[f"desired-{metric.pk}"] = repr(least), repr(desired)
    return data


def outcome_of(response, metric):
    return next(row["outcome"] for row in response.context["rows"] if row["metric"].pk == metric.pk)


def test_beyond_the_limit_the_strip_is_binned_and_counts_each_candidate_once(crowded, cast):
    response = login(cast.bob).get(f"/studies/{crowded.study.pk}/my/ranges/")
    success = crowded.metrics["Success rate"]
    outcome = outcome_of(response, success)
    strip = outcome["strip"]
    assert strip["binned"] and strip["marks"] == [] and outcome["candidates"] == []
    values = measured(crowded, "Success rate")
    least, desired = saved_range(crowded, "Success rate")
    vetoed = set(literally_vetoed(values, least, desired))
    # The literal bins: the axis spans the values and both bounds.
    low, high = min([least, desired, *(v for _, v in values)]), max([least, desired, *(v for _, v in values)])
    bins = limits.STRIP_BINS
    literal = {}
    for name, value in values:
        index = min(math.floor((value - low) / (high - low) * bins), bins - 1)
        count, vetoes = literal.get(index, (0, 0))
        literal[index] = (count + 1, vetoes + (name in vetoed))
    assert [(b.measured, b.vetoed) for b in strip["bins"]] == [literal[i] for i in sorted(literal)]
    page = body(response)
    assert f"This range vetoes {len(vetoed)} of {len(values)} candidates, none newly." in text(response)
    assert (
        'class="strip strip--binned"' in page
        and "range-table" not in page.split(f"range-outcome-{success.pk}")[1][:3000]
    )
    # The metrics with two candidates keep a mark and a table row each.
    auc = outcome_of(response, crowded.metrics["AUC"])
    assert not auc["strip"]["binned"] and [c["name"] for c in auc["candidates"]] == ["J48", "JRip"]


def test_the_newly_vetoed_are_named_a_page_at_a_time_as_a_literal_recomputation(crowded, cast, unchanged):
    success = crowded.metrics["Success rate"]
    values = measured(crowded, "Success rate")
    before = set(literally_vetoed(values, *saved_range(crowded, "Success rate")))
    tighter = (0.93, 0.95)
    newly = [name for name in literally_vetoed(values, *tighter) if name not in before]
    assert len(newly) > limits.CANDIDATES_PER_PAGE  # so that there are pages
    data = typed(crowded, **{"Success rate": tighter})
    client = login(cast.bob)
    with unchanged():
        first = client.post(f"/studies/{crowded.study.pk}/my/ranges/", {**data, "preview": "1"})
        second = client.post(f"/studies/{crowded.study.pk}/my/ranges/", {**data, "vetoed-page": f"{success.pk}-2"})
    shown = outcome_of(first, success)["newly"]
    assert list(shown.paginator.object_list) == newly
    assert list(shown.object_list) == newly[: limits.CANDIDATES_PER_PAGE]
    assert (
        list(outcome_of(second, success)["newly"].object_list)
        == newly[limits.CANDIDATES_PER_PAGE :][: limits.CANDIDATES_PER_PAGE]
    )
    page = body(first)
    assert f"{len(newly)} newly" in text(first)
    assert f"Newly vetoed (1–{limits.CANDIDATES_PER_PAGE} of {len(newly)}):" in text(first)
    assert f'name="vetoed-page" value="{success.pk}-2"' in page
    assert ", ".join(newly[: limits.CANDIDATES_PER_PAGE]) + "." in page
    assert newly[limits.CANDIDATES_PER_PAGE] not in page.split("Newly vetoed")[1].split("</div>")[0]
    # The page button kept what was typed, and saved nothing (unchanged()).
    assert re.search(rf'name="least-{success.pk}"[^>]*value="0.93"', body(second))


def test_the_preview_sends_only_the_outcomes_that_changed(crowded, cast):
    client = login(cast.bob)
    page = client.get(f"/studies/{crowded.study.pk}/my/ranges/")
    shown = dict(re.findall(r'name="(shown-\d+)" value="([^"]*)"', page.content.decode()))
    assert len(shown) == 4
    success, time = crowded.metrics["Success rate"], crowded.metrics["Training time"]
    data = {**typed(crowded, **{"Training time": (5.0, 1.0)}), **shown}
    response = client.post(f"/studies/{crowded.study.pk}/my/ranges/preview/", data)
    answer = body(response)
    assert [row["metric"].pk for row in response.context["rows"]] == [time.pk]
    assert f'id="range-outcome-{time.pk}"' in answer and f'id="range-outcome-{success.pk}"' not in answer
    # The summary counts every metric's vetoes, changed or not.
    success_vetoed = set(literally_vetoed(measured(crowded, "Success rate"), *saved_range(crowded, "Success rate")))
    time_vetoed = set(literally_vetoed(measured(crowded, "Training time"), 5.0, 1.0))
    vetoed = success_vetoed | time_vetoed
    assert len(vetoed) <= limits.CANDIDATES_PER_PAGE  # few enough to be named, in the study's order
    assert f"With these ranges {len(vetoed)} candidates would be vetoed: JRip (by Training time); Extra 00 (by" in text(
        response
    )


# --- the measurements table ----------------------------------------------------------------------------


def test_measurements_are_paged_and_the_csv_holds_every_value(crowded, cast):
    client = login(cast.alice)
    base = f"/studies/{crowded.study.pk}/measurements/"
    first, last = body(client.get(base)), body(client.get(base + "?page=3"))
    names = [c.name for c in Candidate.objects.filter(study=crowded.study).order_by("position", "id")]
    rows = lambda page: re.findall(r'<th scope="row">([^<]+)</th>', page)  # noqa: E731
    assert rows(first) == names[: limits.CANDIDATES_PER_PAGE]
    assert rows(last) == names[2 * limits.CANDIDATES_PER_PAGE :]
    assert f"Candidates 51–{len(names)} of {len(names)}" in last
    assert 'href="?page=2#table-title">Previous' in last and ">Next<" not in last
    # Every value, measured or not, in the download (wide, full precision).
    download = client.get(f"/studies/{crowded.study.pk}/measurements.csv")
    assert download["Content-Type"].startswith("text/csv")
    table = list(csv.reader(io.StringIO(download.content.decode())))
    metrics = [
        m.name for m in Metric.objects.filter(study=crowded.study).order_by("attribute__position", "position", "id")
    ]
    assert table[0] == ["candidate", *metrics]
    assert [row[0] for row in table[1:]] == names
    values = {
        (m.candidate.name, m.metric.name): m.value
        for m in Measurement.objects.filter(study=crowded.study).select_related("candidate", "metric")
    }
    assert {
        (row[0], metric): float(cell)
        for row in table[1:]
        for metric, cell in zip(metrics, row[1:], strict=True)
        if cell
    } == values
    # An expert reads the pages and downloads too; nobody else does.
    assert login(cast.bob).get(f"/studies/{crowded.study.pk}/measurements.csv").status_code == 200
    assert login(cast.charlie).get(f"/studies/{crowded.study.pk}/measurements.csv").status_code == 404


def test_a_page_of_the_table_saves_its_own_cells(crowded, cast):
    client = login(cast.alice)
    success = crowded.metrics["Success rate"]
    target = Candidate.objects.get(study=crowded.study, name="Extra 55")
    url = f"/studies/{crowded.study.pk}/measurements/?page=3"
    form = dict(
        re.findall(r'<input type="text" name="(cell-[\d-]+)" value="([^"]*)"', client.get(url).content.decode())
    )
    assert len(form) == (EXTRA + 2 - 50) * Metric.objects.filter(study=crowded.study).count()
    response = client.post(url, {**form, f"cell-{target.pk}-{success.pk}": "0.5"})
    assert response.status_code == 302 and response["Location"].endswith("/measurements/?page=3")
    assert Measurement.objects.get(candidate=target, metric=success).value == 0.5
    # Cells of other pages are not in the form: nothing else changed.
    assert Measurement.objects.get(candidate__name="Extra 00", metric=success).value == 0.40


def test_the_setup_pages_its_candidates(crowded, cast):
    client = login(cast.alice)
    names = [c.name for c in Candidate.objects.filter(study=crowded.study).order_by("position", "id")]
    listed = lambda page: re.findall(r'<span class="table__title">([^<]+)</span>', page.split('id="candidates"')[1])  # noqa: E731
    first = body(client.get(f"/studies/{crowded.study.pk}/setup/"))
    second = body(client.get(f"/studies/{crowded.study.pk}/setup/?page=2"))
    assert listed(first) == names[: limits.CANDIDATES_PER_PAGE]
    assert listed(second) == names[limits.CANDIDATES_PER_PAGE : 2 * limits.CANDIDATES_PER_PAGE]
    assert f"Candidates ({len(names)})" in first and f"Candidates 26–50 of {len(names)}" in second
    assert 'href="?page=3#candidates">Next' in second
