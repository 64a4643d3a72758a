"""Measures of binary relevance (``label >= threshold``): AP/MAP, precision, recall, AUC."""
from __future__ import annotations

import numpy as np

from rankwise.errors import InputError
from rankwise.metrics import _kernels as K
from rankwise.metrics._common import check_threshold, run_metric

AP_DENOMINATORS = {"relevant": 0, "min_k": 1}


def _n_relevant(prep, thr):
    """Relevant rows per query (``label >= thr``), retrieved or not."""
    return K.map_queries(K.count_kernel, prep.offsets, prep.labels, K.G_ABOVE, thr)


def ap_values(prep, *, k=0, threshold=1.0, ap_denominator="relevant"):
    if ap_denominator not in AP_DENOMINATORS:
        raise InputError(f"ap_denominator must be 'relevant' or 'min_k'; got {ap_denominator!r}")
    thr = check_threshold(threshold)
    kind = AP_DENOMINATORS[ap_denominator]
    v, tf, t = prep.kernel_input(K.G_ABOVE, thr)
    vals, nrel = K.map_queries(K.ap_kernel, prep.offsets, v, prep.gstart, prep.singletons, k, kind, tf, t)
    if prep.retrieved is None:
        return vals, nrel == 0
    # the kernel divides by the retrieved relevant count; AP divides by all relevant (R)
    R = _n_relevant(prep, thr).astype(np.float64)
    d_ranked, d_all = (nrel, R) if kind == 0 or k <= 0 else (np.minimum(nrel, k), np.minimum(R, k))
    vals = np.divide(vals * d_ranked, d_all, out=np.zeros_like(vals), where=d_all > 0)
    return vals, R == 0


def _hits(prep, k, thr):
    """Expected number of relevant rows in the top ``k`` (DCG with gain 0/1 and no discount)."""
    v, tf, t = prep.kernel_input(K.G_ABOVE, thr)
    return K.map_queries(K.dcg_kernel, prep.offsets, v, prep.gstart, k, K.DISC_ONE, tf, t)


def precision_values(prep, *, k=0, threshold=1.0):
    thr = check_threshold(threshold)
    hits = _hits(prep, k, thr)
    n = prep.n_ranked()
    denom = n.astype(np.float64) if k <= 0 else np.full(len(n), float(k))
    vals = np.divide(hits, denom, out=np.zeros_like(hits), where=denom > 0)
    return vals, (K.map_queries(K.count_kernel, prep.offsets, prep.labels, K.G_ABOVE, thr) == 0)


def recall_values(prep, *, k=0, threshold=1.0):
    thr = check_threshold(threshold)
    hits = _hits(prep, k, thr)
    R = _n_relevant(prep, thr)
    vals = np.divide(hits, R, out=np.zeros_like(hits), where=R > 0)
    return vals, R == 0


def auc_values(prep, *, threshold=1.0):
    thr = check_threshold(threshold)
    c = K.pair_kernel(prep.offsets, prep.labels, prep.gstart, thr)
    denom = c[:, 5]
    vals = np.divide(c[:, 4], denom, out=np.zeros(len(denom)), where=denom > 0)
    return vals, denom == 0


