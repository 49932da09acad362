"""Benchmark of a run's pages at scale (not a test): issue 19, item 1.

Builds bench/scale.py's closed study at 100 experts x 20 metrics x 1,000
candidates and the same study at 4 x 4 x 4, runs each twice (eagerly, in
this process), and prints for the run page, its status fragment, its
on-demand sections, one candidate's breakdown, the comparison of the two runs
and the API's study export: HTML bytes, SQL queries and CPU time (the best of
``--repeat``), each beside the same figure at 4 x 4 and their ratio. Goals:
under 1 MB and under 3x the 4 x 4 CPU time.

How to run it, from the repository root, on a PostgreSQL database of your own::

    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/approve_bench
    .venv/bin/python manage.py migrate
    .venv/bin/python bench/run_pages.py

``--root DIR`` measures another checkout's code (e.g. main before a change);
its pages that do not exist there are shown as missing. The studies are
deleted at the end.
"""

import argparse
import io
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import scale  # noqa: E402  (bench/scale.py: the study and Django's set-up)

SMALL = {"EXPERTS": 4, "ATTRIBUTES": 2, "METRICS_PER_ATTRIBUTE": 2, "CANDIDATES": 4}
LARGE = {"EXPERTS": 100, "ATTRIBUTES": 5, "METRICS_PER_ATTRIBUTE": 4, "CANDIDATES": 1000}
GOAL_BYTES, GOAL_RATIO = 1_000_000, 3.0


def _bundle(size: dict) -> dict:
    saved = {name: getattr(scale, name) for name in size}
    try:
        for name, value in size.items():
            setattr(scale, name, value)
        return scale.scale_bundle()
    finally:
        for name, value in saved.items():
            setattr(scale, name, value)


def _study(size: dict):
    from django.core.management import call_command

    from engine.models import Run
    from workspace.models import Study

    path = pathlib.Path(f"/tmp/approve-run-pages-{os.getpid()}.json")
    path.write_text(json.dumps(_bundle(size)), encoding="utf-8")
    try:
        out = io.StringIO()
        call_command("import_study", str(path), stdout=out)
    finally:
        path.unlink(missing_ok=True)
    study = Study.objects.select_related("designer").get(pk=int(out.getvalue()))
    for _ in range(2):
        call_command("run_validation", str(study.pk), "--json", stdout=io.StringIO())
    runs = list(
        Run.objects.filter(study=study, status=Run.Status.SUCCEEDED).order_by("pk").values_list("pk", flat=True)
    )
    return study, runs


def _pages(study, runs) -> dict[str, tuple[str, dict]]:
    first, second = runs
    candidate = "candidate 0000" if study.candidates.filter(name="candidate 0000").exists() else "candidate 0001"
    hx = {"HX-Request": "true"}
    return {
        "run page": (f"/runs/{second}/", {}),
        "status fragment (finished run)": (f"/runs/{second}/status/", hx),
        "section: what the experts weighed": (f"/runs/{second}/weights/", hx),
        "section: a candidate's breakdown": (f"/runs/{second}/candidates/{candidate}/", hx),
        "comparison": (f"/runs/{second}/compare/{first}/", {}),
        "API export": (f"/api/v1/studies/{study.pk}/export/", {}),
    }


def _measure(client, url: str, headers: dict, repeat: int):
    from django.db import connection

    best = None
    for _ in range(repeat):
        counter = scale.Counter()
        with connection.execute_wrapper(counter):
            cpu = time.process_time()
            response = client.get(url, headers=headers, secure=True)
            cpu = time.process_time() - cpu
        if response.status_code != 200:
            return None
        figure = (cpu, len(response.content), counter.queries)
        best = figure if best is None or figure[0] < best[0] else best
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    scale.setup_django(pathlib.Path(args.root))
    import warnings

    from django.conf import settings
    from django.test import Client
    from django.test.utils import setup_test_environment

    from workspace.models import Study

    warnings.filterwarnings("ignore", message="No directory at")
    setup_test_environment()
    # Pages link their static files: no collectstatic (and its manifest) needed here.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    made = []
    try:
        small, small_runs = _study(SMALL)
        made.append(small.pk)
        large, large_runs = _study(LARGE)
        made.append(large.pk)
        small_pages, large_pages = _pages(small, small_runs), _pages(large, large_runs)
        figures = {}
        for label, study, pages in (("4x4", small, small_pages), ("100x20x1000", large, large_pages)):
            client = Client()
            client.force_login(study.designer)
            client.get(next(iter(pages.values()))[0], secure=True)  # warm
            figures[label] = {
                page: _measure(client, url, headers, args.repeat) for page, (url, headers) in pages.items()
            }
    finally:
        Study.objects.filter(pk__in=made).delete()
    print(f"root {args.root}; load {' '.join(f'{v:.1f}' for v in os.getloadavg())}; best CPU of {args.repeat}")
    print(
        f"{'page':36} {'4x4 KB':>8} {'q':>3} {'CPU ms':>7} | "
        f"{'large KB':>9} {'q':>3} {'CPU ms':>7} | {'CPU x':>6}  goals"
    )
    for page in small_pages:
        a, b = figures["4x4"][page], figures["100x20x1000"][page]
        if a is None or b is None:
            print(f"{page:36} (missing in this checkout)")
            continue
        ratio = b[0] / a[0]
        ok = "ok" if b[1] < GOAL_BYTES and ratio < GOAL_RATIO else "MISSED"
        print(
            f"{page:36} {a[1] / 1000:8.1f} {a[2]:3d} {a[0] * 1000:7.1f} | "
            f"{b[1] / 1000:9.1f} {b[2]:3d} {b[0] * 1000:7.1f} | {ratio:6.2f}  {ok}"
        )


if __name__ == "__main__":
    main()
