"""How many layers the literal aggregation needs (METHOD.md 6.1): the
``iterations`` a run reports.

``engine.core.evaluate`` computes the group results from the limit of the
aggregation (the stationary distribution of ``V``) and reports, beside them,
the number of layers ``q`` the literal recursive aggregation
(``engine.core.aggregate_literal``) would have taken for ``X = W``. That
count is only reported, but it is the literal's exact count, found without
stepping through millions of layers: stepwise, by repeated squaring, in
float32 on re-centred deviations, on a dominant subspace or on the lazy
chain, whichever is exact and cheapest (``count_layers``).
``engine.core.layers_needed`` is the validating entry point.

No Django import here, and nothing from the rest of ``engine``.
"""

import math

import numpy as np

__all__ = ["FAST_COUNT_MIN_EXPERTS", "LAZY_MIN_DIAGONAL", "MAX_DOUBLINGS", "STEPWISE_LAYERS", "count_layers"]


#: Layers counted one by one (as the literal iteration does) before the count
#: switches to repeated squaring of V.
STEPWISE_LAYERS = 10_000

#: Repeated squaring stops at V^(2^MAX_DOUBLINGS): far beyond any strictly
#: positive V whose smallest weight is a representable double.
MAX_DOUBLINGS = 62


def _spread_below(layer: np.ndarray, tolerance: float) -> bool:
    return bool(np.all(layer.max(axis=0) - layer.min(axis=0) < tolerance))


