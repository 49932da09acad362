"""Benchmark of engine.core and engine.prioritisation (not a test).

Run from the repository root:  .venv/bin/python bench/engine.py

Prints, measured side by side in one run with a fixed seed:

1. evaluate() against "the dense way" (every expert's score of every
   candidate, (100, k, n) at a time) for k=1000, n=50, m=1000: times,
   speed-up, peak extra memory (tracemalloc), and how evaluate's time grows
   when m, then k, is multiplied by 4;
2. evaluate() against the literal per-candidate aggregation for k=200, n=30,
   m=200 with a slowly mixing V (self-weights 0.9);
3. batched AHP weights + consistency ratios for 1000 experts x 9 criteria
   against AHPy if installed, else a per-expert loop with np.linalg.eig.
   AHPy is for the benchmark only, never a dependency of the project:
   `.venv/bin/pip install ahpy==2.1` before running, to compare with it.
"""

import os
import pathlib
import sys
import time
import tracemalloc

# Single-threaded BLAS unless the caller says otherwise: on a shared 2-core
# machine, OpenBLAS threads competing with other processes make small matrix
# products and solves erratic (10x swings between runs), which swamps the
# differences being measured. Set OPENBLAS_NUM_THREADS to override.
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

import numpy as np  # noqa: E402  (after the thread settings, which it reads on import)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from engine import core  # noqa: E402
from engine.core import aggregate_literal, evaluate, expert_influence  # noqa: E402
from engine.prioritisation import SAATY_SCALE, ahp_weights, consistency_ratios, random_index  # noqa: E402

SEED = 20240611
CHUNK = 100


def best_time(function, repeats):
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best


def peak_extra_bytes(function):
    tracemalloc.start()
    tracemalloc.reset_peak()
    baseline, _ = tracemalloc.get_traced_memory()
    function()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak - baseline


def mebibytes(size):
    return f"{size / 2**20:8.1f} MiB"


def random_study(rng, k, n, m, *, self_weight=None):
    weights = rng.uniform(0.05, 1.0, size=(k, n))
    weights /= weights.sum(axis=1, keepdims=True)
    if self_weight is None:
        peer_weights = rng.uniform(0.5, 1.5, size=(k, k))
        peer_weights /= peer_weights.sum(axis=1, keepdims=True)
    else:
        # Slowly mixing: each expert keeps self_weight and spreads the rest.
        others = rng.uniform(0.5, 1.5, size=(k, k))
        np.fill_diagonal(others, 0.0)
        peer_weights = (1 - self_weight) * others / others.sum(axis=1, keepdims=True)
        np.fill_diagonal(peer_weights, self_weight)
    # Each metric has a typical range. About a third of the experts see it
    # the other way round (mixed directions): their least acceptable value is
    # high and their desired value low. Bounds are spread so that roughly a
    # quarter of the candidates end up vetoed, as in a real study.
    centre = rng.uniform(-5, 5, size=n)
    half_width = rng.uniform(0.5, 3, size=n)
    spread = rng.uniform(0, 0.5, size=(k, n)) * half_width
    jitter = rng.uniform(-0.3, 0.3, size=(k, n)) * half_width
    flipped = rng.random((k, n)) < 0.3
    lower = np.where(flipped, centre + 2 * half_width + spread, centre - half_width - spread)
    upper = np.where(flipped, centre + jitter, centre + half_width + jitter)
    measurements = centre + half_width * (0.5 + 0.55 * rng.standard_normal((m, n)))
    return dict(weights=weights, peer_weights=peer_weights, lower=lower, upper=upper, measurements=measurements)


def dense_evaluate(*, weights, peer_weights, lower, upper, measurements):
    """The straightforward vectorised way: score every (candidate, expert,
    metric) by paper eq. 1, CHUNK candidates at a time, and sum with pi."""
    influence = expert_influence(peer_weights)
    metric_weights = influence @ weights
    width = upper - lower
    m, n = measurements.shape
    group_scores = np.empty((m, n))
    vetoed = np.empty(m, dtype=bool)
    for first in range(0, m, CHUNK):
        chunk = measurements[first:first + CHUNK]
        position = (chunk[:, None, :] - lower) / width  # (chunk, k, n)
        scores = np.clip(position, 0.0, 1.0)
        vetoed[first:first + CHUNK] = (position <= 0).any(axis=(1, 2))
        group_scores[first:first + CHUNK] = np.einsum("i,cij->cj", influence, scores)
    weighted = group_scores @ metric_weights
    return group_scores, np.where(vetoed, 0.0, weighted), vetoed


