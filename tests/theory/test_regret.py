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
    assert regret_constant("bregman", mu=0.25) == pytest.approx(4.0)  # a smaller μ than ψ's: looser, valid
    assert regret_constant("bregman") == pytest.approx(2.0)  # ψ = ½‖x‖²: μ = 1
    # ψ = KL is (1/‖U‖∞)-strongly convex where Theorem 5.3's proof needs it: c = 2√‖U‖∞
    assert regret_constant("bregman", psi="kl", link="exp", U=[2.25, 0.5]) == pytest.approx(2.0 * 1.5)
    with pytest.raises(InputError, match="mu must not exceed"):
        regret_constant("bregman", mu=4.0)
    with pytest.raises(InputError, match="mu must not exceed"):
        regret_constant("bregman", psi="kl", link="exp", mu=1.0, U=[3.0, 1.0])
    with pytest.raises(InputError, match="depends on U"):
        regret_constant("bregman", psi="kl", link="exp")
    with pytest.raises(InputError, match="psi must be one of"):
        regret_constant("bregman", psi="itakura_saito")
    with pytest.raises(InputError, match="depends on U"):
        regret_constant("op_pairwise", phi="exponential")
    with pytest.raises(InputError, match="no Table 2 regret constant"):
        regret_constant("listnet")


def test_no_bound_for_err_or_ap():
    with pytest.raises(InputError, match="Theorem 3.3"):
        regret_bound("pointwise_squared", "err")


def test_bound_parameters_are_not_handed_to_the_loss():
    """mu is the bound's parameter: check() must not forward it to the loss (raw TypeError before)."""
    Y = label_space(3, 3)
    d = Distribution(Y, np.random.default_rng(0).dirichlet(np.ones(len(Y))))
    rb = regret_bound("bregman", "dcg", mu=1.0)
    assert rb.hyper == {} and rb.bound_hyper == {"mu": 1.0}
    r = rb.check(d, [0.5, 0.2, 0.9])
    assert 0.0 <= r["metric_regret"] <= r["bound"]
    with pytest.raises(InputError, match=r"unknown hyper-parameter\(s\) \['eta'\]"):
        regret_bound("pointwise_squared", "dcg", eta=2.0)
    with pytest.raises(InputError, match="takes no mu"):
        regret_bound("pointwise_squared", "dcg", mu=1.0)
    with pytest.raises(InputError, match="no utility="):
        regret_bound("pointwise_squared", "dcg", utility="exp2")
    with pytest.raises(InputError, match="psi='kl' .* needs link='exp'"):
        regret_bound("bregman", "dcg", psi="kl")
    with pytest.raises(InputError, match="eta must be a positive finite number"):
        regret_bound("pointwise_logistic", "dcg", eta=float("nan")).constant()


def test_check_batch_agrees_with_check_and_the_brute_force_references():
    """Metric regret by the definitions (all permutations, ties averaged) and the surrogate by loops."""
    rng = np.random.default_rng(5)
    Y = label_space(4, 2)
    for loss, metric, lref, mref in (
            ("pointwise_squared", "dcg", ref.pointwise_squared, lambda y, p: ref.dcg(y, p)),
            ("op_pairwise", "p@2", ref.op_pairwise_logistic, lambda y, p: ref.precision(y, p, 2))):
        rb = regret_bound(loss, metric)
        m = get_measure(metric)
        for _ in range(3):
            d = Distribution(Y, rng.dirichlet(np.ones(len(Y))))
            S = np.round(rng.normal(0, 1, (6, 4)), 0)  # many ties
            r = rb.check_batch(d, S)
            V = [m.utility(y) for y in d.labels]
            rbar = ref.best_inner_performance(mref, d.labels, d.probs)
            for b, s in enumerate(S):
                perf = sum(p * ref.scoring_value(mref, y, s) for y, p in zip(d.labels, d.probs))
                assert r["metric_regret"][b] == pytest.approx(rbar - perf, abs=1e-12)
                L = sum(p * lref(s, v) for v, p in zip(V, d.probs))
                assert r["surrogate_regret"][b] == pytest.approx(L - r["l_min"], rel=1e-9, abs=1e-9)
                one = rb.check(d, s, l_min=r["l_min"])
                assert one["bound"] == pytest.approx(r["bound"][b], rel=1e-12)


