"""The scikit-learn estimator contract and clear errors on bad input, for every model."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, GroupKFold

from _model_data import make_data
from rankwise.clicks import DLA, UnbiasedLambdaMART
from rankwise.errors import InputError, NotFittedError
from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker


class _UnbiasedLambdaMARTOnGrades(UnbiasedLambdaMART):
    """The click learner on the suite's graded data: a document is "clicked" where its grade is 2 or more (the
    learner takes clicks, 0/1; its own refusal of other labels: tests/clicks). Only ``fit``'s labels change:
    everything else is the learner's own code."""

    def fit(self, X, y=None, **kw):
        from rankwise.data import RankingDataset

        if isinstance(X, RankingDataset):
            X = RankingDataset(X.X, (X.labels >= 2).astype(float), X.query_offsets, X.query_ids)
        elif y is not None:
            y = np.asarray(y, dtype=float)
            y = np.where(np.isfinite(y), y >= 2, y)  # NaN and inf stay, for the checks of y
        return super().fit(X, y, **kw)

FACTORIES = {
    "linear": lambda: LinearRanker("listnet", max_iter=10),
    "neural": lambda: NeuralRanker("listnet", hidden=(8,), max_iter=1, random_state=0),
    # the listwise attention scorer: predict needs qid (the one documented deviation)
    "neural-attention": lambda: NeuralRanker("listnet", architecture="attention", hidden=(8,), max_iter=1,
                                             random_state=0),
    "gbdt-lgb": lambda: GBDTRanker("listnet", n_estimators=3, random_state=0),
    "gbdt-xgb": lambda: GBDTRanker("listnet", backend="xgboost", n_estimators=3, random_state=0),
    # the click learner: a query is a session, y its clicks (any non-negative labels), a row's rank its position
    "dla": lambda: DLA(hidden=(8,), max_iter=1, random_state=0),
    "unbiased-lambdamart": lambda: _UnbiasedLambdaMARTOnGrades(n_estimators=3, min_child_samples=2),
}


@pytest.fixture(params=list(FACTORIES))
def model(request):
    return FACTORIES[request.param]()


def _is_listwise(model):
    return getattr(model, "architecture", "mlp") == "attention"


def _predict(model, X, qid):
    """predict(X), or predict(X, qid=qid) for the attention scorer."""
    return model.predict(X, qid=qid) if _is_listwise(model) else model.predict(X)


def test_clone_get_params_and_fit_returns_self(model):
    X, y, qid = make_data(n_queries=8, list_len=5)
    params = model.get_params()
    c = clone(model)
    assert c.get_params() == params and c is not model
    assert model.fit(X, y, qid=qid) is model
    assert model.n_features_in_ == X.shape[1] and hasattr(model, "history_")
    assert model.get_params() == params  # fit leaves constructor arguments untouched
    s = _predict(model, X, qid)
    assert s.shape == (len(y),) and s.dtype == np.float64 and np.all(np.isfinite(s))
    if _is_listwise(model):
        with pytest.raises(InputError, match=r"predict\(X\) got no qid, but NeuralRanker\(architecture='attention'\) "
                                             r"scores each document in the context .* call predict\(X, qid=qid\)"):
            model.predict(X)
        with pytest.raises(InputError, match=r"qid has shape \(39,\) but X has 40 rows"):
            model.predict(X, qid=qid[:-1])


def test_fit_accepts_a_ranking_dataset(model):
    from rankwise.data import RankingDataset

    X, y, qid = make_data(n_queries=8, list_len=5)
    ds = RankingDataset.from_arrays(X, y, qid)
    a = _predict(clone(model).fit(ds), X, qid)
    b = _predict(clone(model).fit(X, y, qid=qid), X, qid)
    np.testing.assert_allclose(a, b, atol=1e-6)
    clone(model).fit(X, y, qid=qid, eval_set=RankingDataset.from_arrays(X, y, qid))


