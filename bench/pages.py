"""Benchmark of every page of docs/pages.md at the documented limits (not a
test): issue 19, item 1.

Builds two studies from ``approve-study/1`` bundles (bench/scale.py's shape,
fixed seed): 100 experts x 20 metrics x 1,000 candidates, and 4 experts x
4 metrics x 4 candidates. Each is imported closed, run twice (for the run
pages and the comparison), then put back in assessment so that the expert
steps are editable, as experts see them. Then, for every page of the map, as
the designer and as an expert (``expert000``; pages a role may not open are
left out), it prints the HTML bytes, the SQL queries and the CPU time of
this process (the best of a few requests), at both sizes, and the ratio of
the big page's CPU time to the small one's, against the goals of issue 19:

* under 1 MB of HTML at 100 x 20 x 1,000;
* under 3x the CPU time of the same page at 4 x 4, 10x for the two pages
  that list every expert by nature (the experts page and the peer-weights
  step);
* the robustness page's what-if fragment within 200 ms of CPU.

The run's pages include its on-demand section ("What the experts weighed",
``/runs/{run}/weights/``), a candidate's breakdown and the paged comparison,
asked for as htmx asks (``HX-Request: true``) where they are fragments.
Downloads (the bundle, the results JSON and CSV, the measurements CSV, the
API's study export) are listed too, measured without the size goal: they
carry the whole study.

How to run it, from the repository root, on a PostgreSQL database of your own::

    createdb -h 127.0.0.1 -U postgres approve_bench
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/approve_bench
    .venv/bin/python manage.py migrate
    .venv/bin/python bench/pages.py

``--only SUBSTRING`` measures the pages whose name contains it. Both studies
are deleted at the end unless ``--keep`` is given.
"""

import argparse
import io
import json
import os
import pathlib
import sys
import time
import warnings

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import scale  # noqa: E402  (bench/scale.py: the bundle and the Django set-up)

SIZE_GOAL = 1_000_000
RATIO_GOAL, EVERY_EXPERT_RATIO_GOAL = 3.0, 10.0
WHAT_IF_GOAL = 0.2  # seconds of CPU for the robustness what-if at 100 x 20 x 1,000
BIG = {"experts": 100, "attributes": 5, "metrics_per_attribute": 4, "candidates": 1000}
SMALL = {"experts": 4, "attributes": 2, "metrics_per_attribute": 2, "candidates": 4}


def bundle(experts, attributes, metrics_per_attribute, candidates):
    """bench/scale.py's closed study, at another size."""
    saved = (scale.EXPERTS, scale.ATTRIBUTES, scale.METRICS_PER_ATTRIBUTE, scale.CANDIDATES)
    scale.EXPERTS, scale.ATTRIBUTES, scale.METRICS_PER_ATTRIBUTE, scale.CANDIDATES = (
        experts,
        attributes,
        metrics_per_attribute,
        candidates,
    )
    try:
        built = scale.scale_bundle()
    finally:
        scale.EXPERTS, scale.ATTRIBUTES, scale.METRICS_PER_ATTRIBUTE, scale.CANDIDATES = saved
    built["title"] = f"Pages benchmark {experts}x{attributes * metrics_per_attribute}x{candidates}"
    built["designer"] = f"bench-designer-{candidates}"
    built["experts"] = [f"{name}-{candidates}" for name in built["experts"]]
    rename = {name.removesuffix(f"-{candidates}"): name for name in built["experts"]}
    built["priorities"] = {rename[e]: p for e, p in built["priorities"].items()}
    built["ranges"] = {rename[e]: r for e, r in built["ranges"].items()}
    built["peer_weights"] = {rename[e]: {rename[o]: w for o, w in p.items()} for e, p in built["peer_weights"].items()}
    return built


def build(size):
    """Import the study, run it twice, reopen the assessment: (study, expert, runs)."""
    from django.core.management import call_command
    from django.db.models import F

    from engine.models import Run
    from workspace.models import Study

    text = json.dumps(bundle(**size))
    path = pathlib.Path(f"/tmp/approve-pages-bundle-{os.getpid()}-{size['candidates']}.json")
    path.write_text(text, encoding="utf-8")
    try:
        out = io.StringIO()
        call_command("import_study", str(path), stdout=out)
    finally:
        path.unlink(missing_ok=True)
    study = Study.objects.select_related("designer").get(pk=int(out.getvalue()))
    for _ in range(2):
        call_command("run_validation", str(study.pk), "--json", stdout=io.StringIO())
    succeeded = Run.objects.filter(study=study, status=Run.Status.SUCCEEDED)
    runs = list(succeeded.order_by("pk").values_list("pk", flat=True))
    # Operators' tool: the phase is moved back directly, as the admin would not.
    Study.objects.filter(pk=study.pk).update(phase="assessment", updated_at=F("updated_at"))
    study.refresh_from_db()
    expert = study.memberships.select_related("user").filter(role="expert").order_by("user__username").first()
    return study, expert.user, runs


