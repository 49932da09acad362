"""Benchmark of engine.robustness and evaluation.bootstrap (not a test).

Run from the repository root:  .venv/bin/python bench/robustness.py [section ...]
(sections: sensitivity, montecarlo, experts, throughput, bootstrap; all by default)
Options: --samples S (Monte Carlo samples per measurement, default 512),
--experts-samples S (default 256), --throughput-samples S (default 10000),
--replicates R (bootstrap, default 2000).

Prints ratios measured side by side in one run, BLAS single-threaded
(bench/_blas.py), on the study bench/engine.py builds (100 experts x 20
metrics x 1,000 candidates, half the experts prioritising by AHP with a
20 x 20 matrix on Saaty's scale):

1. sensitivity: weight_stability + sensitivity_lines for every metric, and
   a what-if, against one evaluate() (goal: <= 2);
2. montecarlo: per sample, against the bare evaluate a sample does
   (``bare_evaluate``: the stationary vector, the weights, the group scores,
   the vetoes and the CEFs of arrays already validated, no layer count),
   timed back to back with it (the median of three rounds' ratios, so that
   both see the same load), the full evaluate() (validation and the layer
   count too) printed beside it: judgments and peer weights sampled (goal:
   <= 0.25), and with ranges (+-5 %) and measurements (standard errors) too
   (goal: <= 1);
2b. experts: the same at 1,000 experts x 20 metrics x 1,000 candidates
   (judgments and peer weights), per sample against one evaluate() (goal:
   <= 3; the issue's measure: most of a sample is drawing its million peer
   weights, which neither evaluate draws), the bare evaluate beside it, and
   the peak memory of a fresh process computing them
   (ru_maxrss; goal: <= 1 GiB at the default ENGINE_ANALYSIS_MEMORY_BYTES,
   256 MiB), with the memory budget at 64 MiB and 1 GiB beside it;
3. throughput: the wall time of 10,000 samples of the experts' side in one
   process (goal: < 30 s);
4. bootstrap: 2,000 paired replicates of accuracy and ROC AUC for 10
   candidates x 100,000 instances, per replicate, against one
   scikit-learn roc_auc_score call on 100,000 instances (goal: <= 10).
"""

import argparse
import importlib.util
import pathlib
import resource
import subprocess
import sys
import time

import _blas  # noqa: F401  (sets single-threaded BLAS; must come before numpy)
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import core, robustness  # noqa: E402
from engine.core import evaluate  # noqa: E402
from engine.prioritisation import ahp_weights  # noqa: E402
from engine.rules import SCALE_VALUES  # noqa: E402
from evaluation.bootstrap import bootstrap_metrics  # noqa: E402

SEED = 20240611
K, N, M = 100, 20, 1000


