"""Plackett-Luce logging policies (rank marginals against brute-force enumeration) and the policy-aware
IPS / doubly robust labels (unbiasedness checked exactly by enumerating every page and click pattern)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from rankwise.clicks import (ClickLog, PlackettLucePolicy, PolicyMixture, PolicyPropensity, click_dataset,
                             fit_debiased)
from rankwise.data import RankingDataset
from rankwise.errors import InputError


def pl_pages(logits, k):
    """Every top-k page (ordered tuple of candidates) with its Plackett-Luce probability, by the product
    formula (the remaining weight summed afresh at every step: no cancellation)."""
    w = np.exp(np.asarray(logits, float) - np.max(logits))
    out = []
    for page in itertools.permutations(range(len(w)), k):
        p, used = 1.0, []
        for i in page:
            p *= w[i] / w[[j for j in range(len(w)) if j not in used]].sum()
            used.append(i)
        out.append((page, p))
    return out


def brute_marginals(logits, k):
    P = np.zeros((len(logits), k))
    for page, p in pl_pages(logits, k):
        P[list(page), np.arange(k)] += p
    return P


@pytest.mark.parametrize("n,k,temperature,spread", [(5, 3, 1.0, 3.0), (6, 6, 0.3, 3.0), (7, 4, 5.0, 3.0),
                                                    (6, 2, 0.05, 3.0), (4, 10, 1.0, 1.0), (6, 3, 1.0, 0.0),
                                                    (5, 5, 0.01, 1e-6)])
def test_rank_marginals_exact_against_enumeration(n, k, temperature, spread):
    rng = np.random.default_rng(n + k)
    s = rng.normal(size=n) * spread
    if spread == 0:
        s[:] = 1.2345e-3  # ties: the uniform ranking
    pol = PlackettLucePolicy(np.concatenate([s, [0.7, -0.2]]), [0, n, n + 2], temperature=temperature, top_k=k)
    P = pol.rank_marginals()
    kk = min(k, n)
    assert P.shape == (n + 2, max(kk, 2))
    np.testing.assert_allclose(P[:n, :kk], brute_marginals(s / temperature, kk), atol=1e-12, rtol=0)
    np.testing.assert_allclose(P[n:, :2], brute_marginals(np.array([0.7, -0.2]) / temperature, 2), atol=1e-12)
    assert np.all(P[:n, kk:] == 0) and pol.marginal_error_ < 1e-9
    np.testing.assert_allclose(pol.inclusion(), P.sum(axis=1))


def test_rank_marginals_long_list_and_monte_carlo():
    rng = np.random.default_rng(1)
    s = np.concatenate([rng.normal(size=80) * 2, rng.normal(size=30)])
    pol = PlackettLucePolicy(s, [0, 80, 110], temperature=0.7, top_k=10)
    P = pol.rank_marginals()
    np.testing.assert_allclose(P.sum(axis=0), 2.0, atol=1e-9)  # one document per rank and query
    assert np.all(P.sum(axis=1) <= 1 + 1e-12) and np.all(P > 0)
    n = 20_000
    Pm, se = pol.rank_marginals(method="mc", n_samples=n, random_state=0, return_std_error=True)
    true_se = np.sqrt(P * (1 - P) / n)
    big = true_se > 1e-3
    assert np.abs((Pm - P)[big] / true_se[big]).max() < 5.5
    np.testing.assert_allclose(se, np.sqrt(Pm * (1 - Pm) / n))


def test_sampling_is_plackett_luce():
    # the Gumbel-max draws give every top-2 page with its product-formula probability
    s = np.array([0.3, -1.2, 2.0, 0.0])
    pol = PlackettLucePolicy(s, [0, 4], temperature=0.8, top_k=2)
    n = 200_000
    off, rows = pol.sample(np.zeros(n, dtype=np.int64), random_state=7)
    assert np.all(np.diff(off) == 2)
    pages = rows.reshape(n, 2)
    for page, p in pl_pages(s / 0.8, 2):
        f = np.mean((pages[:, 0] == page[0]) & (pages[:, 1] == page[1]))
        assert abs(f - p) < 5 * np.sqrt(p * (1 - p) / n)
    # seeded: the same seed, the same pages; sessions of different queries keep their own candidates
    pol2 = PlackettLucePolicy(np.arange(7.0), [0, 4, 7], temperature=1.0, top_k=3)
    q = np.array([1, 0, 1, 1, 0])
    o1, r1 = pol2.sample(q, random_state=3)
    o2, r2 = pol2.sample(q, random_state=3)
    np.testing.assert_array_equal(r1, r2)
    assert all(set(r1[o1[i]:o1[i + 1]]) <= (set(range(4, 7)) if q[i] else set(range(4))) for i in range(5))
    assert np.array_equal(np.diff(o1), [3, 3, 3, 3, 3])


def test_temperature_zero_is_the_deterministic_ranker():
    s = np.array([0.5, 2.0, 2.0, -1.0, 3.0])
    pol = PlackettLucePolicy(s, [0, 5], temperature=0, top_k=3)
    P = pol.rank_marginals()
    expected = np.zeros((5, 3))
    expected[[4, 1, 2], [0, 1, 2]] = 1.0  # ties by row order
    np.testing.assert_array_equal(P, expected)
    _, rows = pol.sample(np.zeros(3, dtype=np.int64), random_state=0)
    np.testing.assert_array_equal(rows, [4, 1, 2] * 3)
    # a small temperature approaches it
    cold = PlackettLucePolicy(np.array([0.5, 2.0, 1.0, -1.0, 3.0]), [0, 5], temperature=1e-3, top_k=3)
    np.testing.assert_allclose(cold.rank_marginals()[[4, 1, 2], [0, 1, 2]], 1.0, atol=1e-12)


def test_exposure_and_mixture():
    s = np.array([0.3, -1.2, 2.0, 0.0, 1.0])
    theta = np.array([1.0, 0.5, 0.25])
    a = PlackettLucePolicy(s, [0, 5], temperature=1.0, top_k=3)
    b = PlackettLucePolicy(-s, [0, 5], temperature=0, top_k=3)
    np.testing.assert_allclose(a.exposure(theta), brute_marginals(s, 3) @ theta, atol=1e-12)
    mix = PolicyMixture([a, b], [0.25, 0.75])
    np.testing.assert_allclose(mix.rank_marginals(), 0.25 * a.rank_marginals() + 0.75 * b.rank_marginals())
    np.testing.assert_allclose(mix.exposure(theta), 0.25 * a.exposure(theta) + 0.75 * b.exposure(theta))
    pp = mix.propensities(theta)
    assert isinstance(pp, PolicyPropensity) and pp.policy is mix


@pytest.mark.parametrize("kwargs,match", [
    (dict(scores=[1.0, np.nan], query_offsets=[0, 2]), "finite"),
    (dict(scores=[1.0, 2.0], query_offsets=[0, 3]), "query_offsets"),
    (dict(scores=[1.0, 2.0], query_offsets=[0, 2], temperature=-1), "temperature"),
    (dict(scores=[1.0, 2.0], query_offsets=[0, 2], temperature=True), "temperature"),
    (dict(scores=[1.0, 2.0], query_offsets=[0, 2], top_k=0), "top_k"),
    (dict(scores=[1.0, 2.0], query_offsets=[0, 2], top_k=2.5), "top_k"),
])
def test_policy_errors(kwargs, match):
    with pytest.raises(InputError, match=match):
        PlackettLucePolicy(kwargs.pop("scores"), kwargs.pop("query_offsets"), **kwargs)


def test_policy_method_errors():
    pol = PlackettLucePolicy([1.0, 2.0, 0.0], [0, 3], top_k=2)
    with pytest.raises(InputError, match="ranks 1..R with R >= 2"):
        pol.exposure([1.0])
    with pytest.raises(InputError, match="method"):
        pol.rank_marginals(method="brute")
    with pytest.raises(InputError, match="n_samples"):
        pol.rank_marginals(method="mc", n_samples=0)
    with pytest.raises(InputError, match="query indices"):
        pol.sample([0, 1])
    with pytest.raises(InputError, match="same rows"):
        PolicyMixture([pol, PlackettLucePolicy([1.0, 2.0], [0, 2])])


# -- the policy-aware estimator, exactly --------------------------------------------------------------------------

def tiny_features():
    # two queries (4 and 3 candidates); realistic-looking features with full precision and a NaN
    X = np.array([[0.1234567890123, 3.2e-5], [np.nan, 1.0], [2.5, -7.25e3], [0.0, 0.5],
                  [1.0, 2.0], [3.0, 1e-9], [0.25, 0.125]])
    return RankingDataset.from_arrays(X, np.zeros(7), np.array(["q1"] * 4 + ["q2"] * 3),
                                      doc_ids=np.array(["a", "b", "c", "d", "e", "f", "g"]))


def expected_labels(logger, relevance, theta, features, **kw):
    """E[label] of every candidate over one session of each query: every page (Plackett-Luce product formula)
    and every click pattern (PBM) enumerated, each outcome's labels computed by click_dataset."""
    policy = logger
    off = policy.query_offsets
    docs = np.asarray(features.doc_ids)
    qids = np.asarray(features.query_ids)
    out = {}
    for q in range(len(off) - 1):
        a, b = off[q], off[q + 1]
        k = min(policy.top_k, b - a)
        pages = ([(tuple(np.argsort(-policy.scores[a:b], kind="stable")[:k]), 1.0)] if policy.temperature == 0
                 else pl_pages(policy.scores[a:b] / policy.temperature, k))
        for page, p_page in pages:
            exam = theta[:k] * relevance[a + np.array(page)]
            for clicks in itertools.product((0, 1), repeat=k):
                c = np.array(clicks)
                p = p_page * np.prod(np.where(c == 1, exam, 1 - exam))
                if p == 0:
                    continue
                log = ClickLog.from_arrays([qids[q]], [list(docs[a + np.array(page)])], [list(c)])
                data = click_dataset(log, features, **kw)
                for d, y in zip(data.doc_ids, data.labels):
                    out[d] = out.get(d, 0.0) + p * y
    return np.array([out.get(d, 0.0) for d in docs])


