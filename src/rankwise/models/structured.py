"""Structured hinge surrogates with exact loss-augmented inference, and a linear ranker trained on them.

A structured hinge upper-bounds a ranking loss Δ by

.. math::

    \\ell(w) = \\max_{v \\in V} \\Big[ \\Delta(v, y) + \\sum_{i=1}^r (v_i - \\rho_i) \\langle w, x_i \\rangle \\Big]

(Shalev-Shwartz & Ben-David 2014, eq. 17.8 and 17.14). Its subgradient in ``w`` is
``X^T (v* - ρ)`` where ``v*`` is the maximiser, so training needs the exact *loss-augmented
inference* ``v* = argmax``. This module solves it

* for the NDCG loss (``V`` = permutations encoded as position vectors) by a linear assignment
  (:func:`scipy.optimize.linear_sum_assignment`), or faster by a dynamic programme over the
  top-``k`` positions when the labels take few distinct values;
* for measures of the confusion counts ``a, b, c, d`` (precision@k, recall@k, F1, accuracy;
  ``V`` ⊆ {±1}^r) by the sort-within-``Y_{a,b}`` algorithm of UML §17.5: O(r log r + r²);
* for the Kendall-tau hinge, which is a sum of pairwise hinges and needs no maximiser.

References
----------
S. Shalev-Shwartz and S. Ben-David. *Understanding Machine Learning: From Theory to
Algorithms*, §17.4 (linear ranking, Kendall-tau and NDCG hinge) and §17.5 (bipartite ranking,
multivariate performance measures, eq. 17.11–17.14). Cambridge University Press, 2014.

T. Joachims. A support vector method for multivariate performance measures. ICML 2005.

S. Chakrabarti, R. Khanna, U. Sawant, C. Bhattacharyya. Structured learning for non-smooth
ranking losses. KDD 2008.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.stats import rankdata

from rankwise._validation import Interval, Options
from rankwise.errors import InputError
from rankwise.models.base import BaseRanker, warn_unscaled

__all__ = [
    "HingeArgmax",
    "ndcg_hinge_argmax",
    "multivariate_hinge_argmax",
    "kendall_hinge_value_grad",
    "structured_hinge",
    "StructuredHingeRanker",
    "MEASURES",
    "CONSTRAINTS",
]


class HingeArgmax(NamedTuple):
    """Result of a loss-augmented maximiser.

    ``argmax`` is the maximising ``v`` (positions 1..r with r = top, or a ±1 vector),
    ``value`` the hinge value ``Δ(v*, y) + Σ (v*_i − ρ_i) s_i``, ``reference`` the vector ``ρ``,
    ``delta`` the loss ``Δ(v*, y)`` of the maximiser.
    """

    argmax: np.ndarray
    value: float
    reference: np.ndarray
    delta: float


# --------------------------------------------------------------------------------------------
# input helpers


def _list_arrays(scores, labels, *, name_s="scores", name_y="labels"):
    try:
        s = np.asarray(scores, dtype=np.float64)
        y = np.asarray(labels, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name_s} and {name_y} must be numeric 1-d arrays; {exc}") from None
    if s.ndim != 1 or y.ndim != 1:
        raise InputError(f"{name_s} and {name_y} must be 1-d (one list); got shapes {s.shape} and {y.shape}")
    if s.shape != y.shape:
        raise InputError(f"{name_s} has {len(s)} entries but {name_y} has {len(y)}; they must match")
    if len(s) == 0:
        raise InputError(f"{name_s} is empty; a list needs at least one item")
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(y))):
        raise InputError(f"{name_s} and {name_y} must be finite (no NaN or inf)")
    return s, y


def _check_k(k, r, *, name="k"):
    if k is None:
        return r
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"{name} must be a positive integer or None; got {k!r}")
    return int(k)


def _gains(y, gain):
    if gain == "exp2":
        if np.any(y < 0):
            raise InputError("labels must be non-negative for gain='exp2'")
        return np.exp2(y) - 1.0
    if gain == "linear":
        return y.copy()
    raise InputError(f"gain must be 'exp2' or 'linear'; got {gain!r}")


# --------------------------------------------------------------------------------------------
# NDCG hinge (UML eq. 17.7–17.8)


def _discounts(r: int, k: int) -> np.ndarray:
    """D(p) for ranks p = 1..r from the top: 1/log2(1+p) for p <= k, else 0."""
    p = np.arange(1, r + 1, dtype=np.float64)
    d = 1.0 / np.log2(1.0 + p)
    d[p > k] = 0.0
    return d


def ndcg_delta(positions, labels, *, k=None, gain="exp2") -> float:
    """``Δ(v, y) = 1 − NDCG@k`` of the ranking encoded by ``positions`` (r = top, 1 = bottom).

    .. math::

        \\Delta(v, y) = 1 - \\frac{\\sum_i g(y_i) D(r - v_i + 1)}{\\max_{u \\in V} \\sum_i g(y_i) D(r - u_i + 1)},
        \\qquad D(p) = \\frac{[p \\le k]}{\\log_2(1 + p)}

    A list without positive gain has Δ = 0. (UML §17.4 writes the same with the rank counted
    from the bottom.)
    """
    v = np.asarray(positions)
    y = np.asarray(labels, dtype=np.float64)
    r = len(y)
    k = _check_k(k, r)
    g = _gains(y, gain)
    d = _discounts(r, k)
    best = float(np.sort(g)[::-1] @ d)
    if best <= 0.0:
        return 0.0
    return 1.0 - float(g @ d[r - v.astype(np.int64)]) / best


def _ndcg_dp_states(sizes, K):
    """Number of DP states: tuples (a_g <= n_g) with Σ a_g <= K (truncated polynomial product)."""
    poly = np.zeros(K + 1)
    poly[0] = 1.0
    for n in sizes:
        new = np.zeros(K + 1)
        for a in range(min(n, K) + 1):
            new[a:] += poly[: K + 1 - a]
        poly = new
    return float(poly.sum())


def _ndcg_argmax_assignment(s, c, d):
    r = len(s)
    v = np.arange(1, r + 1, dtype=np.float64)  # column j is position v = j + 1
    # benefit of item i at position v: v s_i − c_i D(r − v + 1)
    benefit = s[:, None] * v[None, :] - c[:, None] * d[::-1][None, :]
    rows, cols = linear_sum_assignment(benefit, maximize=True)
    pos = np.empty(r, dtype=np.int64)
    pos[rows] = cols + 1
    return pos


def _ndcg_argmax_dp(s, c, d, K):
    """Exact maximiser by a DP over the top-K positions.

    Two exchange arguments make it exact: (1) two items of equal gain swap without changing Δ,
    so in an optimum they are ordered by score; (2) below rank K the discount is 0, so the items
    there are ordered by score. Hence the top K is an interleaving of score-sorted prefixes of
    the gain groups, and the rest follows in score order.
    """
    r = len(s)
    levels, inv = np.unique(c, return_inverse=True)
    L = len(levels)
    groups = []
    for gi in range(L):
        idx = np.flatnonzero(inv == gi)
        groups.append(idx[np.argsort(-s[idx], kind="stable")])
    sizes = tuple(len(gr) for gr in groups)
    start = (0,) * L
    layers = [{start: (0.0, None, -1)}]
    for p in range(1, K + 1):
        vpos = r - p + 1
        dp_ = d[p - 1]
        nxt: dict = {}
        for state, (val, _, _) in layers[-1].items():
            for g in range(L):
                a = state[g]
                if a < sizes[g]:
                    item = groups[g][a]
                    nv = val + vpos * s[item] - c[item] * dp_
                    ns = state[:g] + (a + 1,) + state[g + 1:]
                    old = nxt.get(ns)
                    if old is None or nv > old[0]:
                        nxt[ns] = (nv, state, g)
        layers.append(nxt)
    # bottom part: the remaining items in score order at positions r−K .. 1
    group_of = inv
    idx_in_group = np.empty(r, dtype=np.int64)
    for g in range(L):
        idx_in_group[groups[g]] = np.arange(sizes[g])
    gorder = np.argsort(-s, kind="stable")
    s_sorted = s[gorder]
    grp_sorted = group_of[gorder]
    idx_sorted = idx_in_group[gorder]
    finals = list(layers[-1].items())
    best_val, best_state = -np.inf, None
    chunk = 1024
    for c0 in range(0, len(finals), chunk):
        part = finals[c0:c0 + chunk]
        amat = np.array([st for st, _ in part], dtype=np.int64).reshape(len(part), L)
        top_vals = np.array([val for _, (val, _, _) in part])
        rem = amat[:, grp_sorted] <= idx_sorted[None, :]
        vpos = np.cumsum(rem[:, ::-1], axis=1)[:, ::-1]  # count of remaining items at or below
        bottom = np.sum(np.where(rem, vpos * s_sorted[None, :], 0.0), axis=1)
        tot = top_vals + bottom
        j = int(np.argmax(tot))
        if tot[j] > best_val:
            best_val, best_state = float(tot[j]), part[j][0]
    # backtrack the top K
    pos = np.zeros(r, dtype=np.int64)
    state = best_state
    for p in range(K, 0, -1):
        _, prev, g = layers[p][state]
        item = groups[g][prev[g]]
        pos[item] = r - p + 1
        state = prev
    placed = pos > 0
    rest = gorder[~placed[gorder]]
    pos[rest] = np.arange(len(rest), 0, -1)
    return pos


def ndcg_hinge_argmax(scores, labels, *, k=None, gain="exp2", method="auto") -> HingeArgmax:
    """Exact loss-augmented inference for the NDCG hinge (UML eq. 17.8).

    .. math::

        v^* = \\arg\\max_{v \\in V} \\Big[ \\Delta(v, y) + \\sum_{i=1}^r (v_i - \\rho_i) s_i \\Big],
        \\qquad \\Delta = 1 - \\mathrm{NDCG@}k

    over all permutations ``v`` of ``1..r`` encoded as positions (``v_i = r`` is the top, as in
    UML eq. 17.7: ``π(s) = argmax_v Σ v_i s_i``).

    Parameters
    ----------
    scores, labels : array-like, shape (r,)
        Model scores ``s_i = ⟨w, x_i⟩`` and graded relevance labels of one list.
    k : int or None
        NDCG cutoff (None: the whole list).
    gain : {"exp2", "linear"}
        ``g(y) = 2^y − 1`` or ``g(y) = y``.
    method : {"auto", "assignment", "dp"}
        ``"assignment"``: Hungarian algorithm on the r×r benefit matrix ``v s_i − c_i D(r−v+1)``
        (O(r³)). ``"dp"``: dynamic programme over the top-k positions whose states count the
        items taken from each group of equal gain (exact; fast when k or the number of distinct
        labels is small, e.g. NDCG@10 with graded labels: O(r log r + C(k+L, L)·L)).
        ``"auto"`` picks the cheaper by a state count.

    Returns
    -------
    HingeArgmax
        ``argmax`` (positions), ``value`` (the hinge ℓ), ``reference`` (``ρ``), ``delta``.

    Notes
    -----
    ``ρ = π(y)``: the position vector of the ideal ranking. Items with equal labels share the
    average of their positions (mid-ranks), i.e. the expectation over random tie-breaking. Any
    ``ρ`` in the permutahedron keeps ``ℓ ≥ Δ(π(s), y)`` (because ``π(s)`` maximises ``Σ v_i s_i``)
    and, being independent of ``w``, keeps ℓ convex in ``w``. A list with no positive gain has
    Δ ≡ 0 and ℓ = Σ (π(s)_i − ρ_i) s_i.

    References
    ----------
    S. Shalev-Shwartz and S. Ben-David. *Understanding Machine Learning*, §17.4, eq. 17.7–17.8.
    Cambridge University Press, 2014.
    """
    s, y = _list_arrays(scores, labels)
    r = len(s)
    K = min(_check_k(k, r), r)
    g = _gains(y, gain)
    d = _discounts(r, K)
    best = float(np.sort(g)[::-1] @ d)
    c = g / best if best > 0 else np.zeros(r)
    rho = rankdata(y, method="average")
    if method not in ("auto", "assignment", "dp"):
        raise InputError(f"method must be 'auto', 'assignment' or 'dp'; got {method!r}")
    if best <= 0:
        pos = np.empty(r, dtype=np.int64)
        pos[np.argsort(s, kind="stable")] = np.arange(1, r + 1)
    else:
        if method == "auto":
            sizes = np.unique(c, return_counts=True)[1]
            n_states = _ndcg_dp_states(sizes, K)
            # Measured on one core: the Python DP costs ~1 µs per transition, the Hungarian
            # algorithm ~2e-10·r³ s plus ~0.2 ms of set-up.
            method = "dp" if n_states * len(sizes) * 1e-6 < 2e-10 * r ** 3 + 2e-4 else "assignment"
        if method == "dp":
            pos = _ndcg_argmax_dp(s, c, d, K)
        else:
            pos = _ndcg_argmax_assignment(s, c, d)
    delta = 0.0 if best <= 0 else 1.0 - float(c @ d[r - pos])
    value = delta + float((pos - rho) @ s)
    return HingeArgmax(pos, value, rho, delta)


# --------------------------------------------------------------------------------------------
# Multivariate measures of the confusion counts (UML §17.5, eq. 17.11–17.14)


def _ratio(num, den, ok):
    """num/den elementwise; 0/0 gives 1 where ``ok`` (no error: b = c = 0) and 0 elsewhere."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(ok, 1.0, 0.0))
    return out


