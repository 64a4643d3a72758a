"""Counterfactual evaluation of a new ranker (rankwise.clicks.evaluation): exact expectations by
enumerating every page and click outcome of tiny PBM settings, the formulas session by session,
the bootstrap, and interval coverage in a seeded simulation."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from rankwise.clicks import ClickLog, counterfactual_estimates, expected_metric, simulate_clicks_protocol
from rankwise.clicks.evaluation import _session_values, rank_weights
from rankwise.clicks.policy import PlackettLucePolicy
from rankwise.data import RankingDataset, make_synthetic
from rankwise.errors import InputError
from rankwise.metrics import dcg

THETA = np.array([1.0, 3 / 5, 3 / 10])
# two queries: a has candidates x, y, z; b has u, v
DOCS = {"a": ["x", "y", "z"], "b": ["u", "v"]}
ALPHA = {"x": 0.2, "y": 0.9, "z": 0.55, "u": 0.7, "v": 0.35}
NEW = {"x": 0.1, "y": 2.0, "z": 1.5, "u": -1.0, "v": 3.0}  # new ranker: y, z, x; v, u


def features(alpha=ALPHA):
    q = [q for q, ds in DOCS.items() for _ in ds]
    d = [d for ds in DOCS.values() for d in ds]
    X = np.arange(2 * len(d), dtype=np.float64).reshape(-1, 2)
    f = RankingDataset.from_arrays(X, np.zeros(len(d)), q, doc_ids=d)
    return f, np.array([NEW[x] for x in d]), np.array([alpha[x] for x in d])


def one_session(pages):
    """Every (probability, query, page, clicks) of one session: query uniform, page from ``pages[q]``
    (a list of (probability, page)), clicks from the PBM θ_k α_d."""
    out = []
    for q, q_pages in pages.items():
        for p_page, page in q_pages:
            for clicks in itertools.product([0, 1], repeat=len(page)):
                p = 0.5 * p_page
                for k, (d, c) in enumerate(zip(page, clicks)):
                    pc = THETA[k] * ALPHA[d]
                    p *= pc if c else 1 - pc
                out.append((p, q, page, list(clicks)))
    return out


def expectation(pages, fn, n_sessions=2):
    """E[fn(log)] over every log of ``n_sessions`` independent sessions."""
    total, mass = 0.0, 0.0
    for outcome in itertools.product(one_session(pages), repeat=n_sessions):
        p = np.prod([o[0] for o in outcome])
        log = ClickLog.from_arrays(*([o[i] for o in outcome] for i in (1, 2, 3)))
        total = total + p * np.asarray(fn(log))
        mass += p
    assert mass == pytest.approx(1.0, abs=1e-12)
    return total


def exposure_of(log, rho):
    return np.array([rho[d] for d in log.docs[log.doc]])


def uniform_top(k):
    """Every page of the uniformly random ranking of each query's candidates, top k shown."""
    pages = {}
    for q, ds in DOCS.items():
        perms = list(itertools.permutations(ds))
        pages[q] = [(1 / len(perms), list(p[:k])) for p in perms]
    return pages


def rho_uniform_top(k):
    """ρ_d = Σ_{j ≤ k} P(rank j) θ_j = (θ_1 + … + θ_min(k, n)) / n for the uniform ranking."""
    return {d: THETA[:min(k, len(ds))].sum() / len(ds) for ds in DOCS.values() for d in ds}


def test_rank_weights_and_truth_match_house_dcg():
    f, s, alpha = features()
    lam = rank_weights(f, s, k=2)
    # y, z, x and v, u: rank 1 and 2 get 1/log2(2), 1/log2(3); x and u are beyond k = 2
    assert lam.tolist() == pytest.approx([0, 1, 1 / np.log2(3), 1 / np.log2(3), 1])
    q = np.repeat(f.query_ids, np.diff(f.query_offsets))
    assert expected_metric(f, s, alpha, k=2) == pytest.approx(dcg(s, alpha, qid=q, k=2, gain="linear", ties="input"))
    ctr = rank_weights(f, s, k=None, metric="ctr", propensity=THETA)
    assert ctr.tolist() == pytest.approx([THETA[2], THETA[0], THETA[1], THETA[1], THETA[0]])


