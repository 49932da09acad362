"""Benchmark of `manage.py evaluate_predictions` and of an upload (not a test): issues 19 and 33.

Run from the repository root:

    .venv/bin/python bench/evaluate_predictions.py                       # binary, 10,000,000 rows
    .venv/bin/python bench/evaluate_predictions.py --classes 10 --instances 100000   # 10 classes, 1,000,000 rows

Default: 1,000,000 test instances x 10 candidates, a binary task, i.e. a
predictions CSV (approve-predictions/1) of 10,000,000 rows with the columns
candidate, instance (an id a row, "i<number>", every one distinct within a
candidate: what the reader finds hardest, issue 33 item 1), y_true, y_pred,
score, fold (10 folds) and time (about 560 MB), and the same rows as a
Parquet file (as an ML pipeline writes them: candidate and instance text,
labels and folds integers, score and time float64). With ``--classes K``
(K > 2): y_true and y_pred over K labels and one proba:<label> column a
label (each row's exact float64 values, summing to 1) instead of score and
time. Both files are written once to a temporary folder and removed at the
end.

Compares, each in a fresh process so that peak memory (the process's
maximum resident set size) and CPU (user + system, every thread) are its
own, side by side in one run:

1. scikit-learn called directly: the arrays already in memory (loaded from a
   .npz file, no file parsing at all), then per candidate the functions for
   accuracy, balanced accuracy, precision, recall, F1, specificity (from the
   confusion matrix), ROC AUC, Cohen's kappa and log loss (macro averages
   and one-vs-rest AUC with K classes, as approve computes them);
2. polars (a benchmark dependency only, requirements-dev.in) computing the
   same nine metrics from the same CSV and from the same Parquet file, its
   reading included, on its own thread pool: the anchor of what a columnar
   engine does with these files;
3. `manage.py evaluate_predictions FILE --positive 1 --json`, the whole
   command: reading and checking the file, then every metric its columns
   allow (those above, plus consistency over folds, efficiency, A3R, ARR),
   for the CSV and for the Parquet file;
4. the same command's parts, timed inside one process: parsing the file
   and computing the metrics;
5. an upload at the web's limits (binary only): `PREDICTIONS_MAX_ROWS`
   (1,000,000) rows (100,000 instances x 10 candidates, without instance
   ids) posted to the predictions page through Django's test client, signed
   in as the designer, SQLite in the temporary folder, DEBUG off; as CSV and
   as Parquet.

and prints the ratios: the command's CPU over scikit-learn's nine metrics
alone (issue 33's goal: at most 0.75 binary, 1 with 10 classes), its peak
memory over scikit-learn's whole process (goal: at most 1.5), whether the
values agree with scikit-learn's to 1e-12 (polars' to 1e-9: it sums in
another order), and the uploads' times (goal: under 2 s). What it leaves
out: the command's start (Django's setup) is in its CPU and memory;
scikit-learn's and polars' imports are not in their seconds, but are in
their memory. BLAS single-threaded; pyarrow's CSV reader and polars on
their thread pools (the process's CPUs).
"""

