"""Regret bounds of Table 2 (Calauzènes et al. 2013): C_φ(p), constants, and ≥ 1,000 random (Δ, s)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rankwise.errors import InputError
from rankwise.theory import c_phi, get_measure, regret_bound, regret_constant
from rankwise.theory.inner import Distribution, label_space

from _ref import ref


def test_c_phi_matches_its_sum():
    rng = np.random.default_rng(0)
    for n in (2, 3, 4, 7, 10):
        phi = np.sort(rng.random(n))[::-1]
        for p in (1, 2, 3.5):
            assert c_phi(phi, p) == pytest.approx(ref.c_phi(list(phi), p), rel=1e-12)
        assert c_phi(phi, math.inf) == pytest.approx(max(phi[i] - phi[n - 1 - i] for i in range(n // 2)))


def test_c_phi_of_dcg_by_hand():
    # n = 4, φ(i) = 1/log2(1+i): C_φ(2)² = (1 − 1/log2 5)² + (1/log2 3 − 1/log2 4)²
    expect = math.sqrt((1 - 1 / math.log2(5)) ** 2 + (1 / math.log2(3) - 0.5) ** 2)
    assert c_phi((get_measure("dcg"), 4), 2) == pytest.approx(expect)
    # P@k with n ≤ 2k has C_φ(p) = (k-sized gaps)... P@1 on 3 items: one pair (1/1 − 0)
    assert c_phi(get_measure("p@1").discount(3), 2) == pytest.approx(1.0)


def test_table2_constants():
    assert regret_constant("pointwise_squared") == pytest.approx(math.sqrt(2))
    assert regret_constant("pointwise_logistic", eta=4.0) == pytest.approx(2.0)
    assert regret_constant("pointwise_exponential", eta=9.0) == pytest.approx(3.0)
    assert regret_constant("pointwise_squared_hinge", eta=2.0, t=0.5) == pytest.approx(4.0)
    assert regret_constant("pointwise_smooth_hinge", eta=1.0, alpha=0.25) == pytest.approx(8.0)
    assert regret_constant("pairwise_squared") == 1.0
    assert regret_constant("op_pairwise", phi="logistic", U=[0.25, 0.1]) == pytest.approx(1.0)
    assert regret_constant("bregman", mu=4.0) == pytest.approx(1.0)
    with pytest.raises(InputError, match="depends on U"):
        regret_constant("op_pairwise", phi="exponential")
    with pytest.raises(InputError, match="no Table 2 regret constant"):
        regret_constant("listnet")


def test_no_bound_for_err_or_ap():
    with pytest.raises(InputError, match="Theorem 3.3"):
        regret_bound("pointwise_squared", "err")


CASES = [
    ("pointwise_squared", "dcg", {}, 3),
    ("pointwise_logistic", "dcg", {"eta": 4.0}, 3),
    ("pointwise_exponential", "ndcg", {"eta": 1.25}, 3),
    ("pairwise_squared", "dcg", {}, 3),
    ("op_pairwise", "p@2", {"phi": "logistic"}, 2),
    ("bregman", "ndcg@2", {}, 3),
]


def _closed_form_min(loss, hyper, U):
    """L̲ from the minimiser in closed form where Table 2's proofs give it (pointwise)."""
    if loss == "pointwise_logistic":
        return np.log(U / (hyper["eta"] - U))
    if loss == "pointwise_exponential":
        return 0.5 * np.log(U / (hyper["eta"] - U))
    if loss in ("pointwise_squared", "bregman"):  # E[v] minimises E‖v − s‖²
        return U.copy()
    return None


@pytest.mark.parametrize("loss,metric,hyper,levels", CASES)
def test_regret_bound_holds_on_random_distributions_and_scores(loss, metric, hyper, levels, capsys):
    """≥ 1,000 random (Δ, s) per case; prints the tightest ratio (metric regret / bound) seen."""
    rng = np.random.default_rng(11)
    rb = regret_bound(loss, metric, **hyper)
    Y = label_space(3, levels)
    m = get_measure(metric)
    n_checked, worst, n_tight = 0, 0.0, 0
    n_dist = 100
    for _ in range(n_dist):
        probs = rng.dirichlet(np.full(len(Y), rng.choice([0.2, 1.0])))
        probs = np.clip(probs, 1e-6, None)
        d = Distribution(Y, probs / probs.sum())
        U = d.probs @ np.stack([m.utility(y) for y in d.labels])
        s0 = _closed_form_min(loss, rb.hyper, U)
        center = U if s0 is None else s0
        if s0 is not None:  # L̲ = L(Δ, s*) at the closed-form minimiser
            l_min = rb.check(d, s0, l_min=0.0)["surrogate_regret"]
        else:  # L̲ by L-BFGS (convex), computed once per Δ
            l_min = rb.check(d, center)["l_min"]
        for j in range(10):
            scale = [0.01, 0.1, 1.0, 3.0][j % 4]
            s = center + rng.normal(0, scale, 3)
            r = rb.check(d, s, l_min=l_min)
            n_checked += 1
            assert r["metric_regret"] <= r["bound"] * (1 + 1e-7) + 1e-10, (loss, metric, d, s, r)
            if r["metric_regret"] > 1e-9:
                n_tight += 1
                worst = max(worst, r["metric_regret"] / r["bound"])
    assert n_checked >= 1000
    assert n_tight >= 100  # the bound was exercised where it is not trivially 0 ≤ something
    assert worst > 0.3  # within a factor ~3 of tight somewhere: a constant 3× too small would fail
    with capsys.disabled():
        print(f"\n[regret] {loss} vs {metric}: {n_checked} (Δ, s), {n_tight} with positive regret, "
              f"tightest ratio regret/bound = {worst:.4f}")