# Closed-form minimisers of the inner risk (the proofs of Theorems 5.2-5.4 and Appendix B give
# them; each is the stationary point of a one- or two-variable convex function of U(Δ)).
def _argmin_smooth_hinge(U, eta, alpha):
    # U φ_α(1−s) + (η−U) φ_α(s), α < 1/2: s = αU/(η−U) if U ≤ η/2, else 1 − α(η−U)/U
    return np.where(U <= eta / 2, alpha * U / (eta - U), 1.0 - alpha * (eta - U) / U)


CLOSED_FORM = {
    "pointwise_squared": lambda U, h: U.copy(),
    "pointwise_logistic": lambda U, h: np.log(U / (h["eta"] - U)),
    "pointwise_exponential": lambda U, h: 0.5 * np.log(U / (h["eta"] - U)),
    "pointwise_squared_hinge": lambda U, h: U * h.get("t", 1.0) / h["eta"],
    "pointwise_smooth_hinge": lambda U, h: _argmin_smooth_hinge(U, h["eta"], h.get("alpha", 0.25)),
    "pairwise_squared": lambda U, h: U.copy(),
    "op_pairwise": lambda U, h: (np.log(U) if h.get("phi", "logistic") == "logistic" else 0.5 * np.log(U)),
    "bregman": lambda U, h: (U.copy() if h.get("link", "identity") == "identity" else np.log(U)),
}

# (loss, metric, hyper, n_items, label levels, distributions Δ × 10 score vectors each, tightest-ratio floor)
CASES = [
    ("pointwise_squared", "dcg", {}, 3, 3, 100, 0.3),
    ("pointwise_squared", "dcg", {}, 4, 3, 100, 0.3),
    ("pointwise_squared", "ndcg", {}, 5, 2, 30, 0.2),
    ("pointwise_logistic", "dcg", {"eta": 4.0}, 3, 3, 100, 0.3),
    ("pointwise_logistic", "dcg", {"eta": 1.25}, 5, 2, 30, 0.1),
    ("pointwise_exponential", "ndcg", {"eta": 1.25}, 3, 3, 100, 0.3),
    ("pointwise_exponential", "p@2", {"eta": 1.5}, 4, 2, 30, 0.1),
    ("pointwise_squared_hinge", "dcg", {"eta": 4.0, "t": 0.5}, 4, 3, 100, 0.1),
    ("pointwise_squared_hinge", "ndcg", {"eta": 1.25}, 5, 2, 30, 0.05),
    ("pointwise_smooth_hinge", "dcg", {"eta": 4.0, "alpha": 0.25}, 4, 3, 100, 0.08),
    ("pointwise_smooth_hinge", "r@2", {"eta": 1.0, "alpha": 0.25}, 5, 2, 30, 0.08),
    ("pairwise_squared", "dcg", {}, 3, 3, 100, 0.3),
    ("pairwise_squared", "dcg", {}, 5, 2, 30, 0.2),
    ("op_pairwise", "p@2", {"phi": "logistic"}, 3, 2, 100, 0.3),
    ("op_pairwise", "dcg", {"phi": "logistic"}, 4, 3, 30, 0.1),
    ("op_pairwise", "dcg", {"phi": "exponential"}, 4, 3, 100, 0.1),
    ("op_pairwise", "ndcg", {"phi": "exponential"}, 5, 2, 30, 0.1),
    ("bregman", "ndcg@2", {}, 3, 3, 100, 0.3),
    ("bregman", "dcg", {"mu": 1.0}, 4, 3, 30, 0.2),
    ("bregman", "dcg", {"psi": "kl", "link": "exp"}, 4, 3, 100, 0.1),
    ("bregman", "dcg", {"psi": "kl", "link": "exp"}, 5, 3, 30, 0.05),
]
TIGHTEST: dict = {}


