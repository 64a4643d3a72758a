"""as_objective / grad_hess: against autograd on the padded form, and against LightGBM / XGBoost."""
from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from _losses_cases import ALL, BASE_HYPER, SPECS
from rankwise.errors import InputError
from rankwise.losses import REGISTRY, as_objective, grad_hess


def _ragged(seed, n_q=7, max_len=13, binary=False):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, max_len + 1, n_q)
    sizes[0] = 1
    off = np.concatenate(([0], np.cumsum(sizes)))
    n = off[-1]
    s = rng.normal(size=n) * 1.5
    y = rng.integers(0, 2 if binary else 3, n).astype(float)
    return s, y, off


def _per_query_autograd(name, s, y, off, w=None, hessian=True, **hyper):
    g = np.zeros_like(s)
    h = np.zeros_like(s)
    for q in range(len(off) - 1):
        a, b = off[q], off[q + 1]
        if a == b:
            continue
        sq = torch.tensor(s[a:b], requires_grad=True)
        yq = torch.tensor(y[a:b])
        wq = None if w is None else torch.tensor(w[a:b])
        f = lambda x: REGISTRY[name](x, yq, weights=wq, reduction="sum", **hyper)  # noqa: E731
        gq, = torch.autograd.grad(f(sq), sq)
        g[a:b] = gq.numpy()
        if hessian:
            H = torch.autograd.functional.hessian(f, sq.detach())
            h[a:b] = torch.diagonal(H).numpy()
    return g, h


def _dense_reference_hyper(name, hyper):
    """The sort-based forms are first-order autograd Functions: take the reference Hessian (and
    gradient) from the dense pair form of the same loss."""
    return {**hyper, "method": "dense"} if "method" in SPECS[name].defaults else hyper


@pytest.mark.parametrize("name", ALL)
def test_grad_hess_matches_autograd_on_the_padded_form(name):
    hyper = BASE_HYPER.get(name, {})
    s, y, off = _ragged(41, binary=SPECS[name].binary_labels)
    w = np.random.default_rng(1).uniform(0.5, 1.5, len(s))
    g, h = grad_hess(name, s, y, off, weights=w, **hyper)
    g_ref, h_ref = _per_query_autograd(name, s, y, off, w, **_dense_reference_hyper(name, hyper))
    np.testing.assert_allclose(g, g_ref, rtol=1e-9, atol=1e-12)
    assert np.all(h > 0) and np.all(np.isfinite(h))
    if SPECS[name].hessian == "exact":
        np.testing.assert_allclose(h, np.maximum(h_ref, 1e-6), rtol=1e-8, atol=1e-10)
    else:
        np.testing.assert_allclose(h, np.maximum(np.abs(g_ref), 1e-6), rtol=1e-9, atol=1e-12)
    # per-query weights scale each query's gradient and Hessian
    gw = np.random.default_rng(2).uniform(0.5, 3.0, len(off) - 1)
    row = np.repeat(gw, np.diff(off))
    g2, h2 = grad_hess(name, s, y, off, weights=w, group_weights=gw, hess_floor=1e-300, **hyper)
    np.testing.assert_allclose(g2, g_ref * row, rtol=1e-9, atol=1e-12)
    h_want = h_ref * row if SPECS[name].hessian == "exact" else np.abs(g_ref * row)
    np.testing.assert_allclose(h2, np.maximum(h_want, 1e-300), rtol=1e-8, atol=1e-10)


FAST_FORMS = [("rankboost", {}), ("rankboost", {"pair_weights": "delta_label"}), ("pairwise_squared", {}),
              ("pairwise_squared", {"utility": "exp2"}), ("op_pairwise", {"phi": "exponential"}),
              ("op_pairwise", {"phi": "squared_hinge", "utility": "exp2"})]


@pytest.mark.parametrize("name,hyper", FAST_FORMS, ids=lambda v: v if isinstance(v, str) else str(v))
@pytest.mark.parametrize("spread", [1.0, 40.0])
def test_fast_grad_hess_equals_the_dense_pair_form(name, hyper, spread):
    """The O(n log n) / O(n) value, gradient and exact Hessian diagonal that grad_hess takes from
    the sort-based forms equal the dense O(n^2) pair form: ragged groups (padding masked), tied
    scores and labels, row and group weights, and (spread 40) pairs beyond the linear continuation
    of the exponential at 50."""
    s, y, off = _ragged(43, n_q=9, max_len=15)
    s = np.round(s * spread * 2) / 2  # ties
    rng = np.random.default_rng(4)
    w = rng.uniform(0.5, 1.5, len(s))
    gw = rng.uniform(0.5, 3.0, len(off) - 1)
    g, h, v = grad_hess(name, s, y, off, weights=w, group_weights=gw, hess_floor=1e-300, return_value=True, **hyper)
    gd, hd, vd = grad_hess(name, s, y, off, weights=w, group_weights=gw, hess_floor=1e-300, return_value=True,
                           method="dense", **hyper)
    assert np.isfinite(v) and v == pytest.approx(vd, rel=1e-12)
    np.testing.assert_allclose(g, gd, rtol=1e-10, atol=1e-12 * np.abs(gd).max())
    np.testing.assert_allclose(h, hd, rtol=1e-10, atol=1e-12 * np.abs(hd).max())
    # and the value is the loss summed over the queries
    want = sum(gw[q] * float(REGISTRY[name](torch.tensor(s[off[q]:off[q + 1]]), torch.tensor(y[off[q]:off[q + 1]]),
                                            weights=torch.tensor(w[off[q]:off[q + 1]]), reduction="sum", **hyper))
               for q in range(len(off) - 1))
    assert v == pytest.approx(want, rel=1e-12)


