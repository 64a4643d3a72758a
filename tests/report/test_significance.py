import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rankwise.errors import InputError
from rankwise.report import (compare_systems, holm_correction, paired_randomization_test, paired_t_test,
                             win_tie_loss)


def holm_naive(p):
    """Holm (1979) step-down, written as the loop of the paper."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adj = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adj[i] = running
    return adj


@pytest.mark.parametrize("seed", range(5))
def test_t_test_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    a = rng.random(40)
    b = a + rng.normal(0.02, 0.1, 40)
    assert paired_t_test(a, b) == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-12)


@pytest.mark.parametrize("n", [3, 7, 12])
def test_randomization_exact_matches_scipy_permutation_test(n):
    rng = np.random.default_rng(n)
    a, b = rng.random(n), rng.random(n)
    ref = stats.permutation_test((a, b), lambda x, y: np.mean(x - y), permutation_type="samples",
                                 n_resamples=np.inf, alternative="two-sided").pvalue
    assert paired_randomization_test(a, b) == pytest.approx(ref, rel=1e-12)


def test_randomization_sampled_close_to_t_test_and_reproducible():
    rng = np.random.default_rng(1)
    a = rng.random(200)
    b = a - 0.01 + rng.normal(0, 0.1, 200)
    p1 = paired_randomization_test(a, b, n_resamples=20_000, random_state=3)
    p2 = paired_randomization_test(a, b, n_resamples=20_000, random_state=3)
    assert p1 == p2
    assert abs(p1 - paired_t_test(a, b)) < 0.03


def test_identical_systems():
    a = np.linspace(0, 1, 30)
    assert paired_t_test(a, a) == 1.0
    assert paired_randomization_test(a, a) == 1.0
    assert win_tie_loss(a, a) == (0, 30, 0)


def test_holm_matches_naive():
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.random(rng.integers(1, 12)) ** 3
        np.testing.assert_allclose(holm_correction(p), holm_naive(list(p)), rtol=0, atol=1e-15)


def test_compare_systems_table():
    rng = np.random.default_rng(0)
    base = rng.random(50)
    runs = {name: pd.DataFrame({"ndcg@10": base + shift + rng.normal(0, 0.05, 50),
                                "map": base + rng.normal(0, 0.05, 50)})
            for name, shift in [("bm25", 0.0), ("lambdamart", 0.2), ("linear", 0.01)]}
    table = compare_systems(runs, n_resamples=2000)
    assert list(table.means.index) == ["bm25", "lambdamart", "linear"]
    assert len(table.pairs) == 3 * 2
    row = table.pairs.query("system_a == 'bm25' and system_b == 'lambdamart' and metric == 'ndcg@10'").iloc[0]
    assert row.p_ttest_holm < 1e-6 and row.losses > 40
    assert (table.pairs.p_ttest_holm >= table.pairs.p_ttest).all()
    assert "Paired tests" in str(table)


@pytest.mark.parametrize("a,b,match", [
    ([1, 2, 3], [1, 2], "same queries"),
    ([1.0], [2.0], "at least 2"),
    ([1, np.nan], [1, 2], "finite"),
])
def test_bad_input(a, b, match):
    with pytest.raises(InputError, match=match):
        paired_t_test(a, b)


def test_compare_rejects_other_queries():
    a = pd.DataFrame({"m": [1.0, 2.0]}, index=["q1", "q2"])
    b = pd.DataFrame({"m": [1.0, 2.0]}, index=["q1", "q3"])
    with pytest.raises(InputError, match="other queries"):
        compare_systems({"a": a, "b": b})


# ---------------------------------------------------------------- corrections, Tukey HSD, effect sizes, CIs
from rankwise.report import (benjamini_hochberg, bonferroni_correction, bootstrap_ci, cohens_dz,  # noqa: E402
                             tukey_hsd_randomized)
from rankwise.report import significance as S  # noqa: E402


@pytest.mark.parametrize("seed", range(10))
def test_corrections_match_statsmodels(seed):
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(seed)
    p = rng.random(int(rng.integers(1, 60))) ** 4
    p[: p.size // 3] = p[0]  # tied p-values
    for ours, theirs in ((benjamini_hochberg, "fdr_bh"), (bonferroni_correction, "bonferroni"),
                         (holm_correction, "holm")):
        np.testing.assert_allclose(ours(p), multitest.multipletests(p, method=theirs)[1], rtol=0, atol=1e-15)


def test_bh_hand_case():
    # m = 4: p * 4 / rank = 0.04, 0.04, 0.04, 0.8; the step-up minimum from the top keeps them
    np.testing.assert_allclose(benjamini_hochberg([0.01, 0.02, 0.03, 0.8]), [0.04, 0.04, 0.04, 0.8])
    np.testing.assert_allclose(benjamini_hochberg([0.8, 0.03, 0.01, 0.02]), [0.8, 0.04, 0.04, 0.04])


def tukey_brute_force(x):
    """Every assignment of the system labels within every topic, as loops (Carterette 2012)."""
    n, m = x.shape
    means = x.mean(axis=0)
    ranges = []
    for perm in itertools.product(itertools.permutations(range(m)), repeat=n):
        mu = [sum(x[q][perm[q][j]] for q in range(n)) / n for j in range(m)]
        ranges.append(max(mu) - min(mu))
    p = np.ones((m, m))
    for i in range(m):
        for j in range(m):
            if i != j:
                p[i, j] = sum(r >= abs(means[i] - means[j]) - 1e-12 for r in ranges) / len(ranges)
    return p


def test_tukey_hsd_hand_case():
    # two topics, two systems, A wins both by 1: of the 4 label assignments, 2 give a range of 1
    x = np.array([[1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(tukey_hsd_randomized(x), [[1.0, 0.5], [0.5, 1.0]])


@pytest.mark.parametrize("seed,shape", [(0, (4, 3)), (1, (3, 4)), (2, (5, 3)), (3, (2, 5))])
def test_tukey_hsd_exact_equals_brute_force(seed, shape):
    rng = np.random.default_rng(seed)
    x = np.round(rng.random(shape) + np.arange(shape[1]) * 0.2, 2)  # ties among the means too
    np.testing.assert_allclose(tukey_hsd_randomized(x), tukey_brute_force(x), rtol=0, atol=1e-15)


def test_tukey_hsd_with_two_systems_is_the_randomisation_test():
    rng = np.random.default_rng(4)
    a, b = rng.random(9), rng.random(9)
    p = tukey_hsd_randomized(np.column_stack([a, b]))
    assert p[0, 1] == pytest.approx(paired_randomization_test(a, b), rel=1e-12)


def test_tukey_hsd_sampled_close_to_exact_and_reproducible(monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.random((6, 3)) + [0.0, 0.1, 0.4]
    exact = tukey_hsd_randomized(x)
    monkeypatch.setattr(S, "EXACT_TUKEY_MAX_PERMUTATIONS", 0)
    sampled = tukey_hsd_randomized(x, n_resamples=20_000, random_state=1)
    assert np.array_equal(sampled, tukey_hsd_randomized(x, n_resamples=20_000, random_state=1))
    assert np.abs(sampled - exact).max() < 0.015  # binomial standard error <= 0.0036 at 20,000 draws


def test_tukey_hsd_close_to_classical_tukey_without_topic_effects():
    """With independent normal values (no topic effect, equal variances) the permutation
    distribution of the range approximates the studentized range that statsmodels' classical
    Tukey HSD uses; with topic effects only the randomised version is appropriate."""
    multicomp = pytest.importorskip("statsmodels.stats.multicomp")
    rng = np.random.default_rng(6)
    n, m = 300, 4
    x = rng.normal(size=(n, m)) + [0.0, 0.05, 0.12, 0.3]
    ours = tukey_hsd_randomized(x, n_resamples=20_000, random_state=0)
    res = multicomp.pairwise_tukeyhsd(x.T.ravel(), np.repeat(np.arange(m), n))
    theirs = np.ones((m, m))
    for (i, j), p in zip(itertools.combinations(range(m), 2), res.pvalues):
        theirs[i, j] = theirs[j, i] = p
    assert np.abs(ours - theirs).max() < 0.02


def test_cohens_dz():
    a = np.array([0.5, 0.7, 0.2, 0.9, 0.4])
    b = np.array([0.4, 0.5, 0.3, 0.6, 0.1])
    d = a - b
    assert cohens_dz(a, b) == pytest.approx(d.mean() / np.sqrt(((d - d.mean()) ** 2).sum() / 4), rel=1e-14)
    assert cohens_dz(b, a) == -cohens_dz(a, b)
    c = np.array([0.5, 0.75, 0.25, 1.0])  # dyadic: the differences are exactly 0.25
    assert cohens_dz(a, a) == 0.0 and cohens_dz(c + 0.25, c) == np.inf and cohens_dz(c, c + 0.25) == -np.inf


def test_bootstrap_ci_percentile():
    rng = np.random.default_rng(7)
    d = rng.normal(0.03, 0.1, 80)
    lo, hi = bootstrap_ci(d, n_resamples=20_000, random_state=3)
    assert np.array_equal(bootstrap_ci(d, n_resamples=20_000, random_state=3), [lo, hi])
    # the same resampling by index, written plainly
    idx = np.random.default_rng(3).integers(0, 80, size=(1024, 80))
    assert bootstrap_ci(d, n_resamples=1024, random_state=3) == pytest.approx(
        np.quantile(d[idx].mean(axis=1), [0.025, 0.975]), rel=1e-12)
    scipy_ci = stats.bootstrap((d,), np.mean, n_resamples=20_000, method="percentile",
                               random_state=np.random.default_rng(0)).confidence_interval
    se = d.std(ddof=1) / np.sqrt(80)
    assert abs(lo - scipy_ci.low) < 0.05 * se and abs(hi - scipy_ci.high) < 0.05 * se
    cols = bootstrap_ci(np.column_stack([d, -d]), n_resamples=5000, random_state=1, confidence=0.9)
    assert cols.shape == (2, 2) and cols[1] == pytest.approx(-cols[0][::-1], rel=1e-12)


def _systems(n_systems, n_queries, metrics=("map",), spread=0.05, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.random(n_queries)
    return {f"s{i:02d}": pd.DataFrame({m: base + spread * i + rng.normal(0, 0.02, n_queries) for m in metrics})
            for i in range(n_systems)}


def test_resolution_floor_warning_17_runs_3_measures():
    systems = _systems(17, 20, ("map", "ndcg@10", "P@10"))
    with pytest.warns(UserWarning, match=r"floors \d+ Holm-corrected p-values at up to 0.0408 \(family of 408 tests"):
        table = compare_systems(systems, n_resamples=10_000)
    assert table.pairs.p_randomization_holm.min() == pytest.approx(408 / 10_001, rel=1e-12)
    assert "Note: the randomisation test's resolution" in str(table)


def test_no_warning_when_the_floor_is_far_below_alpha(recwarn):
    table = compare_systems(_systems(3, 20), n_resamples=10_000)  # floor 3 / 10,001
    assert table.notes == [] and not [w for w in recwarn if "resolution" in str(w.message)]
    with pytest.warns(UserWarning, match="use at least 599 resamples"):
        compare_systems(_systems(3, 20), n_resamples=200)  # floor 3 / 201 > 0.005


def test_compare_options():
    systems = _systems(4, 25, ("map", "ndcg@10"), spread=0.004, seed=2)
    base = compare_systems(systems, n_resamples=2000)
    table = compare_systems(systems, n_resamples=2000, correction="bh", family="metric", tukey_hsd=True,
                            effect_size=True, n_bootstrap=3000)
    pairs = table.pairs
    assert table.title == "Paired tests (Benjamini-Hochberg-corrected per metric)"
    np.testing.assert_array_equal(pairs.p_ttest, base.pairs.p_ttest)
    for m in ("map", "ndcg@10"):
        sel = pairs.metric == m
        np.testing.assert_allclose(pairs.p_ttest_bh[sel], benjamini_hochberg(pairs.p_ttest[sel]), rtol=0, atol=0)
        np.testing.assert_allclose(pairs.p_randomization_bh[sel], benjamini_hochberg(pairs.p_randomization[sel]),
                                   rtol=0, atol=0)
        x = np.column_stack([systems[s][m] for s in systems])
        tk = tukey_hsd_randomized(x, n_resamples=2000)
        np.testing.assert_allclose(pairs.p_tukey_hsd[sel], [tk[int(a[1:]), int(b[1:])] for a, b in
                                                            zip(pairs.system_a[sel], pairs.system_b[sel])])
    diffs = np.column_stack([systems[a][m] - systems[b][m] for a, b, m in
                             zip(pairs.system_a, pairs.system_b, pairs.metric)])
    np.testing.assert_allclose(pairs[["ci_low", "ci_high"]].to_numpy(),
                               bootstrap_ci(diffs, n_resamples=3000, random_state=0), rtol=1e-12)
    assert (pairs.ci_low <= pairs.mean_diff).all() and (pairs.mean_diff <= pairs.ci_high).all()
    np.testing.assert_allclose(pairs.effect_size, [cohens_dz(systems[a][m], systems[b][m]) for a, b, m in
                                                   zip(pairs.system_a, pairs.system_b, pairs.metric)])
    per_metric_holm = compare_systems(systems, n_resamples=2000, family="metric").pairs
    sel = per_metric_holm.metric == "map"
    np.testing.assert_allclose(per_metric_holm.p_ttest_holm[sel], holm_correction(per_metric_holm.p_ttest[sel]))


@pytest.mark.parametrize("kwargs,match", [
    ({"correction": "fdr"}, "correction must be one of"),
    ({"family": "pair"}, "family must be"),
    ({"alpha": 1.5}, "alpha must lie"),
    ({"n_bootstrap": -1}, "n_bootstrap must be"),
    ({"n_resamples": 0}, "n_resamples must be"),
])
def test_compare_bad_options(kwargs, match):
    with pytest.raises(InputError, match=match):
        compare_systems(_systems(2, 5), **kwargs)


def test_new_functions_bad_input():
    with pytest.raises(InputError, match="lie in"):
        benjamini_hochberg([0.1, 1.2])
    with pytest.raises(InputError, match="n_systems >= 2"):
        tukey_hsd_randomized(np.ones((5, 1)))
    with pytest.raises(InputError, match="finite"):
        tukey_hsd_randomized(np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(InputError, match="confidence"):
        bootstrap_ci(np.ones(5), confidence=1.0)


def test_bootstrap_means_are_resampled_means_whatever_the_block_size():
    """Long inputs are resampled in small blocks (memory); every resample is still n rows drawn in order
    from the stream: the naive loop, one resample at a time, gives the same means."""
    from rankwise.report.significance import bootstrap_means

    d = np.random.default_rng(3).normal(size=(5000, 2))  # 5000 rows: blocks of 800 resamples, not 1024
    got = bootstrap_means(d, n_resamples=1700, random_state=11)
    rng = np.random.default_rng(11)
    want = np.array([d[rng.integers(0, len(d), size=len(d))].mean(axis=0) for _ in range(1700)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
