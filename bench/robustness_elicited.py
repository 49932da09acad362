"""Benchmark of Monte Carlo analyses with elicited metrics (not a test).

Run from the repository root:  .venv/bin/python bench/robustness_elicited.py [--base REV] [--samples S]

On bench/robustness.py's study (100 experts x 20 metrics x 1,000
candidates, half the experts by AHP), BLAS single-threaded, the median of
three paired rounds:

1. before/after: the per-sample time of runs WITHOUT elicited metrics, the
   engine of ``--base`` (default ``main``, read with ``git archive`` into a
   temporary package) against this tree's, side by side in one process
   (goal: ratio <= 1.05);
2. the cost of one elicited metric (metric 0 as each expert's own value;
   the candidates' instances 2,000 each in one binary set, every expert
   with their own diagonal weights): per sample with the own values fixed,
   and with them recomputed from the bootstrap, against the same sampling
   of the study without it.
"""

import argparse
import importlib
import importlib.util
import io
import pathlib
import subprocess
import sys
import tarfile
import tempfile
import time

import _blas  # noqa: F401  (sets single-threaded BLAS; must come before numpy)
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import core, robustness  # noqa: E402


def _bench(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _bench("robustness")
SEED = BENCH.SEED
INSTANCES = 2_000


def engine_at(revision: str, folder: pathlib.Path):
    """``engine.robustness`` as of ``revision``, imported as the package ``engine_before`` (its pure modules
    import nothing outside the package)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "engine"], check=True, capture_output=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    (folder / "engine").rename(folder / "engine_before")
    sys.path.insert(0, str(folder))
    return importlib.import_module("engine_before.robustness")


def _per_sample(module, inputs, spec, samples):
    started = time.perf_counter()
    module.monte_carlo_chunk(inputs, spec, SEED, 0, samples)
    return (time.perf_counter() - started) / samples


def cases(module):
    spec = module.SamplingSpec
    return [
        ("judgments + peer weights", spec(judgments=True, peer_weights=True)),
        ("judgments only", spec(judgments=True, pairwise=tuple(range(module.PAIRWISE_TOP)))),
        (
            "+ ranges 5 % + measurements",
            spec(judgments=True, peer_weights=True, range_fraction=0.05, measurements=True),
        ),
    ]


def bench_before_after(base: str, inputs, samples):
    BENCH.section(f"1. Without elicited metrics: {base} against this tree, per sample ({samples} samples a run)")
    with tempfile.TemporaryDirectory() as folder:
        before = engine_at(base, pathlib.Path(folder))
        old_inputs = before.MonteCarloInputs(
            **{name: value for name, value in inputs.__dict__.items() if name not in ("expert_values", "elicited")}
        )
        for (name, old_spec), (_, new_spec) in zip(cases(before), cases(robustness), strict=True):
            ratio, after, previous = BENCH.paired_ratio(
                lambda new_spec=new_spec: _per_sample(robustness, inputs, new_spec, samples),
                lambda old_spec=old_spec: _per_sample(before, old_inputs, old_spec, samples),
            )
            print(f"{name:34s} before {previous * 1e3:7.3f} ms  after {after * 1e3:7.3f} ms  ratio {ratio:.3f}")


def with_elicited(inputs):
    """The study with metric 0 elicited: each expert's diagonal weights, each candidate's 2,000 instances."""
    rng = np.random.default_rng(SEED + 1)
    k = len(inputs.peer_weights)
    m = len(inputs.measurements)
    truth = rng.integers(0, 2, size=INSTANCES)
    right = rng.uniform(0.6, 0.95, size=(m, 1))
    predicted = np.where(rng.random((m, INSTANCES)) < right, truth, 1 - truth)
    cells = truth * 2 + predicted
    weights = np.zeros((k, 4))
    weights[:, [0, 3]] = rng.uniform(0.2, 1.0, size=(k, 2))
    weights /= weights.sum(axis=1, keepdims=True)
    counts = np.stack([np.bincount(row, minlength=4) for row in cells]) / INSTANCES  # (m, 4)
    own = (counts @ weights.T)[:, :, None]  # (m, k, 1)
    # Spread over metric 0's measured span, so the own values score like its measurements.
    measured = np.asarray(inputs.measurements)[:, 0]
    own = measured.min() + (own - own.min()) / (own.max() - own.min()) * (measured.max() - measured.min())
    column = robustness.ElicitedColumn(metric=0, cell_weights=weights, cells=tuple(cells), prediction_sets=(1,) * m)
    return robustness.MonteCarloInputs(
        **{**inputs.__dict__, "expert_values": core.ExpertValues(np.array([0]), own), "elicited": (column,)}
    )


def bench_elicited(inputs, samples):
    BENCH.section(
        f"2. One elicited metric at 100 experts x 1,000 candidates ({INSTANCES:,} instances each), per sample"
    )
    elicited = with_elicited(inputs)
    spec = robustness.SamplingSpec
    for name, case in [
        ("judgments + peer weights (fixed own values)", spec(judgments=True, peer_weights=True)),
        ("+ ranges 5 % (fixed own values)", spec(judgments=True, peer_weights=True, range_fraction=0.05)),
        (
            "+ ranges 5 % + bootstrap of the own values",
            spec(judgments=True, peer_weights=True, range_fraction=0.05, bootstrap=True),
        ),
    ]:
        ratio, took, plain = BENCH.paired_ratio(
            lambda case=case: _per_sample(robustness, elicited, case, samples),
            lambda case=case: _per_sample(robustness, inputs, case, samples),
        )
        print(f"{name:46s} without {plain * 1e3:7.3f} ms  with {took * 1e3:7.3f} ms  ratio {ratio:.2f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="main")
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("sections", nargs="*", default=["before-after", "elicited"])
    options = parser.parse_args()
    print(_blas.threadpool_state())
    _, inputs = BENCH.study()
    if "before-after" in options.sections:
        bench_before_after(options.base, inputs, options.samples)
    if "elicited" in options.sections:
        bench_elicited(inputs, options.samples)


if __name__ == "__main__":
    main()