THETA = np.array([1.0, 0.6, 0.3])
REL = np.array([0.9, 0.15, 0.6, 0.35, 0.05, 0.7, 0.4])
SCORES = np.array([0.8, -0.3, 1.9, 0.0, 1.1, -2.2, 0.4])


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_policy_aware_ips_is_unbiased_for_every_candidate(temperature):
    feats = tiny_features()
    pol = PlackettLucePolicy(SCORES, feats.query_offsets, temperature=temperature, top_k=2)
    pp = pol.propensities(THETA)
    e = expected_labels(pol, REL, THETA, feats, propensity=pp)
    np.testing.assert_allclose(e, REL, atol=1e-12)
    # policy= and exposure= are the same estimator
    np.testing.assert_allclose(expected_labels(pol, REL, THETA, feats, propensity=THETA, policy=pol), REL, atol=1e-12)
    np.testing.assert_allclose(expected_labels(pol, REL, THETA, feats, exposure=pp.exposure), REL, atol=1e-12)
    # the rank-based IPS of the same clicks is not: documents outside the page count 0 there
    naive = expected_labels(pol, REL, THETA, feats, propensity=THETA)
    assert np.abs(naive - REL).max() > 0.05


def test_policy_aware_doubly_robust_is_unbiased_for_any_direct_model():
    feats = tiny_features()
    pol = PlackettLucePolicy(SCORES, feats.query_offsets, temperature=0.7, top_k=2)
    for m in (np.zeros(7), np.full(7, 0.5), np.array([0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.4])):
        e = expected_labels(pol, REL, THETA, feats, propensity=pol.propensities(THETA), direct=m, nonnegative=False)
        np.testing.assert_allclose(e, REL, atol=1e-12)
    # cut at 0 (the default, for losses whose utilities must be >= 0): biased upwards where labels go negative
    m = np.full(7, 0.9)
    cut = expected_labels(pol, REL, THETA, feats, propensity=pol.propensities(THETA), direct=m)
    assert np.all(cut >= REL - 1e-12) and np.max(cut - REL) > 0.01
    # a candidate the log never shows gets the direct model's value (IPS would give it 0)
    pp = pol.propensities(THETA)
    log = ClickLog.from_arrays(["q1", "q1", "q2"], [["c", "a"], ["d", "c"], ["e", "g"]], [[1, 0], [0, 0], [0, 1]])
    m = np.array([0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.4])
    dr = click_dataset(log, feats, propensity=pp, direct=m)
    assert list(dr.doc_ids) == list("abcdefg")
    np.testing.assert_allclose(dr.labels[[1, 5]], m[[1, 5]], atol=1e-15)
    assert np.all(click_dataset(log, feats, propensity=pp).labels[[1, 5]] == 0)
    # a shown one: m + (clicks - Σ θ_k m) / (n_q ρ), by hand
    rho = pp.exposure
    np.testing.assert_allclose(dr.labels[2], m[2] + (1 - (THETA[0] + THETA[1]) * m[2]) / (2 * rho[2]), rtol=1e-12)
    with pytest.raises(InputError, match="θ per rank"):
        click_dataset(log, feats, exposure=pp.exposure, direct=REL)