def literal_per_candidate(*, weights, peer_weights, lower, upper, measurements):
    metric_weights, _ = aggregate_literal(peer_weights, weights)
    cef = np.empty(len(measurements))
    group_scores = np.empty(measurements.shape)
    for c, measured in enumerate(measurements):
        position = (measured - lower) / (upper - lower)
        scores = np.clip(position, 0.0, 1.0)
        group_scores[c], _ = aggregate_literal(peer_weights, scores)
        cef[c] = 0.0 if (scores == 0).any() else group_scores[c] @ metric_weights
    return group_scores, cef


def section(title):
    print()
    print(title)
    print("-" * len(title))


def bench_dense(rng):
    k, n, m = 1000, 50, 1000
    section(f"1. evaluate vs the dense way, k={k} experts, n={n} metrics, m={m} candidates")
    study = random_study(rng, k, n, m)
    fast = evaluate(**study)
    dense_groups, dense_cef, dense_vetoed = dense_evaluate(**study)
    print(f"   agreement: max |g - g_dense| = {np.abs(fast.group_scores - dense_groups).max():.2e}, "
          f"max |cef - cef_dense| = {np.abs(fast.cef - dense_cef).max():.2e}, "
          f"vetoed identical: {bool((fast.vetoed == dense_vetoed).all())} "
          f"({int(fast.vetoed.sum())} of {m} vetoed), layers q = {fast.iterations}")

    def parts(some_study, repeats):
        # evaluate's private steps timed one by one, each on validated input.
        peer_weights = core._validated_peer_weights(some_study["peer_weights"])
        total = best_time(lambda: evaluate(**some_study), repeats)
        validation = best_time(lambda: core._validated_peer_weights(some_study["peer_weights"]), repeats)
        solve = best_time(lambda: core._stationary_distribution(peer_weights), repeats)
        layers = best_time(
            lambda: core._iterate_layers(peer_weights, some_study["weights"], 1e-9, core.MAX_LAYERS), repeats
        )
        influence = core._stationary_distribution(peer_weights)
        bounds = (some_study["lower"], some_study["upper"], some_study["measurements"])
        scoring = best_time(lambda: (core._group_scores(influence, *bounds), core._vetoed(*bounds)), repeats)
        return total, validation, solve, layers, scoring

    base = parts(study, 7)
    fast_time, _, solve_time, layers_time, _ = base
    dense_time = best_time(lambda: dense_evaluate(**study), 3)
    print(f"   evaluate          {fast_time * 1e3:9.1f} ms   (of which pi solve {solve_time * 1e3:.1f} ms, "
          f"literal layers of W {layers_time * 1e3:.1f} ms)")
    print(f"   dense way         {dense_time * 1e3:9.1f} ms   (same validation and pi solve)")
    print(f"   speed-up          {dense_time / fast_time:9.1f} x   (target >= 5 x)")
    print(f"   speed-up of the scoring alone, the shared pi solve excluded: "
          f"{(dense_time - solve_time) / (fast_time - solve_time):.1f} x")

    fast_memory = peak_extra_bytes(lambda: evaluate(**study))
    dense_memory = peak_extra_bytes(lambda: dense_evaluate(**study))
    print(f"   peak extra memory evaluate {mebibytes(fast_memory)}, dense way {mebibytes(dense_memory)} "
          f"(ratio {dense_memory / fast_memory:.1f} x; inputs themselves: "
          f"{mebibytes(sum(a.nbytes for a in study.values())).strip()})")

    print("   growth of evaluate's time, by part: checking V O(k^2), pi solve O(k^3), literal layers")
    print("   of W O(q k^2 n), scoring and vetoes O((m + k) n log k) (best of several runs each)")
    print(f"   {'':20s} {'total':>10s} {'check V':>10s} {'pi solve':>10s} {'layers':>10s} {'scoring':>10s}")
    print(f"   {f'k={k}, m={m}':20s} " + " ".join(f"{t * 1e3:7.1f} ms" for t in base))
    for label, bigger in (
        (f"m x 4 (m={4 * m})", random_study(np.random.default_rng(SEED + 1), k, n, 4 * m)),
        (f"k x 4 (k={4 * k})", random_study(np.random.default_rng(SEED + 2), 4 * k, n, m)),
    ):
        grown = parts(bigger, 5)
        print(f"   {label:20s} " + " ".join(f"{g / b:8.2f} x" for g, b in zip(grown, base))
              + f"   ({grown[0] * 1e3:.1f} ms in all)")


