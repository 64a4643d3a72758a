"""The engine's given pair weights (``grad_hess(..., pairs=)``: per query an n x n block W, W[i, j] the weight of
the pair "i above j") against the dense formula in torch (value and autograd gradient to 1e-10, the Hessian
diagonal against torch's exact second derivatives), against the label-ordered pairs where W encodes them, and
its input checks."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rankwise.errors import InputError
from rankwise.losses import grad_hess
from rankwise.losses._engine import pairs_offsets


def _inputs(seed, *, ties=False, both=True):
    """Lists of 0 to 11 items (an empty and a 1-item list among them), a block of pair weights per list with
    zeros, weights in both directions of a pair (``both``), scientific-notation magnitudes; tied scores."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 12, 9)
    sizes[2], sizes[5] = 0, 1
    off = np.concatenate([[0], np.cumsum(sizes)])
    s = rng.normal(size=off[-1]) * 1.5
    if ties:
        s = np.round(s * 2) / 2
    blocks = []
    for n in sizes:
        W = rng.uniform(0, 2, (n, n)) * 10.0 ** rng.integers(-3, 3, (n, n))
        W[rng.random((n, n)) < 0.4] = 0.0
        if not both:
            W = np.triu(W, 1)
        np.fill_diagonal(W, rng.uniform(0, 1, n))  # the diagonal is no pair: never read
        blocks.append(W.ravel())
    w = rng.uniform(0.5, 1.5, off[-1])
    return s, off, np.concatenate(blocks) if blocks else np.zeros(0), w


def _omega(kind, ri, rj, mu):
    def inv_d(r):
        return 1.0 / math.log2(2.0 + r)

    def delta(k):
        return 0.0 if k == 0 else abs(1.0 / math.log2(1.0 + k) - 1.0 / math.log2(2.0 + k))
    if kind == "none":
        return 1.0
    if kind == "delta":
        return abs(inv_d(ri) - inv_d(rj))
    if kind == "ndcg2":
        return delta(abs(ri - rj))
    return mu * delta(abs(ri - rj)) + abs(inv_d(ri) - inv_d(rj))  # ndcg2pp


def _reference(s, off, pairs, w, *, phi, omega, sigma=1.0, scale=1.0, trunc=None, norm=False, mu=0.0):
    """Value, gradient and Hessian diagonal of sum_q sum_{i != j} W[i, j] w_i w_j omega_ij phi(s_i - s_j) in torch,
    omega at the current ranks (scores descending, ties in input order) and LightGBM's ``norm`` factors held
    constant, as the engine's docstring states; ``scale`` multiplies the logistic (1/ln 2: LambdaLoss's log2)."""
    po = pairs_offsets(off)
    total, g, h = 0.0, np.zeros_like(s), np.zeros_like(s)
    for q in range(len(off) - 1):
        a, b = off[q], off[q + 1]
        n = b - a
        if n < 2:
            continue
        W = pairs[po[q]:po[q + 1]].reshape(n, n)
        rank = np.empty(n, dtype=int)
        rank[np.argsort(-s[a:b], kind="stable")] = np.arange(n)
        terms = []
        for i in range(n):
            for j in range(n):
                if i == j or W[i, j] == 0 or (trunc and rank[i] >= trunc and rank[j] >= trunc):
                    continue
                wt = W[i, j] * w[a + i] * w[a + j] * _omega(omega, rank[i], rank[j], mu)
                d = s[a + i] - s[a + j]
                if norm and s[a:b].max() != s[a:b].min():
                    wt /= 0.01 + abs(d)
                terms.append((i, j, wt, d))
        factor = 1.0
        if norm:  # (the logistic pairs: the hinge losses have no norm)
            lam = sum(2 * abs(wt * scale * sigma / (1 + math.exp(sigma * d))) for _, _, wt, d in terms)
            factor = math.log2(1 + lam) / lam if lam > 0 else 1.0

        def f(x):
            out = x.sum() * 0
            for i, j, wt, _ in terms:
                d = x[i] - x[j]
                out = out + wt * (scale * torch.nn.functional.softplus(-sigma * d) if phi == "logistic"
                                  else torch.relu(1 - d))
            return out * factor

        x = torch.tensor(s[a:b], requires_grad=True)
        v = f(x)
        gq, = torch.autograd.grad(v, x)
        total += float(v.detach())
        g[a:b] = gq.numpy()
        h[a:b] = torch.diagonal(torch.autograd.functional.hessian(f, torch.tensor(s[a:b]))).numpy()
    return total, g, h


CASES = [
    ("ranknet", {"pair_weights": "none"}, "logistic", "none", {}),
    ("ranknet", {"pair_weights": "delta_ndcg", "gain": "linear"}, "logistic", "delta", {}),
    ("ranknet", {"pair_weights": "delta_ndcg", "sigma": 2.0, "truncation_level": 3}, "logistic", "delta",
     {"sigma": 2.0, "trunc": 3}),
    ("ranknet", {"pair_weights": "delta_ndcg", "norm": True}, "logistic", "delta", {"norm": True}),
    ("ranknet", {"pair_weights": "delta_label", "sigma": 0.5}, "logistic", "none", {"sigma": 0.5}),
    ("lambdaloss", {"weighting": "ndcg2"}, "logistic", "ndcg2", {"scale": 1 / math.log(2)}),
    ("lambdaloss", {"weighting": "ndcg2pp", "mu": 5.0, "truncation_level": 4}, "logistic", "ndcg2pp",
     {"mu": 5.0, "trunc": 4, "scale": 1 / math.log(2)}),
]


