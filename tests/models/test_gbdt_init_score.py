"""GBDTRanker.fit(init_score=...): boosting from a per-row start, as LightGBM's init_score and XGBoost's base_margin.

The references are the libraries' own training functions given the same start on the same rows; the model's
raw predictions leave the start out (LightGBM's rule), so ``init_score + predict(X)`` is the library's score.
"""
from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pytest
import xgboost as xgb

import _resume_faults as h
from rankwise.errors import InputError
from rankwise.losses import as_objective
from rankwise.models import GBDTRanker


def _data(seed=0, n_queries=25, list_len=9, n_features=5):
    """Queries in shuffled row order (the ranker regroups them), full-precision and tiny/huge features, NaN
    features (missing values), binary labels, impressions as row weights, a start in scientific notation."""
    rng = np.random.default_rng(seed)
    n = n_queries * list_len
    X = rng.normal(size=(n, n_features)) * np.array([1.0, 1e-7, 3e5, 1.0, 1.0])[:n_features]
    X[rng.random(X.shape) < 0.05] = np.nan
    qid = rng.permutation(np.repeat(np.arange(n_queries), list_len))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X[:, 0]))).astype(np.float64)
    w = rng.integers(1, 40, size=n).astype(np.float64)
    init = rng.normal(scale=0.7, size=n) * 1.000000000000001 - 2.5e-1
    return X, y, qid, w, init


_TREES = dict(n_estimators=12, num_leaves=7, min_child_samples=5, random_state=0, n_jobs=1, verbose=False)


def _lgb_params(objective):
    return {"objective": objective, "learning_rate": 0.1, "num_leaves": 7, "max_depth": -1, "min_data_in_leaf": 5,
            "bagging_fraction": 1.0, "bagging_freq": 0, "feature_fraction": 1.0, "lambda_l2": 0.0, "seed": 0,
            "deterministic": True, "force_row_wise": True, "verbosity": -1, "metric": "None",
            "feature_pre_filter": False, "num_threads": 1}


def _grouped(X, y, qid, *more):
    order = np.argsort(qid, kind="stable")
    return (X[order], y[order], np.bincount(qid[order]), *(m[order] for m in more))


def test_lightgbm_rankwise_loss_from_init_score_equals_lgb_train_with_it():
    X, y, qid, w, init = _data()
    ours = GBDTRanker("sigmoid_ce", **_TREES).fit(X, y, qid=qid, sample_weight=w, init_score=init)
    Xo, yo, sizes, wo, io = _grouped(X, y, qid, w, init)
    ref = lgb.train(_lgb_params(as_objective("sigmoid_ce", "lightgbm")),
                    lgb.Dataset(Xo, yo, group=sizes, weight=wo, init_score=io), num_boost_round=12)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X, raw_score=True), rtol=1e-12, atol=1e-12)
    assert ours.n_estimators_ == 12
    # the start changes the trees: the same fit from 0 is another model
    plain = GBDTRanker("sigmoid_ce", **_TREES).fit(X, y, qid=qid, sample_weight=w)
    assert np.max(np.abs(plain.predict(X) - ours.predict(X))) > 1e-2


def test_lightgbm_native_objective_from_init_score_equals_lgb_train_with_it():
    X, _, qid, _, init = _data(1)
    y = np.random.default_rng(5).integers(0, 4, size=len(qid)).astype(np.float64)
    ours = GBDTRanker("native:lambdarank", **_TREES).fit(X, y, qid=qid, init_score=init)
    Xo, yo, sizes, io = _grouped(X, y, qid, init)
    ref = lgb.train(_lgb_params("lambdarank"), lgb.Dataset(Xo, yo, group=sizes, init_score=io), num_boost_round=12)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X, raw_score=True))


def _xgb_params(**more):
    return {"eta": 0.1, "max_depth": 6, "min_child_weight": 0.0, "subsample": 1.0, "colsample_bytree": 1.0,
            "lambda": 1e-6, "seed": 0, "tree_method": "hist", "disable_default_eval_metric": 1, "verbosity": 0,
            "max_leaves": 7, "nthread": 1, **more}


def _dmatrix(X, y, sizes, margin):
    d = xgb.DMatrix(X, label=y, missing=np.nan)
    d.set_group(sizes)
    d.set_base_margin(margin)
    return d


def test_xgboost_rankwise_loss_from_init_score_equals_xgb_train_with_base_margin(xgb_by_hand):
    X, y, qid, _, init = _data(2)
    ours = GBDTRanker("sigmoid_ce", backend="xgboost", **_TREES).fit(X, y, qid=qid, init_score=init)
    Xo, yo, sizes, io = _grouped(X, y, qid, init)
    ref = xgb.train(_xgb_params(base_score=0.0), _dmatrix(Xo, yo, sizes, io), num_boost_round=12,
                    obj=as_objective("sigmoid_ce", "xgboost"))
    # the same trees: predict sums their float32 leaves in double, as the by-hand walk of the reference's trees
    np.testing.assert_allclose(ours.predict(X), xgb_by_hand(ref).margin(X), rtol=1e-12, atol=1e-12)