def test_policy_aware_with_a_deterministic_logger_is_ips():
    feats = tiny_features()
    theta = np.array([1.0, 0.6, 0.3])
    rng = np.random.default_rng(0)
    queries, pages, clicks = [], [], []
    for s in range(40):
        q = s % 2
        page = ["c", "a", "d"] if q == 0 else ["e", "g", "f"]  # the deterministic top 3 of SCORES
        queries.append(f"q{q + 1}")
        pages.append(page)
        clicks.append(list(rng.integers(0, 2, len(page))))
    log = ClickLog.from_arrays(queries, pages, clicks)
    ips = click_dataset(log, feats, propensity=theta)
    for t in (0, 1e-3):
        pol = PlackettLucePolicy(SCORES, feats.query_offsets, temperature=t, top_k=3)
        pa = click_dataset(log, feats, propensity=pol.propensities(theta))
        # the same rows (documents below the page have ρ = 0 at T = 0: no row) and the same labels
        assert dict(zip(ips.doc_ids, ips.labels)).keys() <= dict(zip(pa.doc_ids, pa.labels)).keys()
        got = dict(zip(pa.doc_ids, pa.labels))
        for d, y in zip(ips.doc_ids, ips.labels):
            assert abs(got[d] - y) < 1e-9
        if t == 0:
            assert set(pa.doc_ids) == set(ips.doc_ids)
            # clipping ρ at 0.5 scales the labels of the rank-3 documents (ρ = θ_3 = 0.3) by 0.3 / 0.5
            clipped = click_dataset(log, feats, propensity=pol.propensities(theta), clip=0.5)
            want = [got[d] * (0.6 if d in ("d", "f") else 1.0) for d in clipped.doc_ids]
            np.testing.assert_allclose(clipped.labels, want, rtol=1e-12)