def average_precision(scores, labels, *, qid=None, where=None, k=None, ties="average", empty=0.0,
                      reduction="mean", threshold=1, ap_denominator="relevant", doc_ids=None):
    r"""Average precision at cutoff ``k`` (mean over queries: MAP).

    .. math::

        \mathrm{AP@}k = \frac{1}{D} \sum_{i=1}^{\min(k,n)} \mathrm{rel}_i \, \mathrm{P@}i,
        \qquad \mathrm{rel}_i = [y_{\pi_s(i)} \ge \text{threshold}]

    with :math:`D = R` (number of relevant items, ``ap_denominator="relevant"``: trec_eval,
    the LETOR script) or :math:`D = \min(R, k)` (``"min_k"``: LightGBM's map@k).
    A query with no relevant item is *empty*.

    Notes
    -----
    Under ``ties="average"`` the value is exact: a relevant item of a tie group (size ``m``,
    ``r`` relevant, ``s`` items and ``c`` relevant before it) is at offset ``j`` with
    probability ``1/m``, and given that, the expected number of relevant items above it is
    :math:`c + (j-1)(r-1)/(m-1)`; precision at a fixed position is linear in that count.

    References
    ----------
    Voorhees, E. M. and Harman, D. K. *TREC: Experiment and Evaluation in Information
    Retrieval*, MIT Press, 2005 (trec_eval's ``map``).
    McSherry, F. and Najork, M. ECIR 2008 (measures under tied scores).
    """
    return run_metric(ap_values, scores, labels, qid=qid, where=where, ties=ties, doc_ids=doc_ids,
                      empty=empty, reduction=reduction, k=k, threshold=threshold, ap_denominator=ap_denominator)


map = average_precision  # noqa: A001 - the measure's usual name (MAP)


def precision(scores, labels, *, qid=None, where=None, k=None, ties="average", empty=0.0,
              reduction="mean", threshold=1, doc_ids=None):
    r"""Precision at cutoff ``k``: the fraction of the top ``k`` that is relevant.

    .. math::

        \mathrm{P@}k = \frac{1}{k} \sum_{i=1}^{\min(k,n)} [y_{\pi_s(i)} \ge \text{threshold}]

    A list shorter than ``k`` counts the missing positions as irrelevant (trec_eval, LETOR);
    ``k=None`` divides by the list length. Exact under ``ties="average"`` (linear).
    A query with no relevant item is *empty*.

    References
    ----------
    Manning, C. D., Raghavan, P. and Schütze, H. *Introduction to Information Retrieval*,
    Cambridge University Press, 2008, §8.4.
    """
    return run_metric(precision_values, scores, labels, qid=qid, where=where, ties=ties, doc_ids=doc_ids,
                      empty=empty, reduction=reduction, k=k, threshold=threshold)


def recall(scores, labels, *, qid=None, where=None, k=None, ties="average", empty=0.0,
           reduction="mean", threshold=1, doc_ids=None):
    r"""Recall at cutoff ``k``: the fraction of the relevant items found in the top ``k``.

    .. math::

        \mathrm{R@}k = \frac{1}{R} \sum_{i=1}^{\min(k,n)} [y_{\pi_s(i)} \ge \text{threshold}]

    Exact under ``ties="average"`` (linear). A query with no relevant item is *empty*.

    References
    ----------
    Manning, C. D., Raghavan, P. and Schütze, H. *Introduction to Information Retrieval*,
    Cambridge University Press, 2008, §8.4.
    """
    return run_metric(recall_values, scores, labels, qid=qid, where=where, ties=ties, doc_ids=doc_ids,
                      empty=empty, reduction=reduction, k=k, threshold=threshold)


def auc(scores, labels, *, qid=None, where=None, ties="average", empty=0.0, reduction="mean",
        threshold=1, doc_ids=None):
    r"""Area under the ROC curve within a query (bipartite ranking).

    .. math::

        \mathrm{AUC} = \frac{1}{|P||N|} \sum_{u \in P} \sum_{v \in N} [\hat\sigma_u < \hat\sigma_v]

    with :math:`P` the relevant items (``label >= threshold``), :math:`N` the others and
    :math:`\hat\sigma` the predicted positions. Under ``ties="average"`` a tied pair counts 1/2
    (the exact expectation). A query without both kinds of item is *empty*.

    References
    ----------
    Shalev-Shwartz, S. and Ben-David, S. *Understanding Machine Learning*, Cambridge
    University Press, 2014, §17.5 (bipartite ranking).
    """
    return run_metric(auc_values, scores, labels, qid=qid, where=where, ties=ties, doc_ids=doc_ids,
                      empty=empty, reduction=reduction, threshold=threshold)
