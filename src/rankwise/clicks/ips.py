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

Doubly robust labels (``direct=m``): with a regression m(x) of the relevance on the IPS scale,

.. math:: \hat r^{DR}_{qd} = m_d + \frac{1}{n_q} \sum_{s \in S_q} \frac{c_d^{(s)} - [d \text{ shown in } s]\,
          \theta_{k_d^{(s)}} m_d}{\max(\theta_{k_d^{(s)}}, \tau)}

(Dudík, Langford & Li, ICML 2011; Oosterhuis, SIGIR 2023 for position bias). Unclipped, for a document
shown in every session of its query, it *is* the IPS label (the m terms cancel); clipped, a deep
document's label shrinks towards m(x) instead of towards 0; in sessions that did not show the document
m fills in, where IPS counts 0. :func:`direct_relevance` gives an m fitted on the clicks alone.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankwise._validation import Interval, check_k, check_params
from rankwise.clicks._split import held_out_queries, query_folds
from rankwise.data.clicklog import ClickCounts, ClickLog
from rankwise.errors import InputError

__all__ = ["ips_weights", "feature_rows", "click_dataset", "fit_debiased", "select_clip", "ClipSelection",
           "split_log_by_query", "ips_dcg", "direct_relevance"]


#: the propensity clip: the smallest θ (or ρ) kept, or None (no clipping)
_CLIP = [Interval("real", 0, 1, closed="right"), None]


def _check_clip(clip, owner: str) -> float | None:
    check_params(owner, {"clip": clip}, {"clip": _CLIP})
    return None if clip is None else float(clip)


def ips_weights(ranks, propensity, *, clip: float | None = None) -> np.ndarray:
    r"""1/θ_k for each rank (1-based), with θ clipped below at ``clip`` when given."""
    p = np.asarray(propensity, dtype=np.float64)
    ranks = np.asarray(ranks).astype(np.int64)
    if p.ndim != 1 or len(p) == 0:
        raise InputError("propensity must be a 1-d array over ranks 1..R")
    if len(ranks) and (ranks.min() < 1 or ranks.max() > len(p)):
        raise InputError(f"ranks run from {ranks.min()} to {ranks.max()} but propensities are given for ranks 1..{len(p)}")
    if clip is not None:
        p = np.maximum(p, _check_clip(clip, "ips_weights"))
    if not np.all(np.isfinite(p)) or np.any(p <= 0):
        raise InputError("propensities must be finite and > 0 at every rank (IPS divides by them); "
                         "pass clip= to bound them away from 0")
    return 1.0 / p[ranks - 1]


def feature_rows(log: ClickLog | ClickCounts, features) -> np.ndarray:
    """Row of ``features`` (a :class:`~rankwise.data.RankingDataset`) for every (query, doc) pair of ``log``, in
    the order of ``log.pair_keys()``: its ``doc_ids`` within each query, or its row numbers when it has none.
    An :class:`InputError` names the first pair of the log that has no row."""
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
        raise InputError(f"(query {str(q[i])!r}, doc {str(d[i])!r}) of the log has no row in the feature data set")
    return rows


_feature_rows = feature_rows  # the former private name (regression-EM's fit imports it)