import argparse
import json
import os
import pathlib
import resource
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
classes = int(sys.argv[2])
binary = classes == 2
started, cpu = time.perf_counter(), time.process_time()
out = {}
for c in range(data["y_true"].shape[0]):
    t, p = data["y_true"][c], data["y_pred"][c]
    counts = m.confusion_matrix(t, p, labels=list(range(classes)))
    if binary:
        s = data["score"][c]
        tn, fp, fn, tp = counts.ravel()
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
        continue
    proba = data["proba"][c]
    negatives = len(t) - counts.sum(axis=1)
    out[f"C{c}"] = {
        "accuracy": m.accuracy_score(t, p),
        "balanced_accuracy": m.balanced_accuracy_score(t, p),
        "precision": m.precision_score(t, p, average="macro", labels=np.unique(t)),
        "recall": m.recall_score(t, p, average="macro", labels=np.unique(t)),
        "f1": m.f1_score(t, p, average="macro", labels=np.unique(t)),
        "specificity": float(np.mean((negatives - (counts.sum(axis=0) - np.diag(counts))) / negatives)),
        "roc_auc": m.roc_auc_score(t, proba, multi_class="ovr", average="macro", labels=list(range(classes))),
        "cohen_kappa": m.cohen_kappa_score(t, p),
        "log_loss": m.log_loss(t, proba, labels=list(range(classes))),
    }
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
values = {name: {key: float(value) for key, value in scores.items()} for name, scores in out.items()}
print(json.dumps({"seconds": seconds, "cpu": cpu, "peak": peak, "values": values}))
"""

# The same nine metrics in polars, from the file: counts by group_by, AUC
# from average ranks within each candidate (Mann-Whitney), log loss clipped
# as scikit-learn clips it (to float64's epsilon).
POLARS = r"""
import json, resource, sys, time
import polars as pl
path, classes = sys.argv[1], int(sys.argv[2])
started, cpu = time.perf_counter(), time.process_time()
frame = pl.scan_parquet(path) if path.endswith(".parquet") else pl.scan_csv(path)
t, p = pl.col("y_true").cast(pl.Int64), pl.col("y_pred").cast(pl.Int64)
eps = 2.220446049250313e-16
names = [str(k) for k in range(classes)]
count = lambda condition: condition.sum().cast(pl.Float64)  # (counts are u32: their products overflow)
if classes == 2:
    s = pl.col("score").clip(eps, 1 - eps)
    tp, fp = count((t == 1) & (p == 1)), count((t == 0) & (p == 1))
    fn, tn = count((t == 1) & (p == 0)), count((t == 0) & (p == 0))
    positives, n = count(t == 1), pl.len().cast(pl.Float64)
    rank_sum = pl.col("score").rank("average").filter(t == 1).sum()
    auc = (rank_sum - positives * (positives + 1) / 2) / (positives * (n - positives))
    accuracy = (tp + tn) / n
    expected = ((tp + fn) * (tp + fp) + (tn + fp) * (tn + fn)) / (n * n)
    table = frame.group_by("candidate", maintain_order=True).agg(
        accuracy=accuracy,
        balanced_accuracy=(tp / (tp + fn) + tn / (tn + fp)) / 2,
        precision=tp / (tp + fp),
        recall=tp / (tp + fn),
        f1=2 * tp / (2 * tp + fp + fn),
        specificity=tn / (tn + fp),
        roc_auc=auc,
        cohen_kappa=(accuracy - expected) / (1 - expected),
        log_loss=-(pl.when(t == 1).then(s.log()).otherwise((1 - s).log())).mean(),
    )
else:
    n = pl.len().cast(pl.Float64)
    per = {}
    for k, name in enumerate(names):
        hits, true, predicted = count((t == k) & (p == k)), count(t == k), count(p == k)
        column = pl.col(f"proba:{name}")
        rank_sum = column.rank("average").filter(t == k).sum()
        per[k] = {
            "hits": hits, "true": true, "predicted": predicted,
            "precision": hits / predicted, "recall": hits / true, "f1": 2 * hits / (true + predicted),
            "specificity": (n - true - (predicted - hits)) / (n - true),
            "auc": (rank_sum - true * (true + 1) / 2) / (true * (n - true)),
        }
    mean = lambda key: pl.mean_horizontal([per[k][key] for k in range(classes)])
    accuracy = pl.sum_horizontal([per[k]["hits"] for k in range(classes)]) / n
    expected = pl.sum_horizontal([per[k]["true"] * per[k]["predicted"] for k in range(classes)]) / (n * n)
    proba_true = pl.coalesce([pl.when(t == k).then(pl.col(f"proba:{name}")) for k, name in enumerate(names)])
    table = frame.group_by("candidate", maintain_order=True).agg(
        accuracy=accuracy,
        balanced_accuracy=mean("recall"),
        precision=mean("precision"),
        recall=mean("recall"),
        f1=mean("f1"),
        specificity=mean("specificity"),
        roc_auc=mean("auc"),
        cohen_kappa=(accuracy - expected) / (1 - expected),
        log_loss=-(proba_true.clip(eps, 1 - eps).log()).mean(),
    )
table = table.collect()
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
values = {row.pop("candidate"): {key: float(value) for key, value in row.items()} for row in table.to_dicts()}
print(json.dumps({"seconds": seconds, "cpu": cpu, "peak": peak, "values": values}))
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
positive = "1" if sys.argv[2] == "2" else None
data = read_predictions(sys.argv[1], positive=positive, max_classes=limits.PREDICTIONS_MAX_CLASSES, instances=False)
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


