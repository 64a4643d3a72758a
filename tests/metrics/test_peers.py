"""Profiles against the real peers on all MQ2008 test folds, with distinct and with tied scores.

The peers are declared test dependencies (pyproject ``test`` extra): a missing one is an error
of the environment and fails here, never a skip.
"""
from __future__ import annotations

import warnings

import lightgbm as lgb
import numpy as np
import pytest
import pytrec_eval
import ranx
import xgboost as xgb

import rankwise.metrics as M

from _mq2008 import load_fold, score_sets

FOLDS = [1, 2, 3, 4, 5]
SCORES = ["model", "rounded"]


@pytest.fixture(params=FOLDS, ids=[f"Fold{f}" for f in FOLDS])
def fold(request, mq2008_dir):
    return load_fold(str(mq2008_dir / f"Fold{request.param}" / "test.txt.gz"))


def _tied_fraction(s, q):
    pairs = {(a, b) for a, b in zip(q, s)}
    return 1 - len(pairs) / len(s)


@pytest.mark.realdata
@pytest.mark.parametrize("kind", SCORES)
def test_trec_eval_profile_vs_pytrec_eval(fold, kind):
    X, y, q, d = fold
    s = score_sets(X)[kind]
    if kind == "rounded":
        assert _tied_fraction(s, q) > 0.5  # the tie rule really is exercised
    qrel, run = {}, {}
    for qq, dd, yy, ss in zip(q, d, y, s):
        qrel.setdefault(qq, {})[dd] = int(yy)
        run.setdefault(qq, {})[dd] = float(ss)
    measures = {"ndcg": "ndcg", "ndcg_cut_5": "ndcg@5", "ndcg_cut_10": "ndcg@10", "map": "map",
                "P_5": "P@5", "P_10": "P@10", "recall_10": "recall@10", "recip_rank": "mrr"}
    peer = pytrec_eval.RelevanceEvaluator(qrel, set(measures)).evaluate(run)
    ours = M.evaluate(s, y, q, list(measures.values()), profile="trec_eval9", doc_ids=d).per_query
    assert list(ours.index) == list(dict.fromkeys(q))
    for te_name, spec in measures.items():
        col = ours[spec]  # results are keyed by the spec as written
        expected = np.array([peer[qq][te_name] for qq in ours.index])
        np.testing.assert_allclose(col.to_numpy(float), expected, rtol=0, atol=1e-9, err_msg=te_name)


