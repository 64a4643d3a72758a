"""GBDTRanker against the libraries it drives: same trees from equivalent objectives."""
from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pytest
import xgboost as xgb

from _model_data import make_data
from rankwise.errors import InputError
from rankwise.models import GBDTRanker


def test_native_lambdarank_equals_lgbmranker():
    X, y, qid = make_data(n_queries=30, list_len=8)
    ours = GBDTRanker("native:lambdarank", n_estimators=15, num_leaves=7, min_child_samples=5, random_state=1).fit(X, y, qid=qid)
    ref = lgb.LGBMRanker(objective="lambdarank", n_estimators=15, num_leaves=7, min_child_samples=5, random_state=1,
                         deterministic=True, force_row_wise=True, verbosity=-1)
    ref.fit(X, y, group=np.bincount(qid))
    np.testing.assert_allclose(ours.predict(X), ref.predict(X, raw_score=True), rtol=1e-10, atol=1e-10)


def test_rankwise_pointwise_squared_grows_lightgbm_l2_regression_trees():
    # pointwise_squared: ℓ = Σ (s - y)², g = 2(s - y), h = 2; LightGBM's L2 regression has g = s - y, h = 1.
    # Newton leaf values -Σg/Σh and split gains agree up to the common factor, so the models coincide.
    X, y, qid = make_data(n_queries=30, list_len=8, shuffle=True)
    ours = GBDTRanker("pointwise_squared", n_estimators=10, num_leaves=7, min_child_samples=5,
                      backend_params={"min_sum_hessian_in_leaf": 0.0}, random_state=0).fit(X, y, qid=qid)
    params = {"objective": "regression", "num_leaves": 7, "min_data_in_leaf": 5, "learning_rate": 0.1,
              "boost_from_average": False, "min_sum_hessian_in_leaf": 0.0, "verbosity": -1, "deterministic": True,
              "force_row_wise": True, "seed": 0}
    order = np.argsort(qid, kind="stable")  # LightGBM bins do not depend on row order
    ref = lgb.train(params, lgb.Dataset(X[order], y[order]), num_boost_round=10)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-6, atol=1e-6)


