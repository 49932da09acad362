"""Benchmark of a prediction set at the limits (not a test): issue 17, finding 1.

Run from the repository root:  .venv/bin/python bench/evaluation_limits.py [--keep DIR]

Builds the largest set a web upload accepts with the most classes allowed:
``PREDICTIONS_MAX_ROWS`` (1,000,000) rows and ``PREDICTIONS_MAX_CLASSES``
(100) distinct labels, in a file under ``PREDICTIONS_MAX_BYTES`` (20 MB):
10 candidates x 100,000 test instances with the columns candidate, y_true,
y_pred, fold (10 folds) and time, the layout that packs the most
per-label work into the bytes (probability columns for 100 classes would
let a 20 MB file hold fewer than 50,000 rows).

Then, each step in a fresh process so that its peak memory (maximum
resident set size) is its own, with ``DEBUG=false`` on a SQLite database in
a temporary folder, through Django's whole request path (the test client,
signed in as the designer):

1. the upload, through the import service with the web's limits;
2. ``GET /api/v1/studies/{id}/predictions/{set}/evaluation/`` the first
   time (computed and kept) and again (read back);
3. one candidate's report page, first and again;
4. the page comparing the candidates, first and again (the document kept by 2);
5. ``POST .../measurements/compute/`` of four study metrics mapped to
   accuracy, specificity, Cohen's kappa and A3R, for the 10 candidates;
6. files of 20,000 labels (100,000 rows) and of 1,000,000 labels (a
   million rows) refused (their time and memory).

Prints wall time, CPU time (the machine may be shared: CPU time is the
work itself) and peak memory for each; the goal is under 2 s and 500 MiB
for a web request. BLAS single-threaded.
"""

import argparse
import json
import os
import pathlib
import secrets
import subprocess
import sys
import tempfile

import _blas  # noqa: F401  (sets single-threaded BLAS; must come before numpy)
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEED = 20261126
CANDIDATES = 10
FOLDS = 10
# The study metrics computed from the set: the per-label ones and the pairwise.
COMPUTED = [("accuracy", "higher"), ("specificity", "higher"), ("cohen_kappa", "higher"), ("a3r", "higher")]

STEP = r"""
import json, os, resource, sys, time
sys.path.insert(0, os.environ["BENCH_ROOT"])
import django
django.setup()
from django.conf import settings
# No collectstatic here: the pages name their static files without the manifest.
plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
settings.STORAGES = {**settings.STORAGES, "staticfiles": plain}
from django.contrib.auth.models import User
from django.test import Client
from workspace import limits

step, argument = sys.argv[1], sys.argv[2]


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = {}
if step == "upload":
    from evaluation import services
    from workspace.models import Study
    study = Study.objects.get()
    started, started_cpu = time.perf_counter(), cpu()
    try:
        with open(argument, "rb") as stream:
            prediction_set = services.prediction_set_import(
                study=study, stream=stream, name=os.path.basename(argument), uploaded_by=study.designer
            )
        out["set"] = prediction_set.pk
    except Exception as error:  # the refusal is the point of the refused file
        out["refused"] = str(error)[:200]
    out["seconds"] = time.perf_counter() - started
    out["cpu"] = cpu() - started_cpu
elif step == "compute":
    client = Client()
    client.force_login(User.objects.get(username="designer"))
    client.get("/", secure=True)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started, started_cpu = time.perf_counter(), cpu()
    # Every mapped metric (an empty JSON object): the computation itself,
    # not a refusal of the request's form (issue 33, finding 10).
    response = client.post(argument, data="{}", content_type="application/json", secure=True)
    out["first"] = {
        "seconds": time.perf_counter() - started,
        "cpu": cpu() - started_cpu,
        "status": response.status_code,
        "bytes": len(response.content),
        "grew_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024,
        "computed": len(response.json().get("computed", [])) if response.status_code == 200 else 0,
    }
else:
    client = Client()
    client.force_login(User.objects.get(username="designer"))
    client.get("/", secure=True)  # warm up: imports, templates, the session
    for label in ("first", "again"):
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started, started_cpu = time.perf_counter(), cpu()
        response = client.get(argument, secure=True)
        out[label] = {
            "seconds": time.perf_counter() - started,
            "cpu": cpu() - started_cpu,
            "status": response.status_code,
            "bytes": len(response.content),
            "grew_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024,
        }
out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["start_mib"] = before / 1024
print(json.dumps(out))
"""


def write_file(path: pathlib.Path, *, rows: int, classes: int) -> None:
    rng = np.random.default_rng(SEED)
    instances = rows // CANDIDATES
    y_true = rng.integers(0, classes, instances)
    fold = np.arange(instances) % FOLDS
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("candidate,y_true,y_pred,fold,time\n")
        for candidate in range(CANDIDATES):
            right = rng.random(instances) < 0.5 + candidate / 25
            y_pred = np.where(right, y_true, rng.integers(0, classes, instances))
            time = f"{0.001 * (candidate + 1):.3f}"
            out.writelines(
                f"C{candidate},{t},{p},{f},{time}\n"
                for t, p, f in zip(y_true.tolist(), y_pred.tolist(), fold.tolist(), strict=True)
            )


