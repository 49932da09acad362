"""Benchmark of `manage.py evaluate_predictions` and of an upload (not a test): issue 19, item 3.

Run from the repository root:  .venv/bin/python bench/evaluate_predictions.py [--instances N] [--candidates M]

Default: 1,000,000 test instances x 10 candidates, a binary task, i.e. a
predictions CSV (approve-predictions/1) of 10,000,000 rows with the columns
candidate, y_true, y_pred, score, fold (10 folds) and time (about 450 MB),
and the same rows as a Parquet file (as an ML pipeline writes them:
candidate text, labels and folds integers, score and time float64), both
written once to a temporary folder and removed at the end.

Compares, each in a fresh process so that peak memory (the process's
maximum resident set size) is its own, side by side in one run:

1. scikit-learn called directly: the arrays already in memory (loaded from a
   .npy file, no CSV parsing at all), then per candidate the functions for
   accuracy, balanced accuracy, precision, recall, F1, specificity (from the
   confusion matrix), ROC AUC, Cohen's kappa and log loss;
2. `manage.py evaluate_predictions FILE --positive 1 --json`, the whole
   command: reading and checking the file, then every metric its columns
   allow (those above, plus consistency over folds, efficiency, A3R, ARR),
   for the CSV and for the Parquet file;
3. the same command's parts, timed inside one process: parsing the file
   and computing the metrics;
4. an upload at the web's limits: `PREDICTIONS_MAX_ROWS` (1,000,000) rows
   (100,000 instances x 10 candidates, the same columns) posted to the
   predictions page through Django's test client, signed in as the
   designer, SQLite in the temporary folder, DEBUG off; as CSV and as
   Parquet.

and prints the ratios, the command's over scikit-learn alone (issue 19's
goal: at most 1.5, for time and for peak memory), whether the values agree
with scikit-learn's to 1e-12, and the uploads' times (goal: under 2 s).
BLAS single-threaded; pyarrow's CSV reader on its own thread pool (the
process's CPUs, evaluation/predictions/arrow.py).
"""

import argparse
import json
import os
import pathlib
import secrets
import subprocess
import sys
import tempfile
import time

import _blas  # noqa: F401  (sets single-threaded BLAS; must come before numpy)
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEED = 20261124
PYTHON = sys.executable

SKLEARN_ONLY = r"""
import json, resource, sys, time, warnings
import numpy as np
from sklearn import metrics as m
data = np.load(sys.argv[1])
started = time.perf_counter()
out = {}
for c in range(data["y_true"].shape[0]):
    t, p, s = data["y_true"][c], data["y_pred"][c], data["score"][c]
    tn, fp, fn, tp = m.confusion_matrix(t, p, labels=[0, 1]).ravel()
    out[f"C{c}"] = {
        "accuracy": m.accuracy_score(t, p),
        "balanced_accuracy": m.balanced_accuracy_score(t, p),
        "precision": m.precision_score(t, p, pos_label=1),
        "recall": m.recall_score(t, p, pos_label=1),
        "f1": m.f1_score(t, p, pos_label=1),
        "specificity": tn / (tn + fp),
        "roc_auc": m.roc_auc_score(t, s),
        "cohen_kappa": m.cohen_kappa_score(t, p),
        "log_loss": m.log_loss(t, np.column_stack([1 - s, s]), labels=[0, 1]),
    }
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
values = {name: {key: float(value) for key, value in scores.items()} for name, scores in out.items()}
print(json.dumps({"seconds": seconds, "peak": peak, "values": values}))
"""

PARTS = r"""
import json, os, resource, sys, time
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "approve_site.settings")
import django
django.setup()
from evaluation.predictions import read_predictions
from evaluation.report import evaluation_document
from workspace import limits
started = time.perf_counter()
data = read_predictions(sys.argv[1], positive="1", max_classes=limits.PREDICTIONS_MAX_CLASSES)
parsed = time.perf_counter()
evaluation_document(data)
done = time.perf_counter()
print(json.dumps({"parse": parsed - started, "compute": done - parsed}))
"""


UPLOAD = r"""
import json, os, sys, time
sys.path.insert(0, os.environ["BENCH_ROOT"])
import django
django.setup()
from django.conf import settings
# No collectstatic here: the pages name their static files without the manifest.
plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
settings.STORAGES = {**settings.STORAGES, "staticfiles": plain}
from django.contrib.auth.models import User
from django.test import Client
from evaluation.models import PredictionSet
from workspace.models import Study
study = Study.objects.get()
client = Client()
client.force_login(User.objects.get(username="designer"))
client.get(f"/studies/{study.pk}/predictions/", secure=True)  # warm up: imports, templates, the session
out = {}
for path in sys.argv[1:]:
    with open(path, "rb") as upload:
        started = time.perf_counter()
        response = client.post(f"/studies/{study.pk}/predictions/", {"file": upload, "positive": "1"}, secure=True)
        seconds = time.perf_counter() - started
    stored = PredictionSet.objects.filter(name=os.path.basename(path)).first()
    out[os.path.basename(path)] = {
        "seconds": seconds,
        "status": response.status_code,
        "rows": stored.row_count if stored else None,
    }
print(json.dumps(out))
"""

