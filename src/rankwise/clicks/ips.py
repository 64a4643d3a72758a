r"""Inverse-propensity-scored training of any rankwise model from clicks.

Under the position-based model a document at rank k is clicked with probability
:math:`\theta_k r_d`. The IPS estimate of its relevance over the sessions of its query,

.. math:: \hat r_{qd} = \frac{1}{n_q} \sum_{s \in S_q} \frac{c_d^{(s)}}{\theta_{k_d^{(s)}}},

is unbiased (:math:`E[\hat r_{qd}] = r_{qd}` for shown documents with θ > 0). A surrogate whose
value (or gradient) is *affine in the labels* — pointwise squared and logistic templates, the
order-preserving pairwise templates ``op_pairwise`` and ``pairwise_squared``, the Bregman template
with ψ squared — therefore has an unbiased IPS risk when trained on :math:`\hat r` as labels
(Joachims, Swaminathan & Schnabel, WSDM 2017, §4; Wang, Bendersky, Metzler & Najork, SIGIR 2016).
:func:`rankwise.theory.ips.labels_enter_linearly` checks that property numerically and
:func:`fit_debiased` refuses a loss that lacks it. No model code changes: the labels carry the
correction, so :class:`~rankwise.models.LinearRanker`, :class:`~rankwise.models.NeuralRanker`
and :class:`~rankwise.models.GBDTRanker` all take it.

Clipping (``clip=τ``) replaces θ_k by max(θ_k, τ): bounded variance for a bias towards the top
ranks (Joachims et al. 2017, §4; "propensity clipping"); ``clip=None`` keeps the estimate unbiased.
"""
from __future__ import annotations

import numpy as np

from rankwise.clicks.log import ClickCounts, ClickLog
from rankwise.errors import InputError

__all__ = ["ips_weights", "click_dataset", "fit_debiased"]


def ips_weights(ranks, propensity, *, clip: float | None = None) -> np.ndarray:
    r"""1/θ_k for each rank (1-based), with θ clipped below at ``clip`` when given."""
    p = np.asarray(propensity, dtype=np.float64)
    ranks = np.asarray(ranks).astype(np.int64)
    if p.ndim != 1 or len(p) == 0:
        raise InputError("propensity must be a 1-d array over ranks 1..R")
    if len(ranks) and (ranks.min() < 1 or ranks.max() > len(p)):
        raise InputError(f"ranks run from {ranks.min()} to {ranks.max()} but propensities are given for ranks 1..{len(p)}")
    if clip is not None:
        clip = float(clip)
        if not 0 < clip <= 1:
            raise InputError(f"clip must be in (0, 1] (the smallest propensity kept) or None; got {clip}")
        p = np.maximum(p, clip)
    if not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise InputError("propensities must be finite and > 0 at every rank (IPS divides by them); "
                         "pass clip= to bound them away from 0")
    return 1.0 / p[ranks - 1]


def _feature_rows(log: ClickLog, features):
    """Row of ``features`` for every (query, doc) pair of ``log``."""
    import pandas as pd

    from rankwise.data import RankingDataset

    if not isinstance(features, RankingDataset):
        raise InputError(f"features must be a rankwise.data.RankingDataset; got {type(features).__name__}")
    qrow = np.repeat(np.asarray(features.query_ids), np.diff(features.query_offsets))
    q, d = log.pair_keys()
    if features.doc_ids is None:
        # documents are row numbers of the data set
        try:
            rows = np.asarray(d).astype(np.int64)
        except (TypeError, ValueError):
            raise InputError("the data set has no doc_ids, so the log's documents must be its row numbers") from None
        if rows.min(initial=0) < 0 or rows.max(initial=0) >= len(qrow):
            raise InputError(f"document row numbers must lie in [0, {len(qrow)})")
        bad = qrow[rows].astype(str) != np.asarray(q).astype(str)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"document {d[i]} of query {q[i]!r} is row {rows[i]}, which belongs to query {qrow[rows[i]]!r}")
        return rows
    index = pd.MultiIndex.from_arrays([qrow.astype(str), np.asarray(features.doc_ids).astype(str)])
    rows = index.get_indexer(pd.MultiIndex.from_arrays([np.asarray(q).astype(str), np.asarray(d).astype(str)]))
    if np.any(rows < 0):
        i = int(np.flatnonzero(rows < 0)[0])
        raise InputError(f"(query {q[i]!r}, doc {d[i]!r}) of the log has no row in the feature data set")
    return rows


