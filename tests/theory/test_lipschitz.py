"""Lipschitz constants: adversarial estimates vs the closed forms of Chaudhuri & Tewari (2015)
and vs the constants the loss registry declares."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from rankwise.errors import InputError
from rankwise.theory import closed_form_lipschitz, lipschitz
from rankwise.theory.lipschitz import LipschitzEstimate, listnet_ct_loss, smoothed_dcg1_loss


@pytest.mark.parametrize("m", [5, 50, 200])
def test_listnet_linf_constant_does_not_grow_with_m(m):
    """Proposition 1: G_∞ ≤ 2 for every m; the search gets close to 2."""
    est = lipschitz("listnet_ct", "inf", m, n_restarts=32, n_steps=30)
    assert est.estimate <= 2.0 + 1e-12
    assert est.estimate >= 1.95
    assert est.closed_form["bound"] == 2.0


@pytest.mark.parametrize("m", [5, 40])
def test_smoothed_dcg1_matches_the_exact_supremum(m):
    """Proposition 2 bound 2G(Y_max)/σ; exact sup G(Y_max)/(2σ), independent of m."""
    sigma = 0.5
    est = lipschitz("smoothed_dcg1", "inf", m, sigma=sigma, n_restarts=32, n_steps=40)
    cf = closed_form_lipschitz("smoothed_dcg1", "inf", m, max_label=4, sigma=sigma)
    assert cf["exact"] == pytest.approx(15.0 / (2 * sigma))
    assert est.estimate <= cf["exact"] * (1 + 1e-9) <= cf["bound"]
    assert est.estimate >= 0.98 * cf["exact"]


@pytest.mark.parametrize("m", [4, 7, 20, 60])
def test_ranksvm_linf_constant_is_floor_m2_over_2(m):
    est = lipschitz("ranksvm", "inf", m, n_restarts=16, n_steps=5)
    assert est.estimate == pytest.approx(m * m // 2)


def test_ranksvm_grows_while_listnet_does_not():
    small, big = 10, 100
    r = [lipschitz("ranksvm", "inf", m, n_restarts=8, n_steps=3).estimate for m in (small, big)]
    ln = [lipschitz("listnet_ct", "inf", m, n_restarts=16, n_steps=10).estimate for m in (small, big)]
    assert r[1] / r[0] > 50
    assert ln[1] / ln[0] < 1.05


def test_paper_forms_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    s = torch.tensor(rng.normal(size=(3, 6)), dtype=torch.float64, requires_grad=True)
    y = torch.tensor(rng.integers(0, 4, (3, 6)), dtype=torch.float64)
    for fn in (listnet_ct_loss, lambda a, b, **k: smoothed_dcg1_loss(a, b, sigma=0.7, **k)):
        assert torch.autograd.gradcheck(lambda a: fn(a, y, reduction="sum"), (s,))


REGISTRY_CHECKED = ["listnet", "smooth_dcg1", "pairwise_hinge", "ranknet", "kendall_hinge",
                    "pointwise_logistic", "pointwise_smooth_hinge", "sigmoid_ce", "listmle"]


@pytest.mark.parametrize("name", REGISTRY_CHECKED)
@pytest.mark.parametrize("norm", ["inf", "2"])
def test_registry_declared_constants_bound_the_estimates(name, norm):
    """A declared constant must be ≥ every gradient norm the adversarial search finds."""
    m = 8
    kwargs = {}
    levels = 5
    if name == "sigmoid_ce":
        levels = 2  # labels in [0, 1]
    if name in ("pointwise_logistic", "pointwise_smooth_hinge"):
        levels = 2  # utilities in [0, eta] with the default eta = 1
    est = lipschitz(name, norm, m, n_levels=levels, n_restarts=32, n_steps=20, **kwargs)
    assert est.declared is not None, f"{name} declares no {norm} constant"
    assert est.declared_ok, str(est)


def test_listnet_registry_constant_is_tight():
    est = lipschitz("listnet", "inf", 30, n_restarts=32, n_steps=30)
    assert est.estimate >= 0.97 * est.declared


def test_bad_norm_and_loss():
    with pytest.raises(InputError, match="norm must be 'inf' or '2'"):
        lipschitz("listnet_ct", "1", 5)
    with pytest.raises(InputError, match="unknown loss"):
        lipschitz("nope", "inf", 5)
    with pytest.raises(InputError, match="list_length"):
        lipschitz("listnet_ct", "inf", 1)


def test_a_declared_constant_below_the_estimate_is_flagged():
    """The registry check has power: a constant smaller than a gradient seen is reported."""
    def loss(scores, labels, *, reduction="none"):
        return 3.0 * scores.sum(-1)  # gradient (3, ..., 3): ℓ1 norm 3m

    est = lipschitz(loss, "inf", 4, n_restarts=4, n_steps=2)
    assert est.estimate == pytest.approx(12.0)
    bad = LipschitzEstimate("x", "inf", 4, est.estimate, est.scores, est.labels, None, declared=10.0)
    assert bad.declared_ok is False and "VIOLATED" in str(bad)