def generate(
    folder: pathlib.Path, instances: int, candidates: int, classes: int
) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    """The CSV, the same rows as Parquet (a row group per candidate) and,
    for scikit-learn, the same arrays as a .npz file."""
    rng = np.random.default_rng(SEED)
    binary = classes == 2
    y_true = ((rng.random(instances) < 0.3) if binary else rng.integers(0, classes, instances)).astype(np.int8)
    kept: dict[str, list[np.ndarray]] = {"y_true": [], "y_pred": [], "score" if binary else "proba": []}
    csv_path, npz_path = folder / "predictions.csv", folder / "predictions.npz"
    parquet_path = folder / "predictions.parquet"
    index, fold = np.arange(instances), np.arange(instances) % 10
    ids = pa.array(np.char.add("i", index.astype(str)))
    probabilities = [f"proba:{k}" for k in range(classes)]
    header = ["candidate", "instance", "y_true", "y_pred"] + (["score", "fold", "time"] if binary else probabilities)
    header += [] if binary else ["fold"]
    fields = [pa.field(name, pa.string() if name in ("candidate", "instance") else pa.float64()) for name in header]
    for name in ("y_true", "y_pred", "fold"):
        fields[header.index(name)] = pa.field(name, pa.int64())
    schema = pa.schema(fields)
    with csv_path.open("w", encoding="utf-8") as out, pq.ParquetWriter(parquet_path, schema) as parquet:
        out.write(",".join(header) + "\n")
        for c in range(candidates):
            skill = 0.5 + 0.4 * (c + 1) / candidates
            if binary:
                noise = rng.normal(0, 1 - skill, instances)
                score = np.clip(np.where(y_true == 1, 0.62, 0.38) + noise, 0.001, 0.999).round(6)
                y_pred = (score >= 0.5).astype(np.int8)
                seconds = (rng.gamma(2.0, 0.5e-3 * (c + 1), instances)).round(9)
                table = np.column_stack([index, y_true, y_pred, score, fold, seconds])
                np.savetxt(out, table, fmt=f"C{c},i%d,%d,%d,%.6f,%d,%.9g", delimiter=",")
                columns = [y_true, y_pred, score, fold, seconds]
                kept["score"].append(score)
            else:
                logits = rng.normal(0, 1, (instances, classes))
                logits[index, y_true] += 3 * skill
                proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
                y_pred = proba.argmax(axis=1).astype(np.int8)
                table = np.column_stack([index, y_true, y_pred, proba, fold])
                np.savetxt(out, table, fmt=[f"C{c},i%d", "%d", "%d", *["%.17g"] * classes, "%d"], delimiter=",")
                columns = [y_true, y_pred, *proba.T, fold]
                kept["proba"].append(proba)
            arrays = [pa.array(np.full(instances, f"C{c}")), ids, *(pa.array(column) for column in columns)]
            parquet.write_table(
                pa.Table.from_arrays([a.cast(f.type) for a, f in zip(arrays, schema, strict=True)], schema=schema)
            )
            kept["y_true"].append(y_true)
            kept["y_pred"].append(y_pred)
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
    types = {"candidate": pa.string(), "score": pa.float64()}
    schema = pa.schema(
        [(name, types.get(name, pa.int64())) for name in ("candidate", "y_true", "y_pred", "score", "fold")]
    )
    with csv_path.open("w", encoding="utf-8") as out, pq.ParquetWriter(parquet_path, schema) as parquet:
        out.write("candidate,y_true,y_pred,score,fold\n")
        for c in range(candidates):
            score = np.clip(np.where(y_true == 1, 0.62, 0.38) + rng.normal(0, 0.3, instances), 0.001, 0.999).round(3)
            y_pred = (score >= 0.5).astype(np.int8)
            np.savetxt(out, np.column_stack([y_true, y_pred, score, fold]), fmt=f"C{c},%d,%d,%.3f,%d", delimiter=",")
            columns = [pa.array(np.full(instances, f"C{c}")), y_true, y_pred, score, fold]
            parquet.write_table(pa.Table.from_arrays(columns, schema=schema))
    return csv_path, parquet_path


def child_peak(command: list[str], env: dict | None = None) -> tuple[float, int, str, resource.struct_rusage]:
    """Wall time, peak resident memory (bytes, from wait4), output and
    resource usage of a child process. Its error output goes to a file, so a full pipe can never
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
    return seconds, usage.ru_maxrss * 1024, stdout, usage


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


def cpu_of(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def compare(ours: dict, reference: dict) -> float:
    """The largest difference between two documents' values of the metrics both have."""
    return max(
        abs(ours[name][key] - value)
        for name, values in reference.items()
        for key, value in values.items()
        if key in ours.get(name, {})
    )


def measure(paths: dict[str, pathlib.Path], npz_path: pathlib.Path, classes: int) -> tuple[dict, dict, dict]:
    """scikit-learn's, polars' and the command's figures, each in its own process."""
    sk_seconds, sk_peak, sk_out, _ = child_peak([PYTHON, "-c", SKLEARN_ONLY, str(npz_path), str(classes)])
    sklearn = {**json.loads(sk_out), "process": sk_seconds, "process_peak": sk_peak}
    polars, ours = {}, {}
    positive = ["--positive", "1"] if classes == 2 else []
    for kind, path in paths.items():
        polars[kind] = json.loads(child_peak([PYTHON, "-c", POLARS, str(path), str(classes)])[2])
        seconds, peak, out, usage = child_peak(
            [PYTHON, "manage.py", "evaluate_predictions", str(path), *positive, "--json"]
        )
        parts = json.loads(child_peak([PYTHON, "-c", PARTS, str(path), str(classes)])[2])
        document = json.loads(out)
        ours[kind] = {"seconds": seconds, "cpu": cpu_of(usage), "peak": peak, "document": document, "parts": parts}
    return sklearn, polars, ours