@pytest.mark.parametrize("k", [1, 2, None])
def test_deterministic_full_list_ips_exactly_unbiased(k):
    """A deterministic logger showing every candidate: E[IPS] is the new ranker's DCG@k with gains α,
    and SNIPS and DR are IPS itself on every log (w_s = 1; the direct part cancels)."""
    f, s, alpha = features()
    pages = {"a": [(1.0, ["x", "y", "z"])], "b": [(1.0, ["u", "v"])]}
    m_wrong = np.array([0.9, 0.1, 0.3, 0.0, 1.0])

    def est(log):
        r = counterfactual_estimates(log, f, s, propensity=THETA, k=k, direct=m_wrong)
        assert r["snips"].estimate == pytest.approx(r["ips"].estimate, abs=1e-12)
        assert r["dr"].estimate == pytest.approx(r["ips"].estimate, abs=1e-12)
        return r["ips"].estimate

    assert expectation(pages, est) == pytest.approx(expected_metric(f, s, alpha, k=k), abs=1e-12)


@pytest.mark.parametrize("metric", ["dcg", "ctr"])
def test_policy_aware_exactly_unbiased_under_random_top2(metric):
    """Uniformly random rankings with only the top 2 shown (every candidate has ρ > 0): E[IPS] and
    E[DR] (with a wrong direct model) are the truth; every session's control variate has E[w_s] = 1."""
    f, s, alpha = features()
    rho = rho_uniform_top(2)
    m_wrong = np.array([0.9, 0.1, 0.3, 0.0, 1.0])
    truth = expected_metric(f, s, alpha, k=2, metric=metric, propensity=THETA)

    def values(log):
        cols = _session_values(log, f, s, propensity=THETA, exposure=exposure_of(log, rho), k=2, metric=metric,
                               methods=("ips", "snips", "dr"), direct=m_wrong)
        return [cols["ips"][0], cols["dr"][0], cols["snips"][1][0]]

    # the three are means of i.i.d. per-session values: one session's expectation is the log's
    e_ips, e_dr, e_w = expectation(uniform_top(2), values, n_sessions=1)
    assert e_ips == pytest.approx(truth, abs=1e-12)
    assert e_dr == pytest.approx(truth, abs=1e-12)
    assert e_w == pytest.approx(1.0, abs=1e-12)


def test_deterministic_top_k_misses_unshown_documents_dr_recovers_with_right_direct_model():
    """A deterministic top-2 page never shows z: IPS misses exactly z's share of the truth (it is the
    new ranker's second document in query a), DR is unbiased when m̂ is right on z (wrong elsewhere)."""
    f, s, alpha = features()
    pages = {"a": [(1.0, ["x", "y"])], "b": [(1.0, ["u", "v"])]}
    m = np.array([0.9, 0.1, ALPHA["z"], 0.0, 1.0])
    truth = expected_metric(f, s, alpha, k=2)

    def values(log):
        r = counterfactual_estimates(log, f, s, propensity=THETA, k=2, direct=m)
        return [r["ips"].estimate, r["dr"].estimate]

    e_ips, e_dr = expectation(pages, values)
    assert e_ips == pytest.approx(truth - 0.5 * ALPHA["z"] / np.log2(3), abs=1e-12)
    assert e_dr == pytest.approx(truth, abs=1e-12)


def naive(log, f, s, theta, rho, k, m):
    """IPS, SNIPS, DR and the IPS standard error, session by session from the formulas."""
    rows = {(q, d): i for i, (q, d) in enumerate(zip(np.repeat(f.query_ids, np.diff(f.query_offsets)), f.doc_ids))}
    rank = {}
    for qi, q in enumerate(f.query_ids):
        a, b = f.query_offsets[qi], f.query_offsets[qi + 1]
        for r, i in enumerate(sorted(range(a, b), key=lambda i: (-s[i], i))):
            rank[f.doc_ids[i]] = r + 1
    lam = {d: (1 / np.log2(1 + r) if r <= k else 0.0) for d, r in rank.items()}
    Y, W, D = [], [], []
    for si in range(log.n_sessions):
        a, b = log.session_offsets[si], log.session_offsets[si + 1]
        q = log.queries[log.query[si]]
        y = w = r = 0.0
        for j in range(a, b):
            d, c, kk = log.docs[log.doc[j]], log.clicked[j], j - a
            y += lam[d] * c / rho[j]
            w += lam[d] * theta[kk] / rho[j]
            r += lam[d] * (c - theta[kk] * m[rows[(q, d)]]) / rho[j]
        big = sum(lam[d] for d in DOCS[q])
        Y.append(y)
        W.append(w / big if big > 0 else 1.0)
        D.append(sum(lam[d] * m[rows[(q, d)]] for d in DOCS[q]) + r)
    Y, W, D = map(np.array, (Y, W, D))
    return Y.mean(), Y.sum() / W.sum(), D.mean(), Y.std(ddof=1) / np.sqrt(len(Y))


