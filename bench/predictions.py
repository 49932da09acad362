"""Benchmark of the prediction-set reader (not a test): issue 10, item 2.

Writes an ``approve-predictions/1`` CSV of ``--instances`` test instances x
``--candidates`` candidates (fixed seed) and times ``read_predictions`` on it:
wall time, rows per second, and the peak resident memory of this process.

    .venv/bin/python bench/predictions.py --instances 100000 --candidates 10
    .venv/bin/python bench/predictions.py --instances 1000000 --candidates 10 --kind multiclass

    .venv/bin/python bench/predictions.py --instances 100000 --candidates 10 --kind multiclass --classes 10

``--kind binary`` (default): y_pred, score, fold, time, instance and one
context column; ``--kind multiclass``: y_pred and proba over ``--classes``
labels (default 3), fold and instance. The file is written once per size,
kind and classes under ``--directory`` (default: the system's temporary
directory) and reused. The reader alone, against nothing: the comparison
with scikit-learn on arrays in memory and with polars on the same file,
CSV and Parquet, is bench/evaluate_predictions.py's (issue 33, item 1).
"""

import argparse
import pathlib
import resource
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from evaluation.predictions import read_predictions  # noqa: E402

SEED = 20260510
FOLDS = 5
LABELS = ["benign", "malignant", "unknown"]


def labels_of(classes: int) -> list[str]:
    return LABELS if classes <= len(LABELS) else LABELS + [f"class{k}" for k in range(len(LABELS), classes)]


def write_file(path: pathlib.Path, *, instances: int, candidates: int, kind: str, classes: int = 3) -> None:
    rng = np.random.default_rng(SEED)
    labels = labels_of(classes)[:classes]
    y_true = rng.integers(0, 2 if kind == "binary" else classes, instances)
    fold = np.arange(instances) % FOLDS
    with path.open("w", encoding="utf-8", newline="") as out:
        if kind == "binary":
            out.write("candidate,instance,fold,y_true,y_pred,score,time,context:site\n")
        else:
            out.write("candidate,instance,fold,y_true,y_pred," + ",".join(f"proba:{label}" for label in labels) + "\n")
        for candidate in range(candidates):
            name = f"learner-{candidate}"
            for start in range(0, instances, 100_000):
                stop = min(start + 100_000, instances)
                truth = y_true[start:stop]
                if kind == "binary":
                    score = np.clip(truth * 0.5 + rng.random(stop - start) * 0.5, 0, 1)
                    times = rng.random(stop - start) / 100
                    out.writelines(
                        f"{name},i{i},{fold[i]},{LABELS[t]},{LABELS[int(s >= 0.5)]},{s:.6f},{tm:.6f},s{i % 7}\n"
                        for i, t, s, tm in zip(range(start, stop), truth, score, times, strict=True)
                    )
                else:
                    proba = rng.dirichlet([1] * classes, stop - start).tolist()  # floats: repr is exact
                    out.writelines(
                        f"{name},i{i},{fold[i]},{labels[t]},{labels[p.index(max(p))]},{','.join(map(repr, p))}\n"
                        for i, t, p in zip(range(start, stop), truth, proba, strict=True)
                    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=100_000)
    parser.add_argument("--candidates", type=int, default=10)
    parser.add_argument("--kind", choices=["binary", "multiclass"], default="binary")
    parser.add_argument("--classes", type=int, default=3, help="multiclass: the labels (default 3)")
    parser.add_argument("--directory", type=pathlib.Path, default=pathlib.Path(tempfile.gettempdir()))
    options = parser.parse_args()
    classes = f"-{options.classes}" if options.kind == "multiclass" else ""
    path = options.directory / f"predictions-{options.kind}{classes}-{options.instances}x{options.candidates}.csv"
    if not path.exists():
        started = time.perf_counter()
        write_file(
            path, instances=options.instances, candidates=options.candidates, kind=options.kind, classes=options.classes
        )
        print(f"wrote {path} in {time.perf_counter() - started:.1f} s")
    size = path.stat().st_size
    started = time.perf_counter()
    data = read_predictions(path, positive=LABELS[1] if options.kind == "binary" else None)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{data.rows:,} rows ({size / 1e6:.0f} MB, {len(data.candidates)} candidates, labels {data.labels}) "
        f"read in {seconds:.2f} s: {data.rows / seconds:,.0f} rows/s; peak resident memory {peak:,.0f} MB"
    )


if __name__ == "__main__":
    main()
