"""RandPair on aggregated counts: ``ClickLog.counts(by=...)`` keeps a session property per row
(``ClickCounts.row_data``), and ``RandPair.fit`` on those counts equals the estimate on the session log."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from rankwise.clicks import RandPair, identifiability
from rankwise.data import ClickCounts, ClickLog
from rankwise.errors import InputError


def swap_log(n_sessions, *, pivot=1, seed=0, nq=25, max_len=9, p_none=0.2):
    """Sessions of varied length (at least the pivot and the paired rank), documents shuffled per query;
    the document at the pivot and at k swapped in half the randomised sessions; a share ``p_none`` of sessions
    without intervention (pair_rank 0); PBM clicks with θ_k = k^-1.3 and uneven relevances."""
    rng = np.random.default_rng(seed)
    theta = np.arange(1, max_len + 1) ** -1.3
    rel = rng.uniform(0.02, 0.9, (nq, max_len))
    q = rng.integers(0, nq, n_sessions)
    k = rng.integers(1, max_len + 1, n_sessions)  # the rank paired with the pivot, never the pivot itself
    k[k == pivot] = max_len
    k[rng.random(n_sessions) < p_none] = 0
    size = np.maximum(np.maximum(k, pivot), rng.integers(2, max_len + 1, n_sessions))
    docs, clicked, queries = [], [], []
    for s in range(n_sessions):
        order = np.arange(size[s])
        if k[s] and rng.random() < 0.5:
            order[[pivot - 1, k[s] - 1]] = order[[k[s] - 1, pivot - 1]]
        docs.append([f"d{d}" for d in order])
        clicked.append((rng.random(size[s]) < theta[: size[s]] * rel[q[s], order]).astype(int).tolist())
        queries.append(f"q{q[s]}")
    return ClickLog.from_arrays(queries, docs, clicked,
                                session_data={"pair_rank": k, "logger": rng.integers(0, 3, n_sessions)})


@pytest.mark.parametrize("pivot", [1, 2])
def test_randpair_on_counts_equals_the_session_log(pivot):
    log = swap_log(6000, pivot=pivot, seed=pivot)
    on_log = RandPair(pivot=pivot).fit(log)
    on_counts = RandPair(pivot=pivot).fit(log.counts(by="pair_rank"))
    for name in ("propensity_", "pivot_ratio_", "pair_sessions_"):
        np.testing.assert_array_equal(getattr(on_counts, name), getattr(on_log, name))
    assert on_counts.identifiability_ == on_log.identifiability_
    # a split by a further session property changes nothing
    both = RandPair(pivot=pivot).fit(log.counts(by=("logger", "pair_rank")))
    np.testing.assert_array_equal(both.propensity_, on_log.propensity_)


def test_counts_by_a_session_property_brute_force():
    log = swap_log(400, seed=5)
    c = log.counts(by=["pair_rank", "logger"])
    assert set(c.row_data) == {"pair_rank", "logger"}
    clicks, shown = Counter(), Counter()
    off, k, lg = log.session_offsets, log.session_data["pair_rank"], log.session_data["logger"]
    for s in range(log.n_sessions):
        for i in range(off[s], off[s + 1]):
            key = (log.queries[log.query[s]], log.docs[log.doc[i]], i - off[s] + 1, k[s], lg[s])
            clicks[key] += int(log.clicked[i])
            shown[key] += 1
    got = {(c.queries[c.query[i]], c.docs[c.doc[i]], int(c.rank[i]), int(c.row_data["pair_rank"][i]),
            int(c.row_data["logger"][i])): (c.clicks[i], c.impressions[i]) for i in range(len(c.rank))}
    assert len(got) == len(c.rank) == len(shown)
    assert got == {key: (float(clicks[key]), float(shown[key])) for key in shown}
    np.testing.assert_array_equal(c.sessions, np.bincount(log.query, minlength=log.n_queries))
    # the split does not change the plain counts' totals nor the identifiability diagnostic
    plain = log.counts()
    assert plain.row_data == {}
    assert c.clicks.sum() == plain.clicks.sum() and c.impressions.sum() == plain.impressions.sum()
    assert identifiability(c) == identifiability(plain) == identifiability(log)


def test_randpair_counts_errors():
    log = swap_log(2000, seed=3)
    with pytest.raises(InputError, match=r"row_data has no 'pair_rank'"):
        RandPair().fit(log.counts())
    with pytest.raises(InputError, match=r"session_data has no \['nope'\]"):
        log.counts(by="nope")
    c = log.counts(by="pair_rank")
    # drop one impression of rank 5 under intervention 5: the counts no longer show the pivot and rank 5 together
    i = int(np.flatnonzero((c.rank == 5) & (c.row_data["pair_rank"] == 5) & (c.impressions > c.clicks))[0])
    imp = c.impressions.copy()
    imp[i] -= 1
    broken = ClickCounts(c.queries, c.sessions, c.query, c.docs, c.doc, c.rank, c.clicks, imp, row_data=c.row_data)
    with pytest.raises(InputError, match="pairing rank 5 with the pivot"):
        RandPair().fit(broken)
    with pytest.raises(InputError, match="row_data"):
        ClickCounts(c.queries, c.sessions, c.query, c.docs, c.doc, c.rank, c.clicks, c.impressions,
                    row_data={"pair_rank": c.row_data["pair_rank"][:-1]})


def test_randpair_refuses_a_session_that_does_not_show_its_paired_rank():
    """A session paired with rank 6 but three documents long counts its pivot click and no click at 6:
    the ratio would be silently low. It is refused (before: accepted)."""
    pages = [["a", "b", "c"], ["a", "b", "c", "d", "e", "f"], ["f", "b", "c", "d", "e", "a"]]
    log = ClickLog.from_arrays(["q"] * 3, pages, [[1, 0, 0], [1, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1]],
                               session_data={"pair_rank": np.array([6, 6, 6])})
    with pytest.raises(InputError, match="session 0 pairs rank 6 with the pivot"):
        RandPair().fit(log)