def test_return_value_of_the_autograd_and_pair_paths():
    s, y, off = _ragged(45)
    for name in ("listnet", "ranknet", "pointwise_squared"):
        _, _, v = grad_hess(name, s, y, off, return_value=True)
        want = sum(float(REGISTRY[name](torch.tensor(s[a:b]), torch.tensor(y[a:b]), reduction="sum"))
                   for a, b in zip(off[:-1], off[1:]))
        assert v == pytest.approx(want, rel=1e-12)


@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(0, 9), min_size=1, max_size=8), seed=st.integers(0, 2**16),
       name=st.sampled_from(["ranknet", "listnet", "pairwise_hinge", "listmle", "lambdaloss"]))
def test_grad_hess_on_ragged_groups(sizes, seed, name):
    rng = np.random.default_rng(seed)
    off = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    s = rng.normal(size=off[-1])
    y = rng.integers(0, 4, off[-1]).astype(float)
    g, h = grad_hess(name, s, y, off)
    g_ref, _ = _per_query_autograd(name, s, y, off, hessian=False)
    np.testing.assert_allclose(g, g_ref, rtol=1e-9, atol=1e-12)
    assert np.all(h >= 1e-6)


def test_grad_hess_rejects_bad_groups():
    with pytest.raises(InputError, match="offsets must be non-decreasing"):
        grad_hess("ranknet", np.zeros(4), np.zeros(4), [0, 3])
    with pytest.raises(InputError, match="labels_flat has 3 entries"):
        grad_hess("ranknet", np.zeros(4), np.zeros(3), [0, 4])
    with pytest.raises(InputError, match="unknown loss"):
        as_objective("lambdamart")
    with pytest.raises(InputError, match="backend must be one of"):
        as_objective("ranknet", backend="catboost")
    with pytest.raises(InputError, match="unknown hyperparameter"):
        as_objective("ranknet", sigmaa=2.0)


# ------------------------------------------------------------------ peers: LightGBM, XGBoost


def _toy(seed=0, n_q=40, size=12, n_feat=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_q * size, n_feat))
    y = (X[:, 0] + 0.5 * rng.normal(size=len(X)) > 0.3).astype(float)
    group = np.full(n_q, size)
    return X, y, group


def test_sigmoid_ce_reproduces_xgboost_binary_logistic():
    xgb = pytest.importorskip("xgboost")
    X, y, group = _toy()
    d = xgb.DMatrix(X, y)
    d.set_group(group)
    params = {"max_depth": 3, "eta": 0.3, "lambda": 1.0, "tree_method": "exact", "base_score": 0.5, "nthread": 1}
    ref = xgb.train({**params, "objective": "binary:logistic"}, d, 5)
    # a custom objective works on the margin: base_score 0 is the margin of p = 0.5
    ours = xgb.train({**params, "base_score": 0.0, "disable_default_eval_metric": 1}, d, 5,
                     obj=as_objective("sigmoid_ce", "xgboost"))
    np.testing.assert_allclose(ours.predict(d, output_margin=True), ref.predict(d, output_margin=True),
                               rtol=1e-5, atol=1e-5)


def test_pointwise_squared_reproduces_lightgbm_l2_regression():
    lgb = pytest.importorskip("lightgbm")
    X, y, group = _toy(1)
    params = {"num_leaves": 7, "learning_rate": 0.2, "min_data_in_leaf": 5, "verbose": -1, "num_threads": 1,
              "boost_from_average": False, "lambda_l2": 0.0, "min_sum_hessian_in_leaf": 0.0}
    ref = lgb.train({**params, "objective": "regression"}, lgb.Dataset(X, y, group=group), 5)
    # ℓ = (y - s)²: gradient and Hessian are 2x those of LightGBM's ½(y - s)², the Newton step is the same
    ours = lgb.train({**params, "objective": as_objective("pointwise_squared")},
                     lgb.Dataset(X, y, group=group), 5)
    np.testing.assert_allclose(ours.predict(X, raw_score=True), ref.predict(X, raw_score=True), rtol=1e-6, atol=1e-6)