def test_rankwise_pointwise_squared_on_xgboost_equals_squarederror(xgb_by_hand):
    X, y, qid = make_data(n_queries=30, list_len=8)
    ours = GBDTRanker("pointwise_squared", backend="xgboost", n_estimators=10, max_depth=3, random_state=0,
                      backend_params={"lambda": 0.0, "min_child_weight": 0.0}).fit(X, y, qid=qid)
    ref = xgb.train({"objective": "reg:squarederror", "max_depth": 3, "eta": 0.1, "lambda": 0.0, "base_score": 0.0,
                     "min_child_weight": 0.0, "tree_method": "hist", "seed": 0},
                    xgb.DMatrix(X, y), num_boost_round=10)
    # predict sums XGBoost's float32 leaves in double: the reference's trees summed the same way
    np.testing.assert_allclose(ours.predict(X), xgb_by_hand(ref).margin(X), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_rankwise_loss_learns_and_is_deterministic(backend):
    (X, y, qid), (Xt, yt, qt) = make_data(seed=0), make_data(seed=1)
    a = GBDTRanker("lambdaloss", backend=backend, n_estimators=30, random_state=3).fit(X, y, qid=qid)
    b = GBDTRanker("lambdaloss", backend=backend, n_estimators=30, random_state=3).fit(X, y, qid=qid)
    np.testing.assert_array_equal(a.predict(Xt), b.predict(Xt))
    rand = np.random.default_rng(0).normal(size=len(yt))
    from reference.models_reference import mean_ndcg

    assert a.score(Xt, yt, qid=qt) > mean_ndcg(rand, yt, qt) + 0.2


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_early_stopping_and_history(backend):
    (X, y, qid), (Xv, yv, qv) = make_data(seed=0), make_data(seed=1)
    m = GBDTRanker("listnet", backend=backend, n_estimators=300, learning_rate=0.3, early_stopping_rounds=5,
                   random_state=0).fit(X, y, qid=qid, eval_set=(Xv, yv, qv))
    vals = m.history_["ndcg@10"]
    assert len(vals) < 300 and vals[m.best_iteration_] == max(vals)
    assert m.score(Xv, yv, qid=qv) == pytest.approx(max(vals), abs=1e-9)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_checkpoint_resume_continues_boosting(tmp_path, backend):
    X, y, qid = make_data(n_queries=20, list_len=6)
    full = GBDTRanker("listnet", backend=backend, n_estimators=12, random_state=0).fit(X, y, qid=qid)
    ck = tmp_path / "ck.npz"
    GBDTRanker("listnet", backend=backend, n_estimators=6, random_state=0).fit(X, y, qid=qid, checkpoint=ck,
                                                                            checkpoint_every=3)
    resumed = GBDTRanker("listnet", backend=backend, n_estimators=12, random_state=0).fit(X, y, qid=qid, resume=ck)
    assert resumed.n_estimators_ == 12 and resumed.history_["iteration"] == list(range(12))
    np.testing.assert_allclose(resumed.predict(X), full.predict(X), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_resume_from_a_checkpoint_that_already_has_every_round(tmp_path, backend):
    X, y, qid = make_data(n_queries=20, list_len=6)
    ck = tmp_path / "ck.npz"
    full = GBDTRanker("listnet", backend=backend, n_estimators=6, random_state=0).fit(X, y, qid=qid, checkpoint=ck,
                                                                                   checkpoint_every=2)
    resumed = GBDTRanker("listnet", backend=backend, n_estimators=6, random_state=0).fit(X, y, qid=qid, resume=ck)
    assert resumed.n_estimators_ == 6 and resumed.history_ == full.history_
    np.testing.assert_array_equal(resumed.predict(X), full.predict(X))
    with pytest.raises(InputError, match=r"the checkpoint already has 6 boosting rounds, more than n_estimators=4"):
        GBDTRanker("listnet", backend=backend, n_estimators=4, random_state=0).fit(X, y, qid=qid, resume=ck)


def test_checkpoint_every_must_be_a_positive_integer(tmp_path):
    X, y, qid = make_data(n_queries=20, list_len=6)
    for bad in (0, -2, 1.5, "3"):
        with pytest.raises(InputError, match=rf"checkpoint_every must be an integer >= 1; got {bad!r}"):
            GBDTRanker("listnet", n_estimators=3).fit(X, y, qid=qid, checkpoint=tmp_path / "ck.npz",
                                                      checkpoint_every=bad)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_history_records_the_training_objective_of_each_round(backend):
    from rankwise.losses import listnet_loss
    import torch

    X, y, qid = make_data(n_queries=20, list_len=6)
    m = GBDTRanker("listnet", backend=backend, n_estimators=5, learning_rate=0.3, random_state=0,
                   loss_every=1).fit(X, y, qid=qid)
    loss = m.history_["loss"]
    assert len(loss) == 5 and m.history_["iteration"] == list(range(5))

    def mean_listnet(s):  # mean over queries of the loss of the model's scores
        return float(listnet_loss(torch.tensor(s.reshape(20, 6)), torch.tensor(y.reshape(20, 6))))
    assert loss[0] == pytest.approx(mean_listnet(np.zeros(len(y))), rel=1e-9)  # F_0 = 0
    for k in range(1, 5):  # round k's tree was fitted at the model of k rounds
        if backend == "lightgbm":
            s = m.booster_.predict(X, raw_score=True, num_iteration=k)
        else:
            s = m.booster_.predict(xgb.DMatrix(X), output_margin=True, iteration_range=(0, k))
        assert loss[k] == pytest.approx(mean_listnet(s), rel=1e-6)
    assert loss[-1] < loss[0]
    native = GBDTRanker("native:lambdarank", n_estimators=3, min_child_samples=5, random_state=0).fit(X, y, qid=qid)
    assert "loss" not in native.history_  # the library's own objective: no rankwise loss to record


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_loss_every_records_the_loss_every_k_rounds_and_computes_it_only_then(backend, monkeypatch, tmp_path):
    """Before: the objective computed the loss value every round for ``history_`` (a quarter of a
    LambdaMART round then); LightGBM computes no training metric unless asked. Now the value is
    computed and recorded in rounds 0, k, 2k, ... only, counted across a resume, and the trees do
    not depend on it."""
    from rankwise.losses import _engine

    calls = []
    real = _engine.run

    def spy(*args, **kwargs):
        calls.append(kwargs.get("value", True))
        return real(*args, **kwargs)
    monkeypatch.setattr(_engine, "run", spy)
    X, y, qid = make_data(n_queries=20, list_len=6)
    every = GBDTRanker("lambdarank", backend=backend, n_estimators=7, random_state=0, loss_every=1).fit(X, y, qid=qid)
    assert calls == [True] * 7
    calls.clear()
    m = GBDTRanker("lambdarank", backend=backend, n_estimators=7, random_state=0, loss_every=3).fit(X, y, qid=qid)
    assert calls == [True, False, False, True, False, False, True]  # the value only where it is recorded
    loss = m.history_["loss"]
    assert [v is not None for v in loss] == [True, False, False, True, False, False, True]
    assert [loss[k] for k in (0, 3, 6)] == [every.history_["loss"][k] for k in (0, 3, 6)]
    np.testing.assert_array_equal(m.predict(X), every.predict(X))
    calls.clear()
    never = GBDTRanker("lambdarank", backend=backend, n_estimators=4, random_state=0, loss_every=None).fit(X, y, qid=qid)
    assert calls == [False] * 4 and "loss" not in never.history_ and len(never.history_) == 4
    default = GBDTRanker("lambdarank", backend=backend, n_estimators=12, random_state=0).fit(X, y, qid=qid)
    assert [k for k, v in enumerate(default.history_["loss"]) if v is not None] == [0, 10]
    ck = tmp_path / "ck.npz"  # a resumed fit counts rounds from the start of the whole fit
    GBDTRanker("lambdarank", backend=backend, n_estimators=4, random_state=0, loss_every=3).fit(
        X, y, qid=qid, checkpoint=ck, checkpoint_every=4)
    resumed = GBDTRanker("lambdarank", backend=backend, n_estimators=7, random_state=0, loss_every=3).fit(
        X, y, qid=qid, resume=ck)
    assert [v is not None for v in resumed.history_["loss"]] == [True, False, False, True, False, False, True]
    with pytest.raises(InputError, match="loss_every"):
        GBDTRanker("lambdarank", loss_every=0).fit(X, y, qid=qid)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_nan_features_are_missing_values_and_inf_is_refused(backend):
    X, y, qid = make_data(n_queries=20, list_len=6)
    X = X.copy()
    X[::7, 0] = np.nan
    m = GBDTRanker("listnet", backend=backend, n_estimators=5, random_state=0).fit(X, y, qid=qid)
    assert np.all(np.isfinite(m.predict(X)))
    X[3, 1] = np.inf
    with pytest.raises(InputError, match="X contains inf values .* replace it by NaN"):
        GBDTRanker("listnet", backend=backend, n_estimators=5).fit(X, y, qid=qid)


def test_bad_objective_names():
    X, y, qid = make_data(n_queries=5, list_len=4)
    with pytest.raises(InputError, match="native ranking objectives are native:lambdarank, native:rank_xendcg"):
        GBDTRanker("native:rank:ndcg").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="listnett"):
        GBDTRanker("listnett").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="backend must be one of"):
        GBDTRanker(backend="catboost").fit(X, y, qid=qid)


