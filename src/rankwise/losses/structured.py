"""Structured hinge losses with exact loss-augmented inference (numpy maximisers, torch loss).

A structured hinge upper-bounds a ranking loss Δ by

.. math::

    \\ell(s, y) = \\max_{v \\in V} \\Big[ \\Delta(v, y) + \\sum_{i=1}^r (v_i - \\rho_i) s_i \\Big]

(Shalev-Shwartz & Ben-David 2014, eq. 17.8 and 17.14). Its subgradient in the scores is
``v* − ρ`` where ``v*`` is the maximiser, so training needs the exact *loss-augmented
inference* ``v* = argmax``. This module solves it

* for the NDCG loss (``V`` = permutations encoded as position vectors) by a linear assignment
  (:func:`scipy.optimize.linear_sum_assignment`), or faster by a dynamic programme over the
  top-``k`` positions when the labels take few distinct values;
* for measures of the confusion counts ``a, b, c, d`` (precision@k, recall@k, F1, accuracy;
  ``V`` ⊆ {±1}^r) by the sort-within-``Y_{a,b}`` algorithm of UML §17.5: O(r log r + r²);
* for the Kendall-tau hinge, a sum of pairwise hinges that needs no maximiser: the registered
  loss ``"kendall_hinge"`` (:func:`rankwise.losses.pairwise.kendall_hinge_loss`).

Measure strings are resolved by :func:`rankwise.metrics.get_metric` (:func:`resolve_measure`);
NDCG gains are :func:`rankwise.metrics.gains.gain_values`. :func:`structured_hinge` gives the value
and gradient of one list as numpy (what :class:`rankwise.models.StructuredHingeRanker`'s SGD
uses); :func:`structured_hinge_loss` is the same surrogate with the standard loss signature on
``[batch, list]`` tensors.

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

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.stats import rankdata

from rankwise._validation import check_k
from rankwise.errors import InputError
from rankwise.metrics.gains import gain_values
from rankwise.metrics.registry import get_metric

__all__ = [
    "HingeArgmax",
    "StructuredMeasure",
    "ndcg_delta",
    "ndcg_hinge_argmax",
    "multivariate_delta",
    "multivariate_reference",
    "multivariate_hinge_argmax",
    "kendall_hinge_value_grad",
    "resolve_measure",
    "resolve_constraint",
    "structured_hinge",
    "structured_hinge_loss",
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


def _check_k(k, r):
    """A cut-off ``k`` (None: the whole list of ``r`` items)."""
    return check_k(k, whole=r)


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
    g = gain_values(y, gain)
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
    g = gain_values(y, gain)
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
    """Kendall-tau hinge of one list and its (sub)gradient in the scores, as float64 numpy.

    .. math::

        \\ell(s, y) = \\frac{2}{r(r-1)} \\sum_{i<j} \\max\\big(0, 1 - \\operatorname{sign}(y_i - y_j)(s_i - s_j)\\big)

    Pairs with equal labels contribute the constant 1, as in UML (the Kendall-tau loss counts a
    pair as an error unless the predicted order has the label's sign). A list of one item has
    ℓ = 0. The value and gradient are those of the registered loss ``"kendall_hinge"``
    (:func:`rankwise.losses.pairwise.kendall_hinge_loss`, its O(r log r) sweep) on one list.

    References
    ----------
    S. Shalev-Shwartz and S. Ben-David. *Understanding Machine Learning*, §17.4. 2014.
    """
    import torch

    from rankwise.losses.registry import get

    s, y = _list_arrays(scores, labels)
    if len(s) < 2:
        return 0.0, np.zeros(len(s))
    st = torch.tensor(s[None, :], dtype=torch.float64, requires_grad=True)
    value = get("kendall_hinge")(st, torch.tensor(y[None, :], dtype=torch.float64), reduction="sum")
    value.backward()
    return float(value.detach()), st.grad.numpy()[0].copy()


# --------------------------------------------------------------------------------------------
# measures (through the metrics registry) and the hinge of one list


@dataclass(frozen=True)
class StructuredMeasure:
    """A measure with a structured hinge: its ``family`` (``"ndcg"``, ``"multivariate"`` or
    ``"kendall"``), its name (``"ndcg"``, ``"precision"``, ``"recall"``, ``"f1"``, ``"accuracy"``,
    ``"kendall_tau"``) and its cut-off ``k`` (None: the whole list)."""

    family: str
    measure: str
    k: int | None


MEASURES = ("ndcg", "ndcg@k", "precision@k", "recall@k", "f1", "accuracy", "kendall")

# Ranking measures of the metrics registry that have a structured hinge here, by family.
_FAMILY = {"ndcg": "ndcg", "precision": "multivariate", "recall": "multivariate", "kendall_tau": "kendall"}
# Measures of the confusion counts of a ±1 prediction: not ranking metrics, so not in the metrics
# registry; they take no cut-off.
_CONFUSION = ("f1", "accuracy")


def resolve_measure(measure) -> StructuredMeasure:
    """The structured hinge of a measure string (``"ndcg@10"``, ``"P@5"``, ``"recall@3"``,
    ``"kendall"``, ``"f1"``, ``"accuracy"``).

    Ranking measures are parsed by :func:`rankwise.metrics.get_metric`, the one parser of measure
    strings (so its aliases work: ``"P@5"``, ``"tau"``); ``"f1"`` and ``"accuracy"``, measures of
    a ±1 prediction rather than of a ranking, are the only names read here.
    """
    if isinstance(measure, StructuredMeasure):
        return measure
    if not isinstance(measure, str):
        raise InputError(f"measure must be a string such as 'ndcg@10'; got {measure!r}; valid: {', '.join(MEASURES)}")
    text = measure.strip().lower()
    if text in _CONFUSION:
        return StructuredMeasure("multivariate", text, None)
    metric = get_metric(measure)
    family = _FAMILY.get(metric.name)
    if family is None or (family == "kendall" and metric.k is not None):
        raise InputError(f"unknown measure {measure!r} for a structured hinge; valid: {', '.join(MEASURES)}")
    if family == "multivariate" and metric.k is None:
        raise InputError(f"measure {measure!r} needs a cutoff, e.g. '{metric.name}@5'")
    return StructuredMeasure(family, metric.name, metric.k)


def resolve_constraint(spec: StructuredMeasure, constraint):
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
    spec = resolve_measure(measure)
    constraint = resolve_constraint(spec, constraint)
    if spec.family == "ndcg":
        res = ndcg_hinge_argmax(scores, labels, k=spec.k, gain=gain)
        return res.value, res.argmax - res.reference
    if spec.family == "multivariate":
        kk = None if spec.k is None else min(spec.k, len(np.asarray(scores)))
        res = multivariate_hinge_argmax(scores, labels, measure=spec.measure, k=kk, constraint=constraint)
        return res.value, res.argmax - res.reference
    return kendall_hinge_value_grad(scores, labels)


def structured_hinge_loss(scores, labels, *, where=None, weights=None, reduction="mean", measure="ndcg@10",
                          gain="exp2", constraint=None):
    """The structured hinge of :func:`structured_hinge` with the standard loss signature.

    .. math::

        \\ell(s, y) = \\max_{v \\in V} \\Big[ \\Delta(v, y) + \\sum_{i=1}^r (v_i - \\rho_i) s_i \\Big],
        \\qquad \\nabla_s \\ell = v^* - \\rho

    Parameters
    ----------
    scores, labels : tensor, shape (batch, list) or (list,)
    where : bool tensor, optional
        True at real items; a list's padded items are left out of its maximiser.
    weights : tensor, optional
        One weight per list (shape ``(batch,)``, or a scalar for one list). Per-item weights are
        refused: Δ and ``v*`` are properties of the whole list.
    reduction : {"mean", "sum", "none"}
    measure, gain, constraint
        As :func:`structured_hinge`.

    Returns
    -------
    tensor
        The reduced loss. Its gradient in ``scores`` is the subgradient ``v* − ρ`` of each list
        (its second derivative is 0: the hinge is piecewise linear in the scores).

    Notes
    -----
    A list counts when the hinge can move: a relevant item (label > 0) for the NDCG and
    multivariate hinges, two items for the Kendall hinge, as in
    :class:`~rankwise.models.StructuredHingeRanker`; any other list gives exactly 0 and is left
    out of the mean. The maximisers run in float64 numpy on the CPU, one list at a time.

    References
    ----------
    S. Shalev-Shwartz and S. Ben-David. *Understanding Machine Learning*, §17.4–17.5.
    Cambridge University Press, 2014.
    """
    import torch

    from rankwise.losses._utils import prepare, reduce

    name = "structured_hinge"
    spec = resolve_measure(measure)
    constraint = resolve_constraint(spec, constraint)
    b = prepare(scores, labels, where, weights, loss=name)
    if b.item_w is not None:
        raise InputError(f"{name}: weights must be one per list (shape (batch,)); per-item weights have no "
                         "meaning for a structured hinge")
    s_np = b.scores.detach().to(torch.float64).cpu().numpy()
    y_np = b.labels.detach().to(torch.float64).cpu().numpy()
    m_np = b.mask.cpu().numpy()
    values = np.zeros(len(s_np))
    grads = np.zeros_like(s_np)
    valid = np.zeros(len(s_np), dtype=bool)
    for i in range(len(s_np)):
        idx = np.flatnonzero(m_np[i])
        s_i, y_i = s_np[i, idx], y_np[i, idx]
        if spec.family == "kendall" and len(idx) < 2 or spec.family != "kendall" and not np.any(y_i > 0):
            continue
        values[i], g = structured_hinge(s_i, y_i, measure=spec, gain=gain, constraint=constraint)
        grads[i, idx] = g
        valid[i] = True
    G = torch.as_tensor(grads, dtype=b.scores.dtype, device=b.scores.device)
    # value ℓ(s) at s, gradient v* − ρ: the hinge is linear in s around s for the maximiser v*
    per_list = (torch.as_tensor(values, dtype=b.scores.dtype, device=b.scores.device)
                + (G * (b.scores - b.scores.detach())).sum(-1))
    return reduce(per_list, torch.as_tensor(valid, device=b.scores.device), b, reduction, loss=name)