def _lightgbm_eval(X, y, q, s, eval_at):
    sizes = [int(n) for n in np.diff(np.flatnonzero(np.r_[True, q[1:] != q[:-1], True]))]
    ds = lgb.Dataset(X, y, group=sizes, init_score=s, free_raw_data=False)
    rec = {}
    # min_data_in_leaf > n: the one tree cannot split, so it adds a constant at most and the
    # evaluated ranking (ties included) is exactly that of the init scores.
    params = {"objective": "lambdarank", "metric": ["ndcg", "map"], "eval_at": eval_at, "verbose": -1,
              "min_data_in_leaf": len(y) + 1, "num_threads": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lgb.train(params, ds, num_boost_round=1, valid_sets=[ds], valid_names=["v"],
                  callbacks=[lgb.record_evaluation(rec)])
    return {k: v[-1] for k, v in rec["v"].items()}


@pytest.mark.realdata
@pytest.mark.parametrize("kind", SCORES)
def test_lightgbm_profile(fold, kind):
    X, y, q, _ = fold
    s = score_sets(X)[kind]
    ks = [1, 3, 5, 10]
    peer = _lightgbm_eval(X, y, q, s, ks)
    specs = [f"{m}@{k}" for m in ("ndcg", "map") for k in ks]
    ours = M.evaluate(s, y, q, specs, profile="lightgbm").mean
    for spec in specs:
        assert ours[spec] == pytest.approx(peer[spec], abs=1e-9), spec
    # the profile matters: the default conventions give different numbers on this data
    assert abs(M.ndcg(s, y, qid=q, k=10) - peer["ndcg@10"]) > 1e-3


@pytest.mark.realdata
@pytest.mark.parametrize("kind", SCORES)
def test_xgboost_profile(fold, kind):
    X, y, q, _ = fold
    s = score_sets(X)[kind]
    group = np.cumsum(np.r_[True, q[1:] != q[:-1]])
    yb = (y >= 1).astype(float)  # XGBoost's map takes binary labels only
    for peer_metric, lab, spec, extra in [("ndcg@5", y, "ndcg@5", {}), ("ndcg@10", y, "ndcg@10", {}),
                                          ("ndcg", y, "ndcg", {}), ("ndcg@10-", y, "ndcg@10", {"empty": 0.0}),
                                          ("map@5", yb, "map@5", {}), ("map@10", yb, "map@10", {}),
                                          ("map", yb, "map", {}), ("map@10-", yb, "map@10", {"empty": 0.0})]:
        dm = xgb.DMatrix(X, label=lab, qid=group, base_margin=s)
        bst = xgb.train({"objective": "rank:ndcg", "eval_metric": peer_metric, "nthread": 1}, dm, num_boost_round=0)
        peer = float(bst.eval(dm).rsplit(":", 1)[1])
        ours = M.evaluate(s, lab, q, [spec], profile="xgboost", **extra).mean
        (value,) = ours.values()
        assert value == pytest.approx(peer, abs=1e-9), peer_metric


@pytest.mark.realdata
@pytest.mark.parametrize("kind", SCORES)
def test_sklearn_profile_on_equal_length_lists(fold, kind):
    from sklearn.metrics import ndcg_score

    X, y, q, _ = fold
    s = score_sets(X)[kind]
    qs = np.array(list(dict.fromkeys(q)))
    sizes = np.array([(q == qq).sum() for qq in qs])
    off = np.r_[0, np.cumsum(sizes)]
    checked = 0
    for L in np.unique(sizes):
        idx = np.flatnonzero(sizes == L)
        if len(idx) < 2:
            continue
        Y = np.stack([y[off[i]:off[i + 1]] for i in idx])
        S = np.stack([s[off[i]:off[i + 1]] for i in idx])
        for k in (None, 5, 10):
            ours = M.evaluate(S, Y, metrics=["ndcg" if k is None else f"ndcg@{k}"], profile="sklearn").mean
            assert list(ours.values())[0] == pytest.approx(ndcg_score(Y, S, k=k), abs=1e-9)
            checked += 1
    assert checked >= 6


@pytest.mark.realdata
@pytest.mark.parametrize("kind", SCORES)
def test_ranx_profile(fold, kind):
    X, y, q, d = fold
    s = score_sets(X)[kind]
    qs = list(dict.fromkeys(q))
    qrels, run = {qq: {} for qq in qs}, {qq: {} for qq in qs}
    for qq, dd, yy, ss in zip(q, d, y, s):
        qrels[qq][dd] = int(yy)
        run[qq][dd] = float(ss)
    names = {"ndcg@10": ("ndcg@10", {}), "ndcg_burges@10": ("ndcg@10", {"gain": "exp2"}), "map": ("map", {}),
             "map@10": ("map@10", {}), "mrr": ("mrr", {}), "precision@10": ("P@10", {}),
             "recall@10": ("recall@10", {}), "ndcg": ("ndcg", {})}
    ranx_run = ranx.Run.from_dict(run)
    peer = ranx.evaluate(ranx.Qrels.from_dict(qrels), ranx_run, list(names), return_mean=False)
    order = list(ranx_run.keys())  # ranx reports queries in its own (sorted) order
    for ranx_name, (spec, extra) in names.items():
        ours = M.evaluate(s, y, q, [spec], profile="ranx", **extra).per_query.loc[order].iloc[:, 0].to_numpy()
        np.testing.assert_allclose(ours, np.asarray(peer[ranx_name]), rtol=0, atol=1e-9, err_msg=ranx_name)


@pytest.mark.parametrize("seed", range(5))
def test_pairwise_measures_vs_scipy_and_sklearn(seed):
    """Kendall tau-b and Spearman (distinct scores) vs scipy; within-query AUC (ties count 1/2 in
    both) vs sklearn.metrics.roc_auc_score; pairwise accuracy vs the AUC of each label pair."""
    from scipy.stats import kendalltau, spearmanr
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 40, size=12)
    q = np.repeat(np.arange(12), sizes)
    y = rng.integers(0, 4, size=len(q)).astype(float)
    s = rng.normal(size=len(q))
    s_tied = np.round(s)
    tau = M.kendall_tau(s, y, qid=q, reduction="none", empty=-9.0)
    rho = M.spearman(s, y, qid=q, reduction="none", empty=-9.0)
    auc_tied = M.auc(s_tied, y, qid=q, reduction="none", empty=-9.0)
    for i in range(12):
        m = q == i
        if len(np.unique(y[m])) < 2:
            continue
        assert tau[i] == pytest.approx(kendalltau(s[m], y[m]).statistic, abs=1e-12)
        assert rho[i] == pytest.approx(spearmanr(s[m], y[m]).statistic, abs=1e-12)
        rel = y[m] >= 1
        if 0 < rel.sum() < m.sum():
            assert auc_tied[i] == pytest.approx(roc_auc_score(rel, s_tied[m]), abs=1e-12)
