"""The scikit-learn estimator contract and clear errors on bad input, for every model."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, GroupKFold

from _model_data import make_data
from rankwise.errors import InputError, NotFittedError
from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker

FACTORIES = {
    "linear": lambda: LinearRanker("listnet", max_iter=10),
    "neural": lambda: NeuralRanker("listnet", hidden=(8,), epochs=1, random_state=0),
    "gbdt-lgb": lambda: GBDTRanker("listnet", n_estimators=3, random_state=0),
    "gbdt-xgb": lambda: GBDTRanker("listnet", backend="xgboost", n_estimators=3, random_state=0),
}


@pytest.fixture(params=list(FACTORIES))
def model(request):
    return FACTORIES[request.param]()


def test_clone_get_params_and_fit_returns_self(model):
    X, y, qid = make_data(n_queries=8, list_len=5)
    params = model.get_params()
    c = clone(model)
    assert c.get_params() == params and c is not model
    assert model.fit(X, y, qid=qid) is model
    assert model.n_features_in_ == X.shape[1] and hasattr(model, "history_")
    assert model.get_params() == params  # fit leaves constructor arguments untouched
    s = model.predict(X)
    assert s.shape == (len(y),) and s.dtype == np.float64 and np.all(np.isfinite(s))


def test_fit_accepts_a_ranking_dataset(model):
    from rankwise.data import RankingDataset

    X, y, qid = make_data(n_queries=8, list_len=5)
    ds = RankingDataset.from_arrays(X, y, qid)
    a = clone(model).fit(ds).predict(X)
    b = clone(model).fit(X, y, qid=qid).predict(X)
    np.testing.assert_allclose(a, b, atol=1e-6)
    clone(model).fit(X, y, qid=qid, eval_set=RankingDataset.from_arrays(X, y, qid))


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
        model.predict(np.zeros((3, 6)))


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
    with pytest.raises(InputError, match="X has 5 features but .* was fitted with 6"):
        model.predict(X[:, :5])


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
        NeuralRanker(hidden=(4,), epochs=2).fit(X, y, qid=qid)
    assert capsys.readouterr().err == ""
