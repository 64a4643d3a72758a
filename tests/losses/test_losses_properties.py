"""Metadata checked numerically: convexity, Lipschitz constants, calibration (order preservation)."""
from __future__ import annotations

import pytest
import torch

from _losses_cases import ALL, BASE_HYPER, SPECS, labels_for
from rankwise.losses import REGISTRY, spec


def _f(name, s, y, **kw):
    hyper = dict(BASE_HYPER.get(name, {}))
    hyper.update(kw)
    return REGISTRY[name](s, y, reduction="sum", **hyper)


@pytest.mark.parametrize("name", [n for n in ALL if SPECS[n].convex])
def test_convex_along_random_segments(name):
    gen = torch.Generator().manual_seed(23)
    for _ in range(40):
        L = int(torch.randint(2, 8, (1,), generator=gen))
        y = labels_for(name, (1, L), gen)
        a = torch.randn(1, L, generator=gen, dtype=torch.float64) * 3
        b = torch.randn(1, L, generator=gen, dtype=torch.float64) * 3
        fa, fb = _f(name, a, y), _f(name, b, y)
        for t in (0.1, 0.3, 0.5, 0.7, 0.9):
            ft = _f(name, t * a + (1 - t) * b, y)
            assert ft <= t * fa + (1 - t) * fb + 1e-9 * (1 + abs(fa) + abs(fb)), (name, t)


@pytest.mark.parametrize("name", [n for n in ALL if not SPECS[n].convex])
def test_non_convex_losses_violate_convexity_somewhere(name):
    gen = torch.Generator().manual_seed(29)
    found = False
    for _ in range(400):
        L = int(torch.randint(2, 6, (1,), generator=gen))
        y = labels_for(name, (1, L), gen)
        a = torch.randn(1, L, generator=gen, dtype=torch.float64) * 3
        b = torch.randn(1, L, generator=gen, dtype=torch.float64) * 3
        fa, fb = _f(name, a, y), _f(name, b, y)
        fm = _f(name, 0.5 * (a + b), y)
        if fm > 0.5 * (fa + fb) + 1e-9:
            found = True
            break
    assert found, f"{name} is declared non-convex but no violation was found"


def _grad(name, s, y, **kw):
    s = s.clone().requires_grad_(True)
    g, = torch.autograd.grad(_f(name, s, y, **kw), s)
    return g[0]


@pytest.mark.parametrize("name", [n for n in ALL if SPECS[n].lipschitz_inf is not None])
def test_lipschitz_constants_bound_the_gradient(name):
    sp = spec(name)
    gen = torch.Generator().manual_seed(31)
    hyper = {k: v for k, v in BASE_HYPER.get(name, {}).items() if k in ("eta",)}
    for _ in range(60):
        m = int(torch.randint(1, 12, (1,), generator=gen))
        y = labels_for(name, (1, m), gen)
        s = torch.randn(1, m, generator=gen, dtype=torch.float64) * float(torch.rand(1, generator=gen) * 6)
        if torch.rand(1, generator=gen) < 0.3:
            s = torch.zeros(1, m, dtype=torch.float64)  # all tied
        g = _grad(name, s, y)
        assert g.abs().sum() <= sp.lipschitz_inf(m, **hyper) * (1 + 1e-9) + 1e-12
        assert g.norm() <= sp.lipschitz_2(m, **hyper) * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("name", ["pairwise_hinge", "kendall_hinge", "ranknet"])