def run(step: str, argument: str, env: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", STEP, step, argument], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        sys.exit(f"{step} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", help="a folder to work in and keep (default: a temporary one, removed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = pathlib.Path(args.keep or temporary)
        folder.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "BENCH_ROOT": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "approve_site.settings",
            "DATABASE_URL": f"sqlite:///{folder / 'bench.sqlite3'}",
            "DEBUG": "false",
            "SECRET_KEY": secrets.token_urlsafe(64),
            "ALLOWED_HOSTS": "testserver",
            "REDIS_URL": "",
            "LOG_LEVEL": "WARNING",
        }
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        from django.contrib.auth.models import User
        from django.core.management import call_command

        from workspace import limits
        from workspace import services as workspace_services

        call_command("migrate", verbosity=0)
        designer = User.objects.create_user("designer", password=secrets.token_urlsafe(16))
        study = workspace_services.study_create(designer=designer, title="Limits")
        for candidate in range(CANDIDATES):
            workspace_services.candidate_add(study=study, name=f"C{candidate}")
        # Study metrics computed from the set (the measurements' POST).
        from evaluation import services as evaluation_services

        attribute = workspace_services.attribute_add(study=study, name="Quality")
        for computation, better in COMPUTED:
            metric = workspace_services.metric_add(
                study=study, attribute=attribute, name=computation, better=better, default_range=[0, 10]
            )
            evaluation_services.metric_computation_set(metric=metric, computation=computation)

        rows, classes = limits.PREDICTIONS_MAX_ROWS, limits.PREDICTIONS_MAX_CLASSES
        path = folder / "limits.csv"
        write_file(path, rows=rows, classes=classes)
        size = path.stat().st_size
        assert size <= limits.PREDICTIONS_MAX_BYTES, size
        print(f"{rows:,} rows, {classes} classes, {CANDIDATES} candidates, {size / limits.MB:.1f} MB")
        print(_blas.threadpool_state())

        uploaded = run("upload", str(path), env)
        print(
            f"{'upload:':<26}{uploaded['seconds']:6.2f} s ({uploaded['cpu']:.2f} s CPU), "
            f"peak {uploaded['peak_mib']:.0f} MiB"
        )
        base = f"/studies/{study.pk}/predictions/{uploaded['set']}/"
        for what, url in (
            ("API evaluation", f"/api/v1{base}evaluation/"),
            ("candidate report", f"{base}candidates/C0/"),
            ("comparison page", f"{base}compare/"),
        ):
            measured = run("get", url, env)
            if any(measured[label]["status"] != 200 for label in ("first", "again")):
                sys.exit(f"{what} did not answer 200: {measured}")
            for label in ("first", "again"):
                got = measured[label]
                print(
                    f"{what + ', ' + label + ':':<26}{got['seconds']:6.2f} s ({got['cpu']:.2f} s CPU), "
                    f"+{got['grew_mib']:.0f} MiB "
                    f"(status {got['status']}, {got['bytes'] / 1024:.0f} KiB)"
                )
            print(f"{'':<26}process peak {measured['peak_mib']:.0f} MiB (started at {measured['start_mib']:.0f})")

        computed = run("compute", f"/api/v1/studies/{study.pk}/measurements/compute/", env)["first"]
        if computed["status"] != 200 or computed["computed"] != len(COMPUTED) * CANDIDATES:
            sys.exit(f"the computation did not run: {computed}")
        print(
            f"{'measurements computed:':<26}{computed['seconds']:6.2f} s ({computed['cpu']:.2f} s CPU), "
            f"+{computed['grew_mib']:.0f} MiB "
            f"({computed['computed']} values: {len(COMPUTED)} metrics x {CANDIDATES} candidates)"
        )

        for count, rows_of_it in ((20_000, 100_000), (1_000_000, 1_000_000)):
            wide = folder / "wide.csv"
            wide.write_text(
                "candidate,y_true,y_pred\n" + "".join(f"C0,{i % count},0\n" for i in range(rows_of_it)),
                encoding="utf-8",
            )
            refused = run("upload", str(wide), env)
            print(
                f"{f'{count:,} labels refused:':<26}{refused['seconds']:6.2f} s ({refused['cpu']:.2f} s CPU), "
                f"peak {refused['peak_mib']:.0f} MiB ({wide.stat().st_size / limits.MB:.1f} MB): "
                f"{refused.get('refused', 'NOT REFUSED')}"
            )


if __name__ == "__main__":
    main()
