"""Benchmark of engine.core and engine.prioritisation (not a test).

Run from the repository root:  .venv/bin/python bench/engine.py [section ...]
(sections: dense, growth, literal, ahp, layers, kernels; all by default)

Prints, measured side by side in one run with a fixed seed (best of several
runs each, BLAS single-threaded, see bench/_blas.py):

1. evaluate() against the dense pass (every expert's score of every
   candidate, the (m, k, n) tensor built CHUNK candidates at a time and
   aggregated with pi; same validation and pi) at k=1000, n=50, m=1000 (goal:
   a ratio <= 0.1), at k=3000, with slowly mixing peer weights (self-weights
   0.99, tiny off-diagonal weights; goal: <= 1) and with nearly
   block-reducible ones, with agreement and the layer count against the
   literal reference;
2. where evaluate's time goes, and how it grows when k, then m, is
   multiplied by 4, and for m much larger than k;
3. evaluate() against the literal per-candidate aggregation (k=200, n=30,
   m=200, self-weights 0.9);
4. batched AHP weights + consistency ratios for 1000 experts x 9 criteria
   (CPU time; one pass of ahp_priorities, by the paper's column means and by
   the eigenvector) against AHPy if installed (goal: AHPy's time / ours >=
   50), else, with a clear message, against a per-expert loop with
   np.linalg.eig. AHPy is for the benchmark only, never a dependency of the
   project: it is pinned in requirements-dev.txt under "benchmarks only";
   `pip install ahpy==2.1` into the venv that runs this script;
5. the share of evaluate's CPU time spent counting layers (only reported as
   ``iterations``) at 100 experts x 20 metrics x 1,000 candidates with
   slowly mixing peer weights, and at k=1000, n=50;
6. ``core._group_scores_at``'s binary searches (issue 19, item 4): its loop
   over metrics (one ``np.searchsorted`` per metric for the starts and one
   for the ends) against the same positions found for every metric at once
   by one stable ``argsort`` of the breakpoints and the candidates' values
   merged per metric, at 100 x 20 x 1,000 and at 1,000 x 50 x 1,000, with the
   loop's Python overhead alone (the same calls on one candidate): what
   any vectorisation of the loop could save at most.
"""

import os
import pathlib
import sys
import time
import tracemalloc

import _blas  # noqa: F401  (sets single-threaded BLAS; must come before numpy)
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from engine import core, layers  # noqa: E402
from engine.core import aggregate_literal, evaluate, expert_influence  # noqa: E402
from engine.prioritisation import ahp_priorities, ahp_weights, consistency_ratios, random_index  # noqa: E402
from engine.rules import SCALE_VALUES  # noqa: E402

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
    return f"{size / 2**20:.1f} MiB"


def random_study(rng, k, n, m, *, self_weight=None, blocks=None):
    weights = rng.uniform(0.05, 1.0, size=(k, n))
    weights /= weights.sum(axis=1, keepdims=True)
    peer_weights = rng.uniform(0.5, 1.5, size=(k, k))
    if self_weight is not None:
        # Slowly mixing: each expert keeps self_weight and spreads the rest.
        np.fill_diagonal(peer_weights, 0.0)
        peer_weights = (1 - self_weight) * peer_weights / peer_weights.sum(axis=1, keepdims=True)
        np.fill_diagonal(peer_weights, self_weight)
    elif blocks is not None:
        # Nearly block-reducible: two camps that rate the other camp at
        # `blocks` in all (spread over its members), their own at the rest.
        camp = np.arange(k) < k // 2
        same = camp[:, None] == camp[None, :]
        own = np.where(same, peer_weights, 0.0)
        other = peer_weights - own
        peer_weights = (1 - blocks) * own / own.sum(axis=1, keepdims=True)
        peer_weights += blocks * other / other.sum(axis=1, keepdims=True)
    peer_weights /= peer_weights.sum(axis=1, keepdims=True)
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
    return {
        "weights": weights,
        "peer_weights": peer_weights,
        "lower": lower,
        "upper": upper,
        "measurements": measurements,
    }


