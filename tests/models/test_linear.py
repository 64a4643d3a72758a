"""LinearRanker: peers (scikit-learn Ridge/Lasso), the ListNet optimality condition, solvers, maps."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Lasso, Ridge

from _model_data import make_data
from reference.models_reference import listnet_linear_objective_grad, mean_ndcg
from rankwise.models import LinearRanker


def test_lbfgs_pointwise_squared_equals_sklearn_ridge():
    X, y, qid = make_data(n_queries=30, list_len=8)
    alpha = 0.3
    m = LinearRanker("pointwise_squared", alpha=alpha, standardize=False, tol=1e-12, max_iter=500).fit(X, y, qid=qid)
    # ours: (1/m) Σ_q Σ_i (s_i - y_i)² + α/2 ||w||²  ==  (1/m) [ ||Xw + b - y||² + (m α / 2) ||w||² ]
    ref = Ridge(alpha=30 * alpha / 2).fit(X.astype(np.float64), y)
    np.testing.assert_allclose(m.coef_, ref.coef_, atol=1e-5)
    assert m.intercept_ == pytest.approx(ref.intercept_, abs=1e-5)


def test_lbfgs_l1_equals_sklearn_lasso_with_exact_zeros():
    rng = np.random.default_rng(3)
    X, y, qid = make_data(n_queries=30, list_len=8, n_features=10)
    X[:, 6:] = rng.normal(size=(len(X), 4)) * 0.1  # weak noise features that the ℓ1 term removes
    l1 = 0.8
    m = LinearRanker("pointwise_squared", alpha=0.0, l1=l1, standardize=False, tol=1e-12, max_iter=2000).fit(X, y, qid=qid)
    n = len(y)
    # (1/2n) ||Xw + b - y||² + a ||w||_1 with a = m l1 / (2n)
    ref = Lasso(alpha=30 * l1 / (2 * n), tol=1e-12, max_iter=100000).fit(X.astype(np.float64), y)
    np.testing.assert_allclose(m.coef_, ref.coef_, atol=1e-5)
    assert np.array_equal(m.coef_ == 0, ref.coef_ == 0) and np.any(ref.coef_ == 0)


def test_lbfgs_listnet_solution_is_stationary_for_naive_objective():
    X, y, qid = make_data(n_queries=25, list_len=7)
    alpha = 0.05
    m = LinearRanker("listnet", alpha=alpha, standardize=False, fit_intercept=False, tol=1e-10, max_iter=1000)
    m.fit(X, y, qid=qid)
    g = listnet_linear_objective_grad(m.coef_, 0.0, X.astype(np.float64), y, qid, alpha)
    assert np.linalg.norm(g) < 1e-5
    # and the naive gradient at a random point is far from zero (the check can fail)
    assert np.linalg.norm(listnet_linear_objective_grad(m.coef_ + 0.5, 0.0, X.astype(np.float64), y, qid, alpha)) > 1e-2


@pytest.mark.parametrize("solver", ["ogd", "adam"])
def test_stochastic_solvers_approach_the_erm_solution(solver):
    (X, y, qid), (Xt, yt, qt) = make_data(seed=0), make_data(seed=1)
    erm = LinearRanker("listnet", alpha=1e-3, tol=1e-10, max_iter=500).fit(X, y, qid=qid)
    m = LinearRanker("listnet", alpha=1e-3, solver=solver, max_iter=40, random_state=0,
                     learning_rate=0.5 if solver == "ogd" else 0.05).fit(X, y, qid=qid)
    cos = m.coef_ @ erm.coef_ / np.linalg.norm(m.coef_) / np.linalg.norm(erm.coef_)
    assert cos > 0.98
    assert m.score(Xt, yt, qid=qt) > erm.score(Xt, yt, qid=qt) - 0.03
    assert len(m.history_["loss"]) == 40 and m.history_["loss"][-1] < m.history_["loss"][0]


def test_ogd_returns_the_average_of_its_iterates():
    X, y, qid = make_data(n_queries=12, list_len=5)
    m = LinearRanker("listnet", alpha=0.0, solver="ogd", max_iter=1, learning_rate=1.0, standardize=False,
                     fit_intercept=False, random_state=0).fit(X, y, qid=qid)
    from reference.models_reference import averaged_ogd, listnet_loss_and_grad
    from rankwise.train.batching import query_batches
    from rankwise.train.loop import epoch_seed

    order = [int(b[0]) for b in query_batches(np.arange(0, 61, 5), 1, rng=np.random.default_rng(epoch_seed(0, 0)))]
    fns = [lambda w, q=q: X[5 * q:5 * q + 5].T.astype(float) @ listnet_loss_and_grad(X[5 * q:5 * q + 5] @ w, y[5 * q:5 * q + 5])[1]
           for q in order]
    _, avg = averaged_ogd(fns, np.zeros(X.shape[1]), lr=1.0)
    np.testing.assert_allclose(m.coef_, avg, atol=1e-5)


def test_rows_out_of_query_order_give_the_same_model():
    X, y, qid = make_data(n_queries=20, list_len=6)
    p = np.random.default_rng(0).permutation(len(y))
    a = LinearRanker("ranknet", alpha=1e-2).fit(X, y, qid=qid)
    b = LinearRanker("ranknet", alpha=1e-2).fit(X[p], y[p], qid=qid[p])
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-6)
    np.testing.assert_allclose(b.predict(X[p]), a.predict(X)[p], atol=1e-5)


@pytest.mark.parametrize("feature_map,n_out", [("poly2", 6 + 21), ("rff", 64)])
def test_feature_maps_fit_a_nonlinear_target(feature_map, n_out):
    rng = np.random.default_rng(0)
    nq, L = 40, 10
    X = rng.normal(size=(nq * L, 6)).astype(np.float32)
    z = X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=len(X))  # invisible to a linear scorer
    y = np.digitize(z, [-0.5, 0.5, 1.5]).astype(float)
    qid = np.repeat(np.arange(nq), L)
    lin = LinearRanker("listnet", alpha=1e-3).fit(X, y, qid=qid)
    fm = LinearRanker("listnet", alpha=1e-3, feature_map=feature_map, n_components=64, gamma=0.2,
                      random_state=0).fit(X, y, qid=qid)
    assert fm.coef_.shape == (n_out,)
    assert fm.score(X, y, qid=qid) > lin.score(X, y, qid=qid) + 0.15


def test_score_is_mean_ndcg10_of_naive_reference():
    X, y, qid = make_data(n_queries=6, list_len=5)
    m = LinearRanker("listnet").fit(X, y, qid=qid)
    assert m.score(X, y, qid=qid) == pytest.approx(mean_ndcg(m.predict(X), y, qid), abs=1e-12)
    s = np.round(m.predict(X), 1)  # rounding creates ties
    m.coef_, m.intercept_ = m.coef_ * 0, 0.0
    assert m.score(X, y, qid=qid) == pytest.approx(mean_ndcg(np.zeros(len(y)), y, qid), abs=1e-12)
    assert mean_ndcg(s, y, qid) != pytest.approx(mean_ndcg(np.zeros(len(y)), y, qid))


def test_early_stopping_keeps_best_iteration():
    (X, y, qid), (Xv, yv, qv) = make_data(seed=0), make_data(seed=1)
    m = LinearRanker("listnet", solver="adam", max_iter=60, learning_rate=0.05, early_stopping_rounds=3, random_state=0)
    m.fit(X, y, qid=qid, eval_set=(Xv, yv, qv))
    vals = m.history_["ndcg@10"]
    assert len(vals) < 60  # stopped early
    assert m.best_score_ == pytest.approx(max(vals)) and vals[m.best_iteration_] == max(vals)
    assert m.score(Xv, yv, qid=qv) == pytest.approx(max(vals), abs=1e-6)


@pytest.mark.parametrize("solver", ["ogd", "adam"])
def test_checkpoint_resume_equals_uninterrupted_run(tmp_path, solver):
    X, y, qid = make_data(n_queries=20, list_len=6)
    kw = dict(loss="listnet", solver=solver, random_state=7, learning_rate=0.1)
    full = LinearRanker(max_iter=6, **kw).fit(X, y, qid=qid)
    ck = tmp_path / "ck.npz"
    LinearRanker(max_iter=3, **kw).fit(X, y, qid=qid, checkpoint=ck)
    resumed = LinearRanker(max_iter=6, **kw).fit(X, y, qid=qid, resume=ck)
    np.testing.assert_allclose(resumed.coef_, full.coef_, atol=1e-6)
    assert resumed.history_["epoch"] == list(range(6))


def test_lbfgs_early_stopping_keeps_the_best_iteration():
    (X, y, qid), (Xv, yv, qv) = make_data(seed=0), make_data(seed=1)
    # a label-noise-free training set that L-BFGS overfits slowly: the validation NDCG peaks early
    m = LinearRanker("listnet", alpha=0.0, max_iter=200, tol=1e-12, early_stopping_rounds=2)
    m.fit(X, y, qid=qid, eval_set=(Xv, yv, qv))
    vals = m.history_["ndcg@10"]
    assert len(vals) < 200  # stopped by patience, not by max_iter or convergence
    assert vals[m.best_iteration_] == max(vals) and m.best_iteration_ == len(vals) - 3
    assert m.score(Xv, yv, qid=qv) == pytest.approx(max(vals), abs=1e-9)
    assert all(v is not None for v in m.history_["loss"])


def test_lbfgs_history_records_the_objective_without_an_extra_pass():
    X, y, qid = make_data(n_queries=15, list_len=6)
    alpha = 0.05
    m = LinearRanker("listnet", alpha=alpha, standardize=False, fit_intercept=False, tol=1e-10, max_iter=500)
    calls = []
    m.fit(X, y, qid=qid, eval_set=(X, y, qid))  # with an eval set: loss recorded too (it was None)
    loss = m.history_["loss"]
    assert len(loss) == m.n_iter_ and all(v is not None for v in loss)
    assert all(b <= a + 1e-12 for a, b in zip(loss, loss[1:]))  # L-BFGS-B descends
    from reference.models_reference import listnet_loss_and_grad

    Xd = X.astype(np.float64)
    want = np.mean([listnet_loss_and_grad(Xd[qid == q] @ m.coef_, y[qid == q])[0] for q in range(15)])
    assert loss[-1] == pytest.approx(want + 0.5 * alpha * m.coef_ @ m.coef_, rel=1e-9)
    # the loss comes from the optimiser's own evaluations: one objective call per function evaluation
    import rankwise.models.linear as linear_mod

    m2 = LinearRanker("listnet", alpha=alpha, standardize=False, fit_intercept=False, tol=1e-10, max_iter=500)
    real = linear_mod.minimize_erm

    def counting(fun_grad, *a, **k):
        def fg(theta):
            calls.append(1)
            return fun_grad(theta)
        theta, res = real(fg, *a, **k)
        assert len(calls) == res.nfev
        return theta, res
    linear_mod.minimize_erm = counting
    try:
        m2.fit(X, y, qid=qid)
    finally:
        linear_mod.minimize_erm = real
    assert m2.history_["loss"] == loss and len(calls) > 0


def test_lbfgs_warns_when_it_stops_at_max_iter():
    X, y, qid = make_data(n_queries=10, list_len=5)
    with pytest.warns(UserWarning, match=r"LinearRanker\(solver='lbfgs'\) reached max_iter=2 iterations without "
                                         "converging"):
        LinearRanker("listnet", max_iter=2).fit(X, y, qid=qid)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LinearRanker("listnet", alpha=1e-2, max_iter=500, tol=1e-6).fit(X, y, qid=qid)  # converges: silent


def test_lbfgs_checkpoint_resume_reaches_the_same_optimum(tmp_path):
    X, y, qid = make_data(n_queries=20, list_len=6)
    kw = dict(loss="listnet", alpha=1e-2, tol=1e-12)  # strongly convex: one optimum
    full = LinearRanker(max_iter=300, **kw).fit(X, y, qid=qid)
    ck = tmp_path / "ck.npz"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stopped at max_iter on purpose
        part = LinearRanker(max_iter=4, **kw).fit(X, y, qid=qid, checkpoint=ck)
    resumed = LinearRanker(max_iter=300, **kw).fit(X, y, qid=qid, resume=ck)
    assert resumed.history_["epoch"] == list(range(len(resumed.history_)))
    assert resumed.history_["loss"][:4] == part.history_["loss"] and resumed.n_iter_ == len(resumed.history_)
    np.testing.assert_allclose(resumed.coef_, full.coef_, atol=1e-5)
    # the checkpoint is rewritten after every iteration: it holds the last iterate of the resumed run
    again = LinearRanker(max_iter=len(resumed.history_), **kw).fit(X, y, qid=qid, resume=ck)
    np.testing.assert_array_equal(again.coef_, resumed.coef_)


@pytest.mark.parametrize("solver", ["lbfgs", "ogd", "adam"])
def test_fixed_random_state_gives_identical_models(solver):
    X, y, qid = make_data(n_queries=12, list_len=6)
    kw = dict(loss="ranknet", solver=solver, feature_map="rff", n_components=16, max_iter=5, random_state=11)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = LinearRanker(**kw).fit(X, y, qid=qid)
        b = LinearRanker(**kw).fit(X, y, qid=qid)
        c = LinearRanker(**{**kw, "random_state": 12}).fit(X, y, qid=qid)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert a.history_ == b.history_
    assert not np.array_equal(a.rff_weights_, c.rff_weights_)  # the seed is used


@pytest.mark.parametrize("solver", ["lbfgs", "adam"])
def test_resume_with_other_features_is_refused(tmp_path, solver):
    X, y, qid = make_data(n_queries=10, list_len=5)
    ck = tmp_path / "ck.npz"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        LinearRanker(solver=solver, max_iter=2, random_state=0).fit(X, y, qid=qid, checkpoint=ck)
    from rankwise.errors import InputError

    with pytest.raises(InputError, match=r"resume=.*ck.npz': the checkpoint was fitted on 6 features but X has 5; "
                                         "resume with the same features"):
        LinearRanker(solver=solver, max_iter=4, random_state=0).fit(X[:, :5], y, qid=qid, resume=ck)
