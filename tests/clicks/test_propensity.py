"""Propensity estimators on logs simulated from a PBM with known propensities."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.clicks import ClickLog, InterventionHarvesting, RandPair, RandTop, RegressionEM
from rankwise.data import ClickCounts, RankingDataset
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


def as_log(X, rank, clicks, impressions, query=None):
    """Aggregated rows (one document per row, rows grouped by query) as the ClickCounts and feature data set
    that RegressionEM.fit takes: document i is row i of the data set."""
    m = len(rank)
    query = np.zeros(m, dtype=np.int64) if query is None else np.asarray(query)
    uq, first, code = np.unique(query, return_index=True, return_inverse=True)
    order = np.argsort(first)  # queries in their order in the rows
    rename = np.empty(len(uq), dtype=np.int64)
    rename[order] = np.arange(len(uq))
    code = rename[code]
    assert np.all(np.diff(code) >= 0), "rows must be grouped by query"
    sizes = np.bincount(code)
    feats = RankingDataset(np.asarray(X, dtype=np.float64), np.zeros(m), np.r_[0, np.cumsum(sizes)],
                           query_ids=uq[order])
    sessions = np.array([np.max(np.asarray(impressions)[code == j]) for j in range(len(uq))])
    counts = ClickCounts(uq[order], sessions, code, np.arange(m), np.arange(m), rank, clicks, impressions)
    return counts, feats


def regression_em(X, rank, clicks, n, *, query=None, **params):
    """RegressionEM fitted on aggregated rows (through the public fit)."""
    counts, feats = as_log(X, rank, clicks, n, query)
    return RegressionEM(**params).fit(counts, features=feats)


@pytest.fixture(scope="module")
def rel():
    return np.random.default_rng(1).uniform(0.05, 0.95, (30, 6))


def test_randtop_recovers_relative_propensities(rel):
    log = pbm_log(40000, shuffle="all", rel=rel)
    est = RandTop().fit(log).propensity_
    np.testing.assert_allclose(est, THETA / THETA[0], rtol=0.06)
    assert RandTop(n=3).fit(log).propensity_.shape == (3,)


def test_randpair_recovers_relative_propensities(rel):
    log = pbm_log(60000, shuffle=None, rel=rel, swap=True)
    est = RandPair().fit(log).propensity_
    np.testing.assert_allclose(est, THETA / THETA[0], rtol=0.08)


def test_harvesting_recovers_relative_propensities(rel):
    log = pbm_log(60000, shuffle="rankers", rel=rel)
    res = InterventionHarvesting().fit(log)
    np.testing.assert_allclose(res.propensity_, THETA / THETA[0], rtol=0.08)
    assert len(res.pairs_) == len(res.set_sizes_) > 0


def test_harvesting_needs_several_rankings(rel):
    log = pbm_log(500, shuffle=None, rel=rel)
    with pytest.raises(InputError, match="nothing to harvest"):
        InterventionHarvesting().fit(log)


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
    res = regression_em(Xs, rank, clicks, n, query=np.repeat(np.arange(nq), R), max_iter=40, n_estimators=40)
    np.testing.assert_allclose(res.propensity_, THETA / THETA[0], rtol=0.1)
    assert res.n_iter_ >= 1 and len(res.loglik_) == res.n_iter_
    # the log-likelihood of the fitted model is better than that of the starting point
    assert res.loglik_[-1] >= res.loglik_[0] - 1e-9


def test_rank_table_aggregates(rel):
    from rankwise.clicks import rank_table

    log = pbm_log(300, shuffle="all", rel=rel)
    with pytest.warns(DeprecationWarning, match=r"log\.counts\(\)"):
        pair, rank, clk, imp = rank_table(log)
    assert imp.sum() == len(log.doc) and clk.sum() == log.clicked.sum()
    assert rank.min() == 1 and rank.max() == 6
    # by brute force: every (pair, rank) row counts its sessions' impressions and clicks; the pair codes are the log's
    for p, r, c, n in zip(pair, rank, clk, imp):
        at = (log.pair == p) & (log.ranks == r)
        assert n == at.sum() and c == log.clicked[at].sum()
    assert len(set(zip(pair.tolist(), rank.tolist()))) == len(pair)
    # an aggregated log is its own table
    agg = log.counts()
    with pytest.warns(DeprecationWarning):
        table = rank_table(agg)
    for a, b in zip(table, (pair, rank, clk, imp)):
        np.testing.assert_array_equal(a, b)


def test_errors(rel):
    log = pbm_log(100, shuffle=None, rel=rel)
    from rankwise.clicks import propensity as old

    with pytest.raises(InputError, match="n must be"):
        RandTop(n=11).fit(log)
    with pytest.raises(InputError, match="session_data has no"):
        RandPair(pair_rank="nope").fit(log)
    with pytest.raises(InputError, match="impressions"), pytest.warns(DeprecationWarning):
        old.regression_em(np.zeros((2, 1)), [1, 2], [3, 0], [1, 1])


def _tiny_confounded(nq=40, per=4, sessions=60, seed=1):
    """A fixed ranking per query (ranks 1..per), relevance a function of the features, PBM clicks."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(nq * per, 3))
    gamma = 1 / (1 + np.exp(-2 * X[:, 0]))
    rank = np.tile(np.arange(1, per + 1), nq)
    n = np.full(nq * per, float(sessions))
    clicks = rng.binomial(sessions, THETA[rank - 1] * gamma).astype(float)
    query = np.repeat(np.arange(nq), per)
    return X, rank, clicks, n, query


