"""Benchmark of prediction files that weigh little and expand a lot (not a
test): issue 29, finding 7.

Run from the repository root:  .venv/bin/python bench/predictions_limits.py [--keep DIR]

Builds three Parquet files with pyarrow, each refused by the text limits
of ``workspace/limits.py`` (``PREDICTIONS_MAX_LABEL_LENGTH``,
``PREDICTIONS_MAX_CLASSES`` on a dictionary, the decoded pages):

1. issue 29's file: 400 rows whose dictionary-encoded ``y_pred`` holds one
   5 MiB label, zstd (1.2 KB; before, 27.8 s and 2.3 GB in the worker and a
   10,486,061-byte answer);
2. a dictionary of 1,000,000 short labels (one dictionary page, a few MB);
3. a zstd column of one 5 MiB value repeated 400 times, plainly encoded
   (70 KB that decode to 2 GB).

Each is uploaded in a fresh process (``DEBUG=false``, SQLite in a
temporary folder, Django's whole request path through the test client,
signed in as the designer, after a warm-up request), through the API (the
file as an ``application/vnd.apache.parquet`` body) and through the
predictions page (a multipart form). Prints for each: the status, the
wall time, the peak of Python's allocations during the request
(tracemalloc, NumPy's included), the peak of Arrow's memory pool, the
growth of the process's peak resident memory, and the size of the answer
(the page's: beyond the same page without an error). Goals: under 1 s,
under 100 MiB, under 10 KB.
"""

import argparse
import io
import json
import os
import pathlib
import secrets
import subprocess
import sys
import tempfile

import _blas  # noqa: F401  (sets single-threaded BLAS; must come before numpy)
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = pathlib.Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
ROWS = 400

STEP = r"""
import json, os, resource, sys, time, tracemalloc
sys.path.insert(0, os.environ["BENCH_ROOT"])
import django
django.setup()
from django.conf import settings
# No collectstatic here: the pages name their static files without the manifest.
plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
settings.STORAGES = {**settings.STORAGES, "staticfiles": plain}
import pyarrow as pa
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from workspace.models import Study

how, path = sys.argv[1], sys.argv[2]
content = open(path, "rb").read()
study = Study.objects.get()
client = Client()
client.force_login(User.objects.get(username="designer"))
page_url = f"/studies/{study.pk}/predictions/"
page = client.get(page_url, secure=True)  # warm up: imports, templates, the session
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
started = time.perf_counter()
if how == "api":
    response = client.generic(
        "POST", f"/api/v1/studies/{study.pk}/predictions/", content,
        content_type="application/vnd.apache.parquet", secure=True,
    )
else:
    upload = SimpleUploadedFile(os.path.basename(path), content)
    response = client.post(page_url, {"file": upload}, secure=True)
seconds = time.perf_counter() - started
_, traced = tracemalloc.get_traced_memory()
tracemalloc.stop()
answer = len(response.content) - (len(page.content) if how == "page" else 0)
print(json.dumps({
    "status": response.status_code,
    "seconds": seconds,
    "traced_mib": traced / 2**20,
    "arrow_mib": pa.default_memory_pool().max_memory() / 2**20,
    "grew_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024,
    "answer_bytes": answer,
    "said": (response.json()["fields"]["file"][0] if how == "api" and response.status_code == 400 else "")[:110],
}))
"""


def _parquet(table: pa.Table, **options) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd", **options)
    return out.getvalue()


def files() -> dict[str, bytes]:
    label = "x" * (5 * MIB)
    one_label = pa.table(
        {
            "candidate": ["C0"] * ROWS,
            "y_true": ["a", "b"] * (ROWS // 2),
            "y_pred": pa.array([label] * ROWS).dictionary_encode(),
        }
    )
    million = pa.array([f"c{index:07d}" for index in range(1_000_000)]).dictionary_encode()
    labels = pa.table({"candidate": pa.array(["C0"] * len(million)).dictionary_encode(), "y_true": million})
    labels = labels.append_column("y_pred", million)
    plain = pa.table({"candidate": ["C0"] * ROWS, "y_true": ["a", "b"] * (ROWS // 2), "y_pred": [label] * ROWS})
    return {
        "one 5 MiB label, 400 rows": _parquet(one_label, use_dictionary=True),
        "1,000,000-label dictionary": _parquet(labels, dictionary_pagesize_limit=1 << 30),
        "zstd plain 5 MiB x 400": _parquet(plain, use_dictionary=False),
    }


def run(how: str, path: pathlib.Path, env: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", STEP, how, str(path)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        sys.exit(f"{how} {path.name} failed:\n{done.stderr}")
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
            "LOG_LEVEL": "ERROR",
        }
        os.environ.update(env)
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        from django.contrib.auth.models import User
        from django.core.management import call_command

        from workspace import services as workspace_services

        call_command("migrate", verbosity=0)
        designer = User.objects.create_user("designer", password=secrets.token_urlsafe(16))
        study = workspace_services.study_create(designer=designer, title="Text limits")
        workspace_services.candidate_add(study=study, name="C0")
        print("goals: under 1 s, under 100 MiB, under 10 KB")
        for name, content in files().items():
            path = folder / f"{len(content)}.parquet"
            path.write_bytes(content)
            print(f"{name} ({len(content):,} bytes):")
            for how in ("api", "page"):
                got = run(how, path, env)
                print(
                    f"  {how:<5} {got['status']}  {got['seconds']:5.2f} s, Python peak {got['traced_mib']:6.1f} MiB, "
                    f"Arrow peak {got['arrow_mib']:6.1f} MiB, resident +{got['grew_mib']:5.1f} MiB, "
                    f"answer {got['answer_bytes']:,} bytes"
                )
                if got["said"]:
                    print(f"        {got['said']}…")


if __name__ == "__main__":
    main()
