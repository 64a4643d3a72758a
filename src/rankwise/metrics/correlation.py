"""Pairwise and rank-correlation measures: Kendall tau, Spearman rho, pairwise accuracy, ω-cost."""
from __future__ import annotations

import numpy as np

from rankwise.errors import InputError
from rankwise.metrics import _kernels as K
from rankwise.metrics._correlation import spearman_kernel
from rankwise.metrics._common import run_metric


def kendall_values(prep):
    c = K.pair_kernel(prep.offsets, prep.labels, prep.gstart, np.inf)
    n = np.diff(prep.offsets).astype(np.float64)
    n0 = n * (n - 1) / 2.0
    denom = np.sqrt(n0 * c[:, 2])
    vals = np.divide(c[:, 0] - c[:, 1], denom, out=np.zeros(len(n)), where=denom > 0)
    return vals, denom == 0


def pairwise_accuracy_values(prep):
    c = K.pair_kernel(prep.offsets, prep.labels, prep.gstart, np.inf)
    vals = np.divide(c[:, 0], c[:, 2], out=np.zeros(len(c)), where=c[:, 2] > 0)
    return vals, c[:, 2] == 0


def ideal_positions(y) -> np.ndarray:
    """1-based position of every item in the ideal order (labels descending), in O(n log n).

    Items of equal label can be ordered either way, so they share the mean of the positions
    their group occupies: ``#{larger labels} + (#{equal labels} + 1) / 2``.
    """
    y = np.asarray(y, dtype=np.float64)
    s = np.sort(y)
    above = np.searchsorted(s, y, side="right")
    greater = len(y) - above
    equal = above - np.searchsorted(s, y, side="left")
    return greater + (equal + 1) / 2.0


def pairwise_cost_values(prep, *, omega="kemeny"):
    if isinstance(omega, str):
        if omega != "kemeny":
            raise InputError(f"omega must be 'kemeny' or a callable omega(sigma_u, sigma_v) -> weights; got {omega!r}")
        c = K.pair_kernel(prep.offsets, prep.labels, prep.gstart, np.inf)
        return c[:, 1], c[:, 2] == 0
    if not callable(omega):
        raise InputError(f"omega must be 'kemeny' or a callable omega(sigma_u, sigma_v) -> weights; got {omega!r}")
    out = np.zeros(prep.n_queries)
    emp = np.zeros(prep.n_queries, dtype=bool)
    for q in range(prep.n_queries):
        a, b = int(prep.offsets[q]), int(prep.offsets[q + 1])
        labels, counts, M = K.label_pair_discordance(prep.labels, prep.gstart, a, b)
        if len(labels) < 2:
            emp[q] = True
            continue
        # omega depends on a pair only through the ideal positions of its labels: one call per
        # pair of distinct labels, weighted by how many such pairs are misordered
        sigma = (counts.sum() - np.cumsum(counts)) + (counts + 1) / 2.0  # larger labels first
        u, v = np.tril_indices(len(labels), k=-1)  # label u > label v
        w = np.asarray(omega(sigma[u], sigma[v]), dtype=np.float64)
        if w.shape != u.shape or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise InputError("omega(sigma_u, sigma_v) must return one finite non-negative weight per pair "
                             f"(arrays of {len(u)} pairs in, got shape {w.shape})")
        out[q] = float(np.sum(w * M[u, v]))
    return out, emp


def spearman_values(prep):
    pos = K.expected_rank_kernel(prep.offsets, prep.gstart)
    vals, ok = spearman_kernel(np.ascontiguousarray(prep.offsets, dtype=np.int64),
                               np.ascontiguousarray(prep.labels, dtype=np.float64), pos)
    return vals, ~ok




def kendall_tau(scores, labels, *, qid=None, where=None, ties="average", empty=0.0, reduction="mean",
                doc_ids=None):
    r"""Kendall's tau-b between the predicted ranking and the labels.

    .. math::

        \tau = \frac{C - D}{\sqrt{n_0 (n_0 - n_1)}}, \qquad n_0 = \binom{n}{2},

    with :math:`C` / :math:`D` the pairs the ranking orders like / against the labels and
    :math:`n_1` the pairs of equal labels. The ranking has no ties once ``ties`` has ordered
    them, so this is tau-b of (ranking, labels); under ``ties="average"`` its exact expectation,
    where a tied pair adds 1/2 to both :math:`C` and :math:`D`. A query with fewer than two
    distinct labels is *empty*.

    References
    ----------
    Kendall, M. G. "The treatment of ties in ranking problems." Biometrika 33(3), 1945.
    """
    return run_metric(lambda p: kendall_values(p), scores, labels, qid=qid, where=where, ties=ties,
                      doc_ids=doc_ids, empty=empty, reduction=reduction)


