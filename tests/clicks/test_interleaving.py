"""Team-draft and probabilistic interleaving (rankwise.clicks.interleaving): construction invariants,
brute force over every list and assignment of 3-document rankings, and recovery of the better ranker."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from rankwise.clicks import click_noise, interleave, simulated_click_model, team_draft
from rankwise.clicks.interleaving import probabilistic_assignment, probabilistic_interleave, probabilistic_outcome
from rankwise.data import make_synthetic
from rankwise.errors import InputError
from rankwise.metrics import ndcg


def random_rankings(rng, n_docs, overlap=True):
    docs = np.arange(n_docs) * 7 + 3
    a = rng.permutation(docs)
    b = rng.permutation(docs) if overlap else rng.permutation(np.concatenate([docs[: n_docs // 2], docs[n_docs:] + 1]))
    return a, b


@pytest.mark.parametrize("seed", range(30))
def test_team_draft_invariants(seed):
    rng = np.random.default_rng(seed)
    a, b = random_rankings(rng, int(rng.integers(1, 12)))
    if seed % 3 == 0:
        b = rng.permutation(np.concatenate([b[: len(b) // 2], [999, 998]]))  # different candidate sets
    k = None if seed % 2 else int(rng.integers(1, 15))
    shown, team = team_draft(a, b, k=k, random_state=seed)
    assert len(set(shown.tolist())) == len(shown)  # no duplicates
    if k is not None:
        assert len(shown) <= k
    if np.array_equal(np.sort(a), np.sort(b)):
        assert len(shown) == (len(a) if k is None else min(k, len(a)))
    n_a = np.cumsum(team == 0)
    n_b = np.cumsum(team == 1)
    assert np.all(np.abs(n_a - n_b) <= 1)  # the teams draft in turns
    for i, (doc, t) in enumerate(zip(shown, team)):
        # each pick is the picking team's highest-ranked document not yet in the list
        ranking = a if t == 0 else b
        first_free = next(d for d in ranking if d not in set(shown[:i].tolist()))
        assert doc == first_free
        if i % 2 == 1:  # the second pick of a round goes to the other team
            assert team[i] != team[i - 1]


def test_team_draft_coin_is_fair():
    """The team that picks first in a round is A in half of the rounds (4000 rounds; 4 standard errors)."""
    a, b = np.arange(8), np.arange(8)[::-1]
    firsts = []
    for seed in range(1000):
        _, team = team_draft(a, b, random_state=seed)
        firsts.extend(team[0::2] == 0)
    share = np.mean(firsts)
    assert abs(share - 0.5) <= 4 * np.sqrt(0.25 / len(firsts))


def test_team_draft_with_identical_rankers_is_a_tie_in_expectation():
    """Clicks that do not depend on the team (PBM on the list): A and B win equally often."""
    rng = np.random.default_rng(0)
    a = np.arange(10)
    alpha = rng.uniform(0.1, 0.9, 10)
    wins = losses = 0
    for seed in range(3000):
        shown, team = team_draft(a, a.copy(), random_state=seed)
        c = rng.random(len(shown)) < alpha[shown] / np.arange(1, len(shown) + 1)
        d = int(c[team == 0].sum()) - int(c[team == 1].sum())
        wins += d > 0
        losses += d < 0
    assert abs(wins - losses) <= 4 * np.sqrt(wins + losses)


def brute_force(a, b, tau):
    """P(L, assignment) for every list L and assignment of 3-document rankings, from the construction."""
    ra = {d: i + 1 for i, d in enumerate(a)}
    rb = {d: i + 1 for i, d in enumerate(b)}
    out = {}
    for L in itertools.permutations(a):
        for asg in itertools.product((0, 1), repeat=len(a)):
            p, left = 1.0, set(a)
            for d, x in zip(L, asg):
                r = ra if x == 0 else rb
                p *= 0.5 * r[d] ** -tau / sum(r[e] ** -tau for e in left)
                left.remove(d)
            out[(L, asg)] = p
    return out


@pytest.mark.parametrize("tau", [0.0, 1.0, 3.0])
def test_probabilistic_interleaving_brute_force_on_three_documents(tau):
    a, b = ["p", "q", "r"], ["r", "p", "q"]
    joint = brute_force(a, b, tau)
    assert sum(joint.values()) == pytest.approx(1.0, abs=1e-12)  # a distribution over (list, assignment)
    for L in itertools.permutations(a):
        p_L = sum(p for (LL, _), p in joint.items() if LL == L)
        post = {asg: joint[(L, asg)] / p_L for asg in itertools.product((0, 1), repeat=3)}
        assert sum(post.values()) == pytest.approx(1.0, abs=1e-12)
        p_a = probabilistic_assignment(a, b, list(L), tau=tau)
        for i in range(3):  # posterior marginals
            assert p_a[i] == pytest.approx(sum(p for asg, p in post.items() if asg[i] == 0), abs=1e-12)
        for clicks in itertools.product((0, 1), repeat=3):  # expected outcome by marginalising
            exp = sum(p * np.sign(sum(c for c, x in zip(clicks, asg) if x == 0)
                                  - sum(c for c, x in zip(clicks, asg) if x == 1)) for asg, p in post.items())
            assert probabilistic_outcome(p_a, clicks) == pytest.approx(exp, abs=1e-12)


def test_probabilistic_interleave_draws_lists_with_their_probabilities():
    a, b = ["p", "q", "r"], ["r", "p", "q"]
    joint = brute_force(a, b, 3.0)
    p_L = {}
    for (L, _), p in joint.items():
        p_L[L] = p_L.get(L, 0.0) + p
    n = 6000
    rng = np.random.default_rng(1)
    counts = {}
    for _ in range(n):
        shown, _ = probabilistic_interleave(a, b, tau=3.0, random_state=rng)
        counts[tuple(shown.tolist())] = counts.get(tuple(shown.tolist()), 0) + 1
    for L, p in p_L.items():
        assert abs(counts.get(L, 0) / n - p) <= 4 * np.sqrt(p * (1 - p) / n) + 1e-9


def simulated_set(n_queries=150, seed=0):
    data = make_synthetic(n_queries, n_features=6, list_length=(8, 25), seed=seed)
    y = np.asarray(data.labels, dtype=np.float64)
    qid = np.repeat(np.arange(data.n_queries), np.diff(data.query_offsets))
    return data, y, qid


@pytest.mark.parametrize("method", ["team_draft", "probabilistic"])
@pytest.mark.parametrize("user", ["PBM", "SDBN"])
def test_interleaving_prefers_the_ranker_with_higher_true_ndcg(method, user):
    data, y, qid = simulated_set()
    rng = np.random.default_rng(4)
    better = y + rng.normal(0, 0.7, len(y))
    worse = y + rng.normal(0, 2.5, len(y))
    assert ndcg(better, y, qid=qid, k=10) > ndcg(worse, y, qid=qid, k=10) + 0.1
    for a, b, want in ((better, worse, "A"), (worse, better, "B")):
        it = interleave(data, a, b, n_sessions=3000, method=method, k=10, random_state=2)
        rows = it.log.docs[it.log.doc].astype(np.int64)
        model = simulated_click_model(user, it.log, click_noise(y, max_grade=y.max())[rows],
                                      examination=1.0 / np.arange(1, 11),
                                      satisfaction=((2.0 ** y - 1) / (2.0 ** y.max() - 1))[rows])
        res = it.credit(model.sample(it.log, random_state=3))
        assert res.preferred == want and res.p_value < 0.05
        assert len(res.outcomes) == 3000 and res.wins + res.ties + res.losses == len(res.queries)
        assert res.delta == pytest.approx((res.wins + res.ties / 2) / len(res.queries) - 0.5)


def test_credit_counts_team_clicks():
    data, y, _ = simulated_set(5)
    it = interleave(data, y, -y, n_sessions=20, method="team_draft", random_state=0)
    c = np.zeros(len(it.log.doc), dtype=np.uint8)
    c[it.team == 0] = 1  # every document of A's team clicked
    res = it.credit(c)
    assert np.all(res.outcomes == 1) and res.losses == 0 and res.wins == len(res.queries)
    with pytest.raises(InputError, match="same pages"):
        it.credit(interleave(data, y, -y, n_sessions=20, method="team_draft", random_state=1).log)
    with pytest.raises(InputError, match="one 0/1 flag per row"):
        it.credit(np.ones(3))


def test_bad_input_is_named():
    data, y, _ = simulated_set(5)
    with pytest.raises(InputError, match="method must be"):
        interleave(data, y, y, n_sessions=5, method="balanced")
    with pytest.raises(InputError, match="scores_b must hold"):
        interleave(data, y, y[:3], n_sessions=5)
    with pytest.raises(InputError, match="rank the same documents"):
        probabilistic_interleave([1, 2], [1, 3])
    with pytest.raises(InputError, match="ranks a document twice"):
        team_draft([1, 1], [1, 2])
    with pytest.raises(InputError, match="tau must be"):
        probabilistic_interleave([1, 2], [2, 1], tau=-1)
    it = interleave(data, y, y, n_sessions=5)
    with pytest.raises(InputError, match="PBM needs examination"):
        simulated_click_model("PBM", it.log, np.full(len(it.log.doc), 0.5))
    with pytest.raises(InputError, match="probability in"):
        simulated_click_model("CM", it.log, np.full(len(it.log.doc), 1.5))