def test_eval_set_without_early_stopping_keeps_the_final_model(model):
    """An eval_set alone records the validation curve; only early stopping restores a best step."""
    (X, y, qid), (Xv, yv, qv) = make_data(n_queries=8, list_len=5), make_data(n_queries=6, list_len=5, seed=1)
    plain = clone(model).fit(X, y, qid=qid)
    watched = clone(model).fit(X, y, qid=qid, eval_set=(Xv, yv, qv))
    np.testing.assert_array_equal(_predict(watched, X, qid), _predict(plain, X, qid))
    assert not hasattr(watched, "best_iteration_") and not hasattr(watched, "best_score_")
    curve = watched.history_["ndcg@10"]
    assert len(curve) == len(watched.history_) and all(v is not None for v in curve)
    assert curve[-1] == pytest.approx(watched.score(Xv, yv, qid=qv), abs=1e-6)  # the last step is the model


def test_score_sample_weight_is_a_per_query_weighted_mean(model):
    m = model.fit(*make_data(n_queries=8, list_len=5)[:2], qid=make_data(n_queries=8, list_len=5)[2])
    X, y, qid = make_data(n_queries=8, list_len=8, seed=3)  # held-out queries: not all ranked perfectly
    qw = np.arange(1.0, 9.0)  # one weight per query
    per_query = np.array([m.score(X[qid == q], y[qid == q], qid=qid[qid == q]) for q in range(8)])
    want = float(qw @ per_query / qw.sum())
    assert m.score(X, y, qid=qid, sample_weight=qw[qid]) == pytest.approx(want, abs=1e-12)
    assert want != pytest.approx(per_query.mean(), abs=1e-6)  # the weights matter here
    assert m.score(X, y, qid=qid, sample_weight=np.ones(len(y))) == pytest.approx(m.score(X, y, qid=qid), abs=1e-12)
    # rows out of query order: the weights follow their rows
    p = np.random.default_rng(0).permutation(len(y))
    assert m.score(X[p], y[p], qid=qid[p], sample_weight=qw[qid][p]) == pytest.approx(want, abs=1e-12)
    w = qw[qid].copy()
    w[3] = 0.5
    with pytest.raises(InputError, match=r"sample_weight must be the same for every row of a query .*query 0 has "
                                         r"row weights from 0.5 to 1"):
        m.score(X, y, qid=qid, sample_weight=w)
    with pytest.raises(InputError, match="query weights sum to 0"):
        m.score(X, y, qid=qid, sample_weight=np.zeros(len(y)))
    with pytest.raises(InputError, match="sample_weight must be non-negative"):
        m.score(X, y, qid=qid, sample_weight=-np.ones(len(y)))


def test_negative_sample_weight_is_refused_for_arrays_and_ranking_datasets(model):
    from rankwise.data import RankingDataset

    X, y, qid = make_data(n_queries=8, list_len=5)
    w = np.ones(len(y))
    w[7] = -1.0
    for args, kw in (((X, y), {"qid": qid}), ((RankingDataset.from_arrays(X, y, qid),), {})):
        with pytest.raises(InputError, match=r"sample_weight must be non-negative; got 1 negative entries \(min -1\)"):
            clone(model).fit(*args, sample_weight=w, **kw)


@pytest.mark.parametrize("make", [lambda **kw: LinearRanker("ranknet", max_iter=3, **kw),
                                  lambda **kw: NeuralRanker("ranknet", hidden=(4,), max_iter=1, **kw),
                                  lambda **kw: GBDTRanker("ranknet", n_estimators=2, min_child_samples=2, **kw)])
def test_loss_params_are_checked_before_training(make):
    X, y, qid = make_data(n_queries=6, list_len=4)
    with pytest.raises(InputError, match=r"loss_params: unknown hyperparameter\(s\) \['sigmaa'\] for loss 'ranknet'; "
                                         r"known: \['gain', 'norm', 'pair_weights', 'sigma', 'truncation_level'\]"):
        make(loss_params={"sigmaa": 1}).fit(X, y, qid=qid)
    with pytest.raises(InputError, match=r"loss_params must be a dict of ranknet's hyperparameters .* got list \[1\]"):
        make(loss_params=[1]).fit(X, y, qid=qid)
    make(loss_params={"sigma": 2.0}).fit(X, y, qid=qid)  # a known name is fine


