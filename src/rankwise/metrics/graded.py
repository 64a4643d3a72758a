"""Discounted cumulative gain and its normalised form."""
from __future__ import annotations

import numpy as np

from rankwise.errors import InputError
from rankwise.metrics import _kernels as K
from rankwise.metrics._common import run_metric
from rankwise.metrics.gains import discount_kind, gain_input

SHORT_LIST = ("truncate", "zero")


#: gains above this are scaled down before summing (NDCG is a ratio: scaling cancels), so that a
#: sum of up to 2**53 gains cannot overflow float64
_BIG = 1e290


def _dcg_values(prep, *, k=0, gain="exp2", discount="log2", scale=1.0):
    g, tf = gain_input(prep.labels, gain, prep.label_range)
    if scale != 1.0:
        g = K.apply_gain(g, tf) / scale
        tf = K.G_VALUE
    kind = discount_kind(discount)
    if prep.retrieved is None:
        vals = K.map_queries(K.dcg_kernel, prep.offsets, g, prep.gstart, k, kind, tf, 0.0)
    else:
        ranked = prep.ranked(K.apply_gain(g, tf))
        vals = K.map_queries(K.dcg_kernel, prep.offsets, ranked, prep.gstart, k, kind, K.G_VALUE, 0.0)
    # unretrieved rows count in the ideal
    ideal = K.map_queries(K.ideal_dcg_kernel, prep.offsets, g, k, kind, tf, 0.0)
    return vals, ideal


def _scale(prep, gain) -> float:
    """1, or the largest gain when the gains are so large that their sum could overflow."""
    top = max(abs(prep.label_range[0]), abs(prep.label_range[1]))
    if isinstance(gain, str):
        big = top > _BIG if gain == "linear" else False  # exp2 labels are capped at 1000 by gain_input
        return top if big else 1.0
    table = np.asarray(gain, dtype=np.float64)
    tmax = float(np.abs(table).max()) if table.size else 0.0
    return tmax if tmax > _BIG else 1.0


def dcg_values(prep, *, k=0, gain="exp2", discount="log2"):
    scale = _scale(prep, gain)
    vals, ideal = _dcg_values(prep, k=k, gain=gain, discount=discount, scale=scale)
    if scale != 1.0:
        with np.errstate(over="ignore"):
            vals = vals * scale
        if not np.all(np.isfinite(vals)):
            raise InputError(f"DCG overflows float64 with gains up to {scale:g}; use ndcg (a ratio, computed on "
                             "scaled gains) or rescale the labels")
        ideal = ideal * scale
    return vals, ideal <= 0.0


def ndcg_values(prep, *, k=0, gain="exp2", discount="log2", short_list="truncate"):
    if short_list not in SHORT_LIST:
        raise InputError(f"short_list must be 'truncate' or 'zero'; got {short_list!r}")
    vals, ideal = _dcg_values(prep, k=k, gain=gain, discount=discount, scale=_scale(prep, gain))
    empty = ideal <= 0.0
    out = np.divide(vals, ideal, out=np.zeros_like(vals), where=~empty)
    if short_list == "zero" and k > 0:
        out[prep.n_ranked() < k] = 0.0
    return out, empty


def dcg(scores, labels, *, qid=None, where=None, k=None, gain="exp2", ties="average", empty=0.0,
        reduction="mean", discount="log2", doc_ids=None):
    r"""Discounted cumulative gain at cutoff ``k``.

    .. math::

        \mathrm{DCG@}k(s, y) = \sum_{i=1}^{\min(k, n)} \frac{G(y_{\pi_s(i)})}{\log_2(i + 1)},
        \qquad G(y) = 2^y - 1 \text{ (``"exp2"``) or } y \text{ (``"linear"``)}

    where :math:`\pi_s` sorts the items by decreasing score.

    Parameters
    ----------
    scores, labels : array-like
        Flat ``(n_rows,)`` with ``qid``, or padded ``(n_queries, list)`` with ``where``.
    qid : array-like, optional
        Query id per row (flat input); queries are reported in order of first appearance.
    where : array-like of bool, optional
        True on real items (padded input, or a row mask for flat input).
    k : int or None
        Cutoff; None is the whole list.
    gain : {"exp2", "linear"} or sequence
        Gain of a grade; a sequence is a table indexed by integer grade.
    ties : {"average", "pessimistic", "optimistic", "input", "docid"}
        How tied scores are ordered; ``"average"`` is the exact expectation over uniformly
        random tie-breaking.
    empty : float or "drop"
        Value of a query with no item of positive gain; ``"drop"`` leaves it out.
    reduction : {"mean", "none", "sum"}
        ``"none"`` returns one value per query (after ``empty="drop"``: per kept query).
    discount : {"log2", "jarvelin"}
        ``"log2"`` is :math:`1/\log_2(i+1)`; ``"jarvelin"`` is :math:`1/\max(1, \log_2 i)`
        (first two positions undiscounted: trec_eval, the LETOR script).
    doc_ids : array-like, optional
        Document ids for ``ties="docid"`` (larger id first among ties, as trec_eval; like
        trec_eval, which stores scores as float32, scores equal in float32 count as tied).

    Notes
    -----
    DCG is linear in the per-position discounts, so under ``ties="average"`` an item in a tie
    group occupying positions :math:`s+1..s+m` receives the mean discount of those positions
    (positions beyond ``k`` count 0): the exact expectation.

    References
    ----------
    Järvelin, K. and Kekäläinen, J. "Cumulated gain-based evaluation of IR techniques."
    ACM TOIS 20(4), 2002.
    Burges, C. et al. "Learning to rank using gradient descent." ICML 2005.
    McSherry, F. and Najork, M. "Computing information retrieval performance measures
    efficiently in the presence of tied scores." ECIR 2008.
    """
    return run_metric(dcg_values, scores, labels, qid=qid, where=where, ties=ties, doc_ids=doc_ids,
                      empty=empty, reduction=reduction, k=k, gain=gain, discount=discount)


def ndcg(scores, labels, *, qid=None, where=None, k=None, gain="exp2", ties="average", empty=0.0,
         reduction="mean", discount="log2", short_list="truncate", doc_ids=None):
    r"""Normalised discounted cumulative gain at cutoff ``k``.

    .. math::

        \mathrm{NDCG@}k(s, y) = \frac{\mathrm{DCG@}k(s, y)}{\max_{\pi} \mathrm{DCG@}k(\pi, y)}

    The ideal DCG sorts the gains in decreasing order. Parameters as :func:`dcg`, plus
    ``short_list``: ``"truncate"`` (a list shorter than ``k`` is scored on its own length) or
    ``"zero"`` (NDCG@k is 0 when the list has fewer than ``k`` items, as the LETOR 4.0 script).

    Notes
    -----
    A query whose ideal DCG is 0 (no item with positive gain) is *empty*: it scores ``empty``
    (LightGBM and XGBoost use 1, trec_eval, scikit-learn and ranx 0). Under ``ties="average"``
    the value is exact because the ideal DCG does not depend on the scores.

    References
    ----------
    Järvelin, K. and Kekäläinen, J. "Cumulated gain-based evaluation of IR techniques."
    ACM TOIS 20(4), 2002.
    McSherry, F. and Najork, M. "Computing information retrieval performance measures
    efficiently in the presence of tied scores." ECIR 2008.
    """
    return run_metric(ndcg_values, scores, labels, qid=qid, where=where, ties=ties, doc_ids=doc_ids,
                      empty=empty, reduction=reduction, k=k, gain=gain, discount=discount,
                      short_list=short_list)