def spearman(scores, labels, *, qid=None, where=None, ties="average", empty=0.0, reduction="mean",
             doc_ids=None):
    r"""Spearman's rho between the predicted ranking and the labels.

    .. math::

        \rho = \frac{\sum_i (r_i - \bar r)(l_i - \bar l)}
                    {\sqrt{\sum_i (r_i - \bar r)^2 \sum_i (l_i - \bar l)^2}}

    with :math:`r_i = n + 1 - \text{position}_i` (a permutation, so
    :math:`\sum (r_i-\bar r)^2 = n(n^2-1)/12`) and :math:`l_i` the average ranks of the labels.
    Under ``ties="average"`` the numerator is linear in the positions, so replacing each
    position by its tie group's midpoint gives the exact expectation. (scipy's ``spearmanr``
    instead ranks tied *scores* by their average rank in the denominator too.) A query with
    fewer than two distinct labels is *empty*.

    References
    ----------
    Spearman, C. "The proof and measurement of association between two things." American
    Journal of Psychology 15(1), 1904.
    """
    return run_metric(lambda p: spearman_values(p), scores, labels, qid=qid, where=where, ties=ties,
                      doc_ids=doc_ids, empty=empty, reduction=reduction)


def pairwise_accuracy(scores, labels, *, qid=None, where=None, ties="average", empty=0.0,
                      reduction="mean", doc_ids=None):
    r"""Fraction of pairs with different labels that the ranking orders correctly.

    .. math::

        \mathrm{PA} = \frac{\sum_{y_u > y_v} [\hat\sigma_u < \hat\sigma_v]}{|\{(u, v): y_u > y_v\}|}

    A tied pair counts 1/2 under ``ties="average"``. A query with one distinct label is *empty*.

    References
    ----------
    Joachims, T. "Optimizing search engines using clickthrough data." KDD 2002.
    """
    return run_metric(lambda p: pairwise_accuracy_values(p), scores, labels, qid=qid, where=where, ties=ties,
                      doc_ids=doc_ids, empty=empty, reduction=reduction)


def pairwise_cost(scores, labels, *, qid=None, where=None, ties="average", empty=0.0, reduction="mean",
                  omega="kemeny", doc_ids=None):
    r"""ω-weighted pairwise ranking cost (lower is better).

    .. math::

        \sum_{u \ne v} [\sigma_u < \sigma_v] [\hat\sigma_v < \hat\sigma_u] \, \omega(\sigma_u, \sigma_v)

    with :math:`\sigma` the ideal (true) positions and :math:`\hat\sigma` the predicted ones.
    :math:`\sigma_u < \sigma_v` means ``u`` should precede ``v``: here ``y_u > y_v``; pairs of
    equal labels never count. ``omega="kemeny"`` is :math:`\omega = 1` (the number of
    discordant pairs). A callable ``omega(sigma_u, sigma_v)`` receives the 1-based ideal
    positions of the two sides of every pair of distinct labels ``y_u > y_v`` of a query (two
    float arrays, one entry per pair of labels: items of equal label share one ideal position)
    and returns one non-negative weight per entry, e.g.
    ``lambda su, sv: 1 / np.log2(1 + su) - 1 / np.log2(1 + sv)`` (a DCG-style weight).

    Notes
    -----
    The ideal order is the order of decreasing labels, which does not fix the order among
    equal labels: items of equal label all get the mean of the positions their group
    occupies (``#{larger labels} + (#{equal labels} + 1) / 2``). So :math:`\sigma_u < \sigma_v`
    exactly when ``y_u > y_v``, and ω depends on the labels only through the ideal ranking.
    A tied predicted pair costs ω/2 under ``ties="average"``. A query with one distinct label
    is *empty* (its cost is 0).

    Cost: O(n log n) per query for ``omega="kemeny"`` (a Fenwick count of discordant pairs);
    with a callable ω, which sees a pair only through its two labels' ideal positions, O(n L)
    for L distinct labels plus one call of ω on the L(L-1)/2 label pairs.

    References
    ----------
    Daumé III, H. *A Course in Machine Learning*, ch. "Learning to rank" (ω-ranking,
    Kemeny distance), 2017.
    """
    return run_metric(pairwise_cost_values, scores, labels, qid=qid, where=where, ties=ties,
                      doc_ids=doc_ids, empty=empty, reduction=reduction, omega=omega)
