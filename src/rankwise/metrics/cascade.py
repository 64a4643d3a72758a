"""Cascade-type measures: the user stops at the first satisfying document (ERR, reciprocal rank)."""
from __future__ import annotations

import numpy as np

from rankwise.errors import InputError
from rankwise.metrics import _kernels as K
from rankwise.metrics._common import check_threshold, run_metric


def err_values(prep, *, k=0, max_grade=None):
    lo, top = prep.label_range
    if prep.labels.size and lo < 0:
        raise InputError(f"labels must be non-negative grades for err; got minimum label {lo:g}")
    if max_grade is None:
        gmax = top
    else:
        if isinstance(max_grade, (bool, np.bool_)) or not isinstance(max_grade, (int, float, np.integer, np.floating)) \
                or not np.isfinite(max_grade) or max_grade < 0:
            raise InputError(f"max_grade must be a non-negative number (the label scale's maximum); got {max_grade!r}")
        gmax = float(max_grade)
        if top > gmax:
            raise InputError(f"max_grade={max_grade!r} is below the largest label {top:g}; "
                             "it must be the maximum grade of the label scale")
    if gmax > 1000:
        raise InputError(f"grades too large for err (2^grade overflows); got maximum {gmax:g}")
    v, tf, thr = prep.kernel_input(K.G_EXP2)
    vals = K.map_queries(K.err_kernel, prep.offsets, v, prep.gstart, k, tf, thr, float(np.exp2(gmax)))
    empty = (K.map_queries(K.count_kernel, prep.offsets, prep.labels, K.G_VALUE, 0.0) == 0)  # no label > 0
    return vals, empty


def rr_values(prep, *, k=0, threshold=1.0):
    thr = check_threshold(threshold)
    v, tf, t = prep.kernel_input(K.G_ABOVE, thr)
    vals = K.map_queries(K.rr_kernel, prep.offsets, v, prep.gstart, k, tf, t)
    return vals, (K.map_queries(K.count_kernel, prep.offsets, prep.labels, K.G_ABOVE, thr) == 0)


def err(scores, labels, *, qid=None, where=None, k=None, ties="average", empty=0.0, reduction="mean",
        max_grade=None, doc_ids=None):
    r"""Expected reciprocal rank at cutoff ``k`` (Chapelle et al. 2009).

    .. math::

        \mathrm{ERR@}k = \sum_{r=1}^{\min(k,n)} \frac{1}{r} R_r \prod_{i<r} (1 - R_i),
        \qquad R_i = \frac{2^{y_i} - 1}{2^{y_{\max}}}

    with items in decreasing score order and :math:`y_{\max}` the maximum grade of the label
    scale (``max_grade``). ERR is defined with the scale's maximum, which the labels cannot
    always show: with ``max_grade=None`` it is taken as the largest label of the whole input
    (every query of the call, never per query), so the value of a query depends on what else
    is in the call. Pass it explicitly — 4 for MSLR-WEB10K/30K, 2 for MQ2007/MQ2008 — whenever
    a subset (a fold, a batch, one query) may miss the top grade.

    Parameters as :func:`rankwise.metrics.ndcg` (``gain`` does not apply). A query with no
    label above 0 is *empty* (its ERR would be 0).

    Notes
    -----
    ERR is not linear in the positions, so ``ties="average"`` is computed exactly inside each
    tie group: an item at offset :math:`t` of a group of size :math:`m` sees a uniformly random
    :math:`(t-1)`-subset of the group's other items before it; the mean product of
    :math:`1-R` over such subsets is a normalised elementary symmetric polynomial, built by a
    convex recurrence (O(m·min(m, k)) per group, no sampling).

    References
    ----------
    Chapelle, O., Metzler, D., Zhang, Y. and Grinspan, P. "Expected reciprocal rank for graded
    relevance." CIKM 2009.
    """
    return run_metric(err_values, scores, labels, qid=qid, where=where, ties=ties, doc_ids=doc_ids,
                      empty=empty, reduction=reduction, k=k, max_grade=max_grade)


def reciprocal_rank(scores, labels, *, qid=None, where=None, k=None, ties="average", empty=0.0,
                    reduction="mean", threshold=1, doc_ids=None):
    r"""Reciprocal rank of the first relevant item (mean over queries: MRR).

    .. math::

        \mathrm{RR@}k = \frac{1}{r^*} [r^* \le k], \qquad
        r^* = \min\{ i : y_{\pi_s(i)} \ge \text{threshold} \}

    Relevant means ``label >= threshold`` (trec_eval's ``-l``). A query with no relevant item
    is *empty*.

    Notes
    -----
    Under ``ties="average"``: in the first tie group holding relevant items (``s`` items
    before it, size ``m``, ``r`` relevant) the first relevant one lands at offset ``j`` with
    probability :math:`\binom{m-j}{r-1} / \binom{m}{r}`; the expectation sums over ``j``.

    References
    ----------
    Voorhees, E. M. "The TREC-8 question answering track report." TREC 1999.
    """
    return run_metric(rr_values, scores, labels, qid=qid, where=where, ties=ties, doc_ids=doc_ids,
                      empty=empty, reduction=reduction, k=k, threshold=threshold)


mrr = reciprocal_rank