def test_estimates_match_the_formulas_session_by_session():
    f, s, _ = features()
    rng = np.random.default_rng(3)
    queries, pages, clicks = [], [], []
    for _ in range(40):
        q = "a" if rng.random() < 0.6 else "b"
        page = list(rng.permutation(DOCS[q]))[: rng.integers(1, len(DOCS[q]) + 1)]
        queries.append(q)
        pages.append(page)
        clicks.append(list(rng.integers(0, 2, len(page))))
    log = ClickLog.from_arrays(queries, pages, clicks)
    rho = rng.uniform(0.05, 1.0, len(log.doc))
    m = rng.uniform(0, 1, 5)
    r = counterfactual_estimates(log, f, s, propensity=THETA, exposure=rho, k=2, direct=m)
    ips, snips, dr, se = naive(log, f, s, THETA, rho, 2, m)
    assert r["ips"].estimate == pytest.approx(ips, rel=1e-12)
    assert r["snips"].estimate == pytest.approx(snips, rel=1e-12)
    assert r["dr"].estimate == pytest.approx(dr, rel=1e-12)
    assert r["ips"].stderr == pytest.approx(se, rel=1e-12)
    z = 1.959963984540054
    assert r["ips"].ci_low == pytest.approx(ips - z * se) and r["ips"].ci_high == pytest.approx(ips + z * se)
    assert r["ips"].n == 40 and r["ips"].method == "ips" and r["ips"].interval == "normal"


def test_bootstrap_interval_is_the_house_bootstrap_of_the_sessions():
    from rankwise.report.significance import bootstrap_ci

    f, s, _ = features()
    rng = np.random.default_rng(5)
    log = ClickLog.from_arrays(["a"] * 30 + ["b"] * 20, [["y", "x", "z"]] * 30 + [["v", "u"]] * 20,
                               [list(rng.integers(0, 2, 3)) for _ in range(30)] + [list(rng.integers(0, 2, 2)) for _ in range(20)])
    rho = exposure_of(log, rho_uniform_top(3))
    r = counterfactual_estimates(log, f, s, propensity=THETA, exposure=rho, k=2, methods=("ips", "snips"),
                                 interval="bootstrap", n_bootstrap=500, random_state=7)
    Y, w = _session_values(log, f, s, propensity=THETA, exposure=rho, k=2, metric="dcg", methods=("snips",),
                           direct=None)["snips"]
    lo, hi = bootstrap_ci(Y, n_resamples=500, random_state=7)
    assert (r["ips"].ci_low, r["ips"].ci_high) == pytest.approx((lo, hi), rel=1e-12)
    assert r["snips"].interval == "bootstrap" and r["snips"].ci_low < r["snips"].estimate < r["snips"].ci_high
    normal = counterfactual_estimates(log, f, s, propensity=THETA, exposure=rho, k=2, methods=("snips",))["snips"]
    assert r["snips"].ci_high - r["snips"].ci_low == pytest.approx(normal.ci_high - normal.ci_low, rel=0.3)


def random_top_log(data, alpha, n_sessions, rng, top_k=5):
    """Sessions of a uniformly random ranking (Plackett–Luce with equal scores), top_k shown, PBM clicks."""
    policy = PlackettLucePolicy(np.zeros(len(alpha)), data.query_offsets, temperature=1.0, top_k=top_k)
    q = rng.integers(0, data.n_queries, n_sessions)
    off, rows = policy.sample(q, random_state=rng)
    rank = np.arange(len(rows)) - np.repeat(off[:-1], np.diff(off))
    theta = 1.0 / np.arange(1, top_k + 1)
    clicked = rng.random(len(rows)) < theta[rank] * alpha[rows]
    uq, qc = np.unique(q, return_inverse=True)  # the log's queries: those some session drew
    log = ClickLog(off, qc, np.asarray(data.query_ids)[uq], rows, np.asarray(data.doc_ids), clicked.astype(np.uint8))
    return log, policy.exposure(theta)[rows], theta


