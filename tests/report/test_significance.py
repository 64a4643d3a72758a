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
