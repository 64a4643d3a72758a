"""Choosing the propensity clip on held-out clicks (select_clip, split_log_by_query, ips_dcg)."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.clicks import ClickCounts, ClickLog, click_dataset, ips_dcg, select_clip, split_log_by_query
from rankwise.data import RankingDataset
from rankwise.errors import InputError
from rankwise.models import LinearRanker


def tiny():
    log = ClickLog.from_arrays(["a", "a", "b", "a", "c"], [["x", "y"], ["y", "x"], ["w", "x"], ["x", "y"], ["p", "q"]],
                               [[1, 1], [0, 1], [1, 0], [0, 0], [0, 1]])
    X = np.arange(16, dtype=np.float32).reshape(8, 2)
    feats = RankingDataset.from_arrays(X, np.zeros(8), ["a", "a", "a", "b", "b", "c", "c", "c"],
                                       doc_ids=["x", "y", "z", "x", "w", "p", "q", "r"])
    return log, feats


def simulated(reverse: bool, n_queries=60, n_docs=8, sessions=3000, seed=0):
    """PBM clicks, θ_k = (1/k)², relevance = feature 0; the logging ranker shows the documents by
    increasing relevance when ``reverse`` (so clipping, which pulls labels towards the shown order, hurts)."""
    rng = np.random.default_rng(seed)
    theta = (1.0 / np.arange(1, n_docs + 1)) ** 2
    X, qids, docs, q, d, rank, clicks = [], [], [], [], [], [], []
    for i in range(n_queries):
        rel = rng.uniform(0, 1, n_docs)
        X.append(np.column_stack([rel, rng.normal(size=n_docs)]))
        qids += [f"q{i}"] * n_docs
        docs += [f"d{j}" for j in range(n_docs)]
        shown = np.argsort(rel if reverse else -rel)
        for r, j in enumerate(shown, start=1):
            q.append(i), d.append(i * n_docs + j), rank.append(r)
            clicks.append(rng.binomial(sessions, theta[r - 1] * rel[j]))
    feats = RankingDataset.from_arrays(np.vstack(X).astype(np.float32), np.zeros(len(qids)), qids, doc_ids=docs)
    counts = ClickCounts(queries=np.array([f"q{i}" for i in range(n_queries)]), sessions=np.full(n_queries, sessions),
                         query=q, docs=np.array(docs), doc=d, rank=rank, clicks=clicks,
                         impressions=np.full(len(q), sessions))
    return counts, feats, theta


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("as_log", [True, False])
def test_split_never_puts_a_query_on_both_sides(seed, as_log):
    log, _ = tiny()
    train, val = split_log_by_query(log if as_log else log.counts(), 0.4, random_state=seed)
    tq, vq = set(train.queries), set(val.queries)
    assert not tq & vq and tq | vq == {"a", "b", "c"} and tq and vq
    full = log.counts()
    for part in (train, val):  # each side keeps every row and session of its queries, untouched
        for qi, name in enumerate(part.queries):
            j = list(full.queries).index(name)
            assert part.sessions[qi] == full.sessions[j]
            got = sorted(zip(part.docs[part.doc[part.query == qi]], part.rank[part.query == qi],
                             part.clicks[part.query == qi]))
            want = sorted(zip(full.docs[full.doc[full.query == j]], full.rank[full.query == j],
                              full.clicks[full.query == j]))
            assert got == want


def test_ips_dcg_by_brute_force():
    log, feats = tiny()
    theta = np.array([1.0, 0.25])
    data = click_dataset(log, feats, propensity=theta)
    rng = np.random.default_rng(0)
    scores = rng.normal(size=len(data.labels))
    scores[0] = scores[1]  # a tie: data set order decides
    qrow = np.repeat(np.asarray(data.query_ids), np.diff(data.query_offsets))
    for k in (1, 2, None):
        per_query = []
        for qname in dict.fromkeys(qrow):
            idx = [i for i in range(len(qrow)) if qrow[i] == qname]
            ranked = sorted(idx, key=lambda i: (-scores[i], i))
            ranked = ranked if k is None else ranked[:k]
            per_query.append(sum(data.labels[i] / np.log2(1 + pos) for pos, i in enumerate(ranked, start=1)))
        assert ips_dcg(scores, data, k=k) == pytest.approx(np.mean(per_query))
    # the IPS labels themselves: query a, x clicked at ranks 1 and 2 over 3 sessions
    lab = dict(zip(zip(qrow, data.doc_ids), data.labels))
    assert lab[("a", "x")] == pytest.approx((1 + 4) / 3)


def test_clipping_that_hurts_is_not_chosen():
    counts, feats, theta = simulated(reverse=True)
    sel = select_clip(LinearRanker(loss="pointwise_squared"), counts, feats, theta, clips=(0.9, None),
                      validation_fraction=0.3)
    assert sel.clip is None and sel.scores[1] > sel.scores[0]
    assert sel.n_train_queries + sel.n_validation_queries == 60 and sel.n_validation_queries == 18
    # the heavy clip makes the labels follow the (reversed) logging order: the model learns the wrong sign
    hurt = LinearRanker(loss="pointwise_squared").fit(click_dataset(counts, feats, propensity=theta, clip=0.9))
    assert hurt.predict(np.array([[1.0, 0.0]], dtype=np.float32))[0] < hurt.predict(np.array([[0.0, 0.0]], dtype=np.float32))[0]


def test_chosen_clip_is_the_argmax_and_the_run_is_reproducible():
    counts, feats, theta = simulated(reverse=False, n_queries=30)
    kw = dict(clips=(0.5, 0.05, None), validation_fraction=0.5, random_state=3)
    a = select_clip(LinearRanker(loss="pointwise_squared"), counts, feats, theta, **kw)
    b = select_clip(LinearRanker(loss="pointwise_squared"), counts, feats, theta, **kw)
    np.testing.assert_array_equal(a.scores, b.scores)
    assert a.clip == a.clips[int(np.argmax(a.scores))] and np.all(np.isfinite(a.scores))


@pytest.mark.parametrize("kw", [dict(clips=()), dict(clips=[0.0]), dict(clips=[1.5, None]), dict(clips=0.01),
                                dict(validation_fraction=0.0), dict(validation_fraction=1.0),
                                dict(validation_fraction=-0.2), dict(validation_fraction="half"), dict(k=0)])
def test_bad_inputs_raise(kw):
    counts, feats, theta = simulated(reverse=False, n_queries=6, sessions=50)
    with pytest.raises(InputError):
        select_clip(LinearRanker(loss="pointwise_squared"), counts, feats, theta, **kw)


def test_one_query_cannot_be_split():
    log = ClickLog.from_arrays(["a"], [["x", "y"]], [[1, 0]])
    with pytest.raises(InputError, match="at least 2 queries"):
        split_log_by_query(log)