def test_lightgbm_sklearn_ranker_accepts_the_objective():
    """The scikit-learn adapter (arguments y_true, y_pred: swapped, they would train on the labels as
    scores) boosts the same trees as the Booster adapter, and they rank better than reversed: a sign
    error in either adapter fails here."""
    lgb = pytest.importorskip("lightgbm")
    X, y, group = _toy(2)
    model = lgb.LGBMRanker(objective=as_objective("listnet", "lightgbm_sklearn"), n_estimators=5,
                           num_leaves=7, verbose=-1, n_jobs=1, min_child_samples=5)
    model.fit(X, y, group=group)
    params = {"objective": as_objective("listnet", "lightgbm"), "num_leaves": 7, "verbose": -1, "num_threads": 1,
              "min_data_in_leaf": 5, "learning_rate": 0.1}
    booster = lgb.train(params, lgb.Dataset(X, y, group=group), 5)
    pred = model.predict(X, raw_score=True)
    np.testing.assert_allclose(pred, booster.predict(X, raw_score=True), rtol=1e-12, atol=1e-12)
    from rankwise.metrics import ndcg

    qid = np.repeat(np.arange(len(group)), group)
    learned, reversed_ = (float(ndcg(s, y, qid=qid, k=10)) for s in (pred, -pred))
    assert learned > reversed_ + 0.2, (learned, reversed_)


def _load_fold(path):
    from sklearn.datasets import load_svmlight_file
    with gzip.open(path, "rb") as fh:
        X, y, qid = load_svmlight_file(fh, query_id=True)
    X = X.toarray()
    sizes = np.diff(np.flatnonzero(np.r_[True, qid[1:] != qid[:-1], True]))
    return X, y, sizes


def _mean_ndcg10(scores, y, sizes):
    out, a = [], 0
    for n in sizes:
        s, l = scores[a:a + n], y[a:a + n]
        a += n
        g = 2.0 ** l - 1
        disc = 1 / np.log2(np.arange(2, n + 2))
        ideal = (np.sort(g)[::-1] * disc)[:10].sum()
        if ideal == 0:
            continue
        out.append((g[np.argsort(-s, kind="stable")] * disc)[:10].sum() / ideal)
    return float(np.mean(out))


@pytest.fixture
def one_torch_thread():
    """Two-thread torch ops stall on a loaded 2-core machine (OpenMP barriers); restore after."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.realdata
def test_mq2008_gbdt_with_rankwise_objectives_matches_the_builtin_lambdarank(mq2008_dir, one_torch_thread):
    lgb = pytest.importorskip("lightgbm")
    xgb = pytest.importorskip("xgboost")
    Xtr, ytr, gtr = _load_fold(mq2008_dir / "Fold1" / "train.txt.gz")
    Xte, yte, gte = _load_fold(mq2008_dir / "Fold1" / "test.txt.gz")
    params = {"num_leaves": 15, "learning_rate": 0.1, "min_data_in_leaf": 20, "verbose": -1, "num_threads": 1}
    builtin = lgb.train({**params, "objective": "lambdarank"}, lgb.Dataset(Xtr, ytr, group=gtr), 50)
    ref = _mean_ndcg10(builtin.predict(Xte), yte, gte)
    ours = lgb.train({**params, "objective": as_objective("ranknet", pair_weights="delta_ndcg")},
                     lgb.Dataset(Xtr, ytr, group=gtr), 50)
    got = _mean_ndcg10(ours.predict(Xte), yte, gte)
    rng = np.random.default_rng(0)
    chance = _mean_ndcg10(rng.normal(size=len(yte)), yte, gte)
    assert got > chance + 0.1
    assert got > ref - 0.03, (got, ref)
    d = xgb.DMatrix(Xtr, ytr)
    d.set_group(gtr)
    booster = xgb.train({"max_depth": 4, "eta": 0.1, "nthread": 1, "disable_default_eval_metric": 1},
                        d, 50, obj=as_objective("listnet", "xgboost"))
    got_x = _mean_ndcg10(booster.predict(xgb.DMatrix(Xte)), yte, gte)
    assert got_x > ref - 0.03, (got_x, ref)


def test_the_objective_resolves_its_loss_once_not_every_round(monkeypatch):
    """Issue 28: GBDTRanker built its objective twice and grad_hess re-resolved the loss, re-checked its
    hyperparameters and rebuilt the kernel every boosting round."""
    pytest.importorskip("lightgbm")
    from rankwise.losses import objective
    from rankwise.models import GBDTRanker

    kernels = []
    real = objective._resolved

    def counting(loss, hyper):
        sp, h, kernel = real(loss, hyper)
        kernels.append(kernel)
        return sp, h, kernel
    monkeypatch.setattr(objective, "_resolved", counting)
    X, y, group = _toy(3)
    qid = np.repeat(np.arange(len(group)), group)
    for rounds in (2, 6):
        kernels.clear()
        m = GBDTRanker("lambdarank", n_estimators=rounds, min_child_samples=5, n_jobs=1, random_state=0)
        m.fit(X, y, qid=qid)
        assert m.n_estimators_ == rounds and len(m.history_) == rounds
        assert len(kernels) == 1 and kernels[0] is not None  # one resolution per fit, the compiled kernel
    loss_rounds = [r for r, v in zip(m.history_["iteration"], m.history_["loss"]) if v is not None]
    assert loss_rounds == [0]  # loss_every=10: the value only in round 0