def click_dataset(log: ClickLog | ClickCounts, features, *, propensity=None, clip: float | None = None,
                  candidates: bool = False, direct=None, policy=None, exposure=None, nonnegative: bool = True):
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
    propensity : array (R,) or PolicyPropensity, optional
        θ per rank; or the policy-aware propensities of a stochastic logging policy
        (:meth:`PlackettLucePolicy.propensities <rankwise.clicks.PlackettLucePolicy.propensities>`), which
        gives the policy-aware labels (below) — also through :func:`fit_debiased`.
    clip : float, optional
        Propensity clipping (θ, or ρ for the policy-aware labels, replaced by max(·, clip)).
    candidates : bool, default False
        Also add every document of ``features`` under a logged query that the log never shows
        (the unshown candidates), with label 0 — Joachims et al. (2017) rank each clicked document
        against *all* candidates of its query. With ``False`` only shown documents are rows.
    direct : array or callable, optional
        Doubly robust labels (module docstring): m(x) for every row of ``features`` on the scale of the
        IPS labels, or a function ``direct(log, features, propensity)`` returning it (e.g.
        :func:`direct_relevance`, fitted on this log's clicks). Needs ``propensity``. Values below 0
        are taken as 0 (relevance is non-negative; then every DR label is ≥ 0, except the policy-aware
        ones: see ``nonnegative``).
    policy : PlackettLucePolicy or PolicyMixture, optional
        The logging policy over the rows of ``features``: policy-aware labels with
        ρ = ``policy.exposure(propensity)``.
    exposure : array or "log", optional
        Policy-aware labels with ρ_qd given directly: one value per row of ``features``, or ``"log"``:
        each displayed row's own ρ from ``log.row_data["exposure"]`` (a ClickLog, e.g. of
        :func:`~rankwise.clicks.simulate_clicks_protocol`), when sessions had different loggers.
    nonnegative : bool, default True
        Policy-aware doubly robust labels can be below 0 (a shown, unclicked document with a large m):
        their *expectation* is the relevance. ``True`` cuts them at 0, which losses whose utilities must be
        non-negative (``op_pairwise``) need, at the price of an upward bias on those labels; ``False``
        keeps them unbiased, for losses that take any real label (``pointwise_squared``,
        ``pairwise_squared``). No effect on the other labels (never below 0).

    Policy-aware labels (Oosterhuis & de Rijke, SIGIR 2020), with
    :math:`\rho_{qd} = \sum_k P_\pi(\mathrm{rank}(d)=k)\,\theta_k` the probability that the logging
    policy π shows d and the user examines it:

    .. math:: \hat r_{qd} = \frac{1}{n_q} \sum_{s \in S_q} \frac{c_d^{(s)}}{\rho_{qd}},
              \qquad E[\hat r_{qd}] = r_{qd} \text{ for every candidate with } \rho_{qd} > 0,

    one row per candidate of ``features`` under a logged query with ρ > 0 (shown in this log or not: a
    top-k page from a stochastic policy gives every candidate a chance). Their doubly robust form
    (``direct=m``; Oosterhuis, TOIS 2023, "Doubly robust estimation for correcting position bias in click
    feedback": its estimator for the affine click model P(c) = α_k r + β_k with the PBM's β = 0, α_k = θ_k.
    The paper was not available here, so the formula is stated and derived rather than quoted):

    .. math:: \hat r^{DR}_{qd} = m_d + \frac{1}{n_q} \sum_{s \in S_q}
              \frac{c_d^{(s)} - \theta_{k_d^{(s)}} m_d}{\rho_{qd}}

    (cut at 0 unless ``nonnegative=False``)

    (θ at the rank where session s showed d, 0 where it did not). Since :math:`E[c_d^{(s)}] =
    E[\theta_{k_d^{(s)}}]\, r_d = \rho_{qd} r_d`, each session's term has mean :math:`r_d - m_d`: the
    label is unbiased for any m; a good m lowers its variance (each click is compared with its prediction
    θ m instead of with 0). A candidate never shown
    in the log gets m_d. With ``exposure="log"`` the sums run over the displayed rows with each row's own
    ρ (its session's logger), which is unbiased in the same way; only shown documents are rows then
    (``candidates=True`` adds the unshown ones with label 0, as without a policy).
    With a deterministic logger (temperature 0) ρ_qd = θ at the document's rank and the labels are the
    IPS labels above; documents below the top k then have ρ = 0 and no row.

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
    from rankwise.clicks.policy import PolicyPropensity
    from rankwise.data import RankingDataset

    if policy is not None or exposure is not None or isinstance(propensity, PolicyPropensity):
        return _policy_aware_dataset(log, features, propensity, policy, exposure, clip, candidates, direct,
                                     nonnegative)
    if isinstance(log, ClickLog):
        log = log.counts()
    if not isinstance(log, ClickCounts):
        raise InputError(f"log must be a ClickLog or ClickCounts; got {type(log).__name__}")
    check_params("click_dataset", {"candidates": candidates}, {"candidates": ["boolean"]})
    rows = feature_rows(log, features)
    w = np.ones(len(log.rank)) if propensity is None else ips_weights(log.rank, propensity, clip=clip)
    num = np.bincount(log.pair, weights=log.clicks * w, minlength=log.n_pairs)
    if direct is not None:
        if propensity is None:
            raise InputError("direct (doubly robust labels) needs the propensities")
        m = _direct_values(direct, log, features, propensity)[rows]
        # Σ_s [shown] θ_k m / max(θ_k, τ) over the rows of each pair; θ as given (relative), its clip in w
        shown = np.bincount(log.pair, weights=log.impressions * np.asarray(propensity, dtype=np.float64)[log.rank - 1]
                            * w, minlength=log.n_pairs)
        num = num + m * (log.sessions[log.pair_query] - shown)
    label = num / log.sessions[log.pair_query]
    if direct is not None:  # ≥ 0 exactly for m ≥ 0 (a non-click leaves m(1 − θ/max(θ, τ))); only rounding is cut
        label = np.maximum(label, 0.0)
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
        label = np.concatenate([label, np.zeros(len(extra))])  # (DR: never shown, m would fill in; label 0 here)
        q = np.concatenate([q, np.asarray(log.queries)[fpos[extra]]])
        d = np.concatenate([d, fd[extra]])
        qpos = np.concatenate([qpos, fpos[extra]])
    order = np.argsort(qpos, kind="stable")
    return RankingDataset.from_arrays(features.X[rows[order]], label[order], q[order], doc_ids=d[order])


def _policy_aware_dataset(log, features, propensity, policy, exposure, clip, candidates, direct, nonnegative):
    """:func:`click_dataset` with policy-aware labels (see there)."""
    data = _policy_aware_labels(log, features, propensity, policy, exposure, clip, candidates, direct)
    check_params("click_dataset", {"nonnegative": nonnegative}, {"nonnegative": ["boolean"]})
    if nonnegative and direct is not None:
        data.labels = np.maximum(data.labels, 0.0)
    return data


def _policy_aware_labels(log, features, propensity, policy, exposure, clip, candidates, direct):
    from rankwise.clicks.policy import PolicyPropensity
    from rankwise.data import RankingDataset

    check_params("click_dataset", {"candidates": candidates}, {"candidates": ["boolean"]})
    if sum(x is not None for x in (policy, exposure)) + isinstance(propensity, PolicyPropensity) > 1:
        raise InputError("give the policy-aware propensities once: propensity=<PolicyPropensity>, policy= or exposure=")
    theta = None
    if isinstance(propensity, PolicyPropensity):
        rho, theta = propensity.exposure, propensity.theta
    elif policy is not None:
        if propensity is None:
            raise InputError("policy= needs propensity= (the examination θ per rank) to give ρ = Σ_k P(rank=k) θ_k")
        if not hasattr(policy, "propensities"):
            raise InputError(f"policy must be a PlackettLucePolicy or PolicyMixture; got {type(policy).__name__}")
        pp = policy.propensities(propensity)
        rho, theta = pp.exposure, pp.theta
    else:
        theta = None if propensity is None else np.asarray(propensity, dtype=np.float64)
        rho = exposure
    if clip is not None:
        clip = _check_clip(clip, "click_dataset")
    if direct is not None and theta is None:
        raise InputError("direct (doubly robust labels) needs the examination θ per rank (propensity=)")
    if isinstance(rho, str):
        if rho != "log":
            raise InputError(f"exposure must be an array (one ρ per row of the features) or 'log'; got {rho!r}")
        return _row_exposure_dataset(log, features, theta, clip, candidates, direct)
    if candidates:
        raise InputError("policy-aware labels already have a row for every candidate with ρ > 0; candidates=True "
                         "(label-0 rows for unshown documents) does not apply")
    if isinstance(log, ClickLog):
        log = log.counts()
    if not isinstance(log, ClickCounts):
        raise InputError(f"log must be a ClickLog or ClickCounts; got {type(log).__name__}")
    n_rows = int(np.diff(features.query_offsets).sum()) if hasattr(features, "query_offsets") else -1
    rho = np.asarray(rho, dtype=np.float64)
    if rho.shape != (n_rows,):
        raise InputError(f"the policy-aware propensities must give one ρ per row of the features ({n_rows}); "
                         f"got shape {rho.shape} (build the policy on the features data set)")
    if not np.all(np.isfinite(rho)) or np.any(rho < 0):
        raise InputError("the policy-aware propensities ρ must be finite and >= 0")
    prow = feature_rows(log, features)
    if np.any(rho[prow] <= 0):
        i = int(np.flatnonzero(rho[prow] <= 0)[0])
        q, d = log.pair_keys()
        raise InputError(f"(query {q[i]!r}, doc {d[i]!r}) is shown in the log but its ρ is 0: the propensities "
                         "are not those of the policy that logged it")
    n_f = len(rho)
    clicks = np.zeros(n_f)
    clicks[prow] = np.bincount(log.pair, weights=log.clicks, minlength=log.n_pairs)
    fq = np.repeat(np.asarray(features.query_ids), np.diff(features.query_offsets)).astype(str)
    code = {k: i for i, k in enumerate(np.asarray(log.queries).astype(str))}
    qpos = np.array([code.get(k, -1) for k in fq], dtype=np.int64)
    keep = np.flatnonzero((qpos >= 0) & (rho > 0))
    n_q = log.sessions[qpos[keep]].astype(np.float64)
    r = rho[keep] if clip is None else np.maximum(rho[keep], clip)
    label = clicks[keep] / (n_q * r)
    if direct is not None:
        m = _direct_values(direct, log, features, PolicyPropensity(rho, theta))
        t = _policy_theta(theta, log.rank)
        shown = np.zeros(n_f)
        shown[prow] = np.bincount(log.pair, weights=log.impressions * t[log.rank - 1], minlength=log.n_pairs)
        label = m[keep] + (clicks[keep] - m[keep] * shown[keep]) / (n_q * r)
    order = np.argsort(qpos[keep], kind="stable")
    fd = np.arange(n_f).astype(str) if features.doc_ids is None else np.asarray(features.doc_ids).astype(str)
    rows = keep[order]
    return RankingDataset.from_arrays(features.X[rows], label[order], np.asarray(log.queries)[qpos[rows]],
                                      doc_ids=fd[rows])


def _policy_theta(theta, ranks):
    t = np.asarray(theta, dtype=np.float64)
    if t.ndim != 1 or (len(ranks) and len(t) < int(np.max(ranks))):
        raise InputError(f"the examination θ must cover every rank of the log (1..{int(np.max(ranks, initial=1))}); "
                         f"got shape {t.shape}")
    return t


def _row_exposure_dataset(log, features, theta, clip, candidates, direct):
    """Policy-aware labels with each displayed row's own ρ (``exposure="log"``)."""
    from rankwise.data import RankingDataset

    if not isinstance(log, ClickLog) or "exposure" not in log.row_data:
        raise InputError("exposure='log' needs a ClickLog whose row_data has 'exposure' (the policy-aware propensity "
                         "of every displayed row, as simulate_clicks_protocol logs it)")
    rho = np.asarray(log.row_data["exposure"], dtype=np.float64)
    if not np.all(np.isfinite(rho)) or np.any(rho <= 0):
        raise InputError("log.row_data['exposure'] must be finite and > 0 on every displayed row")
    r = rho if clip is None else np.maximum(rho, clip)
    n_q = np.bincount(log.query, minlength=log.n_queries).astype(np.float64)
    num = np.bincount(log.pair, weights=log.clicked / r, minlength=log.n_pairs)
    if direct is not None:
        counts = log.counts()
        m = _direct_values(direct, counts, features, theta)[feature_rows(log, features)]
        t = _policy_theta(theta, log.ranks)
        num = m * n_q[log.pair_query] + num - m * np.bincount(log.pair, weights=t[log.ranks - 1] / r,
                                                              minlength=log.n_pairs)
    base = click_dataset(log, features, candidates=candidates)  # the rows (shown, then unshown), their order
    label = dict(zip(zip(np.asarray(log.pair_keys()[0]).astype(str), np.asarray(log.pair_keys()[1]).astype(str)),
                     num / n_q[log.pair_query]))
    qrow = np.repeat(np.asarray(base.query_ids), np.diff(base.query_offsets)).astype(str)
    new = np.array([label.get(k, 0.0) for k in zip(qrow, np.asarray(base.doc_ids).astype(str))])
    return RankingDataset(base.X, new, base.query_offsets, base.query_ids, doc_ids=base.doc_ids,
                          feature_names=base.feature_names)


def _fitted_propensity(propensity, log, features):
    """``(propensity for click_dataset, fitted propensity estimator or None)``: a propensity estimator (anything
    with ``fit(log, *, features=None)`` and, once fitted, ``propensity_``: :class:`~rankwise.clicks.RegressionEM`,
    :class:`~rankwise.clicks.PBM`, ...) gives its ``propensity_``, fitted here on a clone when it is not yet."""
    if isinstance(propensity, np.ndarray) or not callable(getattr(propensity, "fit", None)):
        return propensity, None
    if getattr(propensity, "propensity_", None) is None:
        from sklearn.base import clone

        propensity = clone(propensity).fit(log, features=features)
        if getattr(propensity, "propensity_", None) is None:
            raise InputError(f"{type(propensity).__name__}.fit set no propensity_: propensity must be an array of "
                             "θ per rank, a PolicyPropensity, or a propensity estimator (e.g. RegressionEM())")
    return np.asarray(propensity.propensity_, dtype=np.float64), propensity


def fit_debiased(estimator, log: ClickLog | ClickCounts, features, propensity, *, clip: float | None = None,
                 check: bool = True, candidates: bool = False, direct=None, **fit_kwargs):
    """Fit ``estimator`` (any rankwise ranker) on the IPS labels of :func:`click_dataset`
    (``candidates=True``: with the unshown candidates of each logged query as label-0 rows; ``direct``:
    the doubly robust labels; see there).

    ``propensity`` is θ per rank (an array), a :class:`~rankwise.clicks.PolicyPropensity`, or a propensity
    estimator (:class:`~rankwise.clicks.RegressionEM`, :class:`~rankwise.clicks.RandTop`, a click model such
    as :class:`~rankwise.clicks.PBM`, ...): an unfitted one is cloned and fitted on ``log`` (with ``features``),
    a fitted one gives its ``propensity_`` as it is. The fitted propensity estimator is then the returned
    estimator's ``propensity_estimator_`` -- the whole path from a log is one call::

        ranker = fit_debiased(GBDTRanker("pointwise_squared"), log, features, propensity=RegressionEM())
        ranker.propensity_estimator_.propensity_   # the position bias it corrected for

    With ``check=True`` the estimator's loss must enter the labels linearly -- its
    :class:`~rankwise.losses.LossSpec` declares it (``labels_affine``; where the spec cannot tell, e.g. a
    callable utility, it is checked numerically by :func:`rankwise.theory.ips.labels_enter_linearly`) --,
    the condition under which the IPS risk is unbiased; otherwise an :class:`InputError` says which losses
    qualify. Returns the estimator.
    """
    if check:
        from rankwise.losses.registry import REGISTRY, check_hyper, spec

        loss = getattr(estimator, "loss", None)
        if not isinstance(loss, str) or loss not in REGISTRY:
            raise InputError(f"fit_debiased needs a rankwise loss whose gradient is affine in the labels; the "
                             f"estimator's loss is {loss!r}. Use e.g. loss='op_pairwise' or 'pointwise_squared' "
                             "(or UnbiasedLambdaMART for LambdaMART), or pass check=False")
        sp = spec(loss)
        params = check_hyper(sp.fn, getattr(estimator, "loss_params", None), loss=loss, param="loss_params")
        affine = sp.affine_in_labels(params)
        if affine is None:
            from rankwise.theory.ips import labels_enter_linearly

            affine = labels_enter_linearly(loss, **params)
        if not affine:
            raise InputError(f"loss {loss!r} is not affine in the labels, so its IPS-weighted risk is biased "
                             "(Joachims et al. 2017 need a linearly decomposable loss); use op_pairwise, "
                             "pairwise_squared, pointwise_squared, pointwise_logistic or bregman, or check=False")
    propensity, fitted = _fitted_propensity(propensity, log, features)
    data = click_dataset(log, features, propensity=propensity, clip=clip, candidates=candidates, direct=direct)
    estimator = estimator.fit(data, **fit_kwargs)
    if fitted is not None:
        estimator.propensity_estimator_ = fitted
    return estimator


def split_log_by_query(log: ClickLog | ClickCounts, validation_fraction: float = 0.2, *, random_state=0):
    """Split a log into (train, validation) :class:`ClickCounts` by query: every query, with all its
    sessions, lands on exactly one side (at least one query on each side)."""
    if isinstance(log, ClickLog):
        log = log.counts()
    if not isinstance(log, ClickCounts):
        raise InputError(f"log must be a ClickLog or ClickCounts; got {type(log).__name__}")
    check_params("split_log_by_query", {"validation_fraction": validation_fraction},
                 {"validation_fraction": [Interval("real", 0, 1, closed="neither")]})
    nq = len(log.queries)
    if nq < 2:
        raise InputError(f"splitting a log by query needs at least 2 queries; the log has {nq}")
    is_val = held_out_queries(nq, float(validation_fraction), random_state)

    def part(keep_q):
        qs = np.flatnonzero(keep_q)
        new = np.full(nq, -1, dtype=np.int64)
        new[qs] = np.arange(len(qs))
        rows = keep_q[log.query]
        return ClickCounts(queries=log.queries[qs], sessions=log.sessions[qs], query=new[log.query[rows]],
                           docs=log.docs, doc=log.doc[rows], rank=log.rank[rows], clicks=log.clicks[rows],
                           impressions=log.impressions[rows])

    return part(~is_val), part(is_val)


def ips_dcg(scores, data, *, k: int | None = 10) -> float:
    r"""Counterfactual (IPS) estimate of DCG@k of a scoring on a click data set.

    .. math:: \widehat{\mathrm{DCG}}@k = \frac{1}{|Q|} \sum_q \sum_{i=1}^{\min(k, n_q)}
              \frac{\hat r_{q\pi_q(i)}}{\log_2(1 + i)}

    with π_q the documents of query q sorted by decreasing score (ties: data set order) and
    :math:`\hat r` the labels of ``data`` (:func:`click_dataset` with the propensities, unclipped:
    an unbiased estimate of the relevance of each shown document, so the sum is an unbiased
    estimate of DCG@k over the shown documents; Joachims et al. 2017, §4; Agarwal et al. 2019).
    """
    from rankwise.metrics import dcg

    scores = np.asarray(scores, dtype=np.float64)
    off = np.asarray(data.query_offsets)
    if scores.shape != (off[-1],):
        raise InputError(f"scores has shape {scores.shape}; expected one score per row ({off[-1]},)")
    k = check_k(k, whole=None)
    labels = np.asarray(data.labels, dtype=np.float64)
    qid = np.repeat(np.arange(len(off) - 1), np.diff(off))
    # DCG with linear gain is linear in the labels, and metrics.dcg takes non-negative ones: the doubly robust
    # labels may be negative, so their positive and negative parts are summed apart (one ranking: ties="input")
    total = sum(sign * dcg(scores, part, qid=qid, k=k, gain="linear", ties="input", discount="log2", empty=0.0,
                           reduction="sum")
                for sign, part in ((1.0, np.maximum(labels, 0.0)), (-1.0, np.maximum(-labels, 0.0))) if part.any())
    return float(total) / max(len(off) - 1, 1)


@dataclass
class ClipSelection:
    """Result of :func:`select_clip`: the chosen ``clip`` and the validation score of every candidate
    (``scores[i]`` for ``clips[i]``), the IPS estimate of DCG@k on the held-out queries."""

    clip: float | None
    clips: tuple
    scores: np.ndarray
    k: int | None
    n_train_queries: int
    n_validation_queries: int


def select_clip(estimator, log: ClickLog | ClickCounts, features, propensity,
                clips=(0.1, 0.01, 0.001, None), *, validation_fraction: float = 0.2, random_state=0,
                k: int | None = 10, candidates: bool = False, check: bool = True, direct=None,
                **fit_kwargs) -> ClipSelection:
    r"""Choose the propensity clip on held-out *clicks* (never on relevance labels).

    The log's queries are split into training and validation queries (:func:`split_log_by_query`);
    for every candidate clip τ (``None``: unclipped) a clone of ``estimator`` is fitted by
    :func:`fit_debiased` on the training queries, and scored on the validation queries by
    :func:`ips_dcg`: the model ranks each validation query's shown documents and the gains are their
    *unclipped* IPS relevance estimates from the validation clicks,

    .. math:: \hat\tau = \arg\max_\tau \frac{1}{|Q_v|} \sum_{q \in Q_v} \sum_{i \le k}
              \frac{\hat r_{q \pi^\tau_q(i)}}{\log_2(1 + i)},

    an unbiased estimate of each model's DCG@k over the shown documents (Joachims, Swaminathan &
    Schnabel, WSDM 2017, §4 and §6 use such counterfactual estimates to select hyper-parameters).
    Ties between candidates go to the first listed. The chosen clip is then meant to be used for a
    fit on the whole log, e.g. ``fit_debiased(estimator, log, features, propensity, clip=sel.clip)``.

    Parameters
    ----------
    estimator : rankwise ranker (scikit-learn style, cloned with :func:`sklearn.base.clone`)
    log : ClickLog or ClickCounts
    features : RankingDataset
    propensity : array (R,) or propensity estimator
        Examination propensities over ranks 1..R (estimated, e.g. by regression-EM, or known); or a propensity
        estimator as for :func:`fit_debiased` (unfitted: a clone is fitted once, on the whole ``log``).
    clips : sequence of float or None
        Candidate clips, each in (0, 1] or ``None``; at least one.
    validation_fraction : float in (0, 1)
        Share of the queries held out.
    random_state : int
        Seed of the split.
    k : int or None
        Cut-off of the validation DCG (``None``: the whole list of shown documents).
    candidates, check, **fit_kwargs
        Passed to :func:`fit_debiased` for the training fits.
    direct : array or callable, optional
        Doubly robust training labels (:func:`click_dataset`). A callable (e.g. :func:`direct_relevance`) is
        fitted on the training queries' clicks only, so the validation clicks stay unseen; an array is used
        as it is. The validation score is the same either way (unclipped IPS gains), so the scores of a
        run with ``direct`` and one without are comparable: that is how to choose between IPS and DR labels.

    Returns
    -------
    ClipSelection

    References
    ----------
    T. Joachims, A. Swaminathan, T. Schnabel, "Unbiased Learning-to-Rank with Biased Feedback",
    WSDM 2017.
    """
    from sklearn.base import clone

    clips = tuple(clips) if not isinstance(clips, (str, bytes)) and np.iterable(clips) else clips
    if not isinstance(clips, tuple) or len(clips) == 0:
        raise InputError(f"clips must be a non-empty sequence of floats in (0, 1] or None; got {clips!r}")
    for c in clips:
        _check_clip(c, "select_clip (every candidate of clips)")
    k = check_k(k, whole=None)
    propensity, _ = _fitted_propensity(propensity, log, features)
    train, val = split_log_by_query(log, validation_fraction, random_state=random_state)
    vdata = click_dataset(val, features, propensity=propensity, clip=None)
    vqid = np.repeat(np.asarray(vdata.query_ids), np.diff(vdata.query_offsets))
    scores = np.empty(len(clips))
    m = None if direct is None else _direct_values(direct, train, features, propensity)
    for i, c in enumerate(clips):
        model = fit_debiased(clone(estimator), train, features, propensity, clip=c, check=check,
                             candidates=candidates, direct=m, **fit_kwargs)
        scores[i] = ips_dcg(model.predict(vdata.X, qid=vqid), vdata, k=k)
    best = int(np.argmax(scores))
    return ClipSelection(clip=clips[best], clips=clips, scores=scores, k=k, n_train_queries=len(train.queries),
                         n_validation_queries=len(val.queries))


def _direct_values(direct, log, features, propensity):
    """m(x) for every row of ``features``: ``direct`` as given, or computed by it on ``log``."""
    n_rows = int(np.diff(features.query_offsets).sum())
    m = direct(log, features, propensity) if callable(direct) else direct
    m = np.asarray(m, dtype=np.float64)
    if m.shape != (n_rows,):
        raise InputError(f"direct must give one value per row of the features ({n_rows}); got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise InputError("direct must be finite on every row")
    return np.maximum(m, 0.0)  # a relevance estimate below 0 (a regression's overshoot) is 0


def direct_relevance(log: ClickLog | ClickCounts, features, propensity, *, estimator=None, n_folds: int = 5,
                     n_estimators: int = 100, learning_rate: float = 0.05, num_leaves: int = 31, n_jobs=None,
                     random_state=0) -> np.ndarray:
    r"""A regression m(x) of the relevance from the clicks alone, for doubly robust labels (``direct=``).

    A rankwise model (``estimator``; default a :class:`~rankwise.models.GBDTRanker` with the pointwise squared
    loss -- a least-squares regression tree ensemble -- of ``n_estimators`` trees, ``learning_rate``,
    ``num_leaves``, ``n_jobs`` threads) fitted to the *unclipped* IPS labels of the shown documents
    (:func:`click_dataset`), cross-fitted by query: the queries are split in ``n_folds`` folds and the
    documents of a fold's queries get the prediction of a clone of the model fitted on the other folds, so a
    document's own clicks never enter its m; a row of ``features`` whose query the log does not have gets the
    mean of the fold models. Returns one value per row of ``features``, on the IPS labels' scale (θ relative
    to rank 1). ``estimator`` should regress (a pointwise loss on the labels' scale: its scores are m);
    ``n_estimators``, ``learning_rate``, ``num_leaves`` and ``n_jobs`` configure the default only.
    """
    from sklearn.base import clone

    import pandas as pd

    data = click_dataset(log, features, propensity=propensity, clip=None)
    q_log = np.repeat(np.asarray(data.query_ids), np.diff(data.query_offsets))
    codes, uq = pd.factorize(q_log.astype(str))
    n_q = len(uq)
    check_params(f"direct_relevance ({n_q} logged queries)", {"n_folds": n_folds},
                 {"n_folds": [Interval("int", 2, n_q)]})
    n_folds = int(n_folds)
    if estimator is None:
        from rankwise.models import GBDTRanker

        estimator = GBDTRanker("pointwise_squared", n_estimators=n_estimators, learning_rate=learning_rate,
                               num_leaves=num_leaves, random_state=int(random_state or 0), n_jobs=n_jobs,
                               verbose=False, loss_every=None)
    elif not (hasattr(estimator, "fit") and hasattr(estimator, "predict")):
        raise InputError(f"estimator must be a rankwise model (fit/predict); got {type(estimator).__name__}")
    fold_q = query_folds(n_q, n_folds, random_state)
    fold_of_query = fold_q[pd.factorize(np.asarray(data.query_ids).astype(str))[0]]
    fq = np.repeat(np.asarray(features.query_ids), np.diff(features.query_offsets)).astype(str)
    q_fold = dict(zip(uq, fold_q))
    f_of_row = np.array([q_fold.get(q, -1) for q in fq], dtype=np.int64)
    out = np.zeros(len(fq))
    for j in range(n_folds):
        model = clone(estimator).fit(data.take(np.flatnonzero(fold_of_query != j)))
        for rows, share in ((f_of_row == j, 1.0), (f_of_row < 0, 1.0 / n_folds)):
            if rows.any():
                out[rows] += share * np.asarray(model.predict(features.X[rows], qid=fq[rows]), dtype=np.float64)
    return out
