"""Paired significance tests for comparing ranking systems query by query.

Two systems evaluated on the same queries give paired per-query values ``a_q`` and ``b_q``;
every test here works on the differences ``d_q = a_q - b_q``.

References
----------
Smucker, M. D., Allan, J., & Carterette, B. (2007). A comparison of statistical significance
tests for information retrieval evaluation. CIKM.
Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scandinavian Journal
of Statistics 6(2), 65–70.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from rankwise.errors import InputError

#: Above this many queries the randomisation test samples sign flips instead of enumerating them.
EXACT_RANDOMIZATION_MAX_N = 16


def _paired(a, b, *, names=("a", "b")) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1:
        raise InputError(f"{names[0]} and {names[1]} must be 1-d arrays of per-query values")
    if a.shape != b.shape:
        raise InputError(f"{names[0]} has {a.size} queries but {names[1]} has {b.size}; "
                         "paired tests need the same queries in the same order")
    if a.size < 2:
        raise InputError(f"a paired test needs at least 2 queries; got {a.size}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise InputError(f"{names[0]} and {names[1]} must be finite (no NaN/inf per-query values)")
    return a - b


def paired_t_test(a, b) -> float:
    r"""Two-sided p-value of the paired t-test on per-query values.

    .. math:: t = \bar d / (s_d / \sqrt n), \quad d_q = a_q - b_q,

    with ``n - 1`` degrees of freedom. Identical systems (all ``d_q = 0``) give p = 1.
    """
    d = _paired(a, b)
    if np.all(d == 0):
        return 1.0
    sd = d.std(ddof=1)
    if sd == 0:  # every difference equal and non-zero: the evidence is as strong as it gets
        return 0.0
    t = d.mean() / (sd / np.sqrt(d.size))
    return float(2.0 * stats.t.sf(abs(t), df=d.size - 1))


def paired_randomization_test(a, b, *, n_resamples: int = 10_000, random_state=0) -> float:
    r"""Two-sided p-value of the paired randomisation (sign-flip permutation) test.

    Under the null hypothesis each difference's sign is equally likely, so the statistic
    :math:`|\bar d|` is compared with :math:`|\frac1n\sum_q \epsilon_q d_q|` over signs
    :math:`\epsilon \in \{\pm1\}^n`: enumerated exactly when ``n <= 16``, otherwise sampled
    (``n_resamples`` draws, reproducible from ``random_state``) with the add-one estimate
    ``(1 + #{as extreme}) / (1 + n_resamples)``, which never reports p = 0.
    """
    d = _paired(a, b)
    if n_resamples < 1:
        raise InputError(f"n_resamples must be >= 1; got {n_resamples}")
    observed = abs(d.mean())
    # A relative tolerance so that sign patterns giving the same mean count as "as extreme".
    tol = 1e-12 * max(1.0, np.abs(d).sum())
    if d.size <= EXACT_RANDOMIZATION_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        null = np.abs(signs @ d) / d.size
        return float(np.mean(null >= observed - tol))
    rng = np.random.default_rng(random_state)
    count = 0
    for start in range(0, n_resamples, 2048):
        m = min(2048, n_resamples - start)
        signs = rng.choice((-1.0, 1.0), size=(m, d.size))
        count += int(np.count_nonzero(np.abs(signs @ d) / d.size >= observed - tol))
    return float((1 + count) / (1 + n_resamples))


def holm_correction(p_values) -> np.ndarray:
    r"""Holm–Bonferroni adjusted p-values (step-down; controls the family-wise error rate).

    With the m p-values sorted increasingly, :math:`\tilde p_{(i)} = \max_{j \le i}
    \min(1, (m - j + 1)\, p_{(j)})`; returned in the input order.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise InputError("p_values must be 1-d")
    if np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise InputError("p_values must lie in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.maximum.accumulate(scaled)
    out = np.empty(m)
    out[order] = adjusted
    return out


def win_tie_loss(a, b, *, tol: float = 0.0) -> tuple[int, int, int]:
    """Counts of queries where ``a`` beats, ties (within ``tol``) and loses to ``b``."""
    d = _paired(a, b)
    wins = int(np.count_nonzero(d > tol))
    losses = int(np.count_nonzero(d < -tol))
    return wins, d.size - wins - losses, losses


@dataclass
class ComparisonTable:
    """Result of :func:`compare_systems`: ``means`` (system × metric) and ``pairs`` (one row per
    system pair and metric, with both p-values, their Holm adjustments and win/tie/loss)."""

    means: pd.DataFrame
    pairs: pd.DataFrame

    def __str__(self) -> str:
        return ("Means\n" + self.means.to_string(float_format=lambda v: f"{v:.4f}") + "\n\nPaired tests (Holm-corrected)\n"
                + self.pairs.to_string(index=False, float_format=lambda v: f"{v:.4g}"))


def compare_systems(per_query: dict, *, n_resamples: int = 10_000, random_state=0) -> ComparisonTable:
    """Compare systems on paired per-query values.

    Parameters
    ----------
    per_query : dict
        ``{system_name: DataFrame}`` with one row per query (same index across systems) and one
        column per metric, e.g. ``rankwise.metrics.evaluate(...).per_query``.

    Every pair of systems is tested on every metric by the paired t-test and the randomisation
    test; Holm's correction is applied per test over the whole family of (pair, metric) tests.
    """
    if len(per_query) < 2:
        raise InputError(f"compare_systems needs at least 2 systems; got {len(per_query)}")
    names = list(per_query)
    frames = {n: pd.DataFrame(per_query[n]) for n in names}
    first = frames[names[0]]
    for n in names[1:]:
        f = frames[n]
        if list(f.columns) != list(first.columns):
            raise InputError(f"system {n!r} has metrics {list(f.columns)}, expected {list(first.columns)}")
        if len(f.index) != len(first.index) or not f.index.equals(first.index):
            raise InputError(f"system {n!r} is evaluated on other queries than {names[0]!r}; "
                             "compare systems on the same queries")
    means = pd.DataFrame({n: frames[n].mean() for n in names}).T
    rows = []
    for x, y in itertools.combinations(names, 2):
        for metric in first.columns:
            a, b = frames[x][metric].to_numpy(), frames[y][metric].to_numpy()
            w, t, l = win_tie_loss(a, b)
            rows.append({"system_a": x, "system_b": y, "metric": metric,
                         "mean_diff": float(np.mean(a - b)),
                         "p_ttest": paired_t_test(a, b),
                         "p_randomization": paired_randomization_test(a, b, n_resamples=n_resamples,
                                                                      random_state=random_state),
                         "wins": w, "ties": t, "losses": l})
    pairs = pd.DataFrame(rows)
    pairs["p_ttest_holm"] = holm_correction(pairs["p_ttest"].to_numpy())
    pairs["p_randomization_holm"] = holm_correction(pairs["p_randomization"].to_numpy())
    return ComparisonTable(means, pairs)
