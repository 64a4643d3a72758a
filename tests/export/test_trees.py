"""The neutral tree representation: the reference scorer equals the boosters, row for row."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.errors import InputError
from rankwise.export._trees import (LIGHTGBM_ZERO_THRESHOLD, MISSING_NAN, MISSING_NONE, adversarial_rows, floor32,
                                    next32, prev32, tree_ensemble)


def _booster_margin(model, X):
    """The library's own raw score on float64 rows (no rankwise float32 cast in between)."""
    if model.backend == "lightgbm":
        return model.booster_.predict(X, raw_score=True)
    import xgboost as xgb

    return model.booster_.predict(xgb.DMatrix(X, missing=np.nan), output_margin=True).astype(np.float64)


def test_float32_neighbours():
    for t in (0.1, 1 / 3, -0.7, 0.0, 1e-40, 3.0, -1e300, 1e300):
        lo = floor32(t)
        assert float(lo) <= t and (float(next32(lo)) > t or np.isinf(next32(lo)))
    assert prev32(np.float32(1.0)) == np.nextafter(np.float32(1.0), np.float32(0.0))
    assert floor32(np.float32(0.1)) == np.float32(0.1)  # a float32 value is its own floor


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
@pytest.mark.parametrize("with_nan", [False, True])
def test_reference_scorer_equals_booster(gbdt_models, mq_fold1, test_with_nan, backend, with_nan):
    model = gbdt_models[backend, with_nan]
    ens = tree_ensemble(model)
    assert ens.source == backend and len(ens.trees) == 60 and ens.n_features == 46
    test = mq_fold1[1].X.astype(np.float64)
    adv = adversarial_rows(ens, test[0])
    assert len(adv) > 1000
    for X in (test, test_with_nan, adv):
        np.testing.assert_array_equal(ens.raw_score(X), _booster_margin(model, X))
        # rankwise's predict sees float32 features and sums the leaves in double; so does the reference scorer then
        np.testing.assert_array_equal(ens.raw_score(X.astype(np.float32), sum_dtype=np.float64), model.predict(X))
    kinds = {int(m) for tr in ens.trees for m in tr.missing_type[tr.feature >= 0]}
    assert kinds == ({MISSING_NAN} if with_nan or backend == "xgboost" else {MISSING_NONE})


def test_lightgbm_zero_as_missing(mq_fold1):
    """missing_type=Zero: NaN and |x| <= 1e-35 take the default side."""
    from rankwise.models.gbdt import GBDTRanker

    train, test = mq_fold1
    model = GBDTRanker(backend="lightgbm", n_estimators=15, n_jobs=1, random_state=0, verbose=False,
                       backend_params={"zero_as_missing": True}).fit(train)
    ens = tree_ensemble(model)
    assert any((tr.missing_type == 1).any() for tr in ens.trees)
    X = test.X.astype(np.float64)
    X[::7, 3] = np.nan
    X[1::7, 5] = LIGHTGBM_ZERO_THRESHOLD
    X[2::7, 6] = -0.0
    for rows in (X, adversarial_rows(ens, X[0])):
        np.testing.assert_array_equal(ens.raw_score(rows), model.booster_.predict(rows, raw_score=True))


def test_xgboost_native_objective_base_margin(mq_fold1):
    """A native objective keeps XGBoost's base score: it is the margin the trees start from (a logit for
    the logistic objectives)."""
    import xgboost as xgb
    from rankwise.models.gbdt import GBDTRanker

    train, test = mq_fold1
    model = GBDTRanker("native:rank:ndcg", backend="xgboost", n_estimators=10, n_jobs=1, random_state=0,
                       verbose=False, backend_params={"base_score": 0.3}).fit(train)
    ens = tree_ensemble(model)
    assert ens.base_score == float(np.float32(0.3))
    np.testing.assert_array_equal(ens.raw_score(test.X.astype(np.float32), sum_dtype=np.float64), model.predict(test.X))
    own = model.booster_.predict(xgb.DMatrix(test.X), output_margin=True)  # XGBoost's float32 sum
    np.testing.assert_array_equal(ens.raw_score(test.X), own)
    dm = xgb.DMatrix(train.X, (train.labels > 0).astype(float))
    booster = xgb.train({"objective": "binary:logistic", "base_score": 0.3, "nthread": 1, "max_depth": 4}, dm, 8)
    ens = tree_ensemble(booster)
    assert ens.base_score == pytest.approx(np.log(0.3 / 0.7), rel=1e-6)
    np.testing.assert_array_equal(ens.raw_score(test.X),
                                  booster.predict(xgb.DMatrix(test.X), output_margin=True).astype(np.float64))


def test_early_stopping_keeps_the_trees_predict_uses(mq_fold1):
    from rankwise.models.gbdt import GBDTRanker

    train, test = mq_fold1
    model = GBDTRanker(backend="lightgbm", n_estimators=40, early_stopping_rounds=3, n_jobs=1, random_state=0,
                       verbose=False).fit(train, eval_set=[test])
    ens = tree_ensemble(model)
    assert len(ens.trees) == model.best_iteration_ + 1
    np.testing.assert_array_equal(ens.raw_score(test.X.astype(np.float32)), model.predict(test.X))


def test_refusals():
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 5, 300), rng.random(300)])
    y = X[:, 0] * 0.5 + X[:, 1]
    cat = lgb.train({"objective": "regression", "verbosity": -1, "min_data_per_group": 5, "cat_smooth": 1},
                    lgb.Dataset(X, y, categorical_feature=[0]), 3)
    with pytest.raises(InputError, match="categorical"):
        tree_ensemble(cat)
    from rankwise.export import ExportError, to_opensearch

    class Fitted:
        booster_ = cat
    with pytest.raises(ExportError, match="categorical splits: rankwise.export represents numerical splits"):
        to_opensearch(Fitted(), "xgboost+json", feature_names=["a", "b"])
    lin = lgb.train({"objective": "regression", "verbosity": -1, "linear_tree": True}, lgb.Dataset(X, y), 3)
    with pytest.raises(InputError, match="linear tree"):
        tree_ensemble(lin)
    with pytest.raises(InputError, match="expected a fitted GBDTRanker"):
        tree_ensemble(object())


def test_lightgbm_reads_the_zero_band_as_zero():
    """LightGBM's predict drops |x| <= 1e-35f from dense rows (they become 0.0); the reference does too.

    Its splits at -1e-35f / +1e-35f then decide x = -1e-35f as 0.0 (right of -1e-35f), not by x <= t.
    """
    import lightgbm as lgb

    x = np.concatenate([np.full(200, -1e-30), np.zeros(200), np.full(200, 1e-30)])
    y = np.concatenate([np.zeros(200), np.ones(200), np.full(200, 2.0)])
    booster = lgb.train({"objective": "regression", "min_data_in_leaf": 5, "verbosity": -1, "num_leaves": 4},
                        lgb.Dataset(x[:, None], y), 3)
    ens = tree_ensemble(booster)
    assert {float(abs(t)) for t in ens.trees[0].threshold[ens.trees[0].feature >= 0]} == {LIGHTGBM_ZERO_THRESHOLD}
    z = LIGHTGBM_ZERO_THRESHOLD
    q = np.array([-1e-30, -np.nextafter(z, 1.0), -z, -z / 2, -0.0, 0.0, z / 2, z, np.nextafter(z, 1.0), 1e-30,
                  np.nan])[:, None]
    np.testing.assert_array_equal(ens.raw_score(q), booster.predict(q, raw_score=True))
    assert ens.raw_score(q[2:3])[0] == ens.raw_score(q[5:6])[0] != ens.raw_score(q[1:2])[0]