def dense_evaluate(*, weights, peer_weights, lower, upper, measurements):
    """The dense pass: score every (candidate, expert, metric) by paper
    eq. 1, CHUNK candidates at a time, and sum with pi."""
    influence = expert_influence(peer_weights)
    metric_weights = influence @ weights
    width = upper - lower
    m, n = measurements.shape
    group_scores = np.empty((m, n))
    vetoed = np.empty(m, dtype=bool)
    for first in range(0, m, CHUNK):
        chunk = measurements[first : first + CHUNK]
        position = (chunk[:, None, :] - lower) / width  # (chunk, k, n)
        scores = np.clip(position, 0.0, 1.0)
        vetoed[first : first + CHUNK] = (position <= 0).any(axis=(1, 2))
        group_scores[first : first + CHUNK] = np.einsum("i,cij->cj", influence, scores)
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


def literal_layers(study):
    try:
        return aggregate_literal(study["peer_weights"], study["weights"])[1]
    except ValueError:  # past aggregate_literal's cap: the float64 count by repeated squaring
        return layers._count_layers_float64(core._validated_peer_weights(study["peer_weights"]), study["weights"], 1e-9)


def bench_dense(rng):
    section("1. evaluate vs the dense pass (ratio = evaluate / dense; goals: <= 0.1 mixing, <= 1 slow)")
    print(
        f"   {'case':34s} {'evaluate':>10s} {'dense':>10s} {'ratio':>7s}  agreement (max |g diff|, |cef diff|, "
        "vetoes), layers q (literal q)"
    )
    cases = [
        ("k=1000 n=50 m=1000", {"k": 1000}, 9, 3, True),
        ("k=3000 n=50 m=1000", {"k": 3000}, 5, 2, True),
        ("slow: self-weights 0.99, k=1000", {"k": 1000, "self_weight": 0.99}, 5, 3, True),
        ("two camps 1e-3 apart, k=1000", {"k": 1000, "blocks": 1e-3}, 2, 2, False),
    ]
    for label, size, repeats, dense_repeats, literal in cases:
        study = random_study(rng, n=50, m=1000, **size)
        fast = evaluate(**study)
        dense_groups, dense_cef, dense_vetoed = dense_evaluate(**study)
        fast_time = best_time(lambda study=study: evaluate(**study), repeats)
        dense_time = best_time(lambda study=study: dense_evaluate(**study), dense_repeats)
        reference = literal_layers(study) if literal else "not run"
        print(
            f"   {label:34s} {fast_time * 1e3:7.1f} ms {dense_time * 1e3:7.1f} ms {fast_time / dense_time:7.3f}  "
            f"{np.abs(fast.group_scores - dense_groups).max():.1e}, {np.abs(fast.cef - dense_cef).max():.1e}, "
            f"{'equal' if (fast.vetoed == dense_vetoed).all() else 'DIFFER'}, q = {fast.iterations} ({reference})"
        )


def parts(study, repeats):
    """evaluate's total and its private steps, each timed on validated input."""
    peer_weights = core._validated_peer_weights(study["peer_weights"])
    influence = core._stationary_distribution(peer_weights)
    bounds = (study["lower"], study["upper"], study["measurements"])
    return (
        best_time(lambda: evaluate(**study), repeats),
        best_time(lambda: core._validated_peer_weights(study["peer_weights"]), repeats),
        best_time(lambda: core._stationary_distribution(peer_weights), repeats),
        best_time(lambda: layers.count_layers(peer_weights, study["weights"], 1e-9, influence), repeats),
        best_time(lambda: (core._group_scores(influence, *bounds), core._vetoed(*bounds)), repeats),
    )


