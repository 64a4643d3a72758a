"""Propensity estimators on logs simulated from a PBM with known propensities."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.clicks import (ClickLog, harvest_propensities, propensities_randpair, propensities_randtop,
                             rank_table, regression_em)
from rankwise.errors import InputError

THETA = 1.0 / np.arange(1, 7) ** 0.8  # six ranks


def pbm_log(n_sessions, *, shuffle, rel, n_queries=30, seed=0, swap=False):
    """Sessions of 6 documents per query; PBM clicks with THETA and per-doc relevance ``rel[q, d]``."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, n_queries, n_sessions)
    R = len(THETA)
    order = np.tile(np.arange(R), (n_sessions, 1))
    pair_rank = np.zeros(n_sessions, dtype=np.int64)
    if shuffle == "all":
        order = np.argsort(rng.random((n_sessions, R)), axis=1)
    elif shuffle == "rankers":  # three fixed rankings per query, one chosen per session
        perms = np.array([[np.arange(R), rng.permutation(R), rng.permutation(R)] for _ in range(n_queries)])
        order = perms[q, rng.integers(0, 3, n_sessions)]
    if swap:
        pair_rank = rng.integers(2, R + 1, n_sessions)
        flip = rng.random(n_sessions) < 0.5
        s = np.flatnonzero(flip)
        k = pair_rank[s] - 1
        a = order[s, 0].copy()
        order[s, 0] = order[s, k]
        order[s, k] = a
    r = rel[q[:, None], order]
    clicks = (rng.random((n_sessions, R)) < THETA * r).astype(np.uint8)
    off = np.arange(0, n_sessions * R + 1, R)
    return ClickLog(off, q, np.array([f"q{x}" for x in range(n_queries)]), order.reshape(-1),
                    np.array([f"d{d}" for d in range(R)]), clicks.reshape(-1), None, {"pair_rank": pair_rank})


@pytest.fixture(scope="module")
def rel():
    return np.random.default_rng(1).uniform(0.05, 0.95, (30, 6))


def test_randtop_recovers_relative_propensities(rel):
    log = pbm_log(40000, shuffle="all", rel=rel)
    est = propensities_randtop(log)
    np.testing.assert_allclose(est, THETA / THETA[0], rtol=0.06)
    assert propensities_randtop(log, n=3).shape == (3,)


def test_randpair_recovers_relative_propensities(rel):
    log = pbm_log(60000, shuffle=None, rel=rel, swap=True)
    est = propensities_randpair(log)
    np.testing.assert_allclose(est, THETA / THETA[0], rtol=0.08)


def test_harvesting_recovers_relative_propensities(rel):
    log = pbm_log(60000, shuffle="rankers", rel=rel)
    res = harvest_propensities(log)
    np.testing.assert_allclose(res.propensity, THETA / THETA[0], rtol=0.08)
    assert len(res.pairs) == len(res.set_sizes) > 0


def test_harvesting_needs_several_rankings(rel):
    log = pbm_log(500, shuffle=None, rel=rel)
    with pytest.raises(InputError, match="nothing to harvest"):
        harvest_propensities(log)


def test_regression_em_well_specified_relevance_is_recovered():
    """Relevance is an exact function of the features; the logged ranking is fixed per query and
    correlated with relevance (the confounded setting regression-EM is for)."""
    rng = np.random.default_rng(0)
    nq, R = 400, len(THETA)
    X = rng.normal(size=(nq, 8, 3))
    gamma = 1 / (1 + np.exp(-(2 * X[..., 0] - X[..., 1])))
    score = X[..., 0] + rng.normal(scale=1.0, size=(nq, 8))
    top = np.argsort(-score, axis=1)[:, :R]
    Xs = np.take_along_axis(X, top[..., None], 1).reshape(-1, 3)
    g = np.take_along_axis(gamma, top, 1).reshape(-1)
    rank = np.tile(np.arange(1, R + 1), nq)
    n = np.full(len(rank), 300.0)
    clicks = rng.binomial(300, THETA[rank - 1] * g).astype(float)
    res = regression_em(Xs, rank, clicks, n, n_iter=40, n_estimators=40)
    np.testing.assert_allclose(res.propensity, THETA / THETA[0], rtol=0.1)
    assert res.n_iter >= 1 and len(res.loglik) == res.n_iter
    # the log-likelihood of the fitted model is better than that of the starting point
    assert res.loglik[-1] >= res.loglik[0] - 1e-9


def test_rank_table_aggregates(rel):
    log = pbm_log(300, shuffle="all", rel=rel)
    pair, rank, clk, imp = rank_table(log)
    assert imp.sum() == len(log.doc) and clk.sum() == log.clicked.sum()
    assert rank.min() == 1 and rank.max() == 6


def test_errors(rel):
    log = pbm_log(100, shuffle=None, rel=rel)
    with pytest.raises(InputError, match="n must be"):
        propensities_randtop(log, n=11)
    with pytest.raises(InputError, match="session_data has no"):
        propensities_randpair(log, pair_rank="nope")
    with pytest.raises(InputError, match="impressions"):
        regression_em(np.zeros((2, 1)), [1, 2], [3, 0], [1, 1])
