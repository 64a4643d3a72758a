"""The click package on the house's contracts (issue 26): ips_dcg is metrics.dcg, one query split,
deprecated pages, the short path fit_debiased(..., propensity=<estimator>), public helpers for the scripts."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.clicks import ips_dcg, split_log_by_query
from rankwise.data import RankingDataset
from rankwise.data.clicklog import ClickLog


def naive_ips_dcg(scores, data, k=10):
    """The former ips_dcg loop: per query, stable sort by decreasing score, labels over log2(1 + i)."""
    off = np.asarray(data.query_offsets)
    total = 0.0
    for a, b in zip(off[:-1], off[1:]):
        order = np.argsort(-scores[a:b], kind="stable")[: (b - a) if k is None else int(k)]
        total += float(np.sum(np.asarray(data.labels[a:b])[order] / np.log2(np.arange(2, len(order) + 2))))
    return total / max(len(off) - 1, 1)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 3, 10, None])
def test_ips_dcg_is_the_naive_loop_on_random_data_with_ties(seed, k):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 25, size=40)
    sizes[3] = 1  # a one-document query
    off = np.concatenate(([0], np.cumsum(sizes)))
    n = int(off[-1])
    # IPS labels: full precision, many zeros; odd seeds: doubly robust labels with negative values
    labels = rng.exponential(size=n) * (rng.random(n) < 0.4) * 1e3 ** rng.uniform(-1, 1, n)
    if seed % 2:
        labels -= 0.3 * rng.random(n)
    scores = np.round(rng.normal(size=n), 1)  # rounded: many score ties inside a query
    scores[rng.random(n) < 0.2] = 0.0
    data = RankingDataset(np.zeros((n, 1), dtype=np.float32), labels, off, np.arange(len(sizes)))
    assert ips_dcg(scores, data, k=k) == pytest.approx(naive_ips_dcg(scores, data, k), rel=1e-12, abs=1e-12)


def test_ips_dcg_breaks_ties_by_data_set_order():
    data = RankingDataset(np.zeros((3, 1), dtype=np.float32), np.array([0.0, 2.0, 1.0]), np.array([0, 3]), ["q"])
    assert ips_dcg(np.zeros(3), data, k=1) == 0.0  # first row of the tie is ranked first
    assert ips_dcg(np.array([0.0, 1.0, 1.0]), data, k=1) == 2.0


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "3"])
def test_ips_dcg_cut_off_is_checked_by_the_house_rule(k):
    from rankwise.errors import InputError

    data = RankingDataset(np.zeros((2, 1), dtype=np.float32), np.ones(2), np.array([0, 2]), ["q"])
    with pytest.raises(InputError, match="k must be"):
        ips_dcg(np.zeros(2), data, k=k)


def test_split_log_by_query_keeps_its_seeded_split():
    """The same held-out queries as before the split rule moved to clicks._split (first n_val of
    default_rng(seed).permutation(n_queries))."""
    n_q = 23
    log = ClickLog.from_arrays([f"q{i}" for i in range(n_q)], [["a", "b"]] * n_q, [[1, 0]] * n_q)
    for seed in (0, 1, 7):
        _, val = split_log_by_query(log, 0.3, random_state=seed)
        perm = np.random.default_rng(seed).permutation(n_q)
        assert sorted(val.queries) == sorted(f"q{i}" for i in perm[:round(0.3 * n_q)])


def test_every_query_split_of_the_package_is_the_one_rule():
    from rankwise.clicks import _split
    from rankwise.clicks.propensity import _held_out_rows, _query_folds

    rng = np.random.default_rng(5)
    query = rng.choice([f"q{i}" for i in range(30)], size=400)
    codes = np.unique(query, return_inverse=True)[1]
    first = {q: i for i, q in reversed(list(enumerate(query)))}  # codes in order of first appearance
    order = {q: r for r, q in enumerate(sorted(first, key=first.get))}
    codes = np.array([order[q] for q in query])
    for seed in (0, 3):
        np.testing.assert_array_equal(_query_folds(query, len(query), 4, seed),
                                      (np.random.default_rng(seed).permutation(30) % 4)[codes])
        held = np.zeros(30, dtype=bool)
        held[np.random.default_rng(seed).permutation(30)[:6]] = True
        np.testing.assert_array_equal(_held_out_rows(query, len(query), 0.2, seed), held[codes])
        np.testing.assert_array_equal(_split.query_folds(30, 4, seed), np.random.default_rng(seed).permutation(30) % 4)


def test_pages_is_deprecated_for_session_dataset():
    from rankwise.clicks import pages

    log = ClickLog.from_arrays(["q", "q"], [["x", "y"], ["y", "x"]], [[1, 0], [0, 1]])
    feats = RankingDataset.from_arrays(np.eye(2, dtype=np.float32), np.zeros(2), ["q"] * 2, doc_ids=["x", "y"])
    with pytest.warns(DeprecationWarning, match="session_dataset"):
        out = pages(log, feats)
    assert len(out) == 7


@pytest.fixture(scope="module")
def small_sim():
    from rankwise.clicks import simulate_clicks_protocol
    from rankwise.data import make_synthetic

    data = make_synthetic(30, n_features=5, list_length=(8, 12), seed=0)
    return simulate_clicks_protocol(data, n_sessions=3000, eta=1.0, top_k=6, temperature=1.0, random_state=0)


def test_fit_debiased_fits_an_unfitted_propensity_estimator_on_the_log(small_sim):
    from rankwise.clicks import RegressionEM, click_dataset, fit_debiased
    from rankwise.models import LinearRanker

    est = RegressionEM(max_iter=3, n_estimators=10)
    ranker = fit_debiased(LinearRanker(loss="pointwise_squared", random_state=0), small_sim.log, small_sim.features,
                          propensity=est)
    fitted = ranker.propensity_estimator_
    assert fitted is not est and not hasattr(est, "propensity_")  # the user's estimator is cloned, not changed
    theta = fitted.propensity_
    assert theta[0] == 1.0 and len(theta) == 6
    want = RegressionEM(max_iter=3, n_estimators=10).fit(small_sim.log, features=small_sim.features).propensity_
    np.testing.assert_allclose(theta, want)
    # the same ranker as the long path with the array of propensities
    by_hand = LinearRanker(loss="pointwise_squared", random_state=0).fit(
        click_dataset(small_sim.log, small_sim.features, propensity=want))
    np.testing.assert_allclose(ranker.predict(small_sim.features.X), by_hand.predict(small_sim.features.X))
    # a fitted estimator is used as it is
    pre = fitted
    again = fit_debiased(LinearRanker(loss="pointwise_squared", random_state=0), small_sim.log, small_sim.features,
                         propensity=pre)
    assert again.propensity_estimator_ is pre
    np.testing.assert_allclose(again.predict(small_sim.features.X), by_hand.predict(small_sim.features.X))


def test_fit_debiased_with_an_array_sets_no_propensity_estimator(small_sim):
    from rankwise.clicks import fit_debiased
    from rankwise.models import LinearRanker

    r = fit_debiased(LinearRanker(loss="pointwise_squared"), small_sim.log, small_sim.features,
                     propensity=small_sim.propensity)
    assert not hasattr(r, "propensity_estimator_")


def test_fit_debiased_refuses_an_object_that_gives_no_propensities(small_sim):
    from rankwise.clicks import fit_debiased
    from rankwise.errors import InputError
    from rankwise.models import LinearRanker

    class NoTheta:
        def fit(self, log, *, features=None):
            return self

        def get_params(self, deep=False):
            return {}

    with pytest.raises(InputError, match="propensity_"):
        fit_debiased(LinearRanker(loss="pointwise_squared"), small_sim.log, small_sim.features, propensity=NoTheta())


def test_feature_rows_is_public_and_maps_every_pair(small_sim):
    from rankwise.clicks import feature_rows

    rows = feature_rows(small_sim.log, small_sim.features)
    q, d = small_sim.log.pair_keys()
    qrow = np.repeat(np.asarray(small_sim.features.query_ids), np.diff(small_sim.features.query_offsets))
    assert len(rows) == small_sim.log.n_pairs
    assert np.array_equal(qrow[rows].astype(str), np.asarray(q).astype(str))
    assert np.array_equal(np.asarray(small_sim.features.doc_ids)[rows].astype(str), np.asarray(d).astype(str))


def naive_theta_given_relevance(rank, clicks, impressions, gamma, R):
    """Per rank, the maximiser of the PBM log-likelihood by a fine grid search (then θ / θ_1)."""
    grid = np.linspace(1e-4, 1.0, 200_001)
    th = np.ones(R)
    for k in range(1, R + 1):
        m = rank == k
        if not m.any():
            continue
        ll = [np.sum(clicks[m] * np.log(t * gamma[m]) + (impressions[m] - clicks[m]) * np.log1p(-t * gamma[m]))
              for t in grid[::100]]
        j = int(np.argmax(ll)) * 100
        lo, hi = max(j - 100, 0), min(j + 101, len(grid))
        fine = grid[lo:hi]
        ll = [np.sum(clicks[m] * np.log(t * gamma[m]) + (impressions[m] - clicks[m]) * np.log1p(-t * gamma[m]))
              for t in fine]
        th[k - 1] = fine[int(np.argmax(ll))]
    return th / th[0]


def test_propensity_given_relevance_is_the_likelihood_maximiser(small_sim):
    from rankwise.clicks import propensity_given_relevance

    rng = np.random.default_rng(0)
    log = small_sim.log
    gamma = rng.uniform(0.2, 0.9, log.n_pairs)
    got = propensity_given_relevance(log, gamma)
    c = log.counts()
    want = naive_theta_given_relevance(c.rank, c.clicks, c.impressions, gamma[c.pair], c.max_rank)
    np.testing.assert_allclose(got, want, atol=2e-5)
    np.testing.assert_array_equal(propensity_given_relevance(c, gamma), got)  # a log and its counts agree
    assert len(propensity_given_relevance(log, gamma, n_ranks=9)) == 9


def test_propensity_given_relevance_errors(small_sim):
    from rankwise.clicks import propensity_given_relevance
    from rankwise.errors import InputError

    with pytest.raises(InputError, match="one value per"):
        propensity_given_relevance(small_sim.log, np.ones(3))
    with pytest.raises(InputError, match="NaN"):
        propensity_given_relevance(small_sim.log, np.full(small_sim.log.n_pairs, np.nan))
    with pytest.raises(InputError, match="n_ranks"):
        propensity_given_relevance(small_sim.log, np.full(small_sim.log.n_pairs, 0.5), n_ranks=2)


def test_scripts_import_no_private_name():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "benchmarks"
    bad = [f"{p.name}: {m.group(0)}" for p in sorted(root.glob("bench_clicks*.py"))
           for m in re.finditer(r"from rankwise[\w.]* import[^\n]*\b_\w+", p.read_text(encoding="utf-8"))]
    assert not bad, bad


def test_select_clip_takes_a_propensity_estimator_fitted_once_on_the_log(small_sim):
    from rankwise.clicks import RegressionEM, select_clip
    from rankwise.models import LinearRanker

    em = RegressionEM(max_iter=3, n_estimators=10).fit(small_sim.log, features=small_sim.features)
    kw = dict(clips=(0.5, None), validation_fraction=0.3, random_state=1)
    a = select_clip(LinearRanker(loss="pointwise_squared", random_state=0), small_sim.log, small_sim.features,
                    RegressionEM(max_iter=3, n_estimators=10), **kw)
    b = select_clip(LinearRanker(loss="pointwise_squared", random_state=0), small_sim.log, small_sim.features,
                    em.propensity_, **kw)
    np.testing.assert_allclose(a.scores, b.scores)
    assert a.clip == b.clip