def _stochastic_product(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``left @ right`` for row-stochastic matrices, rows renormalised.

    Repeated squaring lets the row sums drift (about 6e-11 after 20
    squarings), and that drift swamps the small part of ``V^s`` that carries
    the remaining spread (a relative error of 6e-4 in it, tens of layers in
    the count); renormalising keeps it near 3e-8.
    """
    product = left @ right
    return product / product.sum(axis=1, keepdims=True)


def _count_layers_float64(
    peer_weights: np.ndarray, values: np.ndarray, tolerance: float, stepwise_layers: int | None = None
) -> int:
    """The ``q`` of the literal aggregation of ``values``, without a cap.

    Up to STEPWISE_LAYERS layers it steps exactly as :func:`aggregate_literal`
    does. A V that mixes more slowly (off-diagonal weights near 0, which
    METHOD.md 5 allows) may need millions of layers; then the count is found
    by binary lifting on ``V^(2^j)``: the spread of ``V^s X`` never grows
    with ``s`` (each layer averages rows), so the smallest ``s`` with a
    spread below the tolerance is found in ``O(k^3 log q)``. Near the
    threshold the two ways may round differently by a layer.
    """
    stepwise_layers = STEPWISE_LAYERS if stepwise_layers is None else stepwise_layers
    layer = peer_weights @ values
    for layers in range(stepwise_layers + 1):
        if _spread_below(layer, tolerance):
            return layers
        layer = peer_weights @ layer
    # Layers 0..stepwise_layers are V^1 X .. V^(stepwise_layers + 1) X: the
    # last power known not to have converged is ``reached``.
    reached = stepwise_layers + 1
    powers = [peer_weights]  # powers[j] = V^(2^j)
    reached_power = np.eye(len(peer_weights))
    for bit in range(reached.bit_length()):
        if bit:
            powers.append(_stochastic_product(powers[-1], powers[-1]))
        if reached >> bit & 1:
            reached_power = _stochastic_product(reached_power, powers[bit])
    while not _spread_below(_stochastic_product(reached_power, powers[-1]) @ values, tolerance):
        if len(powers) > MAX_DOUBLINGS:
            raise ValueError(
                f"the recursive aggregation did not reach a spread below {tolerance:g} "
                f"within 2^{MAX_DOUBLINGS} layers; the peer weights are too close to 0"
            )
        powers.append(_stochastic_product(powers[-1], powers[-1]))
    # V^(reached) has not converged but V^(reached + 2^top) has: lift the
    # largest non-converged power bit by bit below 2^top.
    for bit in range(len(powers) - 2, -1, -1):
        candidate = _stochastic_product(reached_power, powers[bit])
        if not _spread_below(candidate @ values, tolerance):
            reached_power = candidate
            reached += 2**bit
    # V^(reached + 1) X is the first converged layer, which is layer q = reached.
    return reached


#: From this many experts on, layers are counted in float32 on re-centred
#: deviations (below it the literal float64 layers cost next to nothing).
FAST_COUNT_MIN_EXPERTS = 48

#: The lazy-chain count is tried when V keeps at least this weight on the
#: diagonal of every row (see ``_count_layers_lazy``).
LAZY_MIN_DIAGONAL = 0.5

_FLOAT32_UNIT = float(np.finfo(np.float32).eps) / 2  # unit roundoff, 2^-24
_FLOAT64_EPS = float(np.finfo(np.float64).eps)


def _spreads(layer: np.ndarray) -> np.ndarray:
    return layer.max(axis=0) - layer.min(axis=0)


def count_layers(peer_weights: np.ndarray, values: np.ndarray, tolerance: float, influence: np.ndarray | None) -> int:
    """The ``q`` of the literal aggregation of ``values`` (see
    ``engine.core.layers_needed``), for a validated ``peer_weights``.

    Few experts: the literal float64 layers (``_count_layers_float64``).
    Many (``FAST_COUNT_MIN_EXPERTS``): ``_count_layers_fast``, which returns
    the same count (or, where float64 rounding decides the literal's count,
    the count of the exact arithmetic, which an extended-precision iteration
    reproduces) at a fraction of the cost; it hands back to the float64
    layers where the tolerance sits at float64's rounding floor. It needs
    ``influence``, the stationary distribution of ``peer_weights``
    (``engine.core.expert_influence``), which the caller gives from
    ``FAST_COUNT_MIN_EXPERTS`` experts on (None below).
    """
    if len(peer_weights) >= FAST_COUNT_MIN_EXPERTS and influence is not None:
        count = _count_layers_fast(peer_weights, values, tolerance, influence)
        if count is not None:
            return count
    return _count_layers_float64(peer_weights, values, tolerance)


def _count_layers_fast(
    peer_weights: np.ndarray, values: np.ndarray, tolerance: float, influence: np.ndarray
) -> int | None:
    """Layer count in float32 on re-centred deviations, checked where it is close.

    ``V^s X`` and ``V^s D`` with ``D = X - 1 (pi X)`` differ by a constant per
    column (``V 1 = 1``), so they have the same spreads; but ``D`` shrinks
    towards 0 with the spread, so float32 keeps about 7 significant digits
    of the spread itself at every layer, where the literal float64 layers
    carry ``pi X`` along and lose digits as the spread shrinks. Each layer
    adds at most ``c u max|Y|`` to an entry's error (``u`` the float32 unit
    roundoff; ``c = 4 sqrt(k) + 4`` bounds a k-term dot product's rounding
    with a wide margin), plus what the row sums' departures from 1 add to
    the literal layers (``_row_sum_defects``); earlier errors are averaged,
    never amplified, by the row-stochastic ``V``, and shrink as the spreads
    do. So each column's spread is known within a band.

    The count is the first layer ``l`` at which no column is surely at or
    above the tolerance; then a column is surely below it (done) or
    ambiguous, and the ambiguous ones (rare: the tolerance must fall inside
    a band of about 1e-5 of the spread) are recounted exactly by
    ``_count_deviations``: ``q = max(l, their count)``. Columns surely below
    are dropped as the layers go (a spread never grows).

    When the spread shrinks so slowly that stepping would cost more than
    another way, it switches (``_switch_from_stepping``): to
    ``_count_layers_lazy`` when V is lazy (heavy diagonal), to
    ``_count_layers_subspace`` when its slow part acts on a few directions
    (nearly separate camps of experts), else to repeated squaring in
    float64. Returns None
    (count the float64 way) when the tolerance lies near float64's rounding
    floor, where rounding, not mixing, decides the literal count.
    """
    k, n = values.shape
    deviations = values - influence @ values
    scale = float(np.abs(deviations).max())
    largest = float(np.abs(values).max())
    if scale == 0.0 or tolerance <= 1e3 * np.sqrt(k) * _FLOAT64_EPS * largest or tolerance < 1e-30 * scale:
        return None
    threshold = tolerance / scale
    layer = (deviations / scale).astype(np.float32)
    transition = peer_weights.astype(np.float32)
    columns = np.arange(n)
    top, bottom = layer.max(axis=0).astype(np.float64), layer.min(axis=0).astype(np.float64)
    error = _FLOAT32_UNIT * np.maximum(top, -bottom)
    growth = (4.0 * np.sqrt(k) + 4.0) * _FLOAT32_UNIT
    # What the row sums' departures from 1 add to a column's spread a layer.
    drift = 2.0 * _row_sum_bound(k) * np.abs(influence @ values) / scale
    largest_spreads = []
    may_switch = True
    spreads = top - bottom
    for layers in range(STEPWISE_LAYERS + 1):
        added = growth * np.maximum(top, -bottom) + drift
        previous_spreads = spreads
        layer = transition @ layer
        top, bottom = layer.max(axis=0).astype(np.float64), layer.min(axis=0).astype(np.float64)
        spreads = top - bottom
        # Earlier errors are mixed by V like any other vector: they shrink at
        # about the rate the spreads do; twice the slowest column's rate
        # leaves a wide margin.
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = float(np.nanmax(spreads / previous_spreads, initial=0.0))
        error = min(1.0, 2.0 * rate) * error + added
        band = 2.0 * error + _FLOAT32_UNIT * spreads
        surely_above = spreads - band >= threshold
        surely_below = spreads + band < threshold
        if not surely_above.any():
            return _settled(peer_weights, deviations, values, tolerance, layers, columns[~surely_below])
        if surely_below.any():
            keep = ~surely_below
            layer, top, bottom = np.ascontiguousarray(layer[:, keep]), top[keep], bottom[keep]
            error, columns, spreads, drift = error[keep], columns[keep], spreads[keep], drift[keep]
        largest_spreads.append(float(spreads.max()))
        if may_switch and layers >= 3:
            # The spread's recent rate of decrease predicts the layers left.
            decay = (largest_spreads[-1] / largest_spreads[-3]) ** 0.5
            left = np.log(threshold / largest_spreads[-1]) / np.log(decay) if 0.0 < decay < 1.0 else 0.0
            if left >= 16:
                may_switch = False  # tried once: the prediction only sharpens later
                switched = _switch_from_stepping(
                    peer_weights, deviations, values, tolerance, layers, left, len(columns)
                )
                if switched is not None:
                    return switched
    return None


def _switch_from_stepping(
    peer_weights: np.ndarray,
    deviations: np.ndarray,
    values: np.ndarray,
    tolerance: float,
    layers: int,
    left: float,
    active: int,
) -> int | None:
    """Another way to the count when stepping on would cost more, else None.

    A float32 layer costs about ``k^2 * active`` multiply-adds; repeated
    squaring about ``4 k^3`` per doubling in the same units (a square and a
    lifting product, in float64 at half the speed); a float64 step of the
    lazy chain's ``P`` or of the subspace search about three or four
    float32 layers, so each is given at most that share of the layers left.
    """
    k = len(peer_weights)
    if float(peer_weights.diagonal().min()) >= LAZY_MIN_DIAGONAL:
        counted = _count_layers_lazy(peer_weights, deviations, values, tolerance, max_steps=int(left // 3))
        if counted is not None:
            return counted
    if left > 64:
        counted = _count_layers_subspace(peer_weights, deviations, values, tolerance, max_steps=min(64, int(left // 4)))
        if counted is not None:
            return counted
    if left * active > 8 * k * np.log2(layers + left):
        return _count_layers_float64(peer_weights, values, tolerance, stepwise_layers=0)
    return None


def _row_sum_defects(peer_weights: np.ndarray) -> np.ndarray:
    """``r = V 1 - 1``, the float64 V's row sums' departures from 1, accurately.

    A renormalised row sums to 1 only within a few ``eps``. The literal
    layers carry each column's level ``c = pi x`` along, so they see
    ``V^s X = V^s D + c (1 + u_s)`` with ``u_s = sum_t V^t r``: a spread of
    about ``|c| eps`` a layer that the deviations alone do not have. Summed
    in extended precision (pairwise), so r is right to about 1e-18.
    """
    return (peer_weights.astype(np.longdouble).sum(axis=1) - 1).astype(np.float64)


def _row_sum_bound(k: int) -> float:
    """A priori bound on ``max |r|`` for rows renormalised by their float64 sum."""
    return (np.log2(k) + 2.0) * _FLOAT64_EPS


def _count_deviations(peer_weights: np.ndarray, deviations: np.ndarray, values: np.ndarray, tolerance: float) -> int:
    """Exact-as-can-be count for a few columns: float64 layers of the deviations.

    ``V^s X = V^s D + c (1 + u_s)`` (see ``_row_sum_defects``): both parts
    are stepped, the deviations with a rounding of about ``sqrt(k) eps`` of
    the spread itself, against ``eps max|X|`` for the literal layers. Where
    the two counts disagree it is the literal's that rounding decided; an
    extended-precision iteration of the same V agrees with this one. Past
    STEPWISE_LAYERS it hands over to the float64 count by repeated squaring.
    """
    defects = _row_sum_defects(peer_weights)
    levels = values[0] - deviations[0]
    layer, drift = peer_weights @ deviations, defects
    for layers in range(STEPWISE_LAYERS + 1):
        if _spread_below(layer + drift[:, None] * levels, tolerance):
            return layers
        layer, drift = peer_weights @ layer, peer_weights @ drift + defects
    return _count_layers_float64(peer_weights, values, tolerance)


def _settled(
    peer_weights: np.ndarray,
    deviations: np.ndarray,
    values: np.ndarray,
    tolerance: float,
    layers: int,
    ambiguous: np.ndarray,
) -> int:
    """``max(layers, exact count of the ambiguous columns)``.

    ``layers`` is a layer at which no column is surely above the tolerance
    while at the one before some column surely is; the ambiguous columns
    are those not surely below it at ``layers``. They are recounted by
    float64 layers of their deviations, or by repeated squaring where that
    many layers would cost more.
    """
    if not len(ambiguous):
        return layers
    k = len(peer_weights)
    if layers * len(ambiguous) <= 4 * k * np.log2(layers + 2):
        recount = _count_deviations(peer_weights, deviations[:, ambiguous], values[:, ambiguous], tolerance)
    else:
        recount = _count_layers_float64(peer_weights, values[:, ambiguous], tolerance, stepwise_layers=0)
    return max(layers, recount)


#: Layers after which the rounding noise in ``V Q - Q H`` counts as mixed
#: away, see ``_count_layers_subspace``.
_SUBSPACE_SETTLE = 8


def _count_layers_subspace(
    peer_weights: np.ndarray, deviations: np.ndarray, values: np.ndarray, tolerance: float, *, max_steps: int
) -> int | None:
    """Layer count when the slow part of V acts on a small subspace.

    A V that mixes slowly because its experts form nearly separate camps
    has a few eigenvalues near 1 and the rest small: after ``T`` layers the
    deviations ``Y = V^T D`` lie, up to a part F whose singular values are
    at float64's rounding level, in a subspace spanned by an orthonormal ``Q`` (k, r) that V
    maps into itself up to a residual ``R = V Q - Q H``, ``H = Q^T V Q``
    (r, r). Then ``V^j Y = Q H^j C + E`` with ``C = Q^T Y`` and
    ``E = V^j F + sum_i V^(j-1-i) R H^i C`` (F the dropped part); V never
    grows a spread, so ``spread(E)`` is at most ``2 |F|`` plus, for the
    last few terms, ``2 |R| |H^i C|`` and, for the others, the spreads of
    ``V^settle R`` times ``|H^i C|`` (R is mostly rounding noise, which V
    mixes away), ``sum_i |H^i|`` bounded by ``min(j, cond(eigenvectors of H)
    / (1 - spectral radius))``; plus the row sums' drift
    (``_row_sum_defects``) over as many layers. Any layer's spreads then cost ``O(k r n)``;
    the first converged layer is found by doubling then bisection, the
    columns within the bound of the tolerance recounted (``_settled``).
    Returns None when no such subspace shows within ``max_steps`` float64
    layers (or the bound stays too wide), for repeated squaring to take over.
    """
    k, n = deviations.shape
    cut = 1e-8 * tolerance
    drift = 2.0 * float(np.abs(_row_sum_defects(peer_weights)).max()) * np.abs(values[0] - deviations[0])
    layer = deviations
    for steps in range(1, max_steps + 1):
        layer = peer_weights @ layer  # layer number steps - 1
        spreads = _spreads(layer)
        error = 1e-12 * spreads + steps * drift
        if not (spreads - error >= tolerance).any():  # converged early after all
            ambiguous = np.flatnonzero(spreads + error >= tolerance)
            return _settled(peer_weights, deviations, values, tolerance, steps - 1, ambiguous)
        if steps % 4:
            continue
        left, sigma, _ = np.linalg.svd(layer, full_matrices=False)
        # Directions at float64's rounding level carry noise, not a subspace.
        rank = int((sigma > max(cut, 1e-12 * sigma[0])).sum())
        basis = left[:, :rank]
        moved = peer_weights @ basis
        small = basis.T @ moved
        residual = moved - basis @ small
        eigenvalues, eigenvectors = np.linalg.eig(small)
        radius = float(np.abs(eigenvalues).max())
        if radius >= 1.0:
            continue
        conditioning = float(np.linalg.cond(eigenvectors))
        horizon = conditioning / (1.0 - radius)
        # R is mostly rounding noise, which V mixes away within a few layers:
        # terms with fewer than SETTLE applications of V after R are bounded
        # by R itself, the rest by V^SETTLE R, whose spreads are far smaller.
        near = 2.0 * float(np.linalg.norm(residual, 2)) * conditioning
        settled = residual
        for _ in range(_SUBSPACE_SETTLE):
            settled = peer_weights @ settled
        far = np.sqrt(rank) * float(_spreads(settled).max())
        coefficients = basis.T @ layer
        sizes = np.linalg.norm(coefficients, axis=0)
        dropped = float(sigma[rank]) if rank < len(sigma) else 0.0  # |F|_2, at least each entry of F
        if (near * _SUBSPACE_SETTLE + far * horizon) * sizes.max() <= 1e-4 * tolerance:
            break
    else:
        return None

    def spreads_at(layers: int) -> tuple[np.ndarray, np.ndarray]:
        power = layers - (steps - 1)
        projected = basis @ (np.linalg.matrix_power(small, power) @ coefficients)
        spreads = _spreads(projected)
        mixing = near * min(power, _SUBSPACE_SETTLE) + far * min(power, horizon)
        error = 2 * dropped + mixing * sizes + 1e-12 * spreads
        return spreads, error + drift * min(layers + 1, horizon)

    def surely_above(layers: int) -> bool:
        spreads, error = spreads_at(layers)
        return bool((spreads - error >= tolerance).any())

    low = steps - 1
    jump = 1
    while surely_above(low + jump):
        low += jump
        jump *= 2
        if low > 2**MAX_DOUBLINGS:
            return None
    high = low + jump
    while high - low > 1:
        middle = (low + high) // 2
        if surely_above(middle):
            low = middle
        else:
            high = middle
    spreads, error = spreads_at(high)
    return _settled(peer_weights, deviations, values, tolerance, high, np.flatnonzero(spreads + error >= tolerance))


def _count_layers_lazy(
    peer_weights: np.ndarray, deviations: np.ndarray, values: np.ndarray, tolerance: float, *, max_steps: int
) -> int | None:
    """Layer count of a lazy V (every diagonal entry >= alpha) in O(T k^2 n).

    ``V = alpha I + (1 - alpha) P`` with ``P`` row-stochastic and
    non-negative, and ``I`` commutes with ``P``, so ``V^s D = sum_t
    C(s, t) alpha^(s-t) (1 - alpha)^t P^t D`` (binomial weights summing to
    1). With alpha near 1, V mixes slowly (thousands of layers) but P
    usually fast: ``Z_t = P^t D`` falls below 1e-6 of the tolerance after a
    few steps ``T``, and the terms past ``T`` change any spread by less
    than ``spread(Z_T)`` (a spread never grows under P and the weights sum to
    at most 1). Any layer's spreads then cost ``O(T k n)``, and the first
    converged layer is found by doubling then bisection, in float64 on the
    deviations: far closer to the exact count than the literal layers
    (see ``_count_deviations``); the band allows for the row sums' drift.
    Returns None when P needs more than
    ``max_steps`` steps.
    """
    k = len(peer_weights)
    alpha = float(peer_weights.diagonal().min())
    steps = [deviations]
    while _spreads(steps[-1]).max() > 1e-6 * tolerance:
        if len(steps) > max_steps:
            return None
        # P Z without forming P: V Z - alpha Z loses about log10(1 / (1 - alpha))
        # digits of Z, far below what the count can see.
        steps.append((peer_weights @ steps[-1] - alpha * steps[-1]) / (1.0 - alpha))
    stacked = np.stack(steps).reshape(len(steps), -1)
    log_stay, log_move = np.log(alpha), np.log1p(-alpha)
    # V shrinks spreads at about alpha + (1 - alpha) times P's rate; the row
    # sums' drift (``_row_sum_defects``) adds up over about 1 / (1 - that)
    # layers, bounded here with a factor 2 to spare.
    rates = [_spreads(later).max() / _spreads(earlier).max() for earlier, later in zip(steps, steps[1:], strict=False)]
    horizon = 2.0 / ((1.0 - alpha) * (1.0 - min(1.0 - 1e-9, max(rates, default=0.0))))
    drift = 2.0 * float(np.abs(_row_sum_defects(peer_weights)).max()) * np.abs(values[0] - deviations[0])
    log_factorials = np.array([math.lgamma(t + 1) for t in range(len(steps))])

    def spreads_at(layers: int) -> tuple[np.ndarray, np.ndarray]:
        """Spreads of layer ``l`` (``V^(l + 1) D``) and their error bound."""
        power = layers + 1
        terms = np.arange(min(power + 1, len(steps)))
        log_weights = (
            math.lgamma(power + 1)
            - log_factorials[terms]
            - np.array([math.lgamma(power - t + 1) for t in terms])
            + (power - terms) * log_stay
            + terms * log_move
        )
        peak = log_weights.max()
        layer = (np.exp(log_weights - peak) @ stacked[: len(terms)]).reshape(k, -1)
        spreads = _spreads(layer) * np.exp(peak)
        return spreads, 1e-6 * tolerance + 1e-12 * spreads + drift * min(power, horizon)

    def surely_above(layers: int) -> bool:
        spreads, error = spreads_at(layers)
        return bool((spreads - error >= tolerance).any())

    low, high = -1, 1  # layer -1 stands for D itself, never below the tolerance here
    while surely_above(high):
        low, high = high, 2 * high
        if high > 2**MAX_DOUBLINGS:
            return None
    while high - low > 1:
        middle = (low + high) // 2
        if surely_above(middle):
            low = middle
        else:
            high = middle
    spreads, error = spreads_at(high)
    return _settled(peer_weights, deviations, values, tolerance, high, np.flatnonzero(spreads + error >= tolerance))