@pytest.mark.parametrize("loss, hyper, phi, omega, ref", CASES, ids=lambda c: str(c))
@pytest.mark.parametrize("ties", [False, True])
def test_given_pairs_against_the_dense_formula_in_torch(loss, hyper, phi, omega, ref, ties):
    s, off, pairs, w = _inputs(3, ties=ties)
    y = np.random.default_rng(0).integers(0, 3, len(s)).astype(float)  # labels: read by no pair
    g, h, v = grad_hess(loss, s, y, off, weights=w, pairs=pairs, return_value=True, hess_floor=1e-300, **hyper)
    want_v, want_g, want_h = _reference(s, off, pairs, w, phi=phi, omega=omega, **ref)
    assert abs(v - want_v) <= 1e-10 * max(1.0, abs(want_v))
    np.testing.assert_allclose(g, want_g, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(h, np.maximum(want_h, 1e-300), rtol=1e-10, atol=1e-10)
    assert np.any(g != 0)


def test_given_pairs_of_the_hinge_in_its_dense_form():
    s, off, pairs, w = _inputs(4)
    y = np.zeros(len(s))
    g, h, v = grad_hess("pairwise_hinge", s, y, off, weights=w, pairs=pairs, return_value=True,
                        pair_weights="delta_ndcg")
    want_v, want_g, _ = _reference(s, off, pairs, w, phi="hinge", omega="delta")
    assert abs(v - want_v) <= 1e-10 * max(1.0, abs(want_v))
    np.testing.assert_allclose(g, want_g, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("hyper", [{"pair_weights": "delta_ndcg", "gain": "linear"},
                                   {"pair_weights": "delta_ndcg", "gain": "linear", "truncation_level": 3,
                                    "norm": True},
                                   {"pair_weights": "none", "sigma": 1.5}])
def test_given_pairs_that_encode_the_labels_equal_the_label_pairs(hyper):
    """Binary labels: W[i, j] = [y_i > y_j] / maxDCG (ΔNDCG) or [y_i > y_j] gives the engine's own loss."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 40, 30)
    off = np.concatenate([[0], np.cumsum(sizes)])
    s, y = rng.normal(size=off[-1]), (rng.random(off[-1]) < 0.3).astype(float)
    w = rng.uniform(0.5, 2, off[-1])
    blocks = []
    for a, b in zip(off[:-1], off[1:]):
        yy = y[a:b]
        k = min(int(yy.sum()), hyper.get("truncation_level") or len(yy))
        ideal = sum(1 / math.log2(2 + r) for r in range(k))
        scale = 1 / ideal if hyper["pair_weights"] == "delta_ndcg" and ideal > 0 else 1.0
        blocks.append((np.greater.outer(yy, yy) * scale).ravel())
    pairs = np.concatenate(blocks)
    got = grad_hess("ranknet", s, y, off, weights=w, pairs=pairs, return_value=True, **hyper)
    want = grad_hess("ranknet", s, y, off, weights=w, return_value=True, **hyper)
    for a, b in zip(got[:2], want[:2]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)
    assert abs(got[2] - want[2]) <= 1e-10 * abs(want[2])


def test_threads_do_not_change_the_result():
    rng = np.random.default_rng(9)
    sizes = rng.integers(2, 15, 600)
    off = np.concatenate([[0], np.cumsum(sizes)])
    s = rng.normal(size=off[-1])
    pairs = rng.uniform(0, 1, int(pairs_offsets(off)[-1]))
    one = grad_hess("ranknet", s, np.zeros(len(s)), off, pairs=pairs, n_jobs=1, pair_weights="delta_ndcg")
    two = grad_hess("ranknet", s, np.zeros(len(s)), off, pairs=pairs, n_jobs=2, pair_weights="delta_ndcg")
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_bad_given_pairs_are_named():
    s, off, pairs, _ = _inputs(1)
    y = np.zeros(len(s))
    with pytest.raises(InputError, match=r"ranknet: pairs must be a flat array .*\(\d+ entries for these offsets\); "
                                         r"got shape \(3,\)"):
        grad_hess("ranknet", s, y, off, pairs=np.ones(3))
    bad = pairs.copy()
    bad[5] = -1.0
    with pytest.raises(InputError, match="ranknet: pairs .* must be finite and non-negative"):
        grad_hess("ranknet", s, y, off, pairs=bad)
    bad[5] = np.nan
    with pytest.raises(InputError, match="must be finite and non-negative"):
        grad_hess("ranknet", s, y, off, pairs=bad)
    with pytest.raises(InputError, match="op_pairwise takes no given pair weights"):
        grad_hess("op_pairwise", s, np.abs(y), off, pairs=pairs)
    with pytest.raises(InputError, match="lambdaloss takes no given pair weights"):
        grad_hess("lambdaloss", s, y, off, pairs=pairs, weighting="ndcg1")