def test_pairwise_linf_constant_is_attained_by_two_label_levels(name):
    sp = spec(name)
    for m in (2, 3, 6, 9):
        y = torch.tensor([[1.0] * (m // 2) + [0.0] * (m - m // 2)], dtype=torch.float64)
        s = torch.zeros(1, m, dtype=torch.float64)
        if name == "ranknet":  # |φ'| -> σ as s_i - s_j -> -∞
            s = torch.cat([torch.full((m // 2,), -40.0), torch.zeros(m - m // 2)]).to(torch.float64)[None]
        g = _grad(name, s, y)
        torch.testing.assert_close(g.abs().sum().item(), sp.lipschitz_inf(m), rtol=1e-9, atol=1e-12)


def test_ranksvm_constant_grows_with_length_listnet_and_smooth_dcg1_do_not():
    hinge, listnet, sdcg, kendall = (spec(n) for n in ("pairwise_hinge", "listnet", "smooth_dcg1", "kendall_hinge"))
    assert hinge.lipschitz_inf(100) == 2 * 2500 and hinge.lipschitz_inf(10) == 50
    assert listnet.lipschitz_inf(10) == listnet.lipschitz_inf(10_000) == 2.0
    assert sdcg.lipschitz_inf(10) == sdcg.lipschitz_inf(10_000)
    assert kendall.lipschitz_inf(1000) <= 1 + 1 / 999
    # ListNet: the constant 2 is approached, whatever the length
    for m in (3, 50, 500):
        y = torch.zeros(1, m, dtype=torch.float64)
        y[0, 0] = 60.0
        s = torch.zeros(1, m, dtype=torch.float64)
        s[0, 1] = 60.0
        g = _grad("listnet", s, y)
        assert 2 - 1e-6 < g.abs().sum() <= 2
    # smoothed DCG@1: G_max / (2σ) approached with two items at the extreme gains
    y = torch.tensor([[4.0, 0.0]], dtype=torch.float64)
    g = _grad("smooth_dcg1", torch.zeros(1, 2, dtype=torch.float64), y)
    torch.testing.assert_close(g.abs().sum().item(), sdcg.lipschitz_inf(2), rtol=1e-12, atol=0)


def _inner_minimiser(name, label_vectors, probs, **hyper):
    """argmin_s sum_k p_k loss(s, y_k) by L-BFGS (the inner risk of Calauzènes et al.)."""
    Y = torch.tensor(label_vectors, dtype=torch.float64)
    p = torch.tensor(probs, dtype=torch.float64)
    s = torch.zeros(Y.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([s], max_iter=500, tolerance_grad=1e-12, tolerance_change=1e-14,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        v = (p * REGISTRY[name](s.expand_as(Y), Y, reduction="none", **hyper)).sum()
        v.backward()
        return v
    for _ in range(5):
        opt.step(closure)
    return s.detach()


# the utility each order-preserving loss is calibrated for (default: u(y) = y)
_UTILITY = {"pointwise_utility_regression": lambda y: 2.0 ** y - 1}


@pytest.mark.parametrize("name", ["pointwise_squared", "pointwise_logistic", "pointwise_exponential",
                                  "pointwise_smooth_hinge", "pointwise_squared_hinge", "sigmoid_ce",
                                  "pointwise_utility_regression", "op_pairwise", "pairwise_squared", "bregman"])
def test_order_preserving_losses_order_like_the_expected_utility(name):
    assert spec(name).order_preserving is True
    hyper = dict(BASE_HYPER.get(name, {}))
    ys = [[2.0, 0.0, 1.0, 0.0], [0.0, 2.0, 1.0, 1.0], [1.0, 1.0, 0.0, 2.0]]
    if name == "sigmoid_ce":  # binary labels
        ys = [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]]
    probs = [0.45, 0.35, 0.2]
    u = _UTILITY.get(name, lambda y: y)
    eu = torch.tensor(probs, dtype=torch.float64) @ u(torch.tensor(ys, dtype=torch.float64))
    s = _inner_minimiser(name, ys, probs, **hyper)
    order_eu = torch.argsort(eu, descending=True)
    assert torch.all(s[order_eu][:-1] > s[order_eu][1:] + 1e-6), (s, eu)


def test_utility_regression_orders_by_expected_gain_not_expected_label():
    """On this distribution E[y] and E[2^y - 1] order items 2 and 3 differently: the regression
    on 2^y - 1 follows the DCG utility (Cossock & Zhang 2008), the one on y the label."""
    ys = [[2.0, 0.0, 1.0, 0.0], [0.0, 2.0, 1.0, 1.0], [1.0, 1.0, 0.0, 2.0]]
    probs = [0.45, 0.35, 0.2]
    ey = torch.tensor(probs, dtype=torch.float64) @ torch.tensor(ys, dtype=torch.float64)
    assert ey[2] > ey[3]  # E[y]: 0.8 > 0.75, E[2^y - 1]: 0.8 < 0.95
    s_gain = _inner_minimiser("pointwise_utility_regression", ys, probs)
    s_label = _inner_minimiser("pointwise_squared", ys, probs)
    assert s_gain[3] > s_gain[2] + 0.1 and s_label[2] > s_label[3] + 0.01


# Pairwise losses with unit pair weights see only P(y_i > y_j), not how much larger: item 0 wins
# big but rarely (y = (2, 0, 0) with p = 0.4), item 1 wins by one grade more often (p = 0.5), so
# E[y_0] = 0.8 > E[y_1] = 0.5 while P(y_1 > y_0) = 0.5 > P(y_0 > y_1) = 0.4.
_PREF_YS = [[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
_PREF_PROBS = [0.5, 0.4, 0.1]


@pytest.mark.parametrize("name", ["ranknet", "rankboost"])
def test_smooth_pairwise_losses_are_not_order_preserving_counterexample(name):
    """Calauzènes et al. (2013, Def. 3.3; Duchi, Mackey & Jordan ICML 2010 for RankNet): the
    unique minimiser of the inner risk ranks item 1 above item 0 although E[y_0] > E[y_1]."""
    assert spec(name).order_preserving is False
    eu = torch.tensor(_PREF_PROBS, dtype=torch.float64) @ torch.tensor(_PREF_YS, dtype=torch.float64)
    assert eu[0] > eu[1] > eu[2]
    s = _inner_minimiser(name, _PREF_YS, _PREF_PROBS)
    Y = torch.tensor(_PREF_YS, dtype=torch.float64)
    P = torch.tensor(_PREF_PROBS, dtype=torch.float64)
    x = s.clone().requires_grad_(True)
    g, = torch.autograd.grad((P * REGISTRY[name](x.expand_as(Y), Y, reduction="none")).sum(), x)
    assert g.abs().max() < 1e-8  # a stationary point of a convex risk: the minimum
    assert s[1] > s[0] + 0.1, s
    # an order-preserving loss on the same distribution follows E[y]
    s_op = _inner_minimiser("pairwise_squared", _PREF_YS, _PREF_PROBS)
    assert s_op[0] > s_op[1] > s_op[2]


def test_kendall_hinge_is_not_order_preserving_counterexample():
    """Piecewise linear with breakpoints on a 0.1 grid (as the RankSVM hinge below): the inner
    risk attains its minimum at scores that do not put item 0 strictly above item 1."""
    assert spec("kendall_hinge").order_preserving is False
    Y = torch.tensor(_PREF_YS, dtype=torch.float64)
    P = torch.tensor(_PREF_PROBS, dtype=torch.float64)
    grid = torch.linspace(-3, 3, 61, dtype=torch.float64)
    a, b = torch.meshgrid(grid, grid, indexing="ij")
    S = torch.stack([a.flatten(), b.flatten(), torch.zeros(a.numel(), dtype=torch.float64)], -1)
    risk = sum(P[k] * REGISTRY["kendall_hinge"](S, Y[k].expand_as(S), reduction="none") for k in range(3))
    bad = S[:, 0] <= S[:, 1]
    assert abs(risk.min().item() - risk[bad].min().item()) < 1e-12


def test_pairwise_hinge_is_not_order_preserving_counterexample():
    """Calauzènes et al. (2013, Def. 3.3): a loss is order-preserving if every score vector that
    can rank against U = E[y] has inner risk strictly above the minimum. For RankSVM's hinge,
    on a cyclic preference mixture, the minimum is also attained with items 1 and 2 tied
    although E[y_1] > E[y_2]: not order-preserving."""
    assert spec("pairwise_hinge").order_preserving is False
    ys = [[2.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, 2.0]]
    probs = [0.4, 0.3, 0.3]
    eu = torch.tensor(probs, dtype=torch.float64) @ torch.tensor(ys, dtype=torch.float64)
    assert eu[0] > eu[1] > eu[2]
    Y = torch.tensor(ys, dtype=torch.float64)
    P = torch.tensor(probs, dtype=torch.float64)
    # the hinge risk is piecewise linear with integer breakpoints: a 0.1 grid contains its minima
    grid = torch.linspace(-3, 3, 61, dtype=torch.float64)
    a, b = torch.meshgrid(grid, grid, indexing="ij")
    S = torch.stack([a.flatten(), b.flatten(), torch.zeros(a.numel(), dtype=torch.float64)], -1)
    risk = sum(P[k] * REGISTRY["pairwise_hinge"](S, Y[k].expand_as(S), reduction="none") for k in range(3))
    bad = S[:, 1] <= S[:, 2]  # item 1 not strictly above item 2
    assert abs(risk.min().item() - risk[bad].min().item()) < 1e-12
    # an order-preserving loss separates the two on the same distribution
    risk_op = sum(P[k] * REGISTRY["pairwise_squared"](S, Y[k].expand_as(S), reduction="none") for k in range(3))
    assert risk_op[bad].min().item() > risk_op.min().item() + 1e-6
