"""GBDTRanker(backend="xgboost").predict sums the trees' float32 leaves in double (issue 25: double
targets within 1e-12 of predict): equal to XGBoost's trees walked by hand and summed in double, and
away from XGBoost's own float32 sum by no more than that sum's rounding."""
from __future__ import annotations

import numpy as np
import pytest
import xgboost as xgb

import rankwise
from _model_data import make_data
from rankwise.models import GBDTRanker, _xgb_sum


def _with_nan(X, seed):
    X = np.array(X, dtype=np.float32)
    X[np.random.default_rng(seed).random(X.shape) < 0.08] = np.nan
    X[::7] = np.nan  # whole rows missing
    return X


@pytest.fixture(scope="module")
def data():
    (X, y, q), (Xv, yv, qv), (Xt, _, _) = make_data(seed=0), make_data(seed=1), make_data(n_queries=20, seed=2)
    return (_with_nan(X, 0), y, q), (_with_nan(Xv, 1), yv, qv), _with_nan(Xt, 2)


MODELS = {
    "rankwise-loss": dict(loss="lambdarank", n_estimators=80),
    "native-ndcg": dict(loss="native:rank:ndcg", n_estimators=80),  # an estimated base score (nonzero)
    "native-pairwise-base": dict(loss="native:rank:pairwise", n_estimators=80, loss_params={"base_score": 0.3}),
    "early-stopped": dict(loss="lambdarank", n_estimators=200, learning_rate=0.5, early_stopping_rounds=3),
    "parallel-trees": dict(loss="lambdarank", n_estimators=30, backend_params={"num_parallel_tree": 3}),
}


@pytest.fixture(scope="module")
def models(data):
    (X, y, q), val, _ = data
    out = {}
    for name, kw in MODELS.items():
        m = GBDTRanker(backend="xgboost", learning_rate=kw.pop("learning_rate", 0.3), min_child_samples=5, n_jobs=1,
                       random_state=0, verbose=False, **kw)
        out[name] = m.fit(X, y, qid=q, **({"eval_set": val} if m.early_stopping_rounds else {}))
    return out


def _rounds(m):
    best = getattr(m, "best_iteration_", None)
    return m.n_estimators_ if best is None else best + 1


@pytest.fixture(scope="module")
def hands(models, xgb_by_hand):
    """{name: the model's trees (the rounds predict uses) walked by hand}; each walk of the test rows is kept."""
    return {name: xgb_by_hand(m.booster_, _rounds(m)) for name, m in models.items()}


@pytest.mark.parametrize("name", list(MODELS))
def test_predict_is_the_double_sum_of_the_float32_leaves_in_tree_order(models, data, hands, name):
    m, Xt = models[name], data[2]
    hand = hands[name]
    got = m.predict(Xt)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, hand.margin(Xt), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got, hand.margin(Xt))  # the same additions in the same order


@pytest.mark.parametrize("name", list(MODELS))
def test_predict_differs_from_xgboosts_float32_sum_by_its_rounding_only(models, data, hands, name):
    m, Xt = models[name], data[2]
    hand = hands[name]
    theirs = m.booster_.predict(xgb.DMatrix(Xt, missing=np.nan), output_margin=True,
                                iteration_range=(0, _rounds(m))).astype(np.float64)
    np.testing.assert_array_equal(hand.float32_margin(Xt), theirs)  # the walk by hand is XGBoost's, leaf for leaf
    diff = np.abs(m.predict(Xt) - theirs)
    assert np.all(diff <= hand.float32_rounding(Xt) + 1e-12)
    assert diff.max() > 0  # the float32 sum does round: predict is not XGBoost's float32 output


def test_early_stopped_predict_uses_the_best_rounds_only(models, data, xgb_by_hand):
    m, Xt = models["early-stopped"], data[2]
    assert m.best_iteration_ + 1 < m.n_estimators_
    every = xgb_by_hand(m.booster_).margin(Xt)
    assert not np.array_equal(m.predict(Xt), every)


def test_double_scores_survive_save_and_load(models, data, tmp_path):
    for name in ("native-ndcg", "early-stopped"):
        m = models[name]
        loaded = rankwise.load(m.save(tmp_path / f"{name}.npz"))
        np.testing.assert_array_equal(loaded.predict(data[2]), m.predict(data[2]))


def test_validation_scores_are_predicts_double_scores(data):
    (X, y, q), (Xv, yv, qv), _ = data
    m = GBDTRanker("lambdarank", backend="xgboost", n_estimators=25, min_child_samples=5, n_jobs=1,
                   random_state=0).fit(X, y, qid=q, eval_set=(Xv, yv, qv))
    np.testing.assert_array_equal(m.eval_scores_, m.predict(Xv))  # qv is sorted: the same row order


def test_blocks_of_rows_give_the_scores_of_one_block(models, data, monkeypatch):
    m, Xt = models["native-ndcg"], data[2]
    whole = m.predict(Xt)
    monkeypatch.setattr(_xgb_sum, "_BLOCK_ENTRIES", 3 * m.n_estimators_)  # 3 rows per block
    np.testing.assert_array_equal(m.predict(Xt), whole)
    assert m.predict(Xt[:0]).shape == (0,)


def test_threads_do_not_change_the_scores(models, data):
    m, Xt = models["rankwise-loss"], data[2]
    one = m.predict(Xt)
    m.set_params(n_jobs=2)
    try:
        np.testing.assert_array_equal(m.predict(Xt), one)
    finally:
        m.set_params(n_jobs=1)


def test_dart_trees_are_weighted_as_xgboost_weights_them(data):
    """DART scales each tree by its weight (float32): the float32 sum of the weighted leaves is XGBoost's
    own output bit for bit, and predict sums the same weighted leaves in double."""
    (X, y, q), _, Xt = data
    m = GBDTRanker("lambdarank", backend="xgboost", n_estimators=20, min_child_samples=5, n_jobs=1, random_state=0,
                   backend_params={"booster": "dart", "rate_drop": 0.3}).fit(X, y, qid=q)
    table = _xgb_sum.leaf_table(m.booster_, m.n_estimators_)
    leaves = m.booster_.predict(xgb.DMatrix(Xt, missing=np.nan), pred_leaf=True).astype(np.int64)
    vals = table.values[leaves + table.offsets]
    acc32 = np.full(len(Xt), table.base, dtype=np.float32)
    acc64 = np.full(len(Xt), table.base)
    for k in range(vals.shape[1]):
        acc32 = acc32 + vals[:, k].astype(np.float32)
        acc64 = acc64 + vals[:, k]
    theirs = m.booster_.predict(xgb.DMatrix(Xt, missing=np.nan), output_margin=True)
    np.testing.assert_array_equal(acc32, theirs)
    np.testing.assert_array_equal(m.predict(Xt), acc64)