SCHEMA = pa.schema(
    [
        ("candidate", pa.string()),
        ("y_true", pa.int64()),
        ("y_pred", pa.int64()),
        ("score", pa.float64()),
        ("fold", pa.int64()),
        ("time", pa.float64()),
    ]
)


def generate(folder: pathlib.Path, instances: int, candidates: int) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    """The CSV, the same rows as Parquet (a row group per candidate) and,
    for scikit-learn, the same arrays as a .npz file."""
    rng = np.random.default_rng(SEED)
    y_true = (rng.random(instances) < 0.3).astype(np.int8)
    kept: dict[str, list[np.ndarray]] = {"y_true": [], "y_pred": [], "score": []}
    csv_path, npz_path = folder / "predictions.csv", folder / "predictions.npz"
    parquet_path = folder / "predictions.parquet"
    fold = np.arange(instances) % 10
    with csv_path.open("w", encoding="utf-8") as out, pq.ParquetWriter(parquet_path, SCHEMA) as parquet:
        out.write("candidate,y_true,y_pred,score,fold,time\n")
        for c in range(candidates):
            skill = 0.5 + 0.4 * (c + 1) / candidates
            noise = rng.normal(0, 1 - skill, instances)
            score = np.clip(np.where(y_true == 1, 0.62, 0.38) + noise, 0.001, 0.999).round(6)
            y_pred = (score >= 0.5).astype(np.int8)
            seconds = (rng.gamma(2.0, 0.5e-3 * (c + 1), instances)).round(9)
            table = np.column_stack([y_true, y_pred, score, fold, seconds])
            np.savetxt(out, table, fmt=f"C{c},%d,%d,%.6f,%d,%.9g", delimiter=",")
            columns = [pa.array(np.full(instances, f"C{c}")), y_true, y_pred, score, fold, seconds]
            parquet.write_table(pa.Table.from_arrays(columns, schema=SCHEMA))
            kept["y_true"].append(y_true)
            kept["y_pred"].append(y_pred)
            kept["score"].append(score)
    np.savez(npz_path, **{key: np.stack(value) for key, value in kept.items()})
    return csv_path, parquet_path, npz_path


def generate_upload(folder: pathlib.Path, instances: int, candidates: int) -> tuple[pathlib.Path, pathlib.Path]:
    """A file within the web's 20 MB at the row limit: the columns
    candidate, y_true, y_pred, score (three decimals) and fold, as CSV and
    as Parquet."""
    rng = np.random.default_rng(SEED + 1)
    y_true = (rng.random(instances) < 0.3).astype(np.int8)
    fold = np.arange(instances) % 10
    csv_path, parquet_path = folder / "upload.csv", folder / "upload.parquet"
    schema = pa.schema([(name, SCHEMA.field(name).type) for name in ("candidate", "y_true", "y_pred", "score", "fold")])
    with csv_path.open("w", encoding="utf-8") as out, pq.ParquetWriter(parquet_path, schema) as parquet:
        out.write("candidate,y_true,y_pred,score,fold\n")
        for c in range(candidates):
            score = np.clip(np.where(y_true == 1, 0.62, 0.38) + rng.normal(0, 0.3, instances), 0.001, 0.999).round(3)
            y_pred = (score >= 0.5).astype(np.int8)
            np.savetxt(out, np.column_stack([y_true, y_pred, score, fold]), fmt=f"C{c},%d,%d,%.3f,%d", delimiter=",")
            columns = [pa.array(np.full(instances, f"C{c}")), y_true, y_pred, score, fold]
            parquet.write_table(pa.Table.from_arrays(columns, schema=schema))
    return csv_path, parquet_path


