"""Benchmark of `manage.py evaluate_predictions` (not a test).

Run from the repository root:  .venv/bin/python bench/evaluate_predictions.py [--instances N] [--candidates M]

Default: 1,000,000 test instances x 10 candidates, a binary task, i.e. a
predictions CSV (approve-predictions/1) of 10,000,000 rows with the columns
candidate, y_true, y_pred, score, fold (10 folds) and time (about 450 MB,
written once to a temporary folder and removed at the end).

Compares, each in a fresh process so that peak memory (the process's
maximum resident set size) is its own, side by side in one run:

1. scikit-learn called directly: the arrays already in memory (loaded from a
   .npy file, no CSV parsing at all), then per candidate the functions for
   accuracy, balanced accuracy, precision, recall, F1, specificity (from the
   confusion matrix), ROC AUC, Cohen's kappa and log loss;
2. `manage.py evaluate_predictions FILE --positive 1 --json`, the whole
   command: reading and checking the CSV, then every metric its columns
   allow (those above, plus consistency over folds, efficiency, A3R, ARR);
3. the same command's parts, timed inside one process: parsing the file
   and computing the metrics.

and prints the ratios (the command against scikit-learn alone), and
whether the values agree with scikit-learn's to 1e-12. BLAS single-threaded.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import _blas  # noqa: F401  (sets single-threaded BLAS; must come before numpy)
import numpy as np

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
started = time.perf_counter()
data = read_predictions(sys.argv[1], positive="1")
parsed = time.perf_counter()
evaluation_document(data)
done = time.perf_counter()
print(json.dumps({"parse": parsed - started, "compute": done - parsed}))
"""


def generate(folder: pathlib.Path, instances: int, candidates: int) -> tuple[pathlib.Path, pathlib.Path]:
    """The CSV and, for scikit-learn, the same arrays as a .npz file."""
    rng = np.random.default_rng(SEED)
    y_true = (rng.random(instances) < 0.3).astype(np.int8)
    arrays = {"y_true": [], "y_pred": [], "score": []}
    csv_path, npz_path = folder / "predictions.csv", folder / "predictions.npz"
    fold = np.arange(instances) % 10
    with csv_path.open("w", encoding="utf-8") as out:
        out.write("candidate,y_true,y_pred,score,fold,time\n")
        for c in range(candidates):
            skill = 0.5 + 0.4 * (c + 1) / candidates
            noise = rng.normal(0, 1 - skill, instances)
            score = np.clip(np.where(y_true == 1, 0.62, 0.38) + noise, 0.001, 0.999).round(6)
            y_pred = (score >= 0.5).astype(np.int8)
            seconds = (rng.gamma(2.0, 0.5e-3 * (c + 1), instances)).round(9)
            table = np.column_stack([y_true, y_pred, score, fold, seconds])
            np.savetxt(out, table, fmt=f"C{c},%d,%d,%.6f,%d,%.9g", delimiter=",")
            arrays["y_true"].append(y_true)
            arrays["y_pred"].append(y_pred)
            arrays["score"].append(score)
    np.savez(npz_path, **{key: np.stack(value) for key, value in arrays.items()})
    return csv_path, npz_path


def child_peak(command: list[str]) -> tuple[float, int, str]:
    """Wall time, peak resident memory (bytes, from wait4) and output of a
    child process. Its error output goes to a file, so a full pipe can never
    block it while its output is read."""
    started = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as errors:
        child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True)
        stdout = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        if status:
            errors.seek(0)
            raise SystemExit(f"{' '.join(command)} failed:\n{errors.read()}")
    return seconds, usage.ru_maxrss * 1024, stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1_000_000)
    parser.add_argument("--candidates", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="approve-bench-") as folder:
        started = time.perf_counter()
        csv_path, npz_path = generate(pathlib.Path(folder), args.instances, args.candidates)
        size = csv_path.stat().st_size
        print(
            f"{args.instances:,} instances x {args.candidates} candidates = {args.instances * args.candidates:,} rows,"
            f" {size / 1e6:.0f} MB CSV (written in {time.perf_counter() - started:.0f} s)"
        )
        sk_seconds, sk_peak, sk_out = child_peak([PYTHON, "-c", SKLEARN_ONLY, str(npz_path)])
        sklearn = json.loads(sk_out)
        ours_seconds, ours_peak, ours_out = child_peak(
            [PYTHON, "manage.py", "evaluate_predictions", str(csv_path), "--positive", "1", "--json"]
        )
        document = json.loads(ours_out)
        parts = json.loads(child_peak([PYTHON, "-c", PARTS, str(csv_path)])[2])

    worst = max(
        abs(document["candidates"][name][key] - value)
        for name, values in sklearn["values"].items()
        for key, value in values.items()
    )
    print()
    print(f"{'':44} {'seconds':>9} {'peak memory':>12}")
    print(f"{'scikit-learn alone (arrays in memory)':44} {sklearn['seconds']:9.2f} {sk_peak / 2**20:9.0f} MiB")
    print(f"{'  its process, from start to end':44} {sk_seconds:9.2f}")
    print(f"{'evaluate_predictions (whole command)':44} {ours_seconds:9.2f} {ours_peak / 2**20:9.0f} MiB")
    print(f"{'  reading and checking the CSV':44} {parts['parse']:9.2f}")
    print(f"{'  computing every metric':44} {parts['compute']:9.2f}")
    print()
    print(f"computing, evaluate_predictions / scikit-learn alone: {parts['compute'] / sklearn['seconds']:.2f}")
    print(f"whole command / scikit-learn alone:                   {ours_seconds / sklearn['seconds']:.2f}")
    print(f"peak memory, command / scikit-learn's process:        {ours_peak / sk_peak:.2f}")
    print(
        f"largest difference from scikit-learn's values:        {worst:.1e} ({'agree' if worst <= 1e-12 else 'DIFFER'})"
    )


if __name__ == "__main__":
    main()