def test_row_exposure_from_the_log():
    feats = tiny_features()
    pol = PlackettLucePolicy(SCORES, feats.query_offsets, temperature=1.0, top_k=2)
    rho = pol.exposure(THETA)
    pages = [["c", "a"], ["a", "b"], ["e", "g"], ["g", "f"]]
    rows = {d: i for i, d in enumerate(feats.doc_ids)}
    log = ClickLog.from_arrays(["q1", "q1", "q2", "q2"], pages, [[1, 0], [1, 1], [0, 1], [1, 0]],
                               row_data={"exposure": [[rho[rows[d]] for d in p] for p in pages]})
    a = click_dataset(log, feats, exposure="log")
    b = dict(zip(*[click_dataset(log, feats, propensity=pol.propensities(THETA)).doc_ids,
                   click_dataset(log, feats, propensity=pol.propensities(THETA)).labels]))
    for d, y in zip(a.doc_ids, a.labels):
        assert abs(b[d] - y) < 1e-12
    assert set(a.doc_ids) == {"a", "b", "c", "e", "f", "g"}  # shown rows only
    m = np.linspace(0.1, 0.7, 7)
    adr = click_dataset(log, feats, exposure="log", propensity=THETA, direct=m)
    bdr = click_dataset(log, feats, propensity=pol.propensities(THETA), direct=m)
    bd = dict(zip(bdr.doc_ids, bdr.labels))
    for d, y in zip(adr.doc_ids, adr.labels):
        assert abs(bd[d] - y) < 1e-12
    with pytest.raises(InputError, match="row_data"):
        click_dataset(log.counts(), feats, exposure="log")


def test_policy_aware_errors_and_fit_debiased():
    from rankwise.models import GBDTRanker

    feats = tiny_features()
    pol = PlackettLucePolicy(SCORES, feats.query_offsets, temperature=0, top_k=2)
    log = ClickLog.from_arrays(["q1"], [["b", "a"]], [[1, 0]])  # "b" is below the deterministic top 2
    with pytest.raises(InputError, match="ρ is 0"):
        click_dataset(log, feats, propensity=pol.propensities(THETA))
    with pytest.raises(InputError, match="one ρ per row"):
        click_dataset(log, feats, exposure=np.ones(3))
    with pytest.raises(InputError, match="needs propensity"):
        click_dataset(log, feats, policy=pol)
    with pytest.raises(InputError, match="candidates"):
        click_dataset(log, feats, exposure=np.ones(7), candidates=True)
    with pytest.raises(InputError, match="once"):
        click_dataset(log, feats, propensity=pol.propensities(THETA), exposure=np.ones(7))
    stoch = PlackettLucePolicy(SCORES, feats.query_offsets, temperature=1.0, top_k=2)
    gbdt = GBDTRanker(loss="op_pairwise", n_estimators=3, min_child_samples=1, random_state=0, n_jobs=1)
    m = fit_debiased(gbdt, log, feats, stoch.propensities(THETA))
    assert np.isfinite(m.predict(feats.X)).all()  # features with a NaN: the trees take them