def bench_growth(rng):
    k, n, m = 1000, 50, 1000
    section(f"2. where evaluate's time goes and how it grows (k={k}, n={n}, m={m} unless said)")
    print("   checking V O(k^2); pi by power iteration O(k^2) a step; layer count O(k^2 n) a float32 layer;")
    print("   scoring and vetoes O((m + k) n log k)")
    header = f"   {'':26s} {'total':>10s} {'check V':>10s} {'pi':>10s} {'layers':>10s} {'scoring':>10s}"
    print(header)
    study = random_study(rng, k, n, m)
    base = parts(study, 11)
    print(f"   {'k=1000, m=1000':26s} " + " ".join(f"{t * 1e3:7.1f} ms" for t in base))
    fast_memory = peak_extra_bytes(lambda: evaluate(**study))
    dense_memory = peak_extra_bytes(lambda: dense_evaluate(**study))
    for label, bigger, reference in (
        (f"k x 4 (k={4 * k}; k^2 = 16 x)", random_study(np.random.default_rng(SEED + 2), 4 * k, n, m), base),
        (f"m x 4 (m={4 * m})", random_study(np.random.default_rng(SEED + 1), k, n, 4 * m), base),
    ):
        grown = parts(bigger, 7)
        print(
            f"   {label:26s} "
            + " ".join(f"{g / b:8.2f} x" for g, b in zip(grown, reference, strict=True))
            + f"   ({grown[0] * 1e3:.1f} ms in all)"
        )
    small_k = 100
    many = random_study(np.random.default_rng(SEED + 3), small_k, n, 25_000)
    more = random_study(np.random.default_rng(SEED + 4), small_k, n, 100_000)
    many_time, more_time = best_time(lambda: evaluate(**many), 9), best_time(lambda: evaluate(**more), 7)
    print(
        f"   m >> k: k={small_k}, m=25,000 -> 100,000 (x 4): {many_time * 1e3:.1f} ms -> {more_time * 1e3:.1f} ms, "
        f"{more_time / many_time:.2f} x (breakpoints scored once, candidates interpolated)"
    )
    print(
        f"   peak extra memory at k=1000, m=1000: evaluate {mebibytes(fast_memory)}, dense pass "
        f"{mebibytes(dense_memory)} (inputs themselves: {mebibytes(sum(a.nbytes for a in study.values()))})"
    )


def bench_literal(rng):
    k, n, m = 200, 30, 200
    timed = 20  # the literal way costs the same for every candidate
    section(f"3. evaluate vs per-candidate literal aggregation, k={k}, n={n}, m={m}, self-weights 0.9")
    study = random_study(rng, k, n, m, self_weight=0.9)
    fast = evaluate(**study)
    subset = dict(study, measurements=study["measurements"][:timed])
    started = time.perf_counter()
    literal_groups, literal_cef = literal_per_candidate(**subset)
    literal_time = (time.perf_counter() - started) * m / timed
    fast_time = best_time(lambda: evaluate(**study), 5)
    print(
        f"   agreement on the first {timed}: max |g - g_literal| = "
        f"{np.abs(fast.group_scores[:timed] - literal_groups).max():.2e}, "
        f"max |cef - cef_literal| = {np.abs(fast.cef[:timed] - literal_cef).max():.2e}, "
        f"layers q = {fast.iterations} (literal {literal_layers(study)})"
    )
    print(f"   evaluate          {fast_time * 1e3:9.1f} ms   (all {m} candidates)")
    print(f"   literal           {literal_time * 1e3:9.1f} ms   (measured on {timed} candidates, x {m // timed})")
    print(f"   ratio             {fast_time / literal_time:9.5f}     (speed-up {literal_time / fast_time:.0f} x)")


def random_pairwise_stack(rng, experts, n):
    matrices = np.ones((experts, n, n))
    rows, columns = np.triu_indices(n, 1)
    values = rng.choice(SCALE_VALUES, size=(experts, len(rows)))
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