def _m_step_model():
    """The documented default relevance regression of RegressionEM (5 trees)."""
    from rankwise.models import GBDTRanker

    return GBDTRanker("sigmoid_ce", n_estimators=5, learning_rate=0.1, num_leaves=15, min_child_samples=20,
                      random_state=0, loss_every=None, verbose=False)


@pytest.mark.parametrize("cross_fit", [0, 4])
def test_regression_em_first_step_matches_enumeration(cross_fit):
    """θ after one EM iteration = the enumerated posterior expectation, with the starting relevance
    refitted here (out of fold with ``cross_fit``: the model of a row never saw its query)."""
    from reference.clicks_reference import regression_em_theta_step
    from rankwise.clicks.propensity import _query_folds

    X, rank, clicks, n, query = _tiny_confounded()
    th0 = np.array([0.9, 0.6, 0.5, 0.4, 0.3, 0.2])[:rank.max()]
    res = regression_em(X, rank, clicks, n, max_iter=1, n_estimators=5, theta_init=th0, cross_fit=cross_fit,
                        query=query)
    target = np.clip(clicks / n / th0[rank - 1], 0, 1)
    folds = _query_folds(query, len(rank), cross_fit, 0) if cross_fit else np.zeros(len(rank), dtype=int)
    gamma0 = np.empty(len(rank))
    for j in np.unique(folds):
        fit = folds != j if cross_fit else np.ones(len(rank), dtype=bool)
        if cross_fit:
            assert not np.intersect1d(query[fit], query[folds == j]).size  # a row's own query is never fitted
        model = _m_step_model().fit(X[fit], target[fit], qid=np.zeros(int(fit.sum())), sample_weight=n[fit])
        gamma0[folds == j] = 1 / (1 + np.exp(-model.predict(X[folds == j])))
    expected = regression_em_theta_step(th0, np.clip(gamma0, 1e-6, 1 - 1e-6), rank, clicks, n)
    np.testing.assert_allclose(res.theta_, expected, rtol=1e-9)


def test_query_folds_keep_queries_whole():
    from rankwise.clicks import propensity as old
    from rankwise.clicks.propensity import _query_folds

    query = np.repeat(np.array(["a", "b", "c", "d", "e", "f", "g"]), [3, 1, 4, 2, 5, 1, 2])
    folds = _query_folds(query, len(query), 3, 0)
    for q in np.unique(query):
        assert len(set(folds[query == q])) == 1
    assert set(folds) == {0, 1, 2}
    with pytest.raises(InputError, match="cross_fit must be"):
        _query_folds(query, len(query), 8, 0)
    with pytest.raises(InputError, match="cross_fit needs the query"), pytest.warns(DeprecationWarning):
        old.regression_em(np.zeros((4, 1)), [1, 2, 1, 2], [0, 0, 0, 0], [1, 1, 1, 1], cross_fit=2)