def pages(study, expert_user, runs):
    """``[(name, method, url, data, who, kind)]``: every page of the map.
    ``who`` is the roles that open it; ``kind`` "page", "download",
    "every expert" (the two pages that list every expert by nature) or
    "what-if" (the robustness page's fragment, whose goal is a time)."""
    from workspace.models import Metric

    s, (first, second) = study.pk, runs[:2]
    metrics = list(Metric.objects.filter(study=study, is_selected=True).order_by("position", "id"))
    ranges = {
        r["metric_id"]: (r["least_acceptable"], r["desired"])
        for r in expert_user.memberships.get(study=study, role="expert").ranges.values(
            "metric_id", "least_acceptable", "desired"
        )
    }
    typed = {}
    for n, metric in enumerate(metrics):
        least, desired = ranges.get(metric.pk) or metric.default_range
        if n == 0:  # one range typed tighter than saved: some candidates newly vetoed
            least = least + (desired - least) * 0.3
        typed[f"least-{metric.pk}"], typed[f"desired-{metric.pk}"] = repr(least), repr(desired)
    candidate = study.candidates.order_by("position", "id").values_list("name", flat=True).first()
    # The what-if: the first attribute's weight doubled, the others as the run had them.
    what_if = "w0=60&w1=10"
    both, designer, expert = ("designer", "expert"), ("designer",), ("expert",)
    return [
        ("dashboard", "get", "/", None, both, "page"),
        ("study home", "get", f"/studies/{s}/", None, both, "page"),
        ("phase confirmation", "get", f"/studies/{s}/phase/closed/", None, designer, "page"),
        ("study delete", "get", f"/studies/{s}/delete/", None, designer, "page"),
        ("setup", "get", f"/studies/{s}/setup/", None, both, "page"),
        ("measurements", "get", f"/studies/{s}/measurements/", None, both, "page"),
        ("measurements.csv", "get", f"/studies/{s}/measurements.csv", None, both, "download"),
        ("experts", "get", f"/studies/{s}/experts/", None, designer, "every expert"),
        ("expert inputs", "get", f"/studies/{s}/inputs/{expert_user.username}/", None, designer, "page"),
        ("bundle.json", "get", f"/studies/{s}/bundle.json", None, designer, "download"),
        ("predictions", "get", f"/studies/{s}/predictions/", None, designer, "page"),
        ("votes step", "get", f"/studies/{s}/my/votes/", None, expert, "page"),
        ("priorities step", "get", f"/studies/{s}/my/priorities/", None, expert, "page"),
        ("priorities preview", "post", f"/studies/{s}/my/priorities/preview/", {"method": "ahp"}, expert, "page"),
        ("ranges step", "get", f"/studies/{s}/my/ranges/", None, expert, "page"),
        ("ranges preview", "post", f"/studies/{s}/my/ranges/preview/", typed, expert, "page"),
        ("ranges check (no JS)", "post", f"/studies/{s}/my/ranges/", {**typed, "preview": "1"}, expert, "page"),
        ("peer-weights step", "get", f"/studies/{s}/my/peer-weights/", None, expert, "every expert"),
        ("discussion", "get", f"/studies/{s}/discussion/", None, both, "page"),
        ("revision rounds", "get", f"/studies/{s}/rounds/", None, both, "page"),
        ("runs", "get", f"/studies/{s}/runs/", None, both, "page"),
        ("runs status", "get", f"/studies/{s}/runs/status/", None, both, "page"),
        ("run page", "get", f"/runs/{second}/", None, both, "page"),
        ("run status", "get", f"/runs/{second}/status/", None, both, "page"),
        ("run: experts weighed", "get", f"/runs/{second}/weights/", None, both, "page"),
        ("candidate breakdown", "get", f"/runs/{second}/candidates/{candidate}/", None, both, "page"),
        ("comparison", "get", f"/runs/{second}/compare/{first}/", None, both, "page"),
        ("comparison page 2", "get", f"/runs/{second}/compare/{first}/?page=2", None, both, "page"),
        ("robustness", "get", f"/runs/{second}/robustness/", None, both, "page"),
        ("robustness what-if", "get", f"/runs/{second}/robustness/what-if/?{what_if}", None, both, "what-if"),
        ("results.json", "get", f"/runs/{second}/results.json", None, both, "download"),
        ("results.csv", "get", f"/runs/{second}/results.csv", None, both, "download"),
        ("API export", "get", f"/api/v1/studies/{s}/export/", None, designer, "download"),
    ]