def _measure_value(measure, a, b, c, d):
    ok = (b == 0) & (c == 0)
    if measure == "precision":
        return _ratio(a, a + b, ok)
    if measure == "recall":
        return _ratio(a, a + c, ok)
    if measure == "f1":
        return _ratio(2 * a, 2 * a + b + c, ok)
    if measure == "accuracy":
        return (a + d) / np.maximum(a + b + c + d, 1)
    raise InputError(f"measure must be one of 'precision', 'recall', 'f1', 'accuracy'; got {measure!r}")


# UML §17.5 (after eq. 17.13): V_{≥k} for precision@k, V_{≤k} for recall@k, {±1}^r (θ = 0) otherwise.
_DEFAULT_CONSTRAINT = {"precision": "ge", "recall": "le", "f1": "any", "accuracy": "any"}
CONSTRAINTS = ("any", "eq", "ge", "le")


def multivariate_delta(v, labels, *, measure="f1") -> float:
    """``Δ(v, y) = 1 − measure(a, b, c, d)`` for a ±1 prediction ``v`` (UML eq. 17.11).

    ``a`` = |{v=+1, y=+1}| (true positives), ``b`` = |{v=+1, y=−1}|, ``c`` = |{v=−1, y=+1}|,
    ``d`` = |{v=−1, y=−1}|; an item is relevant (y=+1) when its label is > 0. A ratio 0/0 is 1
    when the prediction makes no error (b = c = 0) and 0 otherwise.
    """
    v = np.asarray(v) > 0
    pos = np.asarray(labels, dtype=np.float64) > 0
    a = int(np.sum(v & pos))
    b = int(np.sum(v & ~pos))
    c = int(np.sum(~v & pos))
    dd = int(np.sum(~v & ~pos))
    return float(1.0 - _measure_value(measure, np.array(a), np.array(b), np.array(c), np.array(dd)))