def test_library_errors_become_clear_messages():
    X, y, qid = make_data(n_queries=6, list_len=4)  # 24 rows: no split has 20 rows per leaf
    # tiny data behaves as LightGBM's own LGBMRanker: constant trees, constant scores (issue 16 item 8)
    import lightgbm as lgb

    ours = GBDTRanker("listnet", n_estimators=2).fit(X, y, qid=qid).predict(X, qid=qid)
    theirs = lgb.LGBMRanker(n_estimators=2, verbose=-1).fit(X, y, group=[4] * 6).predict(X)
    assert np.ptp(ours) == 0 and np.ptp(theirs) == 0
    with pytest.raises(InputError, match=r"xgboost refused the training run \(XGBoostError"):
        GBDTRanker("listnet", backend="xgboost", n_estimators=2, backend_params={"max_depth": -3}).fit(X, y, qid=qid)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_resume_with_other_features_is_refused(tmp_path, backend):
    X, y, qid = make_data(n_queries=20, list_len=6)
    ck = tmp_path / "ck.npz"
    GBDTRanker("listnet", backend=backend, n_estimators=2, random_state=0).fit(X, y, qid=qid, checkpoint=ck)
    with pytest.raises(InputError, match=r"the checkpoint was fitted on 6 features but X has 4"):
        GBDTRanker("listnet", backend=backend, n_estimators=4, random_state=0).fit(X[:, :4], y, qid=qid, resume=ck)