def test_cross_fit_cannot_learn_a_query_from_itself():
    """One query (with a feature no other query has) is clicked far more: the regression fitted on all
    rows learns it back, the cross-fitted one cannot (its model never saw that query)."""
    rng = np.random.default_rng(0)
    nq, per = 20, 6
    query = np.repeat(np.arange(nq), per)
    X = np.column_stack([query == 0, rng.normal(size=nq * per)]).astype(float)
    rank = np.tile(np.arange(1, per + 1), nq)
    n = np.full(nq * per, 100.0)
    clicks = np.where(query == 0, 80.0, 5.0) * THETA[rank - 1]
    clicks = np.round(clicks)
    kw = dict(max_iter=3, n_estimators=20, min_child_samples=2)
    own = regression_em(X, rank, clicks, n, query=query, **kw).relevance_[query == 0].mean()
    cf = regression_em(X, rank, clicks, n, cross_fit=5, query=query, **kw)
    assert own > 0.5 and cf.relevance_[query == 0].mean() < 0.25
    assert isinstance(cf.relevance_model_, list) and len(cf.relevance_model_) == 5


def test_warm_start_keeps_boosting_one_model():
    X, rank, clicks, n, query = _tiny_confounded()
    res = regression_em(X, rank, clicks, n, query=query, max_iter=4, n_estimators=3, warm_start=True, tol=0.0)
    assert res.n_iter_ == 4 and res.relevance_model_.num_trees() == 3 * 5  # the start + 4 M-steps
    np.testing.assert_allclose(np.clip(res.relevance_model_.predict(X), 1e-6, 1 - 1e-6), res.relevance_, rtol=1e-12)


# ------------------------------------------------------------------ m_step="observed" (ECME), n_estimators="auto"
def test_pbm_gradient_and_fisher_information_by_enumeration():
    """The gradient of −ℓ matches finite differences; at the true relevance its expectation over
    c ~ Binomial(n, tγ) is 0 and its variance is the Fisher information used as the Hessian."""
    from scipy.stats import binom

    from rankwise.clicks.propensity import _pbm_nll, _pbm_nll_grad_hess

    F = np.array([-2.0, -0.3, 0.0, 0.7, 2.5])
    t = np.array([1.0, 0.5, 0.2, 0.05, 0.9])
    c = np.array([3.0, 0.0, 5.0, 1.0, 20.0])
    n = np.array([10.0, 7.0, 30.0, 50.0, 25.0])
    grad, hess = _pbm_nll_grad_hess(F, t, c, n)
    h = 1e-6
    for i in range(len(F)):
        e = np.zeros(len(F))
        e[i] = h
        fd = (_pbm_nll(F + e, t, c, n) - _pbm_nll(F - e, t, c, n)) / (2 * h)
        np.testing.assert_allclose(grad[i], fd, rtol=1e-6, atol=1e-8)
    for i in range(len(F)):
        cs = np.arange(int(n[i]) + 1, dtype=float)
        pmf = binom.pmf(cs, int(n[i]), t[i] / (1 + np.exp(-F[i])))
        g_all, _ = _pbm_nll_grad_hess(np.full(len(cs), F[i]), t[i], cs, n[i])
        assert abs(np.sum(pmf * g_all)) < 1e-9
        np.testing.assert_allclose(np.sum(pmf * g_all ** 2), hess[i], rtol=1e-9)
    assert np.all(hess > 0)


def test_theta_given_gamma_is_the_per_rank_maximiser():
    from scipy.optimize import minimize_scalar

    from rankwise.clicks.propensity import _theta_given_gamma

    rng = np.random.default_rng(3)
    k = np.repeat(np.arange(4), 25)
    gamma = rng.uniform(0.05, 0.95, len(k))
    n = rng.integers(5, 200, len(k)).astype(float)
    c = rng.binomial(n.astype(int), np.array([0.9, 0.3, 0.05, 0.5])[k] * gamma).astype(float)
    c[k == 3] = n[k == 3]  # every impression clicked at rank 4: the likelihood still rises at θ = 1
    th = _theta_given_gamma(k, c, n, gamma, 4)
    for r in range(3):
        at = k == r
        res = minimize_scalar(lambda x: -np.sum(c[at] * np.log(x * gamma[at]) + (n[at] - c[at]) * np.log(1 - x * gamma[at])),
                              bounds=(1e-9, 1.0), method="bounded", options={"xatol": 1e-12})
        np.testing.assert_allclose(th[r], res.x, rtol=1e-6)
    assert th[3] == 1.0