def _engine_bench():
    spec = importlib.util.spec_from_file_location("bench_engine", ROOT / "bench" / "engine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ENGINE = _engine_bench()
best_time = ENGINE.best_time


def section(title):
    print()
    print(title)
    print("-" * len(title))


def study(K=K, N=N, M=M):
    """bench/engine.py's random study, half the experts' weights from AHP matrices."""
    rng = np.random.default_rng(SEED)
    arrays = ENGINE.random_study(rng, K, N, M)
    ahp = np.arange(K) % 2 == 0
    matrices = np.ones((K, N, N))
    rows, columns = np.triu_indices(N, k=1)
    # Judgments near consistent with a random priority vector, snapped to the scale.
    priorities = rng.uniform(0.2, 1.0, size=(K, N))
    ratio = priorities[:, rows] / priorities[:, columns]
    points = np.argmin(np.abs(np.log(ratio)[..., None] - np.log(SCALE_VALUES)), axis=-1)
    matrices[:, rows, columns] = SCALE_VALUES[points]
    matrices[:, columns, rows] = 1.0 / SCALE_VALUES[points]
    weights = arrays["weights"].copy()
    weights[ahp] = ahp_weights(matrices[ahp])
    arrays["weights"] = weights
    errors = np.abs(arrays["measurements"]) * 0.02 + 0.01
    inputs = robustness.MonteCarloInputs(**arrays, ahp_matrices=matrices, ahp_experts=ahp, standard_errors=errors)
    return arrays, inputs


def bench_sensitivity(arrays):
    section("1. Weight sensitivity for every weight (goal: <= 2 x one evaluate)")
    run = evaluate(**arrays)
    a, g, vetoed = run.metric_weights, run.group_scores, run.vetoed

    def every_weight():
        robustness.weight_stability(a, g, vetoed)
        robustness.sensitivity_lines(a, g, vetoed)

    def loop(function, calls=50):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        return (time.perf_counter() - started) / calls

    ratio, took, evaluate_time = paired_ratio(lambda: loop(every_weight), lambda: evaluate_per_call(arrays, 50))
    what_if_ratio, what_if, _ = paired_ratio(
        lambda: loop(lambda: robustness.what_if(a, g, vetoed)), lambda: evaluate_per_call(arrays, 50)
    )
    print(f"evaluate                      {evaluate_time * 1e3:8.2f} ms")
    print(f"stability + lines, {N} weights {took * 1e3:8.2f} ms   ratio {ratio:.2f}")
    print(f"what_if (one slider change)   {what_if * 1e3:8.2f} ms   ratio {what_if_ratio:.3f}")


def paired_ratio(measured, reference, rounds=3):
    """(median ratio, measured time, reference time): each round times
    ``measured()`` and ``reference()`` back to back, each returning its time
    per unit, so both see the same load on a shared machine; the median of
    the rounds' ratios is reported (a best single evaluate on a busy machine
    is a lucky moment, a long Monte Carlo run is not)."""
    ratios, pairs = [], []
    for _ in range(rounds):
        reference_time = reference()
        measured_time = measured()
        ratios.append(measured_time / reference_time)
        pairs.append((measured_time, reference_time))
    middle = int(np.argsort(ratios)[len(ratios) // 2])
    return ratios[middle], *pairs[middle]


def evaluate_per_call(arrays, calls, function=evaluate):
    """One evaluate's time, from a loop of ``calls`` calls."""
    started = time.perf_counter()
    for _ in range(calls):
        function(**arrays)
    return (time.perf_counter() - started) / calls


def bare_evaluate(weights, peer_weights, lower, upper, measurements):
    """What a sample evaluates (engine.core.evaluate's steps on arrays
    already validated, without the layer count, which evaluate only
    reports): the stationary vector, the consensus weights, the group
    scores, the vetoes and the CEFs."""
    influence = core._stationary_distribution(peer_weights)
    metric_weights = influence @ weights
    metric_weights = metric_weights / metric_weights.sum()
    group_scores = core.group_scores_with(influence, lower, upper, measurements, None)
    weighted = (group_scores * metric_weights).sum(axis=1)
    return np.where(core.vetoed_with(lower, upper, measurements, None), 0.0, weighted)


def per_sample(inputs, spec, samples):
    started = time.perf_counter()
    robustness.monte_carlo_chunk(inputs, spec, SEED, 0, samples)
    return (time.perf_counter() - started) / samples


def bench_monte_carlo(arrays, inputs, samples):
    section(f"2. Monte Carlo per sample ({samples} samples a run) against the bare evaluate, median of 3 paired rounds")
    full, bare = evaluate_per_call(arrays, 50), evaluate_per_call(arrays, 50, bare_evaluate)
    print(
        f"evaluate {full * 1e3:.3f} ms, bare evaluate {bare * 1e3:.3f} ms (validation and layer count: "
        f"{(full - bare) / full:.0%} of evaluate)"
    )
    top = tuple(range(robustness.PAIRWISE_TOP))
    cases = [
        ("judgments + peer weights (goal <= 0.25)", robustness.SamplingSpec(judgments=True, peer_weights=True)),
        (
            "  the same, pairwise among all 1,000",
            robustness.SamplingSpec(judgments=True, peer_weights=True, pairwise=tuple(range(M))),
        ),
        ("judgments only", robustness.SamplingSpec(judgments=True, pairwise=top)),
        ("peer weights only", robustness.SamplingSpec(peer_weights=True, pairwise=top)),
        (
            "+ ranges 5 % + measurements (goal <= 1)",
            robustness.SamplingSpec(judgments=True, peer_weights=True, range_fraction=0.05, measurements=True),
        ),
    ]
    for name, spec in cases:
        ratio, took, evaluate_time = paired_ratio(
            lambda spec=spec: per_sample(inputs, spec, samples),
            lambda: evaluate_per_call(arrays, max(20, samples // 4), bare_evaluate),
        )
        print(f"{name:42s}{took * 1e3:8.3f} ms  bare evaluate {evaluate_time * 1e3:6.3f} ms  ratio {ratio:.3f}")


EXPERTS = 1000


def bench_experts(samples):
    section(
        f"2b. Monte Carlo at {EXPERTS:,} experts x {N} metrics x {M:,} candidates, judgments + peer weights, "
        f"{samples} samples (goal: per sample <= 3 x one evaluate, peak memory <= 1 GiB), median of 3 rounds"
    )
    print("(each budget in a fresh process, whose peak memory includes the study, its evaluation and Python)")
    for budget in (256 * 2**20, 64 * 2**20, 2**30):
        command = [sys.executable, __file__, "--experts-child", str(budget), "--experts-samples", str(samples)]
        print(subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip())


def experts_child(budget, samples):
    """One measurement of bench_experts, in this (fresh) process."""
    arrays, inputs = study(EXPERTS, N, M)
    spec = robustness.SamplingSpec(judgments=True, peer_weights=True)
    prepared = robustness.monte_carlo_prepare(inputs, spec, memory_budget=budget)

    def sampled():
        started = time.perf_counter()
        robustness.monte_carlo_counts(prepared, SEED, 0, samples)
        return (time.perf_counter() - started) / samples

    rounds = [
        (sampled(), evaluate_per_call(arrays, 10), evaluate_per_call(arrays, 20, bare_evaluate)) for _ in range(3)
    ]
    took, full, bare = np.median(np.array(rounds), axis=0)
    full_ratio = np.median([sample / evaluate for sample, evaluate, _ in rounds])
    bare_ratio = np.median([sample / evaluate for sample, _, evaluate in rounds])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        f"budget {budget / 2**20:5.0f} MiB: per sample {took * 1e3:6.2f} ms; evaluate {full * 1e3:6.2f} ms, "
        f"ratio {full_ratio:.2f} (goal <= 3); bare evaluate {bare * 1e3:6.2f} ms, ratio {bare_ratio:.2f}; "
        f"peak memory of the process {peak / 2**30:.2f} GiB (goal <= 1)"
    )


def bench_throughput(inputs, samples):
    section(f"3. {samples:,} samples of the experts' side in one process (goal: < 30 s)")
    spec = robustness.SamplingSpec(judgments=True, peer_weights=True)
    started = time.perf_counter()
    counts = robustness.monte_carlo_chunk(inputs, spec, SEED, 0, samples)
    took = time.perf_counter() - started
    result = robustness.summary(counts)
    best = int(np.argmax(result.best))
    print(f"{took:.1f} s; candidate {best} best in {result.best[best]:.1%} +- {result.best_se[best]:.1%}")


def bench_bootstrap(replicates):
    section(
        f"4. Bootstrap: {replicates:,} replicates, 10 candidates x 100,000 instances, accuracy + ROC AUC "
        "(goal: per replicate <= 10 x one sklearn roc_auc_score)"
    )
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(SEED)
    n, candidates = 100_000, 10
    truth = rng.integers(0, 2, size=n)
    scores = np.round(truth * 0.3 + rng.uniform(0, 1, size=(candidates, n)), 3)
    labels = (scores >= 0.65).astype(int)

    def sklearn_call():
        started = time.perf_counter()
        for c in range(5):
            roc_auc_score(truth, scores[c])
        return (time.perf_counter() - started) / 5

    # sklearn's single call is timed just before and just after the long run
    # and averaged, so that both see the same load on a shared machine.
    before = sklearn_call()
    started = time.perf_counter()
    result = bootstrap_metrics(truth, y_pred=labels, y_score=scores, seed=SEED, replicates=replicates)
    took = (time.perf_counter() - started) / replicates
    single = (before + sklearn_call()) / 2
    print(f"sklearn roc_auc_score, one call       {single * 1e3:8.2f} ms")
    print(f"ours, per replicate (10 candidates)   {took * 1e3:8.2f} ms   ratio {took / single:.2f}")
    print("(a loop of sklearn would take 10 calls per replicate: ratio 10 plus resampling)")
    spread = np.nanpercentile(result.roc_auc[:, 0], [2.5, 97.5])
    print(f"candidate 0's AUC 95 % interval: {spread[0]:.4f} .. {spread[1]:.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "sections", nargs="*", default=["sensitivity", "montecarlo", "experts", "throughput", "bootstrap"]
    )
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--experts-samples", type=int, default=256)
    parser.add_argument("--experts-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--throughput-samples", type=int, default=10_000)
    parser.add_argument("--replicates", type=int, default=2000)
    options = parser.parse_args()
    if options.experts_child:
        experts_child(options.experts_child, options.experts_samples)
        return
    print(_blas.threadpool_state())
    print(
        "Skipped here: what a worker adds to a chunk (reading the run, claiming, storing, merging: "
        "bench/analysis_workers.py) and the bootstrap of elicited metrics (bench/robustness_elicited.py)."
    )
    arrays, inputs = study()
    if "sensitivity" in options.sections:
        bench_sensitivity(arrays)
    if "montecarlo" in options.sections:
        bench_monte_carlo(arrays, inputs, options.samples)
    if "experts" in options.sections:
        bench_experts(options.experts_samples)
    if "throughput" in options.sections:
        bench_throughput(inputs, options.throughput_samples)
    if "bootstrap" in options.sections:
        bench_bootstrap(options.replicates)


if __name__ == "__main__":
    main()
