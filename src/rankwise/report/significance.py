"""Paired significance tests for comparing ranking systems query by query.

Two systems evaluated on the same queries give paired per-query values ``a_q`` and ``b_q``;
every test here works on the differences ``d_q = a_q - b_q``.

References
----------
Smucker, M. D., Allan, J., & Carterette, B. (2007). A comparison of statistical significance
tests for information retrieval evaluation. CIKM.
Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scandinavian Journal
of Statistics 6(2), 65–70.
Benjamini, Y., & Hochberg, Y. (1995). Controlling the false discovery rate: a practical and
powerful approach to multiple testing. Journal of the Royal Statistical Society B 57(1), 289–300.
Carterette, B. (2012). Multiple testing in statistical analysis of systems-based information
retrieval experiments. ACM TOIS 30(1), article 4.
Sakai, T. (2014). Statistical reform in information retrieval? SIGIR Forum 48(1), 3–12.
Efron, B., & Tibshirani, R. J. (1993). An Introduction to the Bootstrap. Chapman & Hall.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from rankwise._validation import warn_user
from rankwise.errors import InputError

#: Above this many queries the randomisation test samples sign flips instead of enumerating them.
EXACT_RANDOMIZATION_MAX_N = 16
#: Above this many label permutations (``m!`` per topic, ``(m!)^n`` in all) the randomised Tukey HSD samples.
EXACT_TUKEY_MAX_PERMUTATIONS = 50_000


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


def _check_p(p_values) -> np.ndarray:
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise InputError("p_values must be 1-d")
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise InputError("p_values must lie in [0, 1]")
    return p


def holm_correction(p_values) -> np.ndarray:
    r"""Holm–Bonferroni adjusted p-values (step-down; controls the family-wise error rate).

    With the m p-values sorted increasingly, :math:`\tilde p_{(i)} = \max_{j \le i}
    \min(1, (m - j + 1)\, p_{(j)})`; returned in the input order.
    """
    p = _check_p(p_values)
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.maximum.accumulate(scaled)
    out = np.empty(m)
    out[order] = adjusted
    return out


def bonferroni_correction(p_values) -> np.ndarray:
    r"""Bonferroni adjusted p-values: :math:`\min(1, m\, p_i)` (family-wise error rate)."""
    p = _check_p(p_values)
    return np.minimum(1.0, p.size * p)


def benjamini_hochberg(p_values) -> np.ndarray:
    r"""Benjamini–Hochberg adjusted p-values (step-up; controls the false discovery rate).

    With the m p-values sorted increasingly, :math:`\tilde p_{(i)} = \min_{j \ge i}
    \min(1, \frac{m}{j} p_{(j)})`; returned in the input order. Rejecting where
    :math:`\tilde p \le q` is the procedure of Benjamini & Hochberg (1995) at level q
    (independent or positively dependent tests).
    """
    p = _check_p(p_values)
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, p[order] * m / np.arange(1, m + 1))
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = adjusted
    return out


#: correction name -> adjusted p-values of one family
CORRECTIONS = {"holm": None, "bonferroni": bonferroni_correction, "bh": benjamini_hochberg, "none": None}


def _correct(p, correction: str) -> np.ndarray:
    if correction == "holm":
        return holm_correction(p)
    if correction == "none":
        return _check_p(p).copy()
    return CORRECTIONS[correction](p)


def cohens_dz(a, b) -> float:
    r"""Effect size of a paired comparison: :math:`d_z = \bar d / s_d`, the mean of the per-query
    differences over their standard deviation (``n - 1`` in the denominator), Cohen's
    standardised mean difference for paired samples.

    Identical systems give 0; equal non-zero differences (``s_d = 0``) give ``±inf``.
    """
    d = _paired(a, b)
    mean = d.mean()
    if mean == 0:
        return 0.0
    sd = d.std(ddof=1)
    return float(np.copysign(np.inf, mean)) if sd == 0 else float(mean / sd)


def bootstrap_ci(differences, *, n_resamples: int = 10_000, confidence: float = 0.95,
                 random_state=0) -> np.ndarray:
    r"""Percentile bootstrap confidence intervals of mean per-query differences.

    ``differences`` is an ``(n_queries,)`` or ``(n_queries, k)`` array (k comparisons on the same
    queries); the queries are resampled with replacement ``n_resamples`` times (the same
    resamples for every column, reproducible from ``random_state``) and the interval is the
    :math:`(1 \mp \text{confidence})/2` quantiles of the resampled means (Efron & Tibshirani
    1993, §13.3; numpy's linear quantile). Returns ``(2,)`` or ``(k, 2)``: low, high.
    """
    d = np.asarray(differences, dtype=np.float64)
    one = d.ndim == 1
    d = d[:, None] if one else d
    if d.ndim != 2 or d.shape[0] < 2:
        raise InputError(f"differences must be (n_queries >= 2,) or (n_queries, k); got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise InputError("differences must be finite")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise InputError(f"n_resamples must be an integer >= 1; got {n_resamples!r}")
    if not 0 < confidence < 1:
        raise InputError(f"confidence must lie in (0, 1); got {confidence!r}")
    means = bootstrap_means(d, n_resamples=n_resamples, random_state=random_state)
    tail = (1.0 - confidence) / 2.0
    out = np.quantile(means, [tail, 1.0 - tail], axis=0).T
    return out[0] if one else out


def bootstrap_means(values, *, n_resamples: int = 10_000, random_state=0) -> np.ndarray:
    r"""Column means of ``n_resamples`` bootstrap resamples of the rows of ``values`` ``(n, k)``.

    Each resample draws n rows with replacement (the same rows for every column, reproducible from
    ``random_state``); returns ``(n_resamples, k)``. The resamples are drawn in blocks whose
    multiplicity matrix stays below a few million entries, so long inputs (sessions of a click log)
    fit in memory; the draws do not depend on the block size. :func:`bootstrap_ci` takes quantiles
    of these means; a ratio of two columns' means gives the bootstrap of a ratio estimator.
    """
    d = np.asarray(values, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] < 1:
        raise InputError(f"values must be (n >= 1, k); got shape {d.shape}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise InputError(f"n_resamples must be an integer >= 1; got {n_resamples!r}")
    rng = np.random.default_rng(random_state)
    n = d.shape[0]
    block = int(max(1, min(1024, 4_000_000 // n)))
    means = np.empty((n_resamples, d.shape[1]))
    for start in range(0, n_resamples, block):  # a multiplicity matrix per block: one matrix product
        m = min(block, n_resamples - start)
        idx = rng.integers(0, n, size=(m, n))
        counts = np.bincount((np.arange(m)[:, None] * n + idx).ravel(), minlength=m * n).reshape(m, n)
        means[start:start + m] = counts @ d / n
    return means


def tukey_hsd_randomized(values, *, n_resamples: int = 10_000, random_state=0) -> np.ndarray:
    r"""Randomised Tukey HSD p-values of every pair of systems (Carterette, TOIS 2012, §4).

    ``values`` is ``(n_queries, m)``: one column per system. The statistic of systems i, j is
    :math:`|\bar x_i - \bar x_j|`; under the null hypothesis that the systems are
    interchangeable, the system labels are permuted within each query, and each pair's p-value
    is the probability that the largest difference of any two permuted means,
    :math:`\max_k \bar x^*_k - \min_k \bar x^*_k`, is at least the pair's observed difference.
    Comparing with the maximum over all pairs controls the family-wise error rate over the
    :math:`m(m-1)/2` pairs in one step, with no further correction. The permutations are
    enumerated when there are at most ``EXACT_TUKEY_MAX_PERMUTATIONS`` of them (``(m!)^n``),
    otherwise sampled (``n_resamples``, from ``random_state``) with the add-one estimate
    ``(1 + #{as extreme}) / (1 + n_resamples)``.

    Returns an ``(m, m)`` symmetric matrix of p-values (1 on the diagonal).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] < 2 or x.shape[0] < 2:
        raise InputError(f"values must be (n_queries >= 2, n_systems >= 2); got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise InputError("values must be finite (no NaN/inf per-query values)")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise InputError(f"n_resamples must be an integer >= 1; got {n_resamples!r}")
    n, m = x.shape
    means = x.mean(axis=0)
    observed = np.abs(means[:, None] - means[None, :])
    tol = 1e-12 * max(1.0, np.abs(x).sum() / n)
    if math.factorial(m) ** n <= EXACT_TUKEY_MAX_PERMUTATIONS:
        labels = np.array(list(itertools.permutations(range(m))))  # (m!, m)
        combos = np.array(list(itertools.product(range(len(labels)), repeat=n)))  # (m!^n, n)
        mu = sum(x[q, labels[combos[:, q]]] for q in range(n)) / n
        ranges = np.sort(mu.max(axis=1) - mu.min(axis=1))
        count = len(ranges) - np.searchsorted(ranges, observed - tol, side="left")
        p = count / len(ranges)
    else:
        rng = np.random.default_rng(random_state)
        ranges = np.empty(n_resamples)
        block = max(1, 2_000_000 // (n * m))
        for start in range(0, n_resamples, block):
            b = min(block, n_resamples - start)
            mu = rng.permuted(np.broadcast_to(x, (b, n, m)), axis=2).mean(axis=1)
            ranges[start:start + b] = mu.max(axis=1) - mu.min(axis=1)
        ranges = np.sort(ranges)
        count = n_resamples - np.searchsorted(ranges, observed - tol, side="left")
        p = (1 + count) / (1 + n_resamples)
    np.fill_diagonal(p, 1.0)
    return p


def win_tie_loss(a, b, *, tol: float = 0.0) -> tuple[int, int, int]:
    """Counts of queries where ``a`` beats, ties (within ``tol``) and loses to ``b``."""
    d = _paired(a, b)
    wins = int(np.count_nonzero(d > tol))
    losses = int(np.count_nonzero(d < -tol))
    return wins, d.size - wins - losses, losses


@dataclass
class ComparisonTable:
    """Result of :func:`compare_systems`: ``means`` (system × metric), ``pairs`` (one row per
    system pair and metric: p-values, their corrections, win/tie/loss and the options' columns)
    and ``notes`` (what the reader must know, e.g. a randomisation test's resolution floor)."""

    means: pd.DataFrame
    pairs: pd.DataFrame
    notes: list = field(default_factory=list)
    title: str = "Paired tests (Holm-corrected)"

    def __str__(self) -> str:
        text = ("Means\n" + self.means.to_string(float_format=lambda v: f"{v:.4f}") + f"\n\n{self.title}\n"
                + self.pairs.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        return text + "".join(f"\nNote: {n}" for n in self.notes)


_CORRECTION_NAMES = {"holm": "Holm", "bonferroni": "Bonferroni", "bh": "Benjamini-Hochberg", "none": "uncorrected"}


def _check_options(n_resamples, correction, family, alpha, n_bootstrap):
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise InputError(f"n_resamples must be an integer >= 1; got {n_resamples!r}")
    if correction not in CORRECTIONS:
        raise InputError(f"correction must be one of {', '.join(CORRECTIONS)}; got {correction!r}")
    if family not in ("all", "metric"):
        raise InputError(f"family must be 'all' (one family of every pair and metric) or 'metric' (one family "
                         f"per metric); got {family!r}")
    if not (isinstance(alpha, (float, int)) and 0 < alpha < 1):
        raise InputError(f"alpha must lie in (0, 1); got {alpha!r}")
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)) or n_bootstrap < 0:
        raise InputError(f"n_bootstrap must be an integer >= 0 (0: no confidence intervals); got {n_bootstrap!r}")


def compare_systems(per_query: dict, *, n_resamples: int = 10_000, random_state=0, correction: str = "holm",
                    family: str = "all", tukey_hsd: bool = False, effect_size: bool = False,
                    n_bootstrap: int = 0, alpha: float = 0.05) -> ComparisonTable:
    """Compare systems on paired per-query values.

    Parameters
    ----------
    per_query : dict
        ``{system_name: DataFrame}`` with one row per query (same index across systems) and one
        column per metric, e.g. ``rankwise.metrics.evaluate(...).per_query``.
    n_resamples, random_state
        The randomisation tests' resamples and seed (the sign-flip test is exact up to 16 queries).
    correction : {"holm", "bonferroni", "bh", "none"}
        Multiple-comparison correction of the t-test's and the randomisation test's p-values,
        in columns ``p_ttest_<correction>`` and ``p_randomization_<correction>``: Holm (default)
        and Bonferroni control the family-wise error rate, ``"bh"`` (Benjamini–Hochberg) the
        false discovery rate.
    family : {"all", "metric"}
        The family a correction runs over: every (pair, metric) test (default), or the pairs of
        each metric separately.
    tukey_hsd : bool
        Add ``p_tukey_hsd``: the randomised Tukey HSD of Carterette (2012) over all systems, per
        metric (:func:`tukey_hsd_randomized`; already family-wise over the pairs of a metric).
    effect_size : bool
        Add ``effect_size``: Cohen's :math:`d_z` of the paired differences (:func:`cohens_dz`).
    n_bootstrap : int
        With ``n_bootstrap > 0``, add ``ci_low``, ``ci_high``: the percentile bootstrap
        ``1 - alpha`` confidence interval of ``mean_diff`` (:func:`bootstrap_ci`, seeded by
        ``random_state``; the same query resamples for every pair and metric).
    alpha : float
        The level of the confidence intervals, and the level below which a corrected
        randomisation p-value floored by the test's resolution is reported in ``notes`` and as a
        warning: with ``n_resamples`` draws the smallest p-value is ``1 / (n_resamples + 1)``,
        which Holm or Bonferroni multiply by the family's size (17 systems × 3 metrics: 408 tests,
        floor 0.0408 at 10,000 resamples). A note is made where some p-value sits at that floor
        and the floor exceeds ``alpha / 10``.

    Every pair of systems is tested on every metric by the paired t-test and the randomisation
    test; ``mean_diff`` is ``system_a - system_b``.
    """
    _check_options(n_resamples, correction, family, alpha, n_bootstrap)
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
    rows, diffs = [], []
    for x, y in itertools.combinations(names, 2):
        for metric in first.columns:
            a, b = frames[x][metric].to_numpy(), frames[y][metric].to_numpy()
            w, t, l = win_tie_loss(a, b)
            row = {"system_a": x, "system_b": y, "metric": metric, "mean_diff": float(np.mean(a - b))}
            if effect_size:
                row["effect_size"] = cohens_dz(a, b)
            row.update({"p_ttest": paired_t_test(a, b),
                        "p_randomization": paired_randomization_test(a, b, n_resamples=n_resamples,
                                                                     random_state=random_state),
                        "wins": w, "ties": t, "losses": l})
            rows.append(row)
            diffs.append(a - b)
    pairs = pd.DataFrame(rows)
    if n_bootstrap:
        ci = bootstrap_ci(np.column_stack(diffs), n_resamples=n_bootstrap, confidence=1 - alpha,
                          random_state=random_state)
        pairs.insert(pairs.columns.get_loc("mean_diff") + 1, "ci_low", ci[:, 0])
        pairs.insert(pairs.columns.get_loc("ci_low") + 1, "ci_high", ci[:, 1])
    families = [np.ones(len(pairs), bool)] if family == "all" else [(pairs.metric == m).to_numpy()
                                                                     for m in first.columns]
    for test in ("ttest", "randomization"):
        adjusted = np.empty(len(pairs))
        for members in families:
            adjusted[members] = _correct(pairs[f"p_{test}"].to_numpy()[members], correction)
        pairs[f"p_{test}_{correction}"] = adjusted
    if tukey_hsd:
        p = np.empty(len(pairs))
        index = {n: i for i, n in enumerate(names)}
        for metric in first.columns:
            matrix = tukey_hsd_randomized(np.column_stack([frames[n][metric].to_numpy() for n in names]),
                                          n_resamples=n_resamples, random_state=random_state)
            sel = (pairs.metric == metric).to_numpy()
            p[sel] = [matrix[index[a], index[b]] for a, b in zip(pairs.system_a[sel], pairs.system_b[sel])]
        pairs["p_tukey_hsd"] = p
    notes = _resolution_notes(pairs, families, correction, n_resamples, len(first.index), alpha)
    for note in notes:
        warn_user(note)
    where = "over all pairs and metrics" if family == "all" else "per metric"
    title = f"Paired tests ({_CORRECTION_NAMES[correction]}-corrected {where})" if correction != "none" \
        else "Paired tests (uncorrected)"
    if correction == "holm" and family == "all":
        title = "Paired tests (Holm-corrected)"
    return ComparisonTable(means, pairs, notes, title)


def _resolution_notes(pairs, families, correction, n_resamples, n_queries, alpha) -> list:
    """A note where the sampled randomisation test's smallest p-value, once corrected, sits above
    ``alpha / 10`` for some test that reached it: the reported value is the test's resolution."""
    if n_queries <= EXACT_RANDOMIZATION_MAX_N:
        return []
    floor = 1.0 / (n_resamples + 1)
    raw = pairs["p_randomization"].to_numpy()
    adjusted = pairs[f"p_randomization_{correction}"].to_numpy()
    notes = []
    for members in families:
        at_floor = members & np.isclose(raw, floor, rtol=1e-12, atol=0)
        if not at_floor.any():
            continue
        worst = float(adjusted[at_floor].max())
        if worst <= alpha / 10:
            continue
        size = int(members.sum())
        need = int(math.ceil(10 * size / alpha)) - 1
        what = f"family of {size} tests" + ("" if len(families) == 1 else
                                            f" ({pairs.metric[members].iloc[0]})")
        notes.append(f"the randomisation test's resolution floors {int(at_floor.sum())} "
                     f"{_CORRECTION_NAMES[correction]}-corrected p-values at up to {worst:.4g} ({what}, "
                     f"{n_resamples} resamples: no p-value below 1/{n_resamples + 1} before correction); "
                     f"use at least {need} resamples for a floor of alpha/10 = {alpha / 10:g}, or a smaller family")
    return notes