def _feasible_ones(n_ones, r, k, constraint):
    if constraint == "any":
        return np.ones_like(n_ones, dtype=bool)
    if constraint == "eq":
        return n_ones == k
    if constraint == "ge":
        return n_ones >= k
    if constraint == "le":
        return n_ones <= k
    raise InputError(f"constraint must be 'any', 'eq', 'ge' or 'le'; got {constraint!r}")


def multivariate_reference(labels, *, k=None, constraint="any") -> np.ndarray:
    """The reference ``ρ`` of the multivariate hinge: ``y`` itself when ``y ∈ V``.

    When ``y`` has the wrong number of ones for ``V`` (e.g. 3 relevant items and V = {exactly 5
    ones}), ``ρ`` is the average of the best feasible vectors: all relevant items +1 and the
    missing ones spread evenly over the others (or the k ones spread evenly over the relevant
    items). ``ρ ∈ conv(V)`` keeps the surrogate an upper bound of Δ and convex in ``w``.
    """
    pos = np.asarray(labels, dtype=np.float64) > 0
    r = len(pos)
    P = int(pos.sum())
    N = r - P
    yv = np.where(pos, 1.0, -1.0)
    if constraint == "any":
        return yv
    need = None
    if constraint == "eq" or (constraint == "ge" and P < k) or (constraint == "le" and P > k):
        need = k
    if need is None:
        return yv
    if P >= need:  # choose `need` of the P relevant items, uniformly on average
        return np.where(pos, 2.0 * need / P - 1.0, -1.0)
    return np.where(pos, 1.0, 2.0 * (need - P) / N - 1.0)  # all relevant, rest spread over N