def test_intervals_cover_the_truth_in_a_seeded_simulation():
    """200 logs of a uniformly random top-5 logger on 30 synthetic queries: the 95% normal intervals of
    IPS, SNIPS and DR (direct model: the truth plus noise, fixed) cover the true DCG@5 in 90–99% of logs."""
    data = make_synthetic(30, n_features=5, list_length=(3, 12), seed=2)
    data = RankingDataset(data.X, data.labels, data.query_offsets, data.query_ids,
                          doc_ids=np.arange(len(data.labels)).astype(str))
    alpha = 0.1 + 0.9 * (2.0 ** data.labels - 1) / (2.0 ** data.labels.max() - 1)
    rng = np.random.default_rng(0)
    new = np.asarray(data.labels) + rng.normal(0, 1.0, len(alpha))
    direct = np.clip(alpha + rng.normal(0, 0.1, len(alpha)), 0, 1)
    truth = expected_metric(data, new, alpha, k=5)
    hits = {m: 0 for m in ("ips", "snips", "dr")}
    for _ in range(200):
        log, rho, theta = random_top_log(data, alpha, 400, rng)
        res = counterfactual_estimates(log, data, new, propensity=theta, exposure=rho, k=5, direct=direct)
        for m, e in res.items():
            hits[m] += e.covers(truth)
    cover = {m: h / 200 for m, h in hits.items()}
    assert all(0.90 <= c <= 0.99 for c in cover.values()), cover


def test_protocol_log_deterministic_full_list_covers():
    """The public simulation protocol (deterministic production ranker, whole list shown): IPS intervals
    cover the new ranker's true DCG@10 in 90–99% of 40 logs."""
    from rankwise.models import LinearRanker

    data = make_synthetic(40, n_features=8, list_length=(4, 15), seed=1)
    new = LinearRanker(loss="listnet", random_state=0).fit(data.take(np.arange(10)))
    hits = 0
    for seed in range(40):
        sim = simulate_clicks_protocol(data, n_sessions=2000, top_k=None, random_state=seed, production_fraction=0.1)
        s = new.predict(sim.features.X)
        est = counterfactual_estimates(sim.log, sim.features, s, propensity=sim.propensity, methods=("ips",))["ips"]
        hits += est.covers(expected_metric(sim.features, s, sim.relevance, k=10))
    assert 36 <= hits <= 40


def test_bad_input_is_named():
    f, s, _ = features()
    log = ClickLog.from_arrays(["a", "b"], [["x", "y"], ["u"]], [[1, 0], [0]])
    with pytest.raises(InputError, match="exposure must be positive and finite"):
        counterfactual_estimates(log, f, s, propensity=THETA, exposure=np.array([0.5, 0.0, 0.5]), methods=("ips",))
    with pytest.raises(InputError, match="exposure must hold one value per row"):
        counterfactual_estimates(log, f, s, propensity=THETA, exposure=np.ones(2), methods=("ips",))
    with pytest.raises(InputError, match="relative to rank 1"):
        counterfactual_estimates(log, f, s, propensity=[0.9, 0.5], methods=("ips",))
    with pytest.raises(InputError, match="propensity has 1 ranks"):
        counterfactual_estimates(log, f, s, propensity=[1.0], methods=("ips",))
    with pytest.raises(InputError, match="needs a direct model"):
        counterfactual_estimates(log, f, s, propensity=THETA)
    with pytest.raises(InputError, match="methods must be"):
        counterfactual_estimates(log, f, s, propensity=THETA, methods=("ips", "switch"))
    with pytest.raises(InputError, match="one score per row"):
        counterfactual_estimates(log, f, s[:3], propensity=THETA, methods=("ips",))
    with pytest.raises(InputError, match="scores must be finite"):
        counterfactual_estimates(log, f, np.array([1, np.nan, 0, 0, 0]), propensity=THETA, methods=("ips",))
    with pytest.raises(InputError, match="k must be"):
        counterfactual_estimates(log, f, s, propensity=THETA, k=0, methods=("ips",))
    with pytest.raises(InputError, match="no row in the feature data set"):
        counterfactual_estimates(ClickLog.from_arrays(["a", "a"], [["w"], ["x"]], [[1], [0]]), f, s,
                                 propensity=THETA, methods=("ips",))
    with pytest.raises(InputError, match="at least 2 sessions"):
        counterfactual_estimates(log.subset(np.array([True, False])), f, s, propensity=THETA, methods=("ips",))
    with pytest.raises(InputError, match="interval must be"):
        counterfactual_estimates(log, f, s, propensity=THETA, methods=("ips",), interval="exact")
    with pytest.raises(InputError, match="SNIPS is undefined"):  # z, the new top 1 of a at k = 1, is never shown
        counterfactual_estimates(ClickLog.from_arrays(["a", "a"], [["x"], ["y"]], [[1], [0]]), f,
                                 np.array([0.0, 0.0, 1.0, 0.0, 0.0]), propensity=THETA, k=1, methods=("snips",))
    with pytest.raises(InputError, match="ctr' needs the propensities"):
        rank_weights(f, s, metric="ctr")