def bench_literal(rng):
    k, n, m = 200, 30, 200
    timed = 20  # the literal way costs the same for every candidate
    section(f"2. evaluate vs per-candidate literal aggregation, k={k}, n={n}, m={m}, self-weights 0.9")
    study = random_study(rng, k, n, m, self_weight=0.9)
    fast = evaluate(**study)
    subset = dict(study, measurements=study["measurements"][:timed])
    started = time.perf_counter()
    literal_groups, literal_cef = literal_per_candidate(**subset)
    literal_time = (time.perf_counter() - started) * m / timed
    fast_time = best_time(lambda: evaluate(**study), 5)
    print(f"   agreement on the first {timed}: max |g - g_literal| = "
          f"{np.abs(fast.group_scores[:timed] - literal_groups).max():.2e}, "
          f"max |cef - cef_literal| = {np.abs(fast.cef[:timed] - literal_cef).max():.2e}, layers q = {fast.iterations}")
    print(f"   evaluate          {fast_time * 1e3:9.1f} ms   (all {m} candidates)")
    print(f"   literal           {literal_time * 1e3:9.1f} ms   (measured on {timed} candidates, x {m // timed})")
    print(f"   speed-up          {literal_time / fast_time:9.1f} x")


def random_pairwise_stack(rng, experts, n):
    matrices = np.ones((experts, n, n))
    rows, columns = np.triu_indices(n, 1)
    values = rng.choice(SAATY_SCALE, size=(experts, len(rows)))
    matrices[:, rows, columns] = values
    matrices[:, columns, rows] = 1.0 / values
    return matrices


def loop_ahp(matrices):
    weights, ratios = [], []
    n = matrices.shape[-1]
    index = random_index(n)
    for matrix in matrices:
        weights.append((matrix / matrix.sum(axis=0)).mean(axis=1))
        eigenvalues, _ = np.linalg.eig(matrix)
        lambda_max = eigenvalues.real.max()
        ratios.append(max((lambda_max - n) / (n - 1), 0.0) / index)
    return np.array(weights), np.array(ratios)


def bench_ahp(rng):
    experts, n = 1000, 9
    section(f"3. AHP weights + consistency ratios, {experts} experts x {n} criteria")
    matrices = random_pairwise_stack(rng, experts, n)
    batched_time = best_time(lambda: (ahp_weights(matrices), consistency_ratios(matrices)), 5)
    try:
        import ahpy
    except ImportError:
        reference_name = "per-expert loop (np.linalg.eig each; ahpy not installed)"
        reference_weights, reference_ratios = loop_ahp(matrices)
        reference_time = best_time(lambda: loop_ahp(matrices), 3)
        print(f"   agreement: max |w - w_loop| = {np.abs(ahp_weights(matrices) - reference_weights).max():.2e}, "
              f"max |CR - CR_loop| = {np.abs(consistency_ratios(matrices) - reference_ratios).max():.2e}")
    else:  # only where AHPy happens to be installed (never a dependency)
        labels = [f"c{i}" for i in range(n)]

        def with_ahpy():
            return [
                ahpy.Compare(
                    "expert",
                    {(labels[i], labels[j]): float(matrix[i, j]) for i in range(n) for j in range(i + 1, n)},
                    precision=10,
                    random_index="saaty",
                ).consistency_ratio
                for matrix in matrices
            ]

        # AHPy weighs by the principal eigenvector, not by column-normalised
        # row averages (METHOD.md), so only the consistency ratios compare.
        ahpy_ratios = np.array(with_ahpy())
        print(f"   agreement: max |CR - CR_ahpy| = {np.abs(consistency_ratios(matrices) - ahpy_ratios).max():.2e} "
              "(AHPy rounds to 10 decimals)")
        reference_name = "AHPy, one Compare per expert"
        reference_time = best_time(with_ahpy, 1)
    print(f"   batched           {batched_time * 1e3:9.1f} ms")
    print(f"   {reference_name}: {reference_time * 1e3:.1f} ms")
    print(f"   speed-up          {reference_time / batched_time:9.1f} x")


def main():
    rng = np.random.default_rng(SEED)
    print(f"engine benchmark, numpy {np.__version__}, seed {SEED}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    started = time.perf_counter()
    bench_dense(rng)
    bench_literal(rng)
    bench_ahp(rng)
    print()
    print(f"total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