def multivariate_hinge_argmax(scores, labels, *, measure="f1", k=None, constraint=None) -> HingeArgmax:
    """Exact loss-augmented inference for a measure of the confusion counts (UML §17.5).

    .. math::

        v^* = \\arg\\max_{v \\in V} \\Big[ \\Delta(v, y) + \\sum_{i=1}^r (v_i - \\rho_i) s_i \\Big],
        \\qquad V \\subseteq \\{\\pm 1\\}^r

    Δ depends on ``v`` only through ``(a, b)`` = (true, false) positives, so within each
    ``Y_{a,b}`` the maximiser sets +1 on the ``a`` relevant and the ``b`` irrelevant items of
    largest score; scanning all feasible ``(a, b)`` with prefix sums gives the exact argmax in
    O(r log r + r²) instead of 2^r.

    Parameters
    ----------
    scores, labels : array-like, shape (r,)
        Scores and labels of one list; an item is relevant when its label is > 0.
    measure : {"precision", "recall", "f1", "accuracy"}
    k : int or None
        Size parameter of the constraint (required unless ``constraint="any"``).
    constraint : {"any", "eq", "ge", "le"} or None
        ``V``: all of {±1}^r (θ = 0), exactly ``k`` ones (``b(s)`` = the top k), at least ``k``
        ones (UML's ``V_{≥k}``: ``b(s)`` marks the items of positive score, and the top k if
        fewer) or at most ``k`` (``V_{≤k}``: the items of positive score among the top k).
        None: UML's choice (§17.5, after eq. 17.13) — ``"ge"`` for precision@k, ``"le"`` for
        recall@k, ``"any"`` for F1 and accuracy.

    Returns
    -------
    HingeArgmax
        ``argmax`` (±1 vector), ``value``, ``reference`` ``ρ`` (see
        :func:`multivariate_reference`), ``delta``.

    References
    ----------
    S. Shalev-Shwartz and S. Ben-David. *Understanding Machine Learning*, §17.5, eq.
    17.11–17.14. Cambridge University Press, 2014. T. Joachims. A support vector method for
    multivariate performance measures. ICML 2005.
    """
    s, y = _list_arrays(scores, labels)
    if measure not in _DEFAULT_CONSTRAINT:
        raise InputError(f"measure must be one of {sorted(_DEFAULT_CONSTRAINT)}; got {measure!r}")
    constraint = _DEFAULT_CONSTRAINT[measure] if constraint is None else constraint
    if constraint not in CONSTRAINTS:
        raise InputError(f"constraint must be one of {CONSTRAINTS} or None; got {constraint!r}")
    r = len(s)
    if constraint != "any":
        if k is None:
            raise InputError(f"k is required with constraint={constraint!r}")
        k = _check_k(k, r)
        if constraint in ("eq", "ge") and k > r:
            raise InputError(f"k={k} is larger than the list ({r} items): V would be empty")
    _feasible_ones(np.zeros(1), r, k, constraint)  # validates the constraint name
    pos = y > 0
    ip = np.flatnonzero(pos)
    ineg = np.flatnonzero(~pos)
    ip = ip[np.argsort(-s[ip], kind="stable")]
    ineg = ineg[np.argsort(-s[ineg], kind="stable")]
    P, N = len(ip), len(ineg)
    Sp = np.concatenate(([0.0], np.cumsum(s[ip])))
    Sn = np.concatenate(([0.0], np.cumsum(s[ineg])))
    a = np.arange(P + 1)[:, None]
    b = np.arange(N + 1)[None, :]
    feas = _feasible_ones(a + b, r, k, constraint)
    delta = 1.0 - _measure_value(measure, a, b, P - a, N - b)
    lin = (2.0 * Sp[:, None] - Sp[P]) + (2.0 * Sn[None, :] - Sn[N])  # Σ v_i s_i on Y_{a,b}
    rho = multivariate_reference(y, k=k, constraint=constraint)
    obj = np.where(feas, delta + lin, -np.inf)
    flat = int(np.argmax(obj))
    a_star, b_star = divmod(flat, N + 1)
    v = -np.ones(r)
    v[ip[:a_star]] = 1.0
    v[ineg[:b_star]] = 1.0
    dstar = float(delta[a_star, b_star])
    value = dstar + float((v - rho) @ s)
    return HingeArgmax(v, value, rho, dstar)


