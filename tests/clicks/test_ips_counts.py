"""Aggregated click logs (ClickCounts), IPS labels from counts, unshown candidates, aggregated simulation."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from rankwise.clicks import ClickCounts, ClickLog, click_dataset, fit_debiased, simulate_clicks_protocol
from rankwise.data import RankingDataset, make_synthetic
from rankwise.errors import InputError


def tiny():
    log = ClickLog.from_arrays(["a", "a", "b", "a"], [["x", "y"], ["y", "x"], ["w", "x"], ["x", "y"]],
                               [[1, 1], [0, 1], [1, 0], [0, 0]])
    # query a has an unshown candidate z; query c is never logged
    X = np.arange(14, dtype=np.float32).reshape(7, 2)
    feats = RankingDataset.from_arrays(X, np.zeros(7), ["a", "a", "a", "b", "b", "c", "c"],
                                       doc_ids=["x", "y", "z", "x", "w", "p", "q"])
    return log, feats


def labels_of(ds):
    return dict(zip(zip(np.repeat(ds.query_ids, np.diff(ds.query_offsets)), ds.doc_ids), ds.labels))


def test_counts_by_brute_force():
    log, _ = tiny()
    c = log.counts()
    brute = defaultdict(lambda: [0, 0])
    for s in range(log.n_sessions):
        q = log.queries[log.query[s]]
        a, b = log.session_offsets[s], log.session_offsets[s + 1]
        for k, i in enumerate(range(a, b), start=1):
            brute[(q, log.docs[log.doc[i]], k)][0] += int(log.clicked[i])
            brute[(q, log.docs[log.doc[i]], k)][1] += 1
    got = {(c.queries[q], c.docs[d], int(r)): [int(k), int(n)]
           for q, d, r, k, n in zip(c.query, c.doc, c.rank, c.clicks, c.impressions)}
    assert got == dict(brute)
    assert dict(zip(c.queries, c.sessions)) == {"a": 3, "b": 1} and c.n_sessions == 4


def test_click_dataset_from_counts_equals_sessions():
    log, feats = tiny()
    theta = np.array([1.0, 0.25])
    for kw in ({}, {"propensity": theta}, {"propensity": theta, "clip": 0.5}):
        a, b = click_dataset(log, feats, **kw), click_dataset(log.counts(), feats, **kw)
        np.testing.assert_array_equal(a.doc_ids, b.doc_ids)
        np.testing.assert_allclose(a.labels, b.labels)
        np.testing.assert_array_equal(a.X, b.X)
    lab = labels_of(click_dataset(log.counts(), feats, propensity=theta))
    # query a, 3 sessions: x clicked at rank 1 (session 1) and rank 2 (session 2); y at rank 2 (session 1)
    assert lab[("a", "x")] == pytest.approx((1 / 1.0 + 1 / 0.25) / 3)
    assert lab[("a", "y")] == pytest.approx((1 / 0.25) / 3)


def test_candidates_add_unshown_documents_with_label_zero():
    log, feats = tiny()
    theta = np.array([1.0, 0.25])
    plain = labels_of(click_dataset(log, feats, propensity=theta))
    ds = click_dataset(log, feats, propensity=theta, candidates=True)
    lab = labels_of(ds)
    # every document of a logged query, the shown ones with their IPS labels, z (never shown) with 0;
    # query c has no session and stays out
    assert set(lab) == set(plain) | {("a", "z")}
    assert lab[("a", "z")] == 0 and all(lab[k] == pytest.approx(v) for k, v in plain.items())
    np.testing.assert_array_equal(ds.X[ds.doc_ids == "z"], [[4, 5]])
    assert list(ds.query_ids) == ["a", "b"]
    # the same from counts
    assert labels_of(click_dataset(log.counts(), feats, propensity=theta, candidates=True)) == lab
    # features without doc_ids: the log's documents are row numbers, and so are the candidates'
    rows_log = ClickLog.from_arrays(["a", "a"], [[0, 1], [1, 0]], [[1, 0], [0, 0]])
    bare = RankingDataset.from_arrays(feats.X[:5], np.zeros(5), ["a", "a", "a", "b", "b"])
    got = labels_of(click_dataset(rows_log, bare, candidates=True))
    assert got == {("a", "0"): 0.5, ("a", "1"): 0.0, ("a", "2"): 0.0}
    with pytest.raises(InputError, match="candidates"):
        click_dataset(log, feats, candidates="yes")


def test_click_counts_validation():
    ok = dict(queries=np.array(["a"]), sessions=[2], query=[0, 0], docs=np.array(["x", "y"]), doc=[0, 1],
              rank=[1, 2], clicks=[1, 0], impressions=[2, 2])
    assert ClickCounts(**ok).n_pairs == 2
    with pytest.raises(InputError, match="clicks"):
        ClickCounts(**{**ok, "clicks": [3, 0]})
    with pytest.raises(InputError, match="at most once per session"):
        ClickCounts(**{**ok, "doc": [0, 0]})
    with pytest.raises(InputError, match="1-based"):
        ClickCounts(**{**ok, "rank": [0, 1]})
    with pytest.raises(InputError, match="at least one session"):
        ClickCounts(**{**ok, "sessions": [0]})
    with pytest.raises(InputError, match="ClickLog or ClickCounts"):
        click_dataset("log", tiny()[1])


def test_aggregate_simulation_is_the_session_logs_distribution():
    ds = make_synthetic(40, n_features=8, list_length=(10, 16), seed=2)
    n = 2_000_000
    agg = simulate_clicks_protocol(ds, n_sessions=n, eta=2.0, top_k=None, production_fraction=0.1,
                                   random_state=0, aggregate=True)
    c = agg.counts
    assert isinstance(c, ClickCounts) and c.n_sessions == n and c.n_queries == 40
    # every document of every query, once per session, at the rank the production ranker gives it
    assert len(c.rank) == len(ds.labels) and np.all(c.impressions == c.sessions[c.query])
    rows = c.docs[c.doc].astype(np.int64)
    p = agg.propensity[c.rank - 1] * agg.relevance[rows]
    assert np.all(c.clicks[p == 1] == c.impressions[p == 1])
    z = (c.clicks - c.impressions * p)[p < 1] / np.sqrt(c.impressions * p * (1 - p))[p < 1]
    assert np.abs(z).max() < 5.5 and abs(z.mean()) < 0.5
    # IPS labels with the true θ are unbiased: within 5 standard errors of ρ (one rank per document here)
    ips = click_dataset(c, agg.features, propensity=agg.propensity)
    lab = dict(zip(ips.doc_ids.astype(np.int64), ips.labels))
    theta = agg.propensity[c.rank - 1]
    se = np.sqrt(p * (1 - p) / c.impressions) / theta
    err = np.array([lab[r] for r in rows]) - agg.relevance[rows]
    assert np.all(np.abs(err[p < 1]) < 5 * se[p < 1]) and np.all(np.abs(err[p == 1]) < 1e-12)
    # the same pages as the session log of the same seed
    ses = simulate_clicks_protocol(ds, n_sessions=2000, eta=2.0, top_k=None, production_fraction=0.1, random_state=0)
    rank_of = dict(zip(zip(c.queries[c.query], rows), c.rank))
    sc = ses.log.counts()
    assert all(rank_of[(q, int(d))] == r for q, d, r in zip(sc.queries[sc.query], sc.docs[sc.doc], sc.rank))
    with pytest.raises(InputError, match="pbm"):
        simulate_clicks_protocol(ds, n_sessions=10, click_model="cascade", aggregate=True)


def test_candidates_with_a_good_logging_ranker():
    # with a logging ranker trained on every query and no click noise, the unshown documents are mostly
    # irrelevant: ranking the clicked documents against them too helps trees order the whole list
    # (with a weak logging ranker it hurts instead: docs/clicks.md, bench_clicks)
    from rankwise.metrics import evaluate
    from rankwise.models import GBDTRanker

    data = make_synthetic(160, n_features=10, list_length=(15, 25), seed=3)
    tr, te = data.take(np.arange(100)), data.take(np.arange(100, 160))
    sim = simulate_clicks_protocol(tr, n_sessions=400_000, eta=1.0, top_k=5, production_fraction=1.0,
                                   eps_minus=0.0, random_state=0, aggregate=True)
    res = {}
    for cand in (False, True):
        m = fit_debiased(GBDTRanker(loss="op_pairwise", n_estimators=50, learning_rate=0.1, random_state=0, n_jobs=1),
                         sim.log, sim.features, sim.propensity, candidates=cand)
        res[cand] = evaluate(m.predict(te.X), te.labels, te.qid, metrics=("ndcg@10",)).mean["ndcg@10"]
    assert res[True] > res[False] + 0.02