def test_loss_params_of_a_callable_loss():
    from rankwise.losses import ranknet_loss

    X, y, qid = make_data(n_queries=6, list_len=4)
    with pytest.raises(InputError, match=r"unknown hyperparameter\(s\) \['tau'\] for loss 'ranknet_loss'"):
        LinearRanker(ranknet_loss, loss_params={"tau": 1.0}, max_iter=3).fit(X, y, qid=qid)

    def any_loss(scores, labels, *, where=None, weights=None, reduction="mean", **hyper):
        return ranknet_loss(scores, labels, where=where, weights=weights, reduction=reduction)
    LinearRanker(any_loss, loss_params={"anything": 1.0}, max_iter=3).fit(X, y, qid=qid)  # **kwargs takes all


@pytest.mark.parametrize("est,grid", [
    (GBDTRanker("listnet", n_estimators=8, num_leaves=4, min_child_samples=3, random_state=0),
     {"learning_rate": [1e-4, 0.3]}),
    (NeuralRanker("listnet", hidden=(8,), max_iter=4, learning_rate=0.05, dropout=0.0, random_state=0),
     {"learning_rate": [1e-6, 0.05]}),
], ids=["gbdt", "neural"])
def test_grid_search_with_group_kfold_for_gbdt_and_neural(est, grid):
    X, y, qid = make_data(n_queries=24, list_len=6)
    with sklearn.config_context(enable_metadata_routing=True):
        est = est.set_fit_request(qid=True).set_score_request(qid=True)
        gs = GridSearchCV(est, grid, cv=GroupKFold(n_splits=3))
        gs.fit(X, y, qid=qid, groups=qid)
    name, values = next(iter(grid.items()))
    assert gs.best_params_ == {name: values[1]}  # a vanishing step size learns next to nothing
    train_idx, test_idx = next(GroupKFold(n_splits=3).split(X, y, groups=qid))
    m = clone(est).set_params(**gs.best_params_).fit(X[train_idx], y[train_idx], qid=qid[train_idx])
    assert gs.cv_results_["split0_test_score"][1] == pytest.approx(
        m.score(X[test_idx], y[test_idx], qid=qid[test_idx]), abs=1e-12)