# --------------------------------------------------------------------------------------------
# Kendall-tau hinge (UML §17.4)


def kendall_hinge_value_grad(scores, labels):
    """Kendall-tau hinge of one list and its (sub)gradient in the scores.

    .. math::

        \\ell(s, y) = \\frac{2}{r(r-1)} \\sum_{i<j} \\max\\big(0, 1 - \\operatorname{sign}(y_i - y_j)(s_i - s_j)\\big)

    Pairs with equal labels contribute the constant 1, as in UML (the Kendall-tau loss counts a
    pair as an error unless the predicted order has the label's sign). A list of one item has
    ℓ = 0.

    References
    ----------
    S. Shalev-Shwartz and S. Ben-David. *Understanding Machine Learning*, §17.4. 2014.
    """
    s, y = _list_arrays(scores, labels)
    r = len(s)
    if r < 2:
        return 0.0, np.zeros(r)
    sgn = np.sign(y[:, None] - y[None, :])
    marg = 1.0 - sgn * (s[:, None] - s[None, :])
    iu = np.triu(np.ones((r, r), dtype=bool), 1)
    h = np.where(iu, np.maximum(marg, 0.0), 0.0)
    scale = 2.0 / (r * (r - 1))
    value = scale * float(h.sum())
    active = iu & (marg > 0)
    coef = np.where(active, -sgn, 0.0)  # d/ds_i of the (i<j) term is −sgn_ij, d/ds_j is +sgn_ij
    grad = scale * (coef.sum(axis=1) - coef.sum(axis=0))
    return value, grad


# --------------------------------------------------------------------------------------------
# measure registry and the ranker


