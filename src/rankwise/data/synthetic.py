"""Synthetic learning-to-rank data with a known scoring function and label distribution.

The generative model is an ordinal probit: a latent utility

.. math::

    z = f(x) + \\varepsilon, \\qquad f(x) = w^\\top x + \\sum_{k} c_k\\, x_{a_k} x_{b_k},
    \\qquad \\varepsilon \\sim \\mathcal N(0, \\sigma^2),

is cut at thresholds :math:`t_1 < \\dots < t_{G-1}` into grades :math:`y \\in \\{0,\\dots,G-1\\}`, so
:math:`P(y = g \\mid x) = \\Phi((t_{g+1} - f(x))/\\sigma) - \\Phi((t_g - f(x))/\\sigma)` is known exactly
and ranking by :math:`f` is Bayes-optimal for every metric whose gain increases with the grade.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from rankwise.data.dataset import RankingDataset
from rankwise.errors import InputError

__all__ = ["make_synthetic", "SyntheticTruth"]

# MSLR-WEB30K label shares (grades 0..4), rounded: the default grade histogram.
MSLR_LABEL_SHARES = (0.514, 0.325, 0.134, 0.019, 0.008)


@dataclass(frozen=True)
class SyntheticTruth:
    """The known ground truth of :func:`make_synthetic`.

    Attributes
    ----------
    weights : ndarray (n_features,)
        Linear part ``w``.
    pairs : ndarray of int (n_pairs, 2) and pair_coef : ndarray (n_pairs,)
        Interaction part ``sum_k c_k x[a_k] x[b_k]``.
    thresholds : ndarray (n_grades - 1,)
        Cut points of the latent utility.
    noise : float
        Standard deviation ``sigma`` of the latent noise.
    """

    weights: np.ndarray
    pairs: np.ndarray
    pair_coef: np.ndarray
    thresholds: np.ndarray
    noise: float

    def score(self, X) -> np.ndarray:
        """The noise-free utility ``f(x)`` of each row (float64)."""
        if hasattr(X, "toarray"):
            X = X.toarray()
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != len(self.weights):
            raise InputError(f"X must have shape (n, {len(self.weights)}); got {X.shape}")
        s = np.empty(X.shape[0])
        step = 1 << 16  # float64 work in chunks, so memory stays flat on millions of rows
        for a in range(0, X.shape[0], step):
            Xc = X[a:a + step].astype(np.float64)
            v = Xc @ self.weights
            if len(self.pairs):
                v += (Xc[:, self.pairs[:, 0]] * Xc[:, self.pairs[:, 1]]) @ self.pair_coef
            s[a:a + step] = v
        return s

    def label_proba(self, X) -> np.ndarray:
        """``P(y = g | x)`` for every row and grade, shape ``(n, n_grades)``."""
        f = self.score(X)
        t = np.concatenate(([-np.inf], self.thresholds, [np.inf]))
        cdf = ndtr((t[None, :] - f[:, None]) / self.noise) if self.noise > 0 else \
            (t[None, :] >= f[:, None]).astype(np.float64)
        return np.diff(cdf, axis=1)

    def expected_label(self, X) -> np.ndarray:
        """``E[y | x]``, increasing in ``f(x)``."""
        p = self.label_proba(X)
        return p @ np.arange(p.shape[1], dtype=np.float64)


def _list_lengths(rng, n_queries, list_length, max_len):
    if list_length == "mslr":
        # log-normal, median ~ 90, mean ~ 120, long right tail cut at max_len (MSLR-WEB30K: 1..1251)
        # plus 5% short lists (1..20 docs), as MSLR has queries with a single judged document
        L = np.exp(rng.normal(4.5, 0.75, size=n_queries))
        short = rng.random(n_queries) < 0.05
        L[short] = rng.integers(1, 21, size=int(short.sum()))
        return np.clip(np.round(L), 1, max_len).astype(np.int64)
    if isinstance(list_length, (int, np.integer)):
        if list_length < 1:
            raise InputError(f"list_length must be >= 1; got {list_length}")
        return np.full(n_queries, int(list_length), dtype=np.int64)
    if isinstance(list_length, tuple) and len(list_length) == 2:
        lo, hi = (int(v) for v in list_length)
        if not 1 <= lo <= hi:
            raise InputError(f"list_length=(lo, hi) needs 1 <= lo <= hi; got {list_length}")
        return rng.integers(lo, hi + 1, size=n_queries).astype(np.int64)
    raise InputError(f"list_length must be 'mslr', an int, or a (lo, hi) tuple; got {list_length!r}")


def make_synthetic(n_queries: int = 1000, *, n_features: int = 136, n_grades: int = 5,
                   list_length="mslr", max_len: int = 1300, n_informative: int | None = None, n_pairs: int = 10,
                   noise: float = 0.5, label_shares=None, query_shift: float = 0.5,
                   seed: int = 0) -> RankingDataset:
    """Generate a reproducible ranking data set with a known scoring function.

    Defaults give MSLR-WEB30K-like shapes: 136 features, 5 grades with MSLR's label histogram,
    list lengths from 1 to ``max_len`` (log-normal, median ~90, long tail, plus 5% short lists of 1..20). The full MSLR-WEB30K
    size is ``n_queries=31531`` (about 3.7M rows).

    Parameters
    ----------
    n_queries : int
    n_features, n_grades : int
    list_length : "mslr", int or (lo, hi)
        Log-normal MSLR-like lengths, a fixed length, or uniform integers in ``[lo, hi]``.
    max_len : int
        Longest list (for ``"mslr"``).
    n_informative : int, optional
        Features with a non-zero linear weight (the others are noise features); default
        ``min(20, n_features)``.
    n_pairs : int
        Interaction terms ``c_k x[a_k] x[b_k]`` among the informative features.
    noise : float
        Standard deviation of the latent noise (0 = labels are a deterministic function of f).
    label_shares : sequence of float, optional
        Target share of each grade (default: MSLR's for 5 grades, geometric otherwise); the
        thresholds are set once from a fixed calibration sample, so they do not depend on ``n_queries``.
    query_shift : float
        Standard deviation of a per-query offset added to every feature (query-level effects).
    seed : int
        Everything is a function of ``seed`` (and the other arguments).

    Returns
    -------
    RankingDataset
        With two extra attributes: ``truth`` (:class:`SyntheticTruth`, whose ``score(X)`` is the
        noise-free utility and ``label_proba(X)`` the exact label distribution) and
        ``true_scores`` (``truth.score(X)`` of the generated rows).
    """
    for name, v, lo in (("n_queries", n_queries, 1), ("n_features", n_features, 1), ("n_grades", n_grades, 2),
                        ("max_len", max_len, 1)):
        if not isinstance(v, (int, np.integer)) or v < lo:
            raise InputError(f"{name} must be an integer >= {lo}; got {v!r}")
    if n_informative is None:
        n_informative = min(20, int(n_features))
    if not 0 <= n_informative <= n_features:
        raise InputError(f"n_informative must lie in [0, n_features={n_features}]; got {n_informative}")
    if noise < 0 or not np.isfinite(noise):
        raise InputError(f"noise must be a finite number >= 0; got {noise}")
    if label_shares is None:
        shares = np.asarray(MSLR_LABEL_SHARES if n_grades == 5 else 0.5 ** np.arange(n_grades), dtype=np.float64)
    else:
        shares = np.asarray(label_shares, dtype=np.float64)
    if shares.shape != (n_grades,) or np.any(shares <= 0):
        raise InputError(f"label_shares must be {n_grades} positive numbers; got {label_shares!r}")
    shares = shares / shares.sum()

    root = np.random.SeedSequence(seed)
    s_truth, s_calib, s_data = root.spawn(3)
    rt = np.random.default_rng(s_truth)
    informative = rt.choice(n_features, size=n_informative, replace=False)
    w = np.zeros(n_features)
    w[informative] = rt.normal(size=n_informative)
    if n_informative:
        w /= np.linalg.norm(w)
    n_pairs = min(n_pairs, n_informative * (n_informative - 1) // 2) if n_informative > 1 else 0
    pairs = np.empty((0, 2), dtype=np.int64)
    coef = np.empty(0)
    if n_pairs:
        pairs = np.array([rt.choice(informative, size=2, replace=False) for _ in range(n_pairs)], dtype=np.int64)
        coef = rt.normal(size=n_pairs)
        coef *= np.sqrt(0.5) / np.linalg.norm(coef)

    def draw_X(rng, sizes):
        n = int(sizes.sum())
        X = rng.standard_normal((n, n_features), dtype=np.float32)
        if query_shift:
            shift = (query_shift * rng.standard_normal((len(sizes), n_features))).astype(np.float32)
            X += np.repeat(shift, sizes, axis=0)
        return X

    truth0 = SyntheticTruth(w, pairs, coef, np.zeros(n_grades - 1), float(noise))
    # thresholds from a fixed-size calibration sample (independent of n_queries)
    rc = np.random.default_rng(s_calib)
    Xc = draw_X(rc, np.full(200, 100, dtype=np.int64))
    zc = truth0.score(Xc) + noise * rc.standard_normal(len(Xc))
    thresholds = np.quantile(zc, np.cumsum(shares)[:-1])
    truth = SyntheticTruth(w, pairs, coef, thresholds, float(noise))

    rd = np.random.default_rng(s_data)
    sizes = _list_lengths(rd, int(n_queries), list_length, int(max_len))
    X = draw_X(rd, sizes)
    f = truth.score(X)
    z = f + noise * rd.standard_normal(len(f))
    labels = np.searchsorted(thresholds, z, side="right").astype(np.float64)
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    ds = RankingDataset(X, labels, offsets, np.arange(1, n_queries + 1, dtype=np.int64),
                        feature_names=[f"f{j + 1}" for j in range(n_features)])
    ds.truth = truth
    ds.true_scores = f
    return ds