def click_dataset(log: ClickLog | ClickCounts, features, *, propensity=None, clip: float | None = None,
                  candidates: bool = False):
    r"""The training set of the shown (query, doc) pairs, labelled from the clicks.

    Labels: :math:`\hat r_{qd} = \frac{1}{n_q} \sum_s c_d^{(s)} / \theta_{k_d^{(s)}}` (IPS, see the
    module docstring) with ``propensity`` θ over ranks 1..R, or the raw click-through rate
    :math:`\frac{1}{n_q} \sum_s c_d^{(s)}` with ``propensity=None`` (the biased baseline).

    Parameters
    ----------
    log : ClickLog or ClickCounts
        Sessions, or their aggregate (:meth:`ClickLog.counts`): the labels depend on the counts only.
    features : RankingDataset
        Features of the documents: the log's documents are its ``doc_ids`` within each query, or
        its row numbers when it has none.
    propensity : array (R,), optional
    clip : float, optional
        Propensity clipping (θ replaced by max(θ, clip)).
    candidates : bool, default False
        Also add every document of ``features`` under a logged query that the log never shows
        (the unshown candidates), with label 0 — Joachims et al. (2017) rank each clicked document
        against *all* candidates of its query. With ``False`` only shown documents are rows.

    Returns
    -------
    RankingDataset
        One row per shown (query, doc) — and with ``candidates=True`` per unshown candidate of a
        logged query, after the shown ones — queries in the log's order, ``doc_ids`` as in the log
        (or, for unshown candidates, their ``doc_ids`` in ``features``, their row numbers when it has
        none).

    Notes
    -----
    A document that is never shown has propensity 0 and no unbiased relevance estimate: label 0 is
    biased for a relevant one (*item-selection bias*, Oosterhuis & de Rijke, SIGIR 2020). For a
    pairwise template :math:`\sum_{i \ne j} v_i \varphi(s_i - s_j)` (``op_pairwise``) the unshown
    candidates only enter as the lower document j of a pair, so the IPS risk over shown ∪ unshown
    misses only the pairs where an unshown *relevant* document should be on top; without them it
    also misses every pair (shown relevant i, unshown j), which the test ranking needs (the ranker
    scores all documents). The trade: more of the full-information pairs for a bias against
    relevant unshown documents (a good logging ranker leaves few of them).
    """
    from rankwise.data import RankingDataset

    if isinstance(log, ClickLog):
        log = log.counts()
    if not isinstance(log, ClickCounts):
        raise InputError(f"log must be a ClickLog or ClickCounts; got {type(log).__name__}")
    if not isinstance(candidates, (bool, np.bool_)):
        raise InputError(f"candidates must be True or False; got {candidates!r}")
    rows = _feature_rows(log, features)
    w = np.ones(len(log.rank)) if propensity is None else ips_weights(log.rank, propensity, clip=clip)
    num = np.bincount(log.pair, weights=log.clicks * w, minlength=log.n_pairs)
    label = num / log.sessions[log.pair_query]
    q, d = log.pair_keys()
    q = np.asarray(q)
    d = np.asarray(d).astype(str)
    qpos = log.pair_query
    if candidates:
        # unshown rows of features under a logged query: label 0, after the shown rows of the query
        nrow = len(features.labels)
        fq = np.repeat(np.asarray(features.query_ids), np.diff(features.query_offsets)).astype(str)
        code = {k: i for i, k in enumerate(np.asarray(log.queries).astype(str))}
        fpos = np.array([code.get(k, -1) for k in fq], dtype=np.int64)
        shown = np.zeros(nrow, dtype=bool)
        shown[rows] = True
        extra = np.flatnonzero((fpos >= 0) & ~shown)
        fd = (np.arange(nrow).astype(str) if features.doc_ids is None
              else np.asarray(features.doc_ids).astype(str))
        rows = np.concatenate([rows, extra])
        label = np.concatenate([label, np.zeros(len(extra))])
        q = np.concatenate([q, np.asarray(log.queries)[fpos[extra]]])
        d = np.concatenate([d, fd[extra]])
        qpos = np.concatenate([qpos, fpos[extra]])
    order = np.argsort(qpos, kind="stable")
    return RankingDataset.from_arrays(features.X[rows[order]], label[order], q[order], doc_ids=d[order])


def fit_debiased(estimator, log: ClickLog | ClickCounts, features, propensity, *, clip: float | None = None,
                 check: bool = True, candidates: bool = False, **fit_kwargs):
    """Fit ``estimator`` (any rankwise ranker) on the IPS labels of :func:`click_dataset`
    (``candidates=True``: with the unshown candidates of each logged query as label-0 rows, see there).

    With ``check=True`` the estimator's loss must enter the labels linearly (checked numerically by
    :func:`rankwise.theory.ips.labels_enter_linearly`), the condition under which the IPS risk is
    unbiased; otherwise an :class:`InputError` says which losses qualify. Returns the estimator.
    """
    if check:
        from rankwise.theory.ips import labels_enter_linearly

        loss = getattr(estimator, "loss", None)
        if not isinstance(loss, str) or loss.startswith("native:"):
            raise InputError(f"fit_debiased needs a rankwise loss whose gradient is affine in the labels; the "
                             f"estimator's loss is {loss!r}. Use e.g. loss='op_pairwise' or 'pointwise_squared' "
                             "(or UnbiasedLambdaMART for LambdaMART), or pass check=False")
        params = getattr(estimator, "loss_params", None) or {}
        if not labels_enter_linearly(loss, **params):
            raise InputError(f"loss {loss!r} is not affine in the labels, so its IPS-weighted risk is biased "
                             "(Joachims et al. 2017 need a linearly decomposable loss); use op_pairwise, "
                             "pairwise_squared, pointwise_squared, pointwise_logistic or bregman, or check=False")
    data = click_dataset(log, features, propensity=propensity, clip=clip, candidates=candidates)
    return estimator.fit(data, **fit_kwargs)