@dataclass(frozen=True)
class _MeasureSpec:
    family: str  # "ndcg" | "multivariate" | "kendall"
    measure: str
    k: int | None


MEASURES = ("ndcg", "ndcg@k", "precision@k", "recall@k", "f1", "accuracy", "kendall")


def _parse_measure(spec) -> _MeasureSpec:
    if not isinstance(spec, str):
        raise InputError(f"measure must be a string such as 'ndcg@10'; got {spec!r}; valid: {', '.join(MEASURES)}")
    m = re.fullmatch(r"([a-z0-9]+)(?:@(\d+))?", spec.strip().lower())
    if m is None:
        raise InputError(f"measure {spec!r} is not understood; valid: {', '.join(MEASURES)}")
    name, kk = m.group(1), m.group(2)
    k = int(kk) if kk is not None else None
    if k is not None and k < 1:
        raise InputError(f"measure {spec!r}: the cutoff must be >= 1")
    if name == "ndcg":
        return _MeasureSpec("ndcg", "ndcg", k)
    if name in ("precision", "recall"):
        if k is None:
            raise InputError(f"measure {spec!r} needs a cutoff, e.g. '{name}@5'")
        return _MeasureSpec("multivariate", name, k)
    if name in ("f1", "accuracy", "kendall") and k is None:
        return _MeasureSpec("kendall" if name == "kendall" else "multivariate", name, None)
    raise InputError(f"unknown measure {spec!r}; valid: {', '.join(MEASURES)}")


def _resolve_constraint(spec: _MeasureSpec, constraint):
    """The constraint set V of a measure: UML's default when None (see :func:`multivariate_hinge_argmax`)."""
    if constraint is not None and constraint not in CONSTRAINTS:
        raise InputError(f"constraint must be one of {CONSTRAINTS} or None; got {constraint!r}")
    if spec.family != "multivariate":
        if constraint is not None:
            raise InputError(f"constraint applies to precision@k, recall@k, f1 and accuracy; the {spec.family} "
                             f"hinge takes none (got constraint={constraint!r})")
        return None
    if constraint is None:
        return _DEFAULT_CONSTRAINT[spec.measure]
    if spec.k is None and constraint != "any":
        raise InputError(f"constraint={constraint!r} needs a cutoff k; measure {spec.measure!r} has none "
                         "(use constraint='any' or None)")
    return constraint


def structured_hinge(scores, labels, *, measure="ndcg@10", gain="exp2", constraint=None):
    """Value and score-gradient ``v* − ρ`` of the structured hinge named by ``measure``.

    Returns ``(value, grad)``: the hinge ℓ and its gradient in the scores (a subgradient where
    the maximiser is not unique). ``constraint`` chooses ``V`` for the multivariate measures
    (None: UML's default, ``"ge"`` for precision@k, ``"le"`` for recall@k, ``"any"`` for F1 and
    accuracy; see :func:`multivariate_hinge_argmax`).
    """
    spec = _parse_measure(measure) if isinstance(measure, str) else measure
    constraint = _resolve_constraint(spec, constraint)
    if spec.family == "ndcg":
        res = ndcg_hinge_argmax(scores, labels, k=spec.k, gain=gain)
        return res.value, res.argmax - res.reference
    if spec.family == "multivariate":
        kk = None if spec.k is None else min(spec.k, len(np.asarray(scores)))
        res = multivariate_hinge_argmax(scores, labels, measure=spec.measure, k=kk, constraint=constraint)
        return res.value, res.argmax - res.reference
    return kendall_hinge_value_grad(scores, labels)