def test_xgboost_native_objective_from_init_score_equals_xgb_train_with_base_margin(xgb_by_hand):
    X, y, qid, _, init = _data(3)
    ours = GBDTRanker("native:rank:pairwise", backend="xgboost", **_TREES).fit(X, y, qid=qid, init_score=init)
    Xo, yo, sizes, io = _grouped(X, y, qid, init)
    ref = xgb.train(_xgb_params(objective="rank:pairwise", min_child_weight=1.0), _dmatrix(Xo, yo, sizes, io),
                    num_boost_round=12)
    np.testing.assert_array_equal(ours.predict(X), xgb_by_hand(ref).margin(X))


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_eval_metric_and_early_stopping_see_the_eval_start(backend):
    from rankwise.metrics import ndcg

    X, y, qid, _, init = _data(4)
    Xv, yv, qv, _, iv = _data(5, n_queries=12)
    o = np.argsort(qv, kind="stable")  # eval_scores_ are in the query-grouped order
    Xv, yv, qv, iv = Xv[o], yv[o], qv[o], iv[o]
    m = GBDTRanker("sigmoid_ce", backend=backend, eval_metric="ndcg@5", early_stopping_rounds=200,
                   **_TREES).fit(X, y, qid=qid, init_score=init, eval_set=(Xv, yv, qv), eval_init_score=iv)
    last = m.history_.to_dict()["ndcg@5"][-1]  # after the last round, of every tree
    assert last == pytest.approx(ndcg(iv + m.eval_scores_, yv, k=5, qid=qv), rel=1e-12, abs=1e-12)
    # early stopping kept the best round by the started scores; predict uses it
    assert m.best_score_ == pytest.approx(ndcg(iv + m.predict(Xv), yv, k=5, qid=qv), rel=1e-12, abs=1e-12)
    # the start dominates these small trees' scores: the metric without it is another number
    assert last != pytest.approx(ndcg(m.eval_scores_, yv, k=5, qid=qv), rel=1e-9)


def test_init_score_errors_name_the_parameter():
    X, y, qid, _, init = _data()
    Xv, yv, qv, _, iv = _data(5, n_queries=6)
    m = GBDTRanker("sigmoid_ce", **_TREES)
    with pytest.raises(InputError, match=r"init_score has 224 entries but X has 225 rows"):
        m.fit(X, y, qid=qid, init_score=init[:-1])
    bad = init.copy()
    bad[3] = np.nan
    with pytest.raises(InputError, match="init_score contains NaN or inf"):
        m.fit(X, y, qid=qid, init_score=bad)
    bad[3] = np.inf
    with pytest.raises(InputError, match="init_score contains NaN or inf"):
        m.fit(X, y, qid=qid, init_score=bad)
    with pytest.raises(InputError, match="init_score with eval_set needs eval_init_score"):
        m.fit(X, y, qid=qid, init_score=init, eval_set=(Xv, yv, qv))
    with pytest.raises(InputError, match="eval_init_score has 53 entries but X has 54 rows"):
        m.fit(X, y, qid=qid, init_score=init, eval_set=(Xv, yv, qv), eval_init_score=iv[:-1])
    with pytest.raises(InputError, match="give init_score"):
        m.fit(X, y, qid=qid, eval_set=(Xv, yv, qv), eval_init_score=iv)
    with pytest.raises(InputError, match="eval_init_score was given without eval_set"):
        m.fit(X, y, qid=qid, init_score=init, eval_init_score=iv)


def test_native_lightgbm_objective_refuses_init_score_with_resume(tmp_path):
    X, _, qid, _, init = _data()
    y = np.random.default_rng(5).integers(0, 4, size=len(qid)).astype(np.float64)
    ck = tmp_path / "ck.npz"
    GBDTRanker("native:lambdarank", **_TREES).fit(X, y, qid=qid, init_score=init, checkpoint=ck)
    with pytest.raises(InputError, match="init_score with resume"):
        GBDTRanker("native:lambdarank", **_TREES).fit(X, y, qid=qid, init_score=init, resume=ck)


@pytest.mark.parametrize("backend, loss", [("lightgbm", "lambdarank"), ("lightgbm", "sigmoid_ce"),
                                           ("xgboost", "lambdarank"), ("xgboost", "sigmoid_ce"),
                                           ("xgboost", "native:rank:pairwise")])