def _by_round(m, X, xgb_by_hand):
    """``f(k)``: the scores ``predict`` gives with the first k rounds (XGBoost: its float32 leaves summed in double,
    walked by hand, as GBDTRanker.predict sums them)."""
    if m.backend == "lightgbm":
        return lambda k: m.booster_.predict(X, raw_score=True, num_iteration=k)
    margins = xgb_by_hand(m.booster_).margins(X)
    return lambda k: margins[:, k]


@pytest.mark.parametrize("loss", ["native", "listnet"])
@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_incremental_validation_scores_equal_predict_and_stop_where_full_prediction_would(backend, loss, xgb_by_hand):
    """The kept validation scores (one tree added per round) equal the booster's prediction, and
    early stopping stops at the round that re-predicting the validation set with every tree
    each round (the former O(rounds²) way) would choose."""
    from rankwise.train.early_stopping import EarlyStopping, resolve_metric

    (X, y, qid), (Xv, yv, qv) = make_data(seed=0), make_data(seed=1)
    name = loss if loss != "native" else ("native:lambdarank" if backend == "lightgbm" else "native:rank:ndcg")
    m = GBDTRanker(name, backend=backend, n_estimators=200, learning_rate=0.3, early_stopping_rounds=5,
                   min_child_samples=5, random_state=0).fit(X, y, qid=qid, eval_set=(Xv, yv, qv))
    predict_k = _by_round(m, Xv, xgb_by_hand)
    np.testing.assert_allclose(m.eval_scores_, predict_k(m.n_estimators_), rtol=1e-12, atol=1e-12)
    metric = resolve_metric("ndcg@10")
    offsets = np.concatenate(([0], np.cumsum(np.bincount(qv))))
    stopper = EarlyStopping(5)
    for k in range(1, 201):
        value = metric(predict_k(k), yv, offsets)
        assert m.history_["ndcg@10"][k - 1] == pytest.approx(value, abs=1e-12)
        if stopper.update(k - 1, value):
            break
    assert (m.n_estimators_, m.best_iteration_) == (k, stopper.best_step)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_incremental_validation_after_resume(tmp_path, backend, xgb_by_hand):
    (X, y, qid), (Xv, yv, qv) = make_data(seed=0), make_data(seed=1)
    ck = tmp_path / "ck.npz"
    GBDTRanker("listnet", backend=backend, n_estimators=6, random_state=0).fit(X, y, qid=qid, checkpoint=ck,
                                                                            checkpoint_every=3)
    m = GBDTRanker("listnet", backend=backend, n_estimators=12, random_state=0).fit(
        X, y, qid=qid, resume=ck, eval_set=(Xv, yv, qv))
    np.testing.assert_allclose(m.eval_scores_, _by_round(m, Xv, xgb_by_hand)(12), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend,loss", [("lightgbm", "lambdaloss"), ("lightgbm", "native:lambdarank"),
                                          ("xgboost", "listnet")])
def test_same_model_with_one_and_two_threads(backend, loss):
    X, y, qid = make_data(n_queries=200, list_len=12)  # above the engine's 2,000-row threading threshold
    a = GBDTRanker(loss, backend=backend, n_estimators=10, min_child_samples=5, random_state=0, n_jobs=1).fit(X, y, qid=qid)
    b = GBDTRanker(loss, backend=backend, n_estimators=10, min_child_samples=5, random_state=0, n_jobs=2).fit(X, y, qid=qid)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