class StructuredHingeRanker(BaseRanker):
    """Linear ranker ``s_i = ⟨w, x_i⟩`` trained on a structured hinge by stochastic subgradient descent.

    .. math::

        \\min_w \\; \\frac{\\alpha}{2} \\lVert w \\rVert^2 + \\frac{1}{m} \\sum_{q=1}^m
        \\max_{v \\in V} \\Big[ \\Delta(v, y_q) + \\sum_i (v_i - \\rho_{q,i}) \\langle w, x_{q,i} \\rangle \\Big]

    Each step takes one query, finds ``v*`` exactly (:func:`ndcg_hinge_argmax`,
    :func:`multivariate_hinge_argmax`; the Kendall hinge needs none) and moves along
    ``−(αw + X_q^T (v* − ρ))`` with step ``learning_rate/√t``; the returned ``w`` is the
    average of the iterates (online-to-batch conversion). By default the features are
    standardised on the training rows first (``x ↦ (x − μ)/σ``) and the learned ``w`` is mapped
    back, so ``coef_`` and ``intercept_`` apply to raw features.

    Parameters
    ----------
    measure : str
        ``"ndcg@10"``, ``"ndcg"``, ``"precision@5"``, ``"recall@5"``, ``"f1"``, ``"accuracy"``,
        ``"kendall"`` (any cutoff).
    alpha : float
        ℓ2 regularisation strength :math:`\\alpha` (formerly ``C = 1/alpha``).
    solver : {"sgd"}
    max_iter : int
        Passes over the queries (shuffled each epoch; formerly ``n_epochs``).
    learning_rate : float
        Base step size η₀.
    gain : {"exp2", "linear"}
        Gain of the NDCG loss.
    constraint : {"eq", "ge", "le", "any"} or None
        The set ``V`` of the multivariate hinges (UML eq. 17.13): ``"ge"`` (``V_{≥k}``, at least
        ``k`` predicted relevant), ``"le"`` (``V_{≤k}``), ``"eq"`` (exactly the top ``k``) or
        ``"any"`` (all of {±1}^r, θ = 0). None (default) follows UML §17.5: ``"ge"`` for
        precision@k, ``"le"`` for recall@k, ``"any"`` for F1 and accuracy. Must be None for the
        NDCG and Kendall hinges.
    random_state : int, Generator or None
    standardize : bool
        Centre and scale the features on the training rows before the subgradient steps (the
        step size and ``alpha`` then mean the same on every data set). With
        ``standardize=False`` and feature scales more than 1e6 apart, ``fit`` warns.

    (``C`` and ``n_epochs`` are the former names of ``1/alpha`` and ``max_iter``; they still work,
    with a DeprecationWarning.)

    Attributes
    ----------
    coef_ : ndarray, shape (n_features,)
    n_features_in_ : int
    n_iter_ : int
    train_loss_ : list of float
        Mean surrogate over the queries at the end of each epoch (using the averaged ``w``).

    Notes
    -----
    Queries whose loss is constant (no relevant item for NDCG/precision/recall/F1, or a single
    item) contribute no gradient and are skipped. Every multivariate hinge except
    ``constraint="eq"`` uses θ = 0 (an item is predicted relevant when its score is > 0, within
    the limits ``V`` sets), so it depends on the score's offset; the model then fits an intercept
    ``intercept_`` (which does not change rankings).

    References
    ----------
    S. Shalev-Shwartz and S. Ben-David. *Understanding Machine Learning*, §17.4–17.5 and
    §14.5 (SGD for convex Lipschitz losses). Cambridge University Press, 2014.
    """

    _deprecated_params = {"C": ("alpha", lambda c: 1.0 / c if isinstance(c, (int, float)) and c > 0 else c),
                          "n_epochs": "max_iter"}
    _parameter_constraints = {
        "alpha": [Interval("real", 0, closed="neither")],
        "solver": [Options("sgd")],
        "max_iter": [Interval("int", 1)],
        "learning_rate": [Interval("real", 0, closed="neither")],
        "gain": [Options("exp2", "linear")],
        "random_state": ["random_state"],
        "standardize": ["boolean"],
    }

    def __init__(self, measure="ndcg@10", *, alpha=1.0, solver="sgd", max_iter=20, learning_rate=0.1,
                 gain="exp2", constraint=None, random_state=None, standardize=True, **deprecated):
        self.measure = measure
        self.alpha = alpha
        self.solver = solver
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.gain = gain
        self.constraint = constraint
        self.random_state = random_state
        self.standardize = standardize
        self._init_deprecated(deprecated)

    def _check_params(self):
        spec = _parse_measure(self.measure)
        self._validate_params()
        return spec, _resolve_constraint(spec, self.constraint)

    def fit(self, X, y=None, *, qid=None, sample_weight=None, eval_set=None, group=None):
        """Fit ``w`` on rows ``X`` with labels ``y`` grouped by ``qid``; returns ``self``.

        ``sample_weight`` (one per row): a query's subgradient is scaled by the mean weight of its
        rows. With ``eval_set`` the validation NDCG@10 of the averaged iterate is recorded per
        epoch in ``history_`` (next to the training surrogate, ``history_["loss"]``). ``group``
        (query sizes) may replace ``qid``.
        """
        spec, constraint = self._check_params()
        data, val = self._validate_fit(X, y, qid, sample_weight=sample_weight, eval_set=eval_set, group=group)
        Xd = data.X.toarray() if hasattr(data.X, "toarray") else data.X
        Xd = np.asarray(Xd, dtype=np.float64)
        use_bias = spec.family == "multivariate" and constraint != "eq"
        mean, scale = np.zeros(Xd.shape[1]), np.ones(Xd.shape[1])
        if self.standardize:
            # Without an intercept the hinge depends on score differences only (Σ(v_i − ρ_i) = 0),
            # so centring would change nothing but the offset: scale only, keep intercept_ = 0.
            if use_bias:
                mean = Xd.mean(axis=0)
            scale = np.sqrt(((Xd - mean) ** 2).mean(axis=0))
            scale = np.where(scale > 1e-12, scale, 1.0)
            Xd = (Xd - mean) / scale
        else:
            warn_unscaled(Xd, type(self).__name__)
        if use_bias:
            Xd = np.hstack([Xd, np.ones((Xd.shape[0], 1))])
        if spec.family == "ndcg" and self.gain == "exp2" and np.any(data.y < 0):
            raise InputError("y must be non-negative for the NDCG hinge with gain='exp2'")
        off = data.offsets
        useful = []
        for q in range(data.n_queries):
            yq = data.y[off[q]:off[q + 1]]
            if len(yq) < 2 and spec.family != "multivariate":
                continue
            if spec.family in ("ndcg", "multivariate") and not np.any(yq > 0):
                continue
            useful.append(q)
        if not useful:
            raise InputError("no query can train the model: every query has fewer than 2 items or no "
                             "relevant item (label > 0)")
        qw = np.ones(data.n_queries)
        if data.sample_weight is not None:
            qw = np.add.reduceat(data.sample_weight, off[:-1]) / np.maximum(np.diff(off), 1)
        rng = np.random.default_rng(self.random_state)
        n_feat = Xd.shape[1]
        self.history_ = {"epoch": [], "loss": []} if val is None else {"epoch": [], "loss": [], "ndcg@10": []}
        w = np.zeros(n_feat)
        w_avg = np.zeros(n_feat)
        lam = float(self.alpha)
        t = 0
        self.train_loss_ = []

        def raw(w):  # coefficients and intercept on the raw features: <w, (x - mean)/scale> + b
            coef, b = (w[:-1], float(w[-1])) if use_bias else (w, 0.0)
            coef = coef / scale
            return coef, b - float(coef @ mean)

        for _ in range(int(self.max_iter)):
            for q in rng.permutation(useful):
                t += 1
                Xq = Xd[off[q]:off[q + 1]]
                _, gs = structured_hinge(Xq @ w, data.y[off[q]:off[q + 1]], measure=spec, gain=self.gain,
                                         constraint=constraint)
                grad = lam * w + qw[q] * (Xq.T @ gs)
                w = w - (self.learning_rate / np.sqrt(t)) * grad
                w_avg += (w - w_avg) / t
            self.train_loss_.append(float(np.mean([
                structured_hinge(Xd[off[q]:off[q + 1]] @ w_avg, data.y[off[q]:off[q + 1]],
                                 measure=spec, gain=self.gain, constraint=constraint)[0] for q in useful])))
            self.history_["epoch"].append(len(self.train_loss_))
            self.history_["loss"].append(self.train_loss_[-1])
            if val is not None:
                self.history_["ndcg@10"].append(self._validation_ndcg(val, *raw(w_avg)))
        self.coef_, self.intercept_ = raw(w_avg)
        self.n_iter_ = t
        self.n_features_in_ = data.X.shape[1]
        return self

    @staticmethod
    def _validation_ndcg(val, coef, b) -> float:
        from rankwise.metrics import ndcg

        scores = np.asarray(val.X @ coef, dtype=np.float64).ravel() + b
        qid = np.repeat(np.arange(val.n_queries), np.diff(val.offsets))
        return float(ndcg(scores, val.y, qid=qid, k=10))

    def _get_state(self):
        return ({"n_features_in_": int(self.n_features_in_), "n_iter_": int(self.n_iter_),
                 "intercept_": float(self.intercept_), "train_loss_": [float(v) for v in self.train_loss_],
                 "history_": {k: [float(v) for v in vals] for k, vals in getattr(self, "history_", {}).items()}},
                {"coef_": np.asarray(self.coef_, dtype=np.float64)})

    def _set_state(self, state, arrays):
        self.coef_ = np.asarray(arrays["coef_"], dtype=np.float64)
        self.intercept_ = float(state["intercept_"])
        self.n_iter_ = int(state["n_iter_"])
        self.train_loss_ = list(state["train_loss_"])
        self.history_ = {k: list(v) for k, v in state.get("history_", {}).items()}
        self.n_features_in_ = int(state["n_features_in_"])

    def _predict_rows(self, Xv):
        """Scores ``⟨w, x_i⟩ + intercept`` (higher ranks first)."""
        return np.asarray(Xv @ self.coef_, dtype=np.float64).ravel() + self.intercept_
