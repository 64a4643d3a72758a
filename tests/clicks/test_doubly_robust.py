"""Doubly robust labels (click_dataset(direct=...)) and the relevance regression direct_relevance."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.clicks import ClickLog, click_dataset, direct_relevance, fit_debiased, select_clip
from rankwise.data import RankingDataset
from rankwise.errors import InputError
from rankwise.models import LinearRanker

from test_select_clip import simulated  # pytest puts a test file's folder on sys.path

THETA = np.array([1.0, 0.5, 0.2])


def ragged():
    """Pages of different lengths and orders: y is missing from some sessions of query a (partial exposure)."""
    queries = ["a", "a", "a", "b", "a", "b"]
    pages = [["x", "y", "z"], ["y", "x"], ["x"], ["w", "v"], ["z", "x", "y"], ["v"]]
    clicks = [[1, 0, 1], [1, 1], [0], [0, 1], [1, 1, 0], [1]]
    log = ClickLog.from_arrays(queries, pages, clicks)
    X = np.arange(12, dtype=np.float32).reshape(6, 2)
    feats = RankingDataset.from_arrays(X, np.zeros(6), ["a", "a", "a", "b", "b", "b"],
                                       doc_ids=["x", "y", "z", "w", "v", "u"])
    return log, feats, queries, pages, clicks


def by_sessions(queries, pages, clicks, m_of, clip):
    """The DR label of every (query, doc), session by session, straight from the formula."""
    out = {}
    for q in set(queries):
        sess = [i for i, qq in enumerate(queries) if qq == q]
        docs = {d for i in sess for d in pages[i]}
        for d in docs:
            total = 0.0
            for i in sess:
                if d in pages[i]:
                    k = pages[i].index(d)
                    th = THETA[k]
                    total += (clicks[i][k] - th * m_of[(q, d)]) / max(th, clip or 0.0)
            out[(q, d)] = m_of[(q, d)] + total / len(sess)
    return out


@pytest.mark.parametrize("clip", [None, 0.3])
def test_dr_labels_by_brute_force(clip):
    log, feats, queries, pages, clicks = ragged()
    m = np.array([0.2, 0.7, 0.4, 0.1, 0.9, 0.5])
    ds = click_dataset(log, feats, propensity=THETA, clip=clip, direct=m)
    m_of = {(q, d): m[i] for i, (q, d) in enumerate(zip(["a", "a", "a", "b", "b", "b"], ["x", "y", "z", "w", "v", "u"]))}
    want = by_sessions(queries, pages, clicks, m_of, clip)
    qid = np.repeat(np.asarray(ds.query_ids), np.diff(ds.query_offsets))
    got = {(str(q), str(d)): float(v) for q, d, v in zip(qid, ds.doc_ids, ds.labels)}
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-12)
    # callable m: the same labels; the counts give the same labels as the sessions
    same = click_dataset(log.counts(), feats, propensity=THETA, clip=clip, direct=lambda lg, f, p: m)
    np.testing.assert_allclose(same.labels, ds.labels, rtol=1e-12)


def test_dr_is_ips_where_every_session_shows_the_document_unclipped():
    counts, feats, theta = simulated(reverse=False, n_queries=20, n_docs=5, sessions=500)
    m = np.random.default_rng(0).uniform(0, 2, len(feats.labels))
    ips = click_dataset(counts, feats, propensity=theta)
    dr = click_dataset(counts, feats, propensity=theta, direct=m)
    np.testing.assert_allclose(dr.labels, ips.labels, rtol=1e-10, atol=1e-12)
    # clipped at θ_3: ranks 1-3 keep the IPS label; below, DR = IPS + m(1 − θ/τ) (towards m, not towards 0)
    clip = theta[2]
    ips_c, dr_c = (click_dataset(counts, feats, propensity=theta, clip=clip, direct=d) for d in (None, m))

    def by_key(ds):
        qid = np.repeat(np.asarray(ds.query_ids), np.diff(ds.query_offsets)).astype(str)
        return dict(zip(zip(qid, np.asarray(ds.doc_ids).astype(str)), ds.labels))
    row = {(f, d): i for i, (f, d) in enumerate(zip(np.repeat(np.asarray(feats.query_ids), np.diff(feats.query_offsets)),
                                                     feats.doc_ids))}
    a, b = by_key(ips_c), by_key(dr_c)
    for q, d, r in zip(counts.queries[counts.query], counts.docs[counts.doc], counts.rank):
        key = (str(q), str(d))
        extra = m[row[key]] * (1 - theta[r - 1] / max(theta[r - 1], clip))
        assert b[key] == pytest.approx(a[key] + extra, rel=1e-12, abs=1e-12)
        assert (extra == 0) == (r <= 3)


def test_dr_is_unbiased_for_any_m_and_the_clip_pulls_towards_m():
    """Unclipped, E[DR] = ρ·θ_1 whatever m is (4,000 independent click draws, one query each); clipped, the
    bias is (1 − θ/τ)(m − ρ) at a clipped rank, so an m equal to ρ removes it."""
    from rankwise.clicks import ClickCounts

    rng = np.random.default_rng(5)
    n_draws, n_docs, sessions = 4000, 4, 200
    theta = np.array([1.0, 0.4, 0.1, 0.02])
    rel = np.array([0.9, 0.3, 0.6, 0.8])
    names = np.array([f"d{j}" for j in range(n_docs)] * n_draws)
    qnames = [f"q{i}" for i in range(n_draws)]
    feats = RankingDataset.from_arrays(np.tile(np.eye(n_docs, dtype=np.float32), (n_draws, 1)),
                                       np.zeros(n_draws * n_docs), np.repeat(qnames, n_docs), doc_ids=names)
    counts = ClickCounts(queries=np.array(qnames), sessions=np.full(n_draws, sessions),
                         query=np.repeat(np.arange(n_draws), n_docs), docs=names, doc=np.arange(n_draws * n_docs),
                         rank=np.tile(np.arange(1, n_docs + 1), n_draws),
                         clicks=rng.binomial(sessions, np.tile(theta * rel, n_draws)),
                         impressions=np.full(n_draws * n_docs, sessions))

    def mean_label(**kw):
        ds = click_dataset(counts, feats, propensity=theta, **kw)
        j = np.char.lstrip(np.asarray(ds.doc_ids).astype(str), "d").astype(int)
        return np.bincount(j, weights=ds.labels) / np.bincount(j)
    for m in (np.zeros(n_docs), np.full(n_docs, 0.5), rel):
        np.testing.assert_allclose(mean_label(direct=np.tile(m, n_draws)), rel, atol=0.04)
    np.testing.assert_allclose(mean_label(clip=0.1, direct=np.tile(rel, n_draws)), rel, atol=0.02)  # m = ρ: no bias
    ips_clipped = mean_label(clip=0.1)
    assert ips_clipped[3] == pytest.approx(rel[3] * theta[3] / 0.1, rel=0.1)  # IPS: shrunk by θ/τ = 0.2
    assert abs(mean_label(clip=0.1, direct=np.zeros(n_draws * n_docs))[3] - ips_clipped[3]) < 1e-12  # m = 0: IPS


def test_direct_relevance_never_uses_a_documents_own_query():
    counts, feats, theta = simulated(reverse=False, n_queries=30, n_docs=6, sessions=400)
    m = direct_relevance(counts, feats, theta, n_folds=3, n_estimators=20)
    assert m.shape == (len(feats.labels),) and np.all(np.isfinite(m))
    # change every click of query q0: the m of q0's documents stays, others' may move
    changed = counts.clicks.copy()
    at = counts.query == 0
    changed[at] = counts.impressions[at]
    from rankwise.clicks import ClickCounts

    other = ClickCounts(queries=counts.queries, sessions=counts.sessions, query=counts.query, docs=counts.docs,
                        doc=counts.doc, rank=counts.rank, clicks=changed, impressions=counts.impressions)
    m2 = direct_relevance(other, feats, theta, n_folds=3, n_estimators=20)
    q0 = np.repeat(np.asarray(feats.query_ids), np.diff(feats.query_offsets)) == "q0"
    np.testing.assert_array_equal(m2[q0], m[q0])
    assert not np.array_equal(m2[~q0], m[~q0])
    # it learns the relevance: m correlates with feature 0 (the relevance in this simulation)
    assert np.corrcoef(m, np.asarray(feats.X)[:, 0])[0, 1] > 0.8


def test_select_clip_fits_a_callable_m_on_the_training_queries_only():
    counts, feats, theta = simulated(reverse=False, n_queries=30, n_docs=6, sessions=400)
    seen = []

    def m_fn(lg, f, p):
        seen.append(set(np.asarray(lg.queries).astype(str)))
        return direct_relevance(lg, f, p, n_folds=3, n_estimators=10)

    sel = select_clip(LinearRanker(loss="op_pairwise", max_iter=5, random_state=0), counts, feats, theta,
                      clips=(0.1, None), direct=m_fn, validation_fraction=0.3, random_state=0)
    from rankwise.clicks import split_log_by_query

    train, val = split_log_by_query(counts, 0.3, random_state=0)
    assert seen == [set(np.asarray(train.queries).astype(str))]
    assert not seen[0] & set(np.asarray(val.queries).astype(str))
    assert sel.clip in (0.1, None) and np.all(np.isfinite(sel.scores))
    model = fit_debiased(LinearRanker(loss="op_pairwise", max_iter=5, random_state=0), counts, feats, theta,
                         clip=sel.clip, direct=m_fn)
    assert np.all(np.isfinite(model.predict(feats.X)))


def test_direct_errors():
    log, feats, *_ = ragged()
    with pytest.raises(InputError, match="needs the propensities"):
        click_dataset(log, feats, direct=np.zeros(6))
    with pytest.raises(InputError, match="one value per row"):
        click_dataset(log, feats, propensity=THETA, direct=np.zeros(5))
    with pytest.raises(InputError, match="finite"):
        click_dataset(log, feats, propensity=THETA, direct=np.full(6, np.nan))
    with pytest.raises(InputError, match="n_folds"):
        direct_relevance(log, feats, THETA, n_folds=9)