def report(sklearn: dict, polars: dict, ours: dict, classes: int) -> None:
    goal = 0.75 if classes == 2 else 1.0
    print()
    print(f"{'':52} {'seconds':>8} {'CPU s':>8} {'peak memory':>12}")
    row = "{:52} {:8.2f} {:8.2f} {:8.0f} MiB"
    print(
        row.format(
            "scikit-learn, nine metrics (arrays in memory)", sklearn["seconds"], sklearn["cpu"], sklearn["peak"] / 2**20
        )
    )
    print(f"{'  its whole process (imports, loading the arrays)':52} {sklearn['process']:8.2f}")
    for kind in ours:
        print(
            row.format(
                f"polars, nine metrics from the {kind} file",
                polars[kind]["seconds"],
                polars[kind]["cpu"],
                polars[kind]["peak"] / 2**20,
            )
        )
    for kind, measured in ours.items():
        print(
            row.format(
                f"evaluate_predictions, {kind} (whole command)",
                measured["seconds"],
                measured["cpu"],
                measured["peak"] / 2**20,
            )
        )
        print(f"{f'  reading and checking the {kind} file':52} {measured['parts']['parse']:8.2f}")
        print(f"{'  computing every metric':52} {measured['parts']['compute']:8.2f}")
    print()
    for kind, measured in ours.items():
        values = measured["document"]["candidates"]
        worst = compare(values, sklearn["values"])
        by_polars = compare(values, polars[kind]["values"])
        print(f"{kind}:")
        cpu, peak = measured["cpu"] / sklearn["cpu"], measured["peak"] / sklearn["peak"]
        print(f"  command's CPU / scikit-learn's nine metrics:      {cpu:.2f} (goal <= {goal:g})")
        print(f"  peak memory, command / scikit-learn's process:    {peak:.2f} (goal <= 1.5)")
        print(f"  polars' CPU from the file / scikit-learn's:       {polars[kind]['cpu'] / sklearn['cpu']:.2f}")
        print(f"  reading the file, the command's / scikit-learn's: {measured['parts']['parse'] / sklearn['cpu']:.2f}")
        print(
            f"  computing, the command's / scikit-learn's:        {measured['parts']['compute'] / sklearn['cpu']:.2f}"
        )
        print(
            f"  largest difference from scikit-learn's values: {worst:.1e} ({'agree' if worst <= 1e-12 else 'DIFFER'})"
        )
        agree = "agree" if by_polars <= 1e-9 else "DIFFER"
        print(f"  largest difference from polars' values:        {by_polars:.1e} ({agree})")
    same = ours["CSV"]["document"] == ours["Parquet"]["document"]
    print(f"CSV and Parquet documents identical: {'yes' if same else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1_000_000)
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--classes", type=int, default=2, help="2: binary with a score (default); more: proba columns")
    parser.add_argument("--upload-rows", type=int, default=1_000_000, help="the upload's rows (default: the limit)")
    parser.add_argument("--no-upload", action="store_true", help="skip the page's upload")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="approve-bench-") as folder:
        started = time.perf_counter()
        csv_path, parquet_path, npz_path = generate(pathlib.Path(folder), args.instances, args.candidates, args.classes)
        size = csv_path.stat().st_size
        print(
            f"{args.instances:,} instances x {args.candidates} candidates = {args.instances * args.candidates:,} rows,"
            f" {args.classes} classes, with instance ids; {size / 1e6:.0f} MB CSV,"
            f" {parquet_path.stat().st_size / 1e6:.0f} MB Parquet (written in {time.perf_counter() - started:.0f} s)"
        )
        print(_blas.threadpool_state())
        sklearn, polars, ours = measure({"CSV": csv_path, "Parquet": parquet_path}, npz_path, args.classes)
        upload = args.classes == 2 and not args.no_upload
        uploaded = uploads(pathlib.Path(folder), args.upload_rows, args.candidates) if upload else {}
    report(sklearn, polars, ours, args.classes)
    print()
    for name, measured in uploaded.items():
        stored = f"{measured['rows']:,} rows stored" if measured["rows"] else "NOT STORED"
        print(
            f"page upload, {name} ({stored}, {measured['bytes'] / 1e6:.1f} MB, "
            f"status {measured['status']}): {measured['seconds']:.2f} s (goal < 2 s)"
        )
    if not uploaded:
        print("page upload: skipped (binary only, and not with --no-upload)")


if __name__ == "__main__":
    main()
