"""Unbiased LambdaMART as a GBDTRanker on a click data set: a naive reference of Hu et al. (WWW 2019), the
shared estimator contract (clone, parameters, save/load, grid search over sessions, early stopping, n_jobs)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.base import clone

from rankwise.clicks import ClickLog, UnbiasedLambdaMART, session_dataset, simulate_clicks_protocol
from rankwise.data import RankingDataset, make_synthetic
from rankwise.errors import InputError


def _naive_round(s, y, off, tp, tm, sigma, normalise):
    """Hu et al.'s gradient, Hessian and bias sums by a loop over every (clicked a, unclicked b) pair of every
    session (ranks a, b: positions in the session; ``tp``, ``tm``: the biases per rank); the current
    ranking sorts the session's scores descending, ties in rank order; |ΔDCG| weights, or |ΔNDCG|
    (``normalise``)."""
    n = len(s)
    grad, hess, num_p, num_m = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    for u in range(len(off) - 1):
        a0, b0 = off[u], off[u + 1]
        ss, yy = s[a0:b0], y[a0:b0]
        cur = np.empty(b0 - a0, dtype=int)
        cur[np.argsort(-ss, kind="stable")] = np.arange(b0 - a0)
        ideal = sum(1 / math.log2(2 + k) for k in range(int(yy.sum())))
        for a in range(b0 - a0):
            for b in range(b0 - a0):
                if not (yy[a] == 1 and yy[b] == 0):
                    continue
                d = sigma * (ss[a] - ss[b])
                rho = 1 / (1 + math.exp(d))
                delta = abs(1 / math.log2(2 + cur[a]) - 1 / math.log2(2 + cur[b])) / (ideal if normalise else 1)
                w = delta / (tp[a] * tm[b])
                grad[a0 + a] -= w * sigma * rho
                grad[a0 + b] += w * sigma * rho
                hess[a0 + a] += w * sigma ** 2 * rho * (1 - rho)
                hess[a0 + b] += w * sigma ** 2 * rho * (1 - rho)
                loss = math.log1p(math.exp(-d))
                num_p[a0 + a] += loss / tm[b]
                num_m[a0 + b] += loss / tp[a]
    return grad, np.maximum(hess, 1e-9), num_p, num_m


def _naive_fit(data, *, n_estimators, sigma=1.0, p=0.0, normalise=False, **tree):
    """The whole algorithm with the naive round as a LightGBM objective: the biases re-estimated after every
    round from the per-rank loss sums, each divided by the sessions showing the rank, ^(1/(p+1))."""
    import lightgbm as lgb

    off = np.asarray(data.query_offsets)
    y = np.asarray(data.labels)
    pos = np.arange(len(y)) - np.repeat(off[:-1], np.diff(off))
    R = int(np.diff(off).max())
    shown = np.bincount(pos, minlength=R)
    t = {"p": np.ones(R), "m": np.ones(R)}

    def objective(preds, _):
        g, h, num_p, num_m = _naive_round(np.asarray(preds, float), y, off, t["p"], t["m"], sigma, normalise)
        sp = np.bincount(pos, weights=num_p, minlength=R) / shown
        sm = np.bincount(pos, weights=num_m, minlength=R) / shown
        t["p"] = np.where(sp > 0, (sp / sp[0]) ** (1 / (p + 1)), t["p"])
        t["m"] = np.where(sm > 0, (sm / sm[0]) ** (1 / (p + 1)), t["m"])
        return g, h

    params = {"objective": objective, "learning_rate": tree["learning_rate"], "num_leaves": tree["num_leaves"],
              "min_data_in_leaf": tree["min_child_samples"], "verbosity": -1, "seed": 0, "deterministic": True,
              "force_row_wise": True, "num_threads": 1, "feature_pre_filter": False}
    bst = lgb.train(params, lgb.Dataset(np.asarray(data.X), label=y, group=np.diff(off)), num_boost_round=n_estimators)
    return bst, t["p"], t["m"]


def _small_log(seed=0, n_sessions=300):
    """Pages of 6 to 9 of a query's 12 documents in random order, clicks from a position-biased model; NaN
    and scientific-notation features."""
    rng = np.random.default_rng(seed)
    n_q, n_d = 6, 12
    X = rng.normal(size=(n_q * n_d, 5)) * 10.0 ** rng.integers(-3, 4, size=5)
    X[rng.random(X.shape) < 0.05] = np.nan
    rel = 1 / (1 + np.exp(-np.nan_to_num(X[:, 0]) / 10.0 ** np.floor(np.log10(np.nanstd(X[:, 0])))))
    feats = RankingDataset.from_arrays(X.astype(np.float32), rel, np.repeat(np.arange(n_q), n_d),
                                       doc_ids=[f"d{i % n_d}" for i in range(n_q * n_d)])
    qs, docs, clicks = [], [], []
    for _ in range(n_sessions):
        q = int(rng.integers(n_q))
        shown = rng.permutation(n_d)[: int(rng.integers(6, 10))]
        theta = 1 / np.arange(1, len(shown) + 1)
        qs.append(q)
        docs.append([f"d{d}" for d in shown])
        clicks.append((rng.random(len(shown)) < theta * rel[q * n_d + shown]).astype(int))
    return ClickLog.from_arrays(qs, docs, clicks), feats


@pytest.mark.parametrize("pair_weights, p", [("delta_dcg", 0.0), ("delta_ndcg", 0.5)])
def test_fit_equals_a_naive_reference_of_hu_et_al(pair_weights, p):
    log, feats = _small_log()
    data = session_dataset(log, feats)
    tree = {"learning_rate": 0.1, "num_leaves": 7, "min_child_samples": 5}
    m = UnbiasedLambdaMART(n_estimators=8, pair_weights=pair_weights, p=p, n_jobs=1, **tree).fit(data)
    bst, tp, tm = _naive_fit(data, n_estimators=8, p=p, normalise=pair_weights == "delta_ndcg", **tree)
    assert m.t_plus_[0] == 1 and m.t_minus_[0] == 1 and len(m.t_plus_) == 9
    assert not np.allclose(m.t_plus_, 1)  # the biases moved
    np.testing.assert_allclose(m.t_plus_, tp, rtol=1e-9)
    np.testing.assert_allclose(m.t_minus_, tm, rtol=1e-9)
    np.testing.assert_allclose(m.predict(data.X), bst.predict(np.asarray(data.X), raw_score=True), rtol=1e-9,
                               atol=1e-12)


def test_identical_sessions_merged_equal_the_naive_reference_on_every_session():
    """A log whose sessions repeat (each 1 to 4 times, interleaved) trains on its distinct sessions weighted by
    their counts: the same biases and scores as the naive reference on every session (LightGBM's counts only
    differ, which min_child_samples=1 takes out of play). To 1e-7: a weighted sum and a sum of repeated terms
    round differently, and six rounds carry that on."""
    log, feats = _small_log(seed=4, n_sessions=120)
    rng = np.random.default_rng(0)
    log = log.subset(rng.permutation(np.repeat(np.arange(120), rng.integers(1, 5, 120))))
    data = session_dataset(log, feats)
    tree = {"learning_rate": 0.1, "num_leaves": 7, "min_child_samples": 1}
    m = UnbiasedLambdaMART(n_estimators=6, n_jobs=1, **tree).fit(data)
    bst, tp, tm = _naive_fit(data, n_estimators=6, **tree)
    np.testing.assert_allclose(m.t_plus_, tp, rtol=1e-7)
    np.testing.assert_allclose(m.t_minus_, tm, rtol=1e-7)
    np.testing.assert_allclose(m.predict(data.X), bst.predict(np.asarray(data.X), raw_score=True), rtol=1e-7,
                               atol=1e-8)


def test_round_terms_against_the_naive_loop_with_ties_and_long_sessions():
    """One round with random per-rank biases: sessions of 2 to 31 rows, tied scores (all tied at the start)."""
    from rankwise.clicks.joint import _ideal_dcg_weights, _pair_blocks, _ulm_terms

    rng = np.random.default_rng(1)
    sizes = np.array([20, 3, 31, 2, 9])
    off = np.concatenate([[0], np.cumsum(sizes)])
    pos = np.arange(off[-1]) - np.repeat(off[:-1], sizes)
    y = (rng.random(off[-1]) < 0.3).astype(float)
    tp, tm = rng.uniform(0.3, 1, 31), rng.uniform(0.3, 1, 31)
    own_page = np.arange(len(sizes))  # each session its own page
    counts = _pair_blocks(y, off, own_page, off, np.ones(len(sizes)))
    for scores in (rng.normal(size=off[-1]), np.round(rng.normal(size=off[-1]) * 2) / 2, np.zeros(off[-1])):
        for normalise in (False, True):
            grad_counts = _pair_blocks(y, off, own_page, off, _ideal_dcg_weights(y, off)) if normalise else counts
            (g, h), num_p, num_m = _ulm_terms(scores, off, pos, counts, grad_counts, tp, tm, 1.0)
            want = _naive_round(scores, y, off, tp, tm, 1.0, normalise)
            for got, exp in zip((g, h, num_p, num_m), want):
                np.testing.assert_allclose(got, exp, rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module")
def sim():
    data = make_synthetic(40, n_features=6, list_length=(10, 14), seed=2)
    return simulate_clicks_protocol(data, n_sessions=3000, eta=1.0, top_k=8, production_fraction=0.1,
                                    random_state=0)


@pytest.fixture(scope="module")
def sessions(sim):
    return session_dataset(sim.log, sim.features)


def test_array_form_equals_the_data_set_form(sessions):
    m1 = UnbiasedLambdaMART(n_estimators=4, num_leaves=7, n_jobs=1).fit(sessions)
    m2 = UnbiasedLambdaMART(n_estimators=4, num_leaves=7, n_jobs=1).fit(sessions.X, sessions.labels, qid=sessions.qid)
    np.testing.assert_array_equal(m1.predict(sessions.X), m2.predict(sessions.X, qid=sessions.qid))
    np.testing.assert_array_equal(m1.t_plus_, m2.t_plus_)


def test_threads_do_not_change_the_model(sessions):
    m1 = UnbiasedLambdaMART(n_estimators=4, num_leaves=7, n_jobs=1).fit(sessions)
    m2 = UnbiasedLambdaMART(n_estimators=4, num_leaves=7, n_jobs=2).fit(sessions)
    np.testing.assert_allclose(m1.predict(sessions.X), m2.predict(sessions.X), rtol=1e-12)
    np.testing.assert_allclose(m1.t_minus_, m2.t_minus_, rtol=1e-12)


def test_clone_params_and_save_load(sessions, tmp_path):
    from rankwise.models import load

    m = UnbiasedLambdaMART(n_estimators=3, num_leaves=5, sigma=0.5, p=1.0, pair_weights="delta_ndcg")
    c = clone(m)
    assert c.get_params() == m.get_params() and c is not m
    assert c.set_params(sigma=2.0).sigma == 2.0
    m.fit(sessions)
    m.save(tmp_path / "ulm.rwm")
    back = load(tmp_path / "ulm.rwm")
    assert type(back) is UnbiasedLambdaMART and back.get_params() == m.get_params()
    np.testing.assert_array_equal(back.predict(sessions.X), m.predict(sessions.X))
    np.testing.assert_array_equal(back.t_plus_, m.t_plus_)
    np.testing.assert_array_equal(back.t_minus_, m.t_minus_)


def test_load_in_a_fresh_interpreter_that_never_imported_clicks(sessions, tmp_path):
    import subprocess
    import sys

    path = tmp_path / "ulm.rwm"
    UnbiasedLambdaMART(n_estimators=2, num_leaves=5).fit(sessions).save(path)
    code = ("import sys, rankwise.models as m; x = m.load(sys.argv[1]); "
            "print(type(x).__name__, len(x.t_plus_), 'rankwise.clicks' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["UnbiasedLambdaMART", "8", "True"]


def test_grid_search_with_group_kfold_over_sessions(sessions):
    import sklearn
    from sklearn.model_selection import GridSearchCV, GroupKFold

    with sklearn.config_context(enable_metadata_routing=True):
        est = UnbiasedLambdaMART(n_estimators=3, num_leaves=5, n_jobs=1).set_fit_request(qid=True)
        est = est.set_score_request(qid=True)
        search = GridSearchCV(est, {"sigma": [0.5, 1.0]}, cv=GroupKFold(2))
        qid = sessions.qid
        search.fit(np.asarray(sessions.X), sessions.labels, qid=qid, groups=qid)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert search.best_params_["sigma"] in (0.5, 1.0)


def test_early_stopping_on_an_eval_set(sim, sessions):
    val = sim.features  # relevance labels of every document: the ranker's actual target
    m = UnbiasedLambdaMART(n_estimators=60, num_leaves=7, early_stopping_rounds=3, n_jobs=1).fit(
        sessions, eval_set=val)
    assert m.best_iteration_ < m.n_estimators_ <= 60
    assert len(m.history_) == m.n_estimators_ and len(m.history_["ndcg@10"]) == m.n_estimators_
    assert np.isfinite(m.predict(val.X)).all()


def test_learns_decreasing_bias(sim, sessions):
    m = UnbiasedLambdaMART(n_estimators=10, num_leaves=7).fit(sessions)
    assert m.t_plus_[0] == 1.0 and m.t_minus_[0] == 1.0
    assert m.t_plus_[1] < 0.9 and m.t_plus_[-1] < m.t_plus_[1]
    assert np.isfinite(m.predict(sim.features.X)).all()


def test_clicks_must_be_binary_and_weights_per_session(sessions):
    with pytest.raises(InputError, match=r"UnbiasedLambdaMART: y must be clicks \(0 or 1.*got 2 in row 0"):
        UnbiasedLambdaMART(n_estimators=2).fit(np.ones((4, 2)), [2, 0, 1, 0], qid=[0, 0, 1, 1])
    with pytest.raises(InputError, match="sample_weight is one weight per session"):
        UnbiasedLambdaMART(n_estimators=2).fit(np.ones((4, 2)), [1, 0, 1, 0], qid=[0, 0, 1, 1],
                                               sample_weight=[1, 2, 1, 1])
    with pytest.raises(InputError, match="UnbiasedLambdaMART: sigma must be"):
        UnbiasedLambdaMART(sigma=0).fit(sessions)
    with pytest.raises(InputError, match="UnbiasedLambdaMART: pair_weights must be"):
        UnbiasedLambdaMART(pair_weights="ndcg").fit(sessions)


def test_session_weights_multiply_the_sessions(sessions):
    """A session of weight 2 counts as the session twice in the bias estimates (sums over sessions); one round,
    whose biases come from the scores at the start alone (the trees of weighted and repeated rows may differ)."""
    off = sessions.query_offsets
    k = 200
    X = np.asarray(sessions.X)
    rows = np.arange(off[k])
    twice = RankingDataset.from_arrays(np.vstack([X, X[rows]]),
                                       np.concatenate([sessions.labels, sessions.labels[rows]]),
                                       np.concatenate([sessions.qid, sessions.qid[rows] + 10 ** 6]))
    w = np.ones(sessions.n_queries)
    w[:k] = 2
    kw = {"n_estimators": 1, "num_leaves": 5, "n_jobs": 1}
    a = UnbiasedLambdaMART(**kw).fit(sessions, sample_weight=np.repeat(w, np.diff(off)))
    b = UnbiasedLambdaMART(**kw).fit(twice)
    c = UnbiasedLambdaMART(**kw).fit(sessions)
    np.testing.assert_allclose(a.t_plus_, b.t_plus_, rtol=1e-10)
    np.testing.assert_allclose(a.t_minus_, b.t_minus_, rtol=1e-10)
    assert not np.allclose(a.t_plus_, c.t_plus_, rtol=1e-6)  # the weights do change them


def test_the_former_fit_log_features_warns_and_delegates(sim, sessions):
    with pytest.warns(DeprecationWarning, match=r"fit\(log, features\) is deprecated"):
        old = UnbiasedLambdaMART(n_estimators=3, num_leaves=5, n_jobs=1).fit(sim.log, sim.features)
    new = UnbiasedLambdaMART(n_estimators=3, num_leaves=5, n_jobs=1).fit(sessions)
    np.testing.assert_array_equal(old.predict(sessions.X), new.predict(sessions.X))


@pytest.mark.parametrize("collide", [False, True])
def test_group_codes_against_brute_force(collide):
    """Sessions grouped by their rows bit for bit: repeated sessions, NaN, -0.0 against 0.0, a row moved; with
    ``collide`` the fast hash keeps 2 bits, so different sessions collide and the exact path decides."""
    from rankwise.clicks.joint import _codes_of_groups

    rng = np.random.Generator(np.random.PCG64(7))
    pool = rng.normal(size=(5, 3)).astype(np.float32)
    pool[1, 2] = np.nan
    pool[3] = -0.0
    pool[4] = 0.0
    sessions = [rng.integers(0, 5, rng.integers(1, 5)) for _ in range(60)]
    sessions += [sessions[3], sessions[3][::-1], sessions[10]]
    X = np.vstack([pool[s] for s in sessions])
    y = (rng.random(len(X)) < 0.5).astype(float)
    off = np.concatenate([[0], np.cumsum([len(s) for s in sessions])])
    for extra in ((), (y,)):
        code, first = _codes_of_groups(X, off, *extra, _mask=3 if collide else None)
        keys = [X[a:b].tobytes() + b"".join(e[a:b].tobytes() for e in extra) for a, b in zip(off[:-1], off[1:])]
        want = {}
        for i, k in enumerate(keys):
            want.setdefault(k, len(want))
        np.testing.assert_array_equal(code, [want[k] for k in keys])
        np.testing.assert_array_equal(first, [keys.index(k) for k in want])
