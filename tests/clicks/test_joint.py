"""Unbiased LambdaMART: page statistics by brute force; the biases it learns on simulated clicks (DLA: test_dla.py)."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.clicks import ClickLog, UnbiasedLambdaMART, pages, simulate_clicks_protocol
from rankwise.data import RankingDataset, make_synthetic
from rankwise.errors import NotFittedError


def test_page_counts_by_brute_force():
    docs = [["x", "y", "z"], ["x", "y", "z"], ["y", "x", "z"], ["x", "y", "z"]]
    clicks = [[1, 0, 1], [0, 1, 0], [1, 0, 0], [1, 0, 0]]
    log = ClickLog.from_arrays(["q"] * 4, docs, clicks)
    feats = RankingDataset.from_arrays(np.eye(3, dtype=np.float32), np.zeros(3), ["q"] * 3, doc_ids=["x", "y", "z"])
    p_off, X, position, c, n_sess, counts, m_off = pages(log, feats)
    assert list(p_off) == [0, 3, 6] and list(n_sess) == [3, 1]
    np.testing.assert_array_equal(position, [1, 2, 3, 1, 2, 3])
    np.testing.assert_array_equal(c, [2, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(X[3], [0, 1, 0])  # page 2 starts with y
    M = np.zeros((3, 3))
    for s in (0, 1, 3):
        for a in range(3):
            for b in range(3):
                M[a, b] += clicks[s][a] * (1 - clicks[s][b])
    np.testing.assert_array_equal(counts[m_off[0]:m_off[1]].reshape(3, 3), M)


@pytest.fixture(scope="module")
def sim():
    data = make_synthetic(80, n_features=10, list_length=(12, 20), seed=2)
    return simulate_clicks_protocol(data, n_sessions=15000, eta=1.0, top_k=8, production_fraction=0.1, random_state=0)


def test_unbiased_lambdamart_learns_decreasing_bias(sim):
    m = UnbiasedLambdaMART(n_estimators=10, num_leaves=7).fit(sim.log, sim.features)
    assert m.t_plus_[0] == 1.0 and m.t_minus_[0] == 1.0
    assert m.t_plus_[1] < 0.9 and m.t_plus_[-1] < m.t_plus_[1]
    assert np.isfinite(m.predict(sim.features.X)).all()


def test_not_fitted():
    with pytest.raises(NotFittedError):
        UnbiasedLambdaMART().predict(np.zeros((1, 2)))


def _ulm_case(sizes, scores, seed=0):
    """Unbiased LambdaMART's gradient kernel and the naive loop over the pairs of each page (the current
    ranking by score, descending, ties in page order), on pages of ``sizes`` items."""
    import math

    from rankwise.clicks.joint import _ulm_grad

    rng = np.random.default_rng(seed)
    p_off = np.concatenate([[0], np.cumsum(sizes)])
    m_off = np.concatenate([[0], np.cumsum(np.square(sizes))])
    counts = rng.integers(0, 3, m_off[-1]).astype(float)
    scores = scores(rng, p_off[-1])
    tp, tm = rng.uniform(0.3, 1, p_off[-1]), rng.uniform(0.3, 1, p_off[-1])
    out = [np.zeros(p_off[-1]) for _ in range(4)]
    _ulm_grad(scores, p_off, m_off, counts, tp, tm, 1.0, *out)
    want = [np.zeros(p_off[-1]) for _ in range(4)]
    for u, n in enumerate(sizes):
        s = scores[p_off[u]:p_off[u + 1]]
        cur = np.argsort(np.argsort(-s, kind="stable"))
        for a in range(n):
            for b in range(n):
                m = counts[m_off[u] + a * n + b]
                i, j = p_off[u] + a, p_off[u] + b
                rho = 1 / (1 + math.exp(s[a] - s[b]))
                delta = abs(1 / math.log2(2 + cur[a]) - 1 / math.log2(2 + cur[b]))
                w = m / (tp[i] * tm[j])
                want[0][i] -= w * rho * delta
                want[0][j] += w * rho * delta
                want[1][i] += w * rho * (1 - rho) * delta
                want[1][j] += w * rho * (1 - rho) * delta
                want[2][i] += m * math.log1p(math.exp(-(s[a] - s[b]))) / tm[j]
                want[3][j] += m * math.log1p(math.exp(-(s[a] - s[b]))) / tp[i]
    return out, want


def test_ulm_gradient_kernel_against_naive_loop():
    """Pages of unequal length: every item is indexed by its page offset (regression test)."""
    out, want = _ulm_case([3, 5, 2], lambda rng, n: rng.normal(size=n))
    for got, exp in zip(out, want):
        np.testing.assert_allclose(got, exp, rtol=1e-10, atol=1e-12)


def test_ulm_gradient_ranks_tied_scores_in_page_order():
    """Long pages with tied scores (all tied in LightGBM's first round): |ΔDCG| ranks ties by position on
    the page, at every page length (numba's quicksort left the ties of pages over 15 items in an
    arbitrary order)."""
    for scores in (lambda rng, n: np.round(rng.normal(size=n) * 2) / 2, lambda rng, n: np.zeros(n)):
        out, want = _ulm_case([20, 3, 31], scores, seed=1)
        for got, exp in zip(out, want):
            np.testing.assert_allclose(got, exp, rtol=1e-10, atol=1e-12)