def _confounded_small_theta(seed=0, nq=300, R=8, sessions=2000):
    """Fixed rankings (a noisy score of the feature that drives relevance), θ_k = 1/k² (deep ranks seldom
    examined), relevance an exact function of the features."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(nq, 12, 3))
    gamma = 1 / (1 + np.exp(-(1.5 * X[..., 0] - X[..., 1] - 0.5)))
    top = np.argsort(-(X[..., 0] + rng.normal(size=(nq, 12))), axis=1)[:, :R]
    Xs = np.take_along_axis(X, top[..., None], 1).reshape(-1, 3)
    g = np.take_along_axis(gamma, top, 1).reshape(-1)
    rank = np.tile(np.arange(1, R + 1), nq)
    theta = 1.0 / np.arange(1, R + 1) ** 2
    n = np.full(len(rank), float(sessions))
    clicks = rng.binomial(sessions, theta[rank - 1] * g).astype(float)
    return Xs, rank, clicks, n, np.repeat(np.arange(nq), R), theta


def test_observed_m_step_recovers_theta_where_em_is_slow():
    """Where θ is small EM moves each deep-rank relevance by about θ of the way per iteration; ECME on
    the observed likelihood gets there in a few rounds (same trees, same number of iterations)."""
    X, rank, clicks, n, query, theta = _confounded_small_theta()
    kw = dict(max_iter=6, n_estimators=60, num_leaves=4, query=query)
    ecme = regression_em(X, rank, clicks, n, m_step="observed", **kw)
    em = regression_em(X, rank, clicks, n, **kw)
    err_ecme = np.abs(ecme.propensity_ / (theta / theta[0]) - 1).max()
    err_em = np.abs(em.propensity_ / (theta / theta[0]) - 1).max()
    assert err_ecme < 0.1 < err_em
    assert ecme.n_iter_ <= 6 and len(ecme.loglik_) == ecme.n_iter_
    assert ecme.loglik_[-1] >= ecme.loglik_[0] - 1e-9
    # the model is the relevance: its prediction is the returned γ
    np.testing.assert_allclose(np.clip(ecme.relevance_model_.predict(X), 1e-6, 1 - 1e-6), ecme.relevance_,
                               rtol=1e-12)


def test_auto_trees_are_chosen_on_held_out_queries():
    from rankwise.clicks.propensity import _held_out_rows

    X, rank, clicks, n, query, theta = _confounded_small_theta(nq=150)
    held = _held_out_rows(query, len(query), 0.2, 0)
    for q in np.unique(query):  # a query is on one side only
        assert len(set(held[query == q])) == 1
    assert held[::8].sum() == 30
    for m_step in ("observed", "expected"):
        res = regression_em(X, rank, clicks, n, max_iter=4, n_estimators="auto", num_leaves=4, query=query,
                            m_step=m_step)
        assert 0 < res.relevance_model_.num_trees() < 5000
        if m_step == "observed":  # (EM is still far after 4 iterations here: the test above)
            np.testing.assert_allclose(res.propensity_, theta / theta[0], rtol=0.05)
    # the held-out loss decides: waiting longer for an improvement keeps at least as many trees (the same trees)
    kw = dict(max_iter=1, n_estimators="auto", query=query, m_step="observed", learning_rate=0.5)
    short = regression_em(X, rank, clicks, n, early_stopping_rounds=1, **kw).relevance_model_
    long = regression_em(X, rank, clicks, n, early_stopping_rounds=50, **kw).relevance_model_
    assert 0 < short.num_trees() <= long.num_trees()


def test_observed_and_auto_options_are_checked():
    from rankwise.clicks import propensity as old

    X, rank, clicks, n, query = _tiny_confounded()
    with pytest.raises(InputError, match="m_step must be"):
        regression_em(X, rank, clicks, n, query=query, m_step="exact")
    with pytest.raises(InputError, match="n_estimators must be"):
        regression_em(X, rank, clicks, n, query=query, n_estimators="many")
    with pytest.raises(InputError, match="takes no group, cross_fit or warm_start"):
        regression_em(X, rank, clicks, n, m_step="observed", cross_fit=2, query=query)
    with pytest.raises(InputError, match="use one or the other"):
        regression_em(X, rank, clicks, n, n_estimators="auto", warm_start=True, query=query)
    with pytest.raises(InputError, match="needs the query of every row"), pytest.warns(DeprecationWarning):
        old.regression_em(X, rank, clicks, n, n_estimators="auto")
    with pytest.raises(InputError, match="validation_fraction"):
        regression_em(X, rank, clicks, n, n_estimators="auto", query=query, validation_fraction=1.0)