def best_cpu_time(function, repeats):
    """Best CPU time of this process (BLAS is single-threaded): unlike the
    wall clock, not inflated by other processes on a loaded machine."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        function()
        best = min(best, time.process_time() - started)
    return best


AHP_GOAL = 50


def bench_ahp(rng):
    experts, n = 1000, 9
    section(f"4. AHP weights + consistency ratios, {experts} experts x {n} criteria (CPU time; goal AHPy / ours >= 50)")
    matrices = random_pairwise_stack(rng, experts, n)
    # One pass per weighting: validation, the weights, and lambda_max by the batched
    # Perron kernel (engine.prioritisation._perron), which also gives the eigenvector.
    ours = {
        weighting: best_cpu_time(lambda weighting=weighting: ahp_priorities(matrices, weighting), 15)
        for weighting in ("column_means", "eigenvector")
    }
    two_calls = best_cpu_time(lambda: (ahp_weights(matrices), consistency_ratios(matrices)), 15)
    eigensolve = best_cpu_time(lambda: np.linalg.eigvals(matrices), 5)
    weights, ratios = ahp_priorities(matrices, "eigenvector")
    _, loop_ratios = loop_ahp(matrices)
    print(
        f"   agreement with the eigensolve: max |CR - CR_eig| = {np.abs(ratios - loop_ratios).max():.2e}, "
        f"max |w - principal eigenvector| = "
        f"{max(np.abs(w - principal(m)).max() for w, m in zip(weights, matrices, strict=True)):.2e}"
    )
    print(f"   ahp_priorities, column means (default) {ours['column_means'] * 1e3:7.2f} ms")
    print(f"   ahp_priorities, eigenvector            {ours['eigenvector'] * 1e3:7.2f} ms")
    print(f"   ahp_weights + consistency_ratios       {two_calls * 1e3:7.2f} ms (validating twice)")
    print(f"   np.linalg.eigvals of the stack alone   {eigensolve * 1e3:7.2f} ms (what lambda_max used to cost)")
    try:
        import ahpy
    except ImportError:
        reference_time = best_cpu_time(lambda: loop_ahp(matrices), 3)
        print(
            "   AHPy is not installed, so the ratio to it is NOT measured. It is for the benchmark only: "
            "`pip install ahpy==2.1` (requirements-dev.txt) in the venv that runs this script."
        )
        print(f"   per-expert loop (np.linalg.eig each)   {reference_time * 1e3:7.2f} ms")
        print(f"   loop / ours                            {reference_time / ours['column_means']:7.1f} x")
        return
    labels = [f"c{i}" for i in range(n)]

    def with_ahpy():
        results = []
        for matrix in matrices:
            compared = ahpy.Compare(
                "expert",
                {(labels[i], labels[j]): float(matrix[i, j]) for i in range(n) for j in range(i + 1, n)},
                precision=10,
                random_index="saaty",
            )
            results.append((compared.consistency_ratio, [compared.target_weights[label] for label in labels]))
        return results

    ahpy_results = with_ahpy()
    ahpy_ratios = np.array([ratio for ratio, _ in ahpy_results])
    ahpy_weights = np.array([weights for _, weights in ahpy_results])
    print(
        f"   agreement with AHPy (which rounds to 10 decimals): max |CR - CR_ahpy| = "
        f"{np.abs(ratios - ahpy_ratios).max():.2e}, max |w - w_ahpy| (eigenvector) = "
        f"{np.abs(weights - ahpy_weights).max():.2e}"
    )
    reference_time = best_cpu_time(with_ahpy, 3)
    print(f"   AHPy, one Compare per expert           {reference_time * 1e3:7.2f} ms")
    for weighting, label in (("column_means", "column means"), ("eigenvector", "eigenvector")):
        ratio = reference_time / ours[weighting]
        verdict = "meets" if ratio >= AHP_GOAL else "MISSES"
        print(f"   AHP / AHPy, {label:12s}               {ratio:7.1f} x  ({verdict} the goal of {AHP_GOAL} x)")


def principal(matrix):
    values, vectors = np.linalg.eig(matrix)
    vector = np.abs(vectors[:, np.argmax(values.real)].real)
    return vector / vector.sum()


def bench_layer_share(rng):
    k, n, m = 100, 20, 1000
    section(f"5. share of evaluate's CPU time spent counting layers, k={k}, n={n}, m={m} (and k=1000, n=50)")
    print(f"   {'peer weights':36s} {'evaluate':>10s} {'layers':>10s} {'share':>7s}  iterations")
    cases = [
        ((k, n, m), "slow: self-weights 0.99", {"self_weight": 0.99}),
        ((k, n, m), "slow: self-weights 0.999", {"self_weight": 0.999}),
        ((k, n, m), "two camps 1e-3 apart", {"blocks": 1e-3}),
        ((k, n, m), "two camps 1e-4 apart", {"blocks": 1e-4}),
        ((1000, 50, 1000), "k=1000 n=50: self-weights 0.99", {"self_weight": 0.99}),
        ((1000, 50, 1000), "k=1000 n=50: two camps 1e-3 apart", {"blocks": 1e-3}),
    ]
    for (experts, metrics, candidates), label, kind in cases:
        study = random_study(rng, experts, metrics, candidates, **kind)
        peer_weights = core._validated_peer_weights(study["peer_weights"])
        influence = core._stationary_distribution(peer_weights)
        weights = core._validated_weights(study["weights"])
        repeats = 15 if experts <= 100 else 3
        total = best_cpu_time(lambda study=study: evaluate(**study), repeats)
        counting = best_cpu_time(
            lambda pw=peer_weights, w=weights, pi=influence: layers.count_layers(pw, w, 1e-9, pi), repeats
        )
        print(
            f"   {label:36s} {total * 1e3:7.2f} ms {counting * 1e3:7.2f} ms {counting / total:7.2f}  "
            f"{evaluate(**study).iterations}"
        )


def _positions_loop(sorted_bounds, measured):
    """As ``core._group_scores_at`` finds them: one searchsorted per metric."""
    found = np.empty(measured.shape, dtype=np.intp)
    for metric in range(len(sorted_bounds)):
        found[metric] = np.searchsorted(sorted_bounds[metric], measured[metric], side="right")
    return found


def _positions_merged(sorted_bounds, measured):
    """The same positions for every metric at once: a stable argsort of each
    metric's bounds followed by its values puts a bound before an equal value
    (side="right"); a value's position is the number of bounds before it."""
    k = sorted_bounds.shape[1]
    order = np.argsort(np.concatenate([sorted_bounds, measured], axis=1), axis=1, kind="stable")
    is_value = order >= k
    bounds_before = np.cumsum(~is_value, axis=1)
    found = np.empty(measured.shape, dtype=np.intp)
    rows = np.nonzero(is_value)[0]
    found[rows, order[is_value] - k] = bounds_before[is_value]
    return found