def test_rankwise_subpackages_are_attributes_in_a_fresh_interpreter():
    import subprocess
    import sys

    code = ("import sys, rankwise; names = ['models', 'train', 'losses', 'metrics', 'data', 'theory', 'report']; "
            "mods = [getattr(rankwise, n) for n in names]; "
            "assert all(m.__name__ == 'rankwise.' + n for m, n in zip(mods, names)); "
            "assert rankwise.models.LinearRanker is rankwise.LinearRanker; "
            "assert set(names) <= set(dir(rankwise)); "
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    out = subprocess.run([sys.executable, "-c", "import rankwise; rankwise.nope"], capture_output=True, text=True)
    assert "AttributeError: module 'rankwise' has no attribute 'nope'" in out.stderr


def test_grid_search_with_group_kfold_routes_qid():
    X, y, qid = make_data(n_queries=24, list_len=6)
    with sklearn.config_context(enable_metadata_routing=True):
        est = LinearRanker("listnet", max_iter=20).set_fit_request(qid=True).set_score_request(qid=True)
        gs = GridSearchCV(est, {"alpha": [1e-3, 100.0]}, cv=GroupKFold(n_splits=3))
        gs.fit(X, y, qid=qid, groups=qid)
    assert gs.best_params_ == {"alpha": 1e-3}  # a huge ℓ2 penalty flattens the scores
    assert gs.cv_results_["mean_test_score"][0] > gs.cv_results_["mean_test_score"][1]
    # each fold's score is the NDCG@10 of the held-out queries (recomputed by hand for fold 0)
    train_idx, test_idx = next(GroupKFold(n_splits=3).split(X, y, groups=qid))
    m = LinearRanker("listnet", max_iter=20, alpha=1e-3).fit(X[train_idx], y[train_idx], qid=qid[train_idx])
    assert gs.cv_results_["split0_test_score"][0] == pytest.approx(m.score(X[test_idx], y[test_idx], qid=qid[test_idx]))


def test_predict_before_fit(model):
    with pytest.raises(NotFittedError, match="not fitted yet; call fit"):
        _predict(model, np.zeros((3, 6)), np.zeros(3))


def test_missing_qid_and_length_mismatch(model):
    X, y, qid = make_data(n_queries=8, list_len=5)
    with pytest.raises(InputError, match="qid is required"):
        model.fit(X, y)
    with pytest.raises(InputError, match=r"qid has shape \(39,\) but X has 40 rows"):
        model.fit(X, y, qid=qid[:-1])
    with pytest.raises(InputError, match="y has 39 entries but X has 40 rows"):
        model.fit(X, y[:-1], qid=qid)


def test_nan_inf_in_y_and_x(model):
    X, y, qid = make_data(n_queries=8, list_len=5)
    yb = y.copy()
    yb[2] = np.nan
    with pytest.raises(InputError, match="y contains NaN or inf"):
        model.fit(X, yb, qid=qid)
    Xb = X.copy()
    Xb[4, 1] = np.inf
    with pytest.raises(InputError, match="X contains inf values"):
        model.fit(Xb, y, qid=qid)
    if not isinstance(model, GBDTRanker):  # GBDT treats NaN features as missing values
        Xb[4, 1] = np.nan
        with pytest.raises(InputError, match="X contains NaN values"):
            model.fit(Xb, y, qid=qid)


def test_validation_set_with_other_features(model):
    X, y, qid = make_data(n_queries=8, list_len=5)
    with pytest.raises(InputError, match="eval_set X has 5 features but X has 6"):
        model.fit(X, y, qid=qid, eval_set=(X[:, :5], y, qid))
    with pytest.raises(InputError, match=r"eval_set must be \(X_val, y_val, qid_val\)"):
        model.fit(X, y, qid=qid, eval_set=(X, y))
    model.fit(X, y, qid=qid)
    with pytest.raises(InputError, match=r"X has 5 features, but .* is expecting 6 features as input"):
        _predict(model, X[:, :5], qid)


def test_queries_of_one_document(model):
    X, y, qid = make_data(n_queries=8, list_len=5)
    qid = qid.copy()
    qid[0] = 99  # row 0 becomes a query of its own
    with pytest.warns(UserWarning, match="1 of 9 queries have a single document"):
        model.fit(X, y, qid=qid)
    with pytest.raises(InputError, match="every query in qid has a single document"):
        model.fit(X[:4], y[:4], qid=np.arange(4))


def test_early_stopping_without_eval_set_and_unknown_loss():
    X, y, qid = make_data(n_queries=8, list_len=5)
    with pytest.raises(InputError, match="early_stopping_rounds needs a validation set"):
        LinearRanker(early_stopping_rounds=3).fit(X, y, qid=qid)
    with pytest.raises(InputError, match="listnett"):
        LinearRanker("listnett").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="solver must be one of"):
        LinearRanker(solver="sgd").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="unknown metric"):
        LinearRanker(eval_metric="ndgc@10").fit(X, y, qid=qid, eval_set=(X, y, qid))


def test_progress_bar_is_off_when_not_a_terminal(capsys):
    X, y, qid = make_data(n_queries=8, list_len=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NeuralRanker(hidden=(4,), max_iter=2).fit(X, y, qid=qid)
    assert capsys.readouterr().err == ""