def test_killed_and_resumed_with_init_score_equals_uninterrupted(tmp_path, backend, loss):
    """LightGBM: the start is added in the objective to the training scores, which hold the trees alone in a
    fresh and in a resumed booster; XGBoost keeps the DMatrix's base_margin under a resumed booster. A fit killed
    after a round and resumed equals the uninterrupted one, bit for bit."""
    X, y, qid, _, init = _data(6)

    def fit(**kw):
        return GBDTRanker(loss, backend=backend, **_TREES).fit(X, y, qid=qid, init_score=init, **kw).predict(X)

    full = fit()
    for k in (1, 6, 11):
        ck = tmp_path / f"ck{k}.npz"
        with h.kill_after_writes(k):
            with pytest.raises(h.Killed):
                fit(checkpoint=ck, checkpoint_every=1)
        np.testing.assert_array_equal(fit(checkpoint=ck, checkpoint_every=1, resume=ck), full,
                                      err_msg=f"{backend} {loss}: killed after round {k}")


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_eval_metric_loss_is_the_weighted_training_loss_on_eval_set(backend):
    """eval_metric="loss": Σ_rows w·(y·softplus(-s) + (1-y)·softplus(s)) / (validation queries), at the started
    scores, by hand; early stopping keeps its minimum, as LightGBM's early stopping on a loss metric does."""
    X, y, qid, w, init = _data(7)
    Xv, yv, qv, wv, iv = _data(8, n_queries=12)
    o = np.argsort(qv, kind="stable")
    Xv, yv, qv, wv, iv = Xv[o], yv[o], qv[o], wv[o], iv[o]
    kw = dict(_TREES, n_estimators=60, learning_rate=0.5)
    w = w if backend == "lightgbm" else None  # XGBoost weighs queries, not rows
    m = GBDTRanker("sigmoid_ce", backend=backend, eval_metric="loss", early_stopping_rounds=5, **kw).fit(
        X, y, qid=qid, sample_weight=w, init_score=init, eval_set=(Xv, yv, qv), eval_init_score=iv,
        eval_sample_weight=wv)

    def by_hand(scores):
        s = iv + scores
        return float(np.sum(wv * (yv * np.logaddexp(0, -s) + (1 - yv) * np.logaddexp(0, s)))) / 12

    curve = m.history_.to_dict()["eval_loss"]
    assert curve[-1] == pytest.approx(by_hand(m.eval_scores_), rel=1e-12)
    assert m.best_score_ == pytest.approx(by_hand(m.predict(Xv)), rel=1e-12)
    assert m.best_iteration_ == int(np.argmin(curve)) and len(curve) == m.best_iteration_ + 6 < 60
    unweighted = GBDTRanker("sigmoid_ce", backend=backend, eval_metric="loss", **kw).fit(
        X, y, qid=qid, sample_weight=w, init_score=init, eval_set=(Xv, yv, qv), eval_init_score=iv)
    assert unweighted.history_.to_dict()["eval_loss"][0] != pytest.approx(curve[0], rel=1e-6)


def test_eval_metric_loss_errors_name_the_parameter():
    X, y, qid, w, _ = _data()
    Xv, yv, qv, wv, _ = _data(5, n_queries=6)
    with pytest.raises(InputError, match="eval_sample_weight weighs the rows of eval_metric='loss' only"):
        GBDTRanker("sigmoid_ce", **_TREES).fit(X, y, qid=qid, eval_set=(Xv, yv, qv), eval_sample_weight=wv)
    with pytest.raises(InputError, match="eval_sample_weight was given without eval_set"):
        GBDTRanker("sigmoid_ce", eval_metric="loss", **_TREES).fit(X, y, qid=qid, eval_sample_weight=w)
    with pytest.raises(InputError, match="eval_sample_weight must be non-negative"):
        GBDTRanker("sigmoid_ce", eval_metric="loss", **_TREES).fit(X, y, qid=qid, eval_set=(Xv, yv, qv),
                                                                   eval_sample_weight=-wv)
    with pytest.raises(InputError, match="eval_sample_weight has 53 entries but X has 54 rows"):
        GBDTRanker("sigmoid_ce", eval_metric="loss", **_TREES).fit(X, y, qid=qid, eval_set=(Xv, yv, qv),
                                                                   eval_sample_weight=wv[1:])
    with pytest.raises(InputError, match="eval_metric='loss' is the rankwise loss"):
        GBDTRanker("native:lambdarank", eval_metric="loss", **_TREES).fit(X, np.round(y), qid=qid,
                                                                          eval_set=(Xv, np.round(yv), qv))