def _kernel_case(rng, k, n, m):
    study = random_study(rng, k, n, m)
    lower, upper, measurements = study["lower"], study["upper"], study["measurements"]
    influence = np.full(k, 1 / k)
    sorted_starts = np.sort(np.minimum(lower, upper).T, axis=1)
    measured = np.ascontiguousarray(measurements.T)
    assert np.array_equal(_positions_loop(sorted_starts, measured), _positions_merged(sorted_starts, measured))
    # Ties: values equal to bounds are placed after them by both.
    tied = sorted_starts[:, : min(k, m)].copy()
    assert np.array_equal(_positions_loop(sorted_starts, tied), _positions_merged(sorted_starts, tied))
    repeats = 20 if k <= 100 else 5
    whole = best_cpu_time(lambda: core._group_scores_at(influence, lower, upper, measurements), repeats)
    # Both searches (starts and ends) of _group_scores_at.
    old = 2 * best_cpu_time(lambda: _positions_loop(sorted_starts, measured), repeats)
    new = 2 * best_cpu_time(lambda: _positions_merged(sorted_starts, measured), repeats)
    one = measured[:, :1]
    overhead = 2 * best_cpu_time(lambda: _positions_loop(sorted_starts, one), repeats)
    return whole, old, new, overhead


def bench_kernels(rng):
    section("6. _group_scores_at's binary searches: the loop over metrics against one merged argsort")
    print(f"   {'k x n x m':18s} {'whole':>9s} {'loop':>9s} {'merged':>9s} {'old/new':>8s} {'overhead':>9s}")
    for k, n, m in ((100, 20, 1000), (1000, 50, 1000)):
        whole, old, new, overhead = _kernel_case(rng, k, n, m)
        print(
            f"   {k} x {n} x {m:<8} {whole * 1e3:6.2f} ms {old * 1e3:6.2f} ms {new * 1e3:6.2f} ms "
            f"{old / new:8.2f} {overhead * 1e3:6.3f} ms"
        )
    print("   (whole: _group_scores_at; loop and merged: its two searches; overhead: the loop's calls on one")
    print("   candidate, the most a vectorised loop could save)")


SECTIONS = {
    "dense": bench_dense,
    "growth": bench_growth,
    "literal": bench_literal,
    "ahp": bench_ahp,
    "layers": bench_layer_share,
    "kernels": bench_kernels,
}


def main():
    chosen = sys.argv[1:] or list(SECTIONS)
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    rng = np.random.default_rng(SEED)
    print(
        f"engine benchmark, numpy {np.__version__}, seed {SEED}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"threads: {_blas.threadpool_state()}")
    started = time.perf_counter()
    for name in chosen:
        SECTIONS[name](rng)
    print()
    print(f"total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
