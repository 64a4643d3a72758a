"""Generalised positional performance measures (GPPMs) and two measures that are not GPPMs.

A (u, φ)-GPPM (Calauzènes, Usunier & Gallinari 2013, Definition 2.1) is a ranking performance
measure of the form

.. math::

    r(y, \\sigma) = b(y) + \\sum_{k=1}^{n} \\phi(k)\\, u_{\\sigma(k)}(y),

with a utility ``u: Y -> R_+^n``, a discount with ``φ(1) > 0`` and ``φ(k) ≥ φ(k+1) ≥ 0``, and an
offset ``b``; ``σ(k)`` is the item placed at rank ``k``. Scores with ties are scored as the
expectation over uniformly random tie-breaking (their "scoring performance measure",
Sect. 2.1): for a GPPM the tied items of a block of ranks ``P`` each receive the average discount
over ``P``, which is exact.

Table 1 of the paper gives GPPM forms of DCG@k, NDCG@k, P@k, R@k, AUC and Spearman's rho;
the forms used here are written out (and checked against the direct definitions in the tests)
in each constructor's docstring. ERR (Chapelle et al. 2009) and AP are not GPPMs; they are
provided as :class:`RankMeasure` objects evaluated by their definition, with the same
tie convention computed by enumerating the tie-breaks (small lists only, the theory setting).

References
----------
C. Calauzènes, N. Usunier, P. Gallinari. "Calibration and regret bounds for order-preserving
surrogate losses in learning to rank." Machine Learning 93(2-3):227-260, 2013.
O. Chapelle, D. Metzler, Y. Zhang, P. Grinspan. "Expected reciprocal rank for graded
relevance." CIKM 2009.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from rankwise._validation import check_k
from rankwise.errors import InputError

__all__ = [
    "GPPM", "RankMeasure", "dcg", "ndcg", "precision", "recall", "auc", "spearman",
    "err", "average_precision", "get_measure", "MEASURE_NAMES", "tie_blocks",
]

_MAX_TIE_ENUM = 40320  # 8!: enumeration of tie-breaks beyond this is refused


def _gain(y: np.ndarray, gain: str) -> np.ndarray:
    if gain == "exp2":
        return np.exp2(y) - 1.0
    if gain == "linear":
        return y.astype(np.float64)
    raise InputError(f"gain must be 'exp2' or 'linear'; got {gain!r}")


def _as_labels(y, name: str = "y") -> np.ndarray:
    try:
        arr = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be a numeric vector of labels; {exc}") from None
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"{name} must be a non-empty 1-d vector; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{name} contains NaN or inf")
    return arr


def _as_perm(sigma, n: int) -> np.ndarray:
    sig = np.asarray(sigma)
    if sig.shape != (n,) or sorted(sig.tolist()) != list(range(n)):
        raise InputError(f"sigma must be a permutation of 0..{n - 1} (sigma[k] = item at rank k+1); "
                         f"got {sig.tolist()}")
    return sig.astype(np.int64)


def tie_blocks(s: np.ndarray) -> list[np.ndarray]:
    """Items grouped by equal score, blocks in decreasing score order (ranks are consecutive)."""
    s = np.asarray(s, dtype=np.float64)
    order = np.argsort(-s, kind="stable")
    blocks, start = [], 0
    for k in range(1, len(s) + 1):
        if k == len(s) or s[order[k]] != s[order[start]]:
            blocks.append(order[start:k])
            start = k
    return blocks


def _check_scores(s, n: int) -> np.ndarray:
    try:
        arr = np.asarray(s, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"s must be a numeric score vector; {exc}") from None
    if arr.shape != (n,):
        raise InputError(f"s must have shape ({n},) to match the labels; got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InputError("s contains NaN or inf")
    return arr


@dataclass(frozen=True)
class GPPM:
    """A (u, φ)-GPPM: ``r(y, σ) = b(y) + Σ_k φ(k) u_{σ(k)}(y)``.

    .. math::

        r(y, \\sigma) = b(y) + \\sum_{k=1}^{n} \\phi(k)\\, u_{\\sigma(k)}(y)

    Attributes
    ----------
    name : str
        Measure name, e.g. ``"ndcg@3"``.
    utility_fn : callable
        ``y (n,) -> u(y) (n,)``, non-negative.
    discount_fn : callable
        ``n -> φ (n,)``, non-increasing, ``φ(1) > 0``.
    offset_fn : callable or None
        ``y -> b(y)``; ``None`` means ``b = 0``.

    References
    ----------
    Calauzènes, Usunier & Gallinari (2013), Definition 2.1 and Table 1.
    """

    name: str
    utility_fn: Callable[[np.ndarray], np.ndarray]
    discount_fn: Callable[[int], np.ndarray]
    offset_fn: Callable[[np.ndarray], float] | None = None
    is_gppm: bool = True

    def utility(self, y) -> np.ndarray:
        """``u(y)``: the per-item utilities of label vector ``y``."""
        return np.asarray(self.utility_fn(_as_labels(y)), dtype=np.float64)

    def discount(self, n: int) -> np.ndarray:
        """``(φ(1), ..., φ(n))``."""
        return np.asarray(self.discount_fn(int(n)), dtype=np.float64)

    def offset(self, y) -> float:
        return 0.0 if self.offset_fn is None else float(self.offset_fn(_as_labels(y)))

    def value(self, y, sigma) -> float:
        """``r(y, σ)`` for a permutation ``σ`` (``sigma[k]`` is the item at rank ``k+1``)."""
        y = _as_labels(y)
        sig = _as_perm(sigma, len(y))
        return self.offset(y) + float(self.discount(len(y)) @ self.utility(y)[sig])

    def position_weights(self, s) -> np.ndarray:
        """Expected discount of each item under uniformly random tie-breaking of ``s``.

        For a tie block occupying ranks ``P``, each of its items gets ``mean_{k∈P} φ(k)``.
        """
        phi = self.discount(len(s))
        w = np.empty(len(s))
        start = 0
        for blk in tie_blocks(s):
            w[blk] = phi[start:start + len(blk)].mean()
            start += len(blk)
        return w

    def score(self, y, s) -> float:
        """Scoring performance ``r(y, s)``: the expectation over random tie-breaking (exact)."""
        y = _as_labels(y)
        s = _check_scores(s, len(y))
        return self.offset(y) + float(self.position_weights(s) @ self.utility(y))

    def __str__(self) -> str:
        return f"GPPM({self.name})"


@dataclass(frozen=True)
class RankMeasure:
    """A ranking measure given only by its definition ``r(y, σ)`` (not a GPPM: ERR, AP).

    ``score(y, s)`` is the exact expectation over random tie-breaking, by enumeration of the
    tie-breaks (refused beyond 8! orderings).
    """

    name: str
    value_fn: Callable[[np.ndarray, np.ndarray], float]
    is_gppm: bool = False

    def value(self, y, sigma) -> float:
        y = _as_labels(y)
        return float(self.value_fn(y, _as_perm(sigma, len(y))))

    def score(self, y, s) -> float:
        y = _as_labels(y)
        s = _check_scores(s, len(y))
        blocks = tie_blocks(s)
        count = math.prod(math.factorial(len(b)) for b in blocks)
        if count > _MAX_TIE_ENUM:
            raise InputError(f"{self.name}: {count} tie-breaks to enumerate; at most {_MAX_TIE_ENUM} "
                             "are supported (break the ties or use rankwise.metrics)")
        total = 0.0
        for parts in itertools.product(*(itertools.permutations(b) for b in blocks)):
            total += self.value_fn(y, np.concatenate([np.asarray(p) for p in parts]))
        return total / count

    def __str__(self) -> str:
        return f"RankMeasure({self.name})"


def _cut_discount(k: int | None, base: Callable[[np.ndarray], np.ndarray]):
    def phi(n: int) -> np.ndarray:
        ranks = np.arange(1, n + 1, dtype=np.float64)
        d = base(ranks)
        if k is not None:
            d = np.where(ranks <= k, d, 0.0)
        return d
    return phi


def _log_discount(ranks: np.ndarray) -> np.ndarray:
    return 1.0 / np.log2(1.0 + ranks)


def dcg(k: int | None = None, *, gain: str = "exp2") -> GPPM:
    """DCG@k as a GPPM: ``u_i(y) = 2^{y_i} − 1`` (or ``y_i``), ``φ(i) = 1[i ≤ k] / log2(1 + i)``.

    .. math:: \\mathrm{DCG@k}(y, \\sigma) = \\sum_{i=1}^{k} \\frac{2^{y_{\\sigma(i)}} - 1}{\\log_2(1 + i)}

    References: Järvelin & Kekäläinen (2002); Calauzènes et al. (2013), Table 1.
    """
    check_k(k)
    _gain(np.zeros(1), gain)
    return GPPM(f"dcg@{k}" if k else "dcg", lambda y: _gain(y, gain), _cut_discount(k, _log_discount))


def ndcg(k: int | None = None, *, gain: str = "exp2") -> GPPM:
    """NDCG@k as a GPPM: ``u_i(y) = (2^{y_i} − 1) / DCG@k*(y)``, same ``φ`` as DCG@k.

    .. math:: u_i(y) = \\frac{2^{y_i} - 1}{\\max_{\\sigma} \\mathrm{DCG@k}(y, \\sigma)}

    The utility depends on the whole label vector (the normaliser), which a GPPM allows.
    A label vector with no relevant item has ``u = 0`` (NDCG 0, the trec_eval convention).
    References: Calauzènes et al. (2013), Table 1.
    """
    check_k(k)
    _gain(np.zeros(1), gain)
    phi = _cut_discount(k, _log_discount)

    def util(y):
        g = _gain(y, gain)
        ideal = float(phi(len(y)) @ np.sort(g)[::-1])
        return g / ideal if ideal > 0 else np.zeros_like(g)

    return GPPM(f"ndcg@{k}" if k else "ndcg", util, phi)


def precision(k: int) -> GPPM:
    """P@k: ``u_i(y) = y_i`` (binary), ``φ(i) = 1[i ≤ k] / k``. Calauzènes et al. (2013), Table 1."""
    check_k(k)
    if k is None:
        raise InputError("precision needs a cutoff k, e.g. 'p@3'")
    return GPPM(f"p@{k}", lambda y: (y > 0).astype(np.float64), _cut_discount(k, lambda r: np.full_like(r, 1.0 / k)))


def recall(k: int) -> GPPM:
    """R@k: ``u_i(y) = y_i / ‖y‖_1`` (binary; 0 when no item is relevant), ``φ(i) = 1[i ≤ k]``."""
    check_k(k)
    if k is None:
        raise InputError("recall needs a cutoff k, e.g. 'r@3'")

    def util(y):
        rel = (y > 0).astype(np.float64)
        tot = rel.sum()
        return rel / tot if tot > 0 else rel

    return GPPM(f"r@{k}", util, _cut_discount(k, np.ones_like))


def auc() -> GPPM:
    """AUC of a binary labelling as a GPPM.

    .. math::

        \\mathrm{AUC}(y, \\sigma) = \\frac{1}{n_+ n_-}\\sum_{i: y_i=1}\\sum_{j: y_j=0}
        \\mathbf 1[\\sigma^{-1}(i) < \\sigma^{-1}(j)]
        = -\\frac{n_+ - 1}{2 n_-} + \\sum_{k=1}^{n} (n - k)\\, \\frac{y_{\\sigma(k)}}{n_+ n_-}

    so ``φ(k) = n − k``, ``u_i = y_i / (n_+ n_-)``, ``b = −(n_+ − 1) / (2 n_-)`` (a relevant item at
    rank k has ``n − k`` items below it, ``n_+ − 1 − (\\text{relevant above})`` of them relevant).
    This is an equivalent parametrisation of Table 1's (the paper's ``φ`` and ``b`` differ by the
    choice of constant). Degenerate lists (``n_+ n_- = 0``) get ``u = 0``, ``b = 0``.
    """
    def util(y):
        rel = (y > 0).astype(np.float64)
        npos = rel.sum()
        nneg = len(y) - npos
        return rel / (npos * nneg) if npos * nneg > 0 else np.zeros_like(rel)

    def off(y):
        npos = float((y > 0).sum())
        nneg = len(y) - npos
        return -(npos - 1.0) / (2.0 * nneg) if npos * nneg > 0 else 0.0

    return GPPM("auc", util, lambda n: np.arange(n - 1, -1, -1, dtype=np.float64), off)


def spearman() -> GPPM:
    """Spearman's rho between the predicted order and a true order, as a GPPM.

    The supervision ``y`` is a total order given as ranks (``y_i`` = true rank of item i, 1..n).

    .. math::

        \\rho(y, \\sigma) = 1 - \\frac{6\\sum_i (\\sigma^{-1}(i) - y_i)^2}{n(n^2-1)}
        = -\\frac{3(n+1)}{n-1} + \\sum_{k=1}^{n} (n + 1 - k)\\, \\frac{12 (n + 1 - y_{\\sigma(k)})}{n(n^2-1)}

    using ``Σ_k k y_{σ(k)} = Σ_k (n+1−k)(n+1−y_{σ(k)})``. (Table 1 of Calauzènes et al. gives an
    equivalent parametrisation.)
    """
    def util(y):
        n = len(y)
        return 12.0 * (n + 1 - y) / (n * (n * n - 1.0))

    return GPPM("spearman", util, lambda n: np.arange(n, 0, -1, dtype=np.float64),
                lambda y: -3.0 * (len(y) + 1) / (len(y) - 1.0))


def _err_value(y: np.ndarray, sig: np.ndarray, y_max: float) -> float:
    r = (np.exp2(y[sig]) - 1.0) / 2.0 ** y_max
    not_stopped = np.concatenate([[1.0], np.cumprod(1.0 - r)[:-1]])
    return float(np.sum(not_stopped * r / np.arange(1, len(y) + 1)))


def err(*, y_max: float = 1.0) -> RankMeasure:
    """Expected Reciprocal Rank (Chapelle et al. 2009); not a GPPM.

    .. math::

        \\mathrm{ERR}(y, \\sigma) = \\sum_{k=1}^{n} \\frac{1}{k} R_{\\sigma(k)} \\prod_{j<k} (1 - R_{\\sigma(j)}),
        \\qquad R_i = \\frac{2^{y_i} - 1}{2^{y_{\\max}}}

    ``y_max`` is a property of the label scale (1 for binary labels), not of the query.
    """
    return RankMeasure("err", lambda y, sig: _err_value(y, sig, y_max))


def _ap_value(y: np.ndarray, sig: np.ndarray) -> float:
    rel = (y[sig] > 0).astype(np.float64)
    if rel.sum() == 0:
        return 0.0
    prec = np.cumsum(rel) / np.arange(1, len(y) + 1)
    return float(np.sum(prec * rel) / rel.sum())


def average_precision() -> RankMeasure:
    """Average precision of a binary labelling; not a GPPM. 0 when no item is relevant.

    .. math:: \\mathrm{AP}(y, \\sigma) = \\frac{1}{n_+}\\sum_{k: y_{\\sigma(k)}=1} \\mathrm{P@k}(y, \\sigma)
    """
    return RankMeasure("ap", _ap_value)


MEASURE_NAMES = ("dcg", "dcg@k", "ndcg", "ndcg@k", "p@k", "r@k", "auc", "spearman", "err", "ap")
# the registry's canonical names (rankwise.metrics.get_metric, the one parser of measure names) that
# have a form here: with a cutoff (None = whole list where allowed), and without
_CUT = {"dcg": dcg, "ndcg": ndcg, "precision": precision, "recall": recall}
_NEEDS_CUT = {"precision": "p@2", "recall": "r@2"}
_UNCUT = {"auc": auc, "spearman": spearman, "err": err, "map": average_precision}


def get_measure(metric) -> GPPM | RankMeasure:
    """Resolve ``"ndcg@3"``, ``"dcg"``, ``"p@2"``, ``"err"``, ``"ap"``, ... to a measure object.

    The name is read by :func:`rankwise.metrics.get_metric` (its aliases and trec_eval spellings,
    ``"P_5"``, ``"ndcg_cut_3"``, included); the measures with a form here are ``MEASURE_NAMES``.
    A :class:`GPPM` or :class:`RankMeasure` passes through unchanged. ``"dcg"``/``"ndcg"`` use the
    exp2 gain; build ``dcg(k, gain="linear")`` for another.
    """
    from rankwise.metrics.registry import get_metric

    if isinstance(metric, (GPPM, RankMeasure)):
        return metric
    if not isinstance(metric, str):
        raise InputError(f"metric must be a name like 'ndcg@3' or a GPPM/RankMeasure; got {type(metric).__name__}")
    try:
        spec = get_metric(metric)
    except InputError as exc:
        raise InputError(f"{exc} (measures of rankwise.theory: {', '.join(MEASURE_NAMES)})") from None
    if spec.name in _UNCUT:
        if spec.k is not None:
            raise InputError(f"metric {metric!r}: '{spec.name}' takes no cutoff here")
        return _UNCUT[spec.name]()
    if spec.name not in _CUT or spec.param is not None:
        raise InputError(f"metric {metric!r} ({spec.spec}) has no GPPM or RankMeasure form in rankwise.theory; "
                         f"valid names: {', '.join(MEASURE_NAMES)}")
    if spec.k is None and spec.name in _NEEDS_CUT:
        raise InputError(f"metric {metric!r} needs a cutoff, e.g. {_NEEDS_CUT[spec.name]!r}")
    return _CUT[spec.name](spec.k)