class _RowLogistic:
    """A per-row objective with data of its own (per-row weights w and label y, in the caller's row order): the
    weighted logistic loss; ``eval_loss`` on validation rows."""

    def __init__(self, y, w, yv=None, wv=None):
        self.y, self.w, self.yv, self.wv = y, w, yv, wv
        self.seen = []

    def grad_hess(self, s):
        self.seen.append(s.copy())
        p = 1.0 / (1.0 + np.exp(-s))
        return self.w * (p - self.y), self.w * p * (1.0 - p)

    def eval_loss(self, s):
        return float(np.sum(self.wv * (self.yv * np.logaddexp(0, -s) + (1 - self.yv) * np.logaddexp(0, s))))


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_row_objective_gets_the_callers_row_order_and_equals_the_library_with_it(backend, xgb_by_hand):
    X, y, qid, w, init = _data(9)
    obj = _RowLogistic(y, w)
    ours = GBDTRanker("sigmoid_ce", backend=backend, **_TREES).fit(X, y, qid=qid, init_score=init, objective=obj)
    # the first call sees the start, in the caller's row order (qid is shuffled: the ranker regroups the rows)
    np.testing.assert_array_equal(obj.seen[0], init if backend == "lightgbm" else init.astype(np.float32))
    Xo, yo, sizes, wo, io = _grouped(X, y, qid, w, init)
    ref_obj = _RowLogistic(yo, wo)
    if backend == "lightgbm":
        ref = lgb.train(_lgb_params(lambda s, _d: ref_obj.grad_hess(s)),
                        lgb.Dataset(Xo, yo, group=sizes, init_score=io), num_boost_round=12)
        want = ref.predict(X, raw_score=True)
    else:
        ref = xgb.train(_xgb_params(base_score=0.0), _dmatrix(Xo, yo, sizes, io), num_boost_round=12,
                        obj=lambda s, _d: ref_obj.grad_hess(np.asarray(s, dtype=np.float64)))
        want = xgb_by_hand(ref).margin(X)  # predict sums the float32 leaves in double
    np.testing.assert_allclose(ours.predict(X), want, rtol=1e-12, atol=1e-12)
    # the objective, not the loss, drove the trees: the sigmoid_ce fit without row weights is another model
    plain = GBDTRanker("sigmoid_ce", backend=backend, **_TREES).fit(X, y, qid=qid, init_score=init)
    assert np.max(np.abs(plain.predict(X) - ours.predict(X))) > 1e-3


def test_row_objective_eval_loss_drives_early_stopping():
    X, y, qid, w, init = _data(10)
    Xv, yv, qv, wv, iv = _data(11, n_queries=12)
    obj = _RowLogistic(y, w, yv, wv)
    m = GBDTRanker("sigmoid_ce", eval_metric="loss", early_stopping_rounds=4, **dict(_TREES, n_estimators=80,
                   learning_rate=0.6)).fit(X, y, qid=qid, init_score=init, objective=obj, eval_set=(Xv, yv, qv),
                                           eval_init_score=iv)
    assert m.best_score_ == pytest.approx(obj.eval_loss(iv + m.predict(Xv)), rel=1e-12)
    curve = m.history_.to_dict()["eval_loss"]
    assert m.best_iteration_ == int(np.argmin(curve)) and len(curve) < 80


def test_row_objective_errors_name_the_parameter():
    X, y, qid, w, _ = _data()
    Xv, yv, qv, _, _ = _data(5, n_queries=6)
    m = GBDTRanker("sigmoid_ce", **_TREES)
    with pytest.raises(InputError, match=r"objective must have a grad_hess\(scores\)"):
        m.fit(X, y, qid=qid, objective=lambda s: (s, s))
    with pytest.raises(InputError, match="objective weighs its rows itself"):
        m.fit(X, y, qid=qid, objective=_RowLogistic(y, w), sample_weight=w)
    with pytest.raises(InputError, match="a native loss"):
        GBDTRanker("native:lambdarank", **_TREES).fit(X, np.round(y), qid=qid, objective=_RowLogistic(y, w))
    grad_only = type("G", (), {"grad_hess": lambda self, s: (s, 1 + 0 * s)})()
    with pytest.raises(InputError, match="needs objective.eval_loss"):
        GBDTRanker("sigmoid_ce", eval_metric="loss", **_TREES).fit(X, y, qid=qid, eval_set=(Xv, yv, qv),
                                                                   objective=grad_only)

    class Short(_RowLogistic):
        def grad_hess(self, s):
            g, h = super().grad_hess(s)
            return g[1:], h[1:]

    class Flat(_RowLogistic):
        def grad_hess(self, s):
            g, h = super().grad_hess(s)
            return g, 0 * h

    with pytest.raises(InputError, match="a gradient and a Hessian of 225 values"):
        m.fit(X, y, qid=qid, objective=Short(y, w))
    with pytest.raises(InputError, match="Hessian that is not positive"):
        m.fit(X, y, qid=qid, objective=Flat(y, w))
