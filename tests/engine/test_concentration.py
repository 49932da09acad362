"""The Dirichlet concentration's lower bound (issue 31, item 10): below
``CONCENTRATION_MIN`` the sampler's draws degenerate to the centre (every
gamma below 1e-300, each lifted alike), about e^(-690.8 concentration) of
them; ``SamplingSpec`` refuses such a concentration naming the field."""

import numpy as np
import pytest

from engine import robustness
from engine.robustness import CONCENTRATION_MIN, SamplingSpec


def centre_share(concentration: float, draws: int = 200_000, seed: int = 1) -> float:
    """The share of Dirichlet(concentration / 2, concentration / 2) draws that
    land exactly on the centre (0.5, 0.5)."""
    alpha = np.full((1, 2), concentration / 2)
    sampler = robustness._Dirichlet(alpha, draws)
    return float((sampler.draw(np.random.default_rng(seed))[:, 0, 0] == 0.5).mean())


def test_the_bound_is_0_1():
    assert CONCENTRATION_MIN == 0.1


@pytest.mark.parametrize("name", ["weight_concentration", "peer_concentration"])
def test_the_bound_is_taken_and_just_below_it_is_refused_naming_the_field(name):
    assert getattr(SamplingSpec(**{name: CONCENTRATION_MIN}), name) == CONCENTRATION_MIN
    below = np.nextafter(CONCENTRATION_MIN, 0.0)
    with pytest.raises(ValueError, match=rf"^{name} must be at least 0\.1, got 0\.09999999999999999: below it"):
        SamplingSpec(**{name: below})
    for bad in (0.0005, 0, -1.0, float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValueError, match=rf"^{name} must be"):
            SamplingSpec(**{name: bad})


def test_why_the_sampler_needs_it():
    # the shape 0.0005 (concentration 0.001): half the draws are the centre
    assert centre_share(0.001) == pytest.approx(np.exp(-690.8 * 0.001), abs=0.01)
    # at 0.01 still one in a thousand
    assert centre_share(0.01) == pytest.approx(np.exp(-690.8 * 0.01), abs=3e-4)
    # at the bound: none (about 1e-30 of them)
    assert centre_share(CONCENTRATION_MIN) == 0.0


def test_at_the_bound_the_draws_keep_the_dirichlets_mean_and_variance():
    # Dirichlet(0.1 * (0.3, 0.7)): mean 0.3, variance 0.3 * 0.7 / 1.1
    alpha = np.array([[0.1 * 0.3, 0.1 * 0.7]])
    draws = robustness._Dirichlet(alpha, 400_000).draw(np.random.default_rng(2))[:, 0, 0]
    assert draws.mean() == pytest.approx(0.3, abs=0.005)
    assert draws.var() == pytest.approx(0.3 * 0.7 / 1.1, abs=0.005)