def measure(client, method, url, data, repeat):
    """Bytes, queries and the best CPU time of ``repeat`` requests (after
    one to warm the caches), or None if the role may not open the page."""
    from django.db import connection

    def once():
        # As htmx asks (the breakdown and the previews are its fragments).
        # As htmx asks (the breakdown, the run page's sections, the previews and the what-if are its fragments).
        fragment = any(part in url for part in ("/candidates/", "/weights/", "preview", "/what-if/"))
        headers = {"HX-Request": "true"} if fragment else {}
        if method == "get":
            return client.get(url, secure=True, headers=headers)
        return client.post(url, data, secure=True, headers=headers)

    first = once()
    if first.status_code in (403, 404, 405):
        return None
    assert first.status_code == 200, (url, first.status_code)
    best, queries = None, 0
    for _ in range(repeat):
        counter = scale.Counter()
        with connection.execute_wrapper(counter):
            cpu = time.process_time()
            response = once()
            cpu = time.process_time() - cpu
        best = cpu if best is None else min(best, cpu)
        queries = counter.queries
    return {"bytes": len(response.content), "queries": queries, "cpu": best}


def run(only, keep, repeat):
    from django.conf import settings
    from django.test import Client, override_settings
    from django.test.utils import setup_test_environment

    from workspace.models import Study

    warnings.filterwarnings("ignore", message="No directory at")
    setup_test_environment()
    # DEBUG is off (scale.setup_django) but nothing is collected: static
    # URLs are written as in development, without the manifest.
    plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
    storages = override_settings(STORAGES={**settings.STORAGES, "staticfiles": plain})
    storages.enable()
    built = []
    rows = []
    try:
        for size in (SMALL, BIG):
            built.append(build(size))
        clients = {}
        for study, expert_user, _runs in built:
            designer, expert = Client(), Client()
            designer.force_login(study.designer)
            expert.force_login(expert_user)
            clients[study.pk] = {"designer": designer, "expert": expert}
        (small, small_expert, small_runs), (big, big_expert, big_runs) = built
        for small_page, big_page in zip(
            pages(small, small_expert, small_runs), pages(big, big_expert, big_runs), strict=True
        ):
            name, method, _url, _data, who, kind = small_page
            if only and only not in name:
                continue
            for role in who:
                a = measure(clients[small.pk][role], *small_page[1:4], repeat=repeat * 2)
                b = measure(clients[big.pk][role], *big_page[1:4], repeat=repeat)
                if a is None or b is None:
                    continue
                rows.append({"page": name, "role": role, "kind": kind, "small": a, "big": b})
    finally:
        if not keep:
            Study.objects.filter(pk__in=[study.pk for study, _e, _r in built]).delete()
    return rows


def report(rows):
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"load average: {load}   CPU: this process (best of the repeats)")
    print("small: 4 experts x 4 metrics x 4 candidates   big: 100 experts x 20 metrics x 1,000 candidates")
    header = (
        f"{'page':<22} {'role':<8} {'bytes 4x4':>10} {'bytes big':>10} {'q 4x4':>5} {'q big':>5} "
        f"{'cpu 4x4':>8} {'cpu big':>8} {'ratio':>6} {'goal':>5}  verdict"
    )
    print(header)
    print("-" * len(header))
    missed = 0
    for row in rows:
        a, b = row["small"], row["big"]
        ratio = b["cpu"] / a["cpu"] if a["cpu"] > 0 else float("inf")
        goal = EVERY_EXPERT_RATIO_GOAL if row["kind"] == "every expert" else RATIO_GOAL
        goal_text = f"{WHAT_IF_GOAL * 1000:.0f}ms" if row["kind"] == "what-if" else f"{goal:.0f}"
        if row["kind"] == "download":
            verdict = "download (no goal)"
        else:
            problems = []
            if b["bytes"] >= SIZE_GOAL:
                problems.append("size")
            if row["kind"] == "what-if" and b["cpu"] >= WHAT_IF_GOAL:
                problems.append(f"time ({WHAT_IF_GOAL * 1000:.0f} ms)")
            elif row["kind"] != "what-if" and ratio >= goal:
                problems.append("cpu")
            verdict = "MISSES " + ", ".join(problems) if problems else "ok"
            missed += bool(problems)
        print(
            f"{row['page']:<22} {row['role']:<8} {scale._figure(a['bytes'], 'bytes'):>10} "
            f"{scale._figure(b['bytes'], 'bytes'):>10} {a['queries']:>5} {b['queries']:>5} "
            f"{a['cpu'] * 1000:>6.1f}ms {b['cpu'] * 1000:>6.1f}ms {ratio:>6.1f} {goal_text:>5}  {verdict}"
        )
    print(f"{missed} page(s) miss a goal")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="measure only the pages whose name contains this")
    parser.add_argument("--keep", action="store_true", help="keep both studies")
    parser.add_argument("--repeat", type=int, default=3, help="requests per big page (the small ones get twice)")
    args = parser.parse_args()
    scale.setup_django(pathlib.Path(__file__).resolve().parent.parent)
    report(run(args.only, args.keep, args.repeat))


if __name__ == "__main__":
    main()