def child_peak(command: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """Wall time, peak resident memory (bytes, from wait4) and output of a
    child process. Its error output goes to a file, so a full pipe can never
    block it while its output is read."""
    started = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as errors:
        child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
        stdout = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        if status:
            errors.seek(0)
            raise SystemExit(f"{' '.join(command)} failed:\n{errors.read()}")
    return seconds, usage.ru_maxrss * 1024, stdout


def uploads(folder: pathlib.Path, rows: int, candidates: int) -> dict:
    """The page's upload of ``rows`` rows, as CSV and as Parquet, in a
    process of its own on a fresh SQLite database."""
    upload_folder = folder / "upload"
    upload_folder.mkdir()
    csv_path, parquet_path = generate_upload(upload_folder, rows // candidates, candidates)
    env = {
        **os.environ,
        "BENCH_ROOT": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "approve_site.settings",
        "DATABASE_URL": f"sqlite:///{upload_folder / 'bench.sqlite3'}",
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "ALLOWED_HOSTS": "testserver",
        "REDIS_URL": "",
        "LOG_LEVEL": "WARNING",
    }
    setup = (
        "import os, sys; sys.path.insert(0, os.environ['BENCH_ROOT']); import django; django.setup()\n"
        "from django.contrib.auth.models import User\n"
        "from django.core.management import call_command\n"
        "from workspace import services\n"
        "call_command('migrate', verbosity=0)\n"
        "designer = User.objects.create_user('designer', password='not-used-bench-only')\n"
        "study = services.study_create(designer=designer, title='Upload')\n"
        f"[services.candidate_add(study=study, name=f'C{{c}}') for c in range({candidates})]\n"
    )
    child_peak([PYTHON, "-c", setup], env)
    sizes = {path.name: path.stat().st_size for path in (csv_path, parquet_path)}
    measured = json.loads(child_peak([PYTHON, "-c", UPLOAD, str(csv_path), str(parquet_path)], env)[2])
    return {name: {**values, "bytes": sizes[name]} for name, values in measured.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1_000_000)
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--upload-rows", type=int, default=1_000_000, help="the upload's rows (default: the limit)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="approve-bench-") as folder:
        started = time.perf_counter()
        csv_path, parquet_path, npz_path = generate(pathlib.Path(folder), args.instances, args.candidates)
        size = csv_path.stat().st_size
        print(
            f"{args.instances:,} instances x {args.candidates} candidates = {args.instances * args.candidates:,} rows,"
            f" {size / 1e6:.0f} MB CSV, {parquet_path.stat().st_size / 1e6:.0f} MB Parquet"
            f" (written in {time.perf_counter() - started:.0f} s)"
        )
        print(_blas.threadpool_state())
        sk_seconds, sk_peak, sk_out = child_peak([PYTHON, "-c", SKLEARN_ONLY, str(npz_path)])
        sklearn = json.loads(sk_out)
        ours = {}
        for kind, path in (("CSV", csv_path), ("Parquet", parquet_path)):
            seconds, peak, out = child_peak(
                [PYTHON, "manage.py", "evaluate_predictions", str(path), "--positive", "1", "--json"]
            )
            parts = json.loads(child_peak([PYTHON, "-c", PARTS, str(path)])[2])
            ours[kind] = {"seconds": seconds, "peak": peak, "document": json.loads(out), "parts": parts}
        uploaded = uploads(pathlib.Path(folder), args.upload_rows, args.candidates)

    print()
    print(f"{'':44} {'seconds':>9} {'peak memory':>12}")
    print(f"{'scikit-learn alone (arrays in memory)':44} {sklearn['seconds']:9.2f} {sk_peak / 2**20:9.0f} MiB")
    print(f"{'  its process, from start to end':44} {sk_seconds:9.2f}")
    for kind, measured in ours.items():
        print(
            f"{f'evaluate_predictions, {kind} (whole command)':44} {measured['seconds']:9.2f} "
            f"{measured['peak'] / 2**20:9.0f} MiB"
        )
        print(f"{f'  reading and checking the {kind} file':44} {measured['parts']['parse']:9.2f}")
        print(f"{'  computing every metric':44} {measured['parts']['compute']:9.2f}")
    print()
    for kind, measured in ours.items():
        document = measured["document"]
        worst = max(
            abs(document["candidates"][name][key] - value)
            for name, values in sklearn["values"].items()
            for key, value in values.items()
        )
        time_ratio = measured["seconds"] / sklearn["seconds"]
        memory_ratio = measured["peak"] / sk_peak
        print(f"{kind}:")
        print(f"  whole command / scikit-learn alone:            {time_ratio:.2f} (goal <= 1.5)")
        print(f"  peak memory, command / scikit-learn's process: {memory_ratio:.2f} (goal <= 1.5)")
        print(
            f"  computing, the command's / scikit-learn alone: {measured['parts']['compute'] / sklearn['seconds']:.2f}"
        )
        print(
            f"  largest difference from scikit-learn's values: {worst:.1e} ({'agree' if worst <= 1e-12 else 'DIFFER'})"
        )
    same = ours["CSV"]["document"] == ours["Parquet"]["document"]
    print(f"CSV and Parquet documents identical: {'yes' if same else 'NO'}")
    print()
    for name, measured in uploaded.items():
        stored = f"{measured['rows']:,} rows stored" if measured["rows"] else "NOT STORED"
        print(
            f"page upload, {name} ({stored}, {measured['bytes'] / 1e6:.1f} MB, "
            f"status {measured['status']}): {measured['seconds']:.2f} s (goal < 2 s)"
        )


if __name__ == "__main__":
    main()