def _case_id(c):
    loss, metric, hyper, n = c[:4]
    h = ",".join(f"{k}={v}" for k, v in hyper.items())
    return f"{loss}[{h}]-{metric}-n{n}"


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_regret_bound_holds_on_random_distributions_and_scores(case, capsys):
    """Random (Δ, s): ≥ 1,000 per case for n = 3 and most n = 4 cases, 300 for the others.

    Δ is a Dirichlet draw (dense or sparse) over the label space, or over 32 random label
    vectors of it when it has more (n = 4, 5 with three levels).

    For n ≥ 4, C_φ(2) of eq. (10) has ⌊n/2⌋ ≥ 2 terms. L̲(Δ) comes from the closed-form
    minimiser, checked against L-BFGS on the first Δ of each case. Prints the tightest ratio
    metric regret / bound seen.
    """
    loss, metric, hyper, n, levels, n_dist, floor = case
    rng = np.random.default_rng(11)
    rb = regret_bound(loss, metric, **hyper)
    Y = label_space(n, levels)
    m = get_measure(metric)
    n_checked, worst, n_tight = 0, 0.0, 0
    for i in range(n_dist):
        # support: every label vector, or 32 of them drawn at random when the space is larger
        sup = Y if len(Y) <= 32 else Y[np.sort(rng.choice(len(Y), 32, replace=False))]
        probs = rng.dirichlet(np.full(len(sup), rng.choice([0.2, 1.0])))
        probs = np.clip(probs, 1e-6, None)
        d = Distribution(sup, probs / probs.sum())
        U = d.probs @ np.stack([m.utility(y) for y in d.labels])
        center = CLOSED_FORM[loss](U, hyper)
        l_min = rb.check_batch(d, center[None, :], l_min=0.0)["surrogate_regret"][0]
        if i == 0:  # the closed form is the minimiser: L-BFGS finds nothing lower
            assert rb.check(d, center)["l_min"] >= l_min - 1e-7 * max(1.0, abs(l_min))
        scales = np.array([0.01, 0.1, 1.0, 3.0])[np.arange(10) % 4][:, None]
        S = center + rng.normal(0, 1, (10, n)) * scales
        S[-1] = center[::-1] if rng.random() < 0.5 else center + rng.normal(0, 0.3, n)
        r = rb.check_batch(d, S, l_min=l_min)
        n_checked += len(S)
        reg, bnd = r["metric_regret"], r["bound"]
        ok = reg <= bnd * (1 + 1e-7) + 1e-10
        assert ok.all(), (loss, metric, d, S[~ok], reg[~ok], bnd[~ok])
        pos = reg > 1e-9
        n_tight += int(pos.sum())
        if pos.any():
            worst = max(worst, float((reg[pos] / bnd[pos]).max()))
    assert n_checked >= (1000 if n_dist >= 100 else 300)
    assert n_tight >= n_checked // 10  # the bound was exercised where it is not trivially 0 ≤ something
    assert worst > floor  # a constant many times too large would fail
    TIGHTEST[_case_id(case)] = worst
    with capsys.disabled():
        print(f"\n[regret] {_case_id(case)}: {n_checked} (Δ, s), {n_tight} with positive regret, "
              f"tightest ratio regret/bound = {worst:.4f}")


def test_kl_bregman_constant_needs_the_utility_scale():
    """ψ = KL is only (1/‖U‖∞)-strongly convex where the proof needs it. Two items of utility
    ≈ 3 (DCG gain of label 2) whose order is flipped by an ε: metric regret (φ(1) − φ(2))·δ,
    surrogate regret ≈ δ²/(4·3) at the cone minimiser g₁ = g₂ = (U₁ + U₂)/2, so the bound with
    c = 2√‖U‖∞ is tight (ratio → 1), and the old c = 2/√1 = 2 is violated by a factor ≈ √3."""
    q, eps = 0.02, 1e-7
    d = Distribution(np.array([[2.0, 2.0], [2.0, 1.0]]), np.array([1 - q, q]))
    rb = regret_bound("bregman", "dcg", psi="kl", link="exp")
    U = np.array([3.0, 3.0 - 2.0 * q])
    t = U.mean()
    s = np.log(t) + np.array([-eps, eps])  # item 1 (U₁ > U₂) ranked second
    r = rb.check(d, s, l_min=rb.check(d, np.log(U), l_min=0.0)["surrogate_regret"])
    phi = get_measure("dcg").discount(2)
    assert r["metric_regret"] == pytest.approx((phi[0] - phi[1]) * (U[0] - U[1]), rel=1e-9)
    assert r["metric_regret"] <= r["bound"]
    ratio = r["metric_regret"] / r["bound"]
    assert ratio > 0.98  # tight: the derived μ = 1/‖U‖∞ cannot be improved here
    old_bound = r["bound"] / math.sqrt(U.max())  # c = 2, i.e. μ = 1 regardless of ψ
    assert r["metric_regret"] > 1.5 * old_bound
