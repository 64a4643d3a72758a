r"""Counterfactual evaluation of a new ranker from a click log it did not produce.

The question a user asks before an A/B test: *what would the new ranker's DCG@k (or click-through)
be on the traffic of this log?* — answered from the log's clicks by inverse propensity scoring (IPS),
its self-normalised form (SNIPS) and the doubly robust estimator (DR), each with a confidence interval.

Setting and estimand
--------------------
Sessions s = 1..N are independent draws of (query q, result page, clicks): the query from the traffic
distribution P(q), the page from the logging policy π(· | q) (deterministic or stochastic), the clicks
from a position-based model (PBM),

.. math:: P(c_{sd} = 1 \mid d \text{ at rank } k) = \theta_k \, \alpha_{qd}, \qquad \theta_1 = 1,

so :math:`\alpha_{qd}` is the click probability of d at rank 1 (its *relevance* on the scale of
rankwise's propensities θ, relative to rank 1). The new ranker orders the candidates
:math:`D_q` of each query (the rows of ``features``) by decreasing score, ties by row order; with rank
weights :math:`\lambda(k)` — :math:`1/\log_2(1+k)` for ``metric="dcg"``, :math:`\theta_k` for
``metric="ctr"``, 0 beyond the cutoff k — the estimand is

.. math:: V = E_{q \sim P(q)} \sum_{d \in D_q} \lambda(\mathrm{rank}_{new}(d)) \, \alpha_{qd},

the new ranker's expected DCG@k with gains α (``"dcg"``), or its expected number of clicks per
session on a page of its top k under the same PBM (``"ctr"``), on the log's query distribution.

Estimators
----------
With :math:`\rho_{qd}` the *exposure* of a displayed document — its expected examination under the
logging policy, :math:`\rho_{qd} = \sum_k P_\pi(\mathrm{rank}(d) = k \mid q)\,\theta_k` (the policy-aware
propensity of Oosterhuis & de Rijke, SIGIR 2020; for a deterministic logger
:math:`\theta_{\mathrm{rank}_{log}(d)}`, Joachims et al., WSDM 2017) — and
:math:`\lambda_d = \lambda(\mathrm{rank}_{new}(d))`, every estimator is a mean of per-session values:

.. math::

   \hat V_{IPS} = \frac1N \sum_s Y_s, \quad Y_s = \sum_{d \in s} \lambda_d \frac{c_{sd}}{\rho_{qd}};
   \qquad
   \hat V_{SNIPS} = \frac{\sum_s Y_s}{\sum_s w_s}, \quad
   w_s = \frac{1}{\Lambda_q} \sum_{d \in s} \lambda_d \frac{\theta_{\mathrm{rank}_{log}(d)}}{\rho_{qd}};

.. math::

   \hat V_{DR} = \frac1N \sum_s \Bigl[\sum_{d \in D_q} \lambda_d \hat m_{qd}
        + \sum_{d \in s} \lambda_d \frac{c_{sd} - \theta_{\mathrm{rank}_{log}(d)} \hat m_{qd}}{\rho_{qd}}\Bigr]

(sums over :math:`d \in s` run over the documents displayed in session s).

- *IPS* is unbiased when every document the new ranker puts in its top k has :math:`\rho_{qd} > 0`
  (exposure under the logger) and ρ and θ are correct, since :math:`E[c_{sd}/\rho_{qd}] = \alpha_{qd}`.
  A deterministic top-k logger has ρ = 0 below rank k: documents never displayed are missed
  (item-selection bias), which only a stochastic logger (or a full-list page) removes.
- *SNIPS*: the control variate :math:`w_s` has expectation
  :math:`E[w_s \mid q] = \sum_{d \in D_q:\, \rho_{qd} > 0} \lambda_d / \Lambda_q` with
  :math:`\Lambda_q = \sum_{d \in D_q} \lambda_d` over *every* candidate of q, because
  :math:`E_\pi[\theta_{\mathrm{rank}_{log}(d)}] = \rho_{qd}` (θ of an undisplayed document is 0): exactly 1
  for every query under IPS's own condition (ρ > 0 wherever λ > 0); :math:`w_s = 1` where
  :math:`\Lambda_q = 0`. The ratio is consistent (bias O(1/N)) and cancels the noise of the logging
  policy's draws (Swaminathan & Joachims, NeurIPS 2015, with this per-document weight). With a
  deterministic logger that shows every candidate, every :math:`w_s = 1` and SNIPS is IPS exactly —
  there is no logging randomness to normalise; where ρ = 0 on part of the new top k (a deterministic
  top-k page), :math:`w_s < 1` is a constant of the query and SNIPS rescales its IPS term by it, a
  bias of its own (neither estimator sees those documents).
- *DR* (Dudík, Langford & Li, ICML 2011; for position bias Oosterhuis, TOIS 2023): a direct model
  :math:`\hat m_{qd}` of α for every candidate plus IPS of the residuals; unbiased when ρ > 0 on the new
  top k (for *any* m̂, provided m̂ is independent of the clicks it corrects: fit it on other data or
  cross-fit it, as :func:`rankwise.clicks.direct_relevance` does), or when m̂ = α where ρ = 0; its
  variance is small when m̂ is close to α.

Intervals. Sessions are i.i.d., so ``interval="normal"`` is the mean ± z·stderr with the sample
standard deviation of the per-session values (for SNIPS the delta method:
:math:`\mathrm{se} = \sqrt{\sum_s (Y_s - \hat V w_s)^2 / (N(N-1))} / \bar w`);
``interval="bootstrap"`` resamples the sessions (:func:`rankwise.report.significance.bootstrap_means`)
and takes percentile intervals (of the ratio of resampled means for SNIPS). ``stderr`` is always the
analytic one.

References
----------
T. Joachims, A. Swaminathan, T. Schnabel. "Unbiased learning-to-rank with biased feedback." WSDM 2017.
H. Oosterhuis, M. de Rijke. "Policy-aware unbiased learning to rank for top-k rankings." SIGIR 2020.
H. Oosterhuis. "Doubly robust estimation for correcting position bias in click feedback for unbiased
learning to rank." ACM TOIS 41(3), 2023.
M. Dudík, J. Langford, L. Li. "Doubly robust policy evaluation and learning." ICML 2011.
A. Swaminathan, T. Joachims. "The self-normalized estimator for counterfactual learning." NeurIPS 2015.
S. Li, Y. Abbasi-Yadkori, B. Kveton, S. Muthukrishnan, V. Vinay, Z. Wen. "Offline evaluation of
ranking policies with click models." KDD 2018.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankwise._validation import Interval, check_k, check_params
from rankwise.data.clicklog import ClickLog
from rankwise.errors import InputError

__all__ = ["CounterfactualEstimate", "counterfactual_estimates", "rank_weights", "expected_metric",
           "COUNTERFACTUAL_METHODS"]

COUNTERFACTUAL_METHODS = ("ips", "snips", "dr")
_METRICS = ("dcg", "ctr")


@dataclass(frozen=True)
class CounterfactualEstimate:
    """One estimator's answer: ``estimate`` with its standard error and ``confidence`` interval
    ``[ci_low, ci_high]`` (``interval``: "normal" or "bootstrap") over ``n`` sessions."""

    method: str
    estimate: float
    stderr: float
    ci_low: float
    ci_high: float
    n: int
    confidence: float
    interval: str

    def covers(self, value: float) -> bool:
        """Whether the interval contains ``value``."""
        return bool(self.ci_low <= value <= self.ci_high)


def _check_theta(propensity, n_ranks, what):
    theta = np.asarray(propensity, dtype=np.float64)
    if theta.ndim != 1 or theta.size == 0 or not np.all(np.isfinite(theta)) or np.any(theta <= 0):
        raise InputError("propensity must be a 1-d array of positive finite examination probabilities θ per rank; "
                         f"got {propensity!r:.80}")
    if not np.isclose(theta[0], 1.0):
        raise InputError(f"propensity must be relative to rank 1 (θ[0] == 1, rankwise's form); got θ[0] = {theta[0]:g}")
    if len(theta) < n_ranks:
        raise InputError(f"propensity has {len(theta)} ranks but {what} needs {n_ranks}")
    return theta


def _new_ranks(features, scores):
    """1-based rank of every row of ``features`` in its query under ``scores`` (decreasing, ties by row order)."""
    from rankwise.data import RankingDataset

    if not isinstance(features, RankingDataset):
        raise InputError(f"features must be a rankwise.data.RankingDataset; got {type(features).__name__}")
    off = np.asarray(features.query_offsets, dtype=np.int64)
    n = int(off[-1])
    s = np.asarray(scores, dtype=np.float64)
    if s.shape != (n,):
        raise InputError(f"scores must hold one score per row of features ({n},); got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise InputError("scores must be finite (the new ranker scored a row NaN or inf)")
    qrow = np.repeat(np.arange(len(off) - 1), np.diff(off))
    order = np.lexsort((np.arange(n), -s, qrow))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - off[qrow[order]] + 1
    return rank, qrow


def rank_weights(features, scores, *, k: int | None = 10, metric: str = "dcg", propensity=None) -> np.ndarray:
    r"""λ(rank_new(d)) for every row of ``features``: the weight a linear rank metric gives the row's
    relevance when the new ranker (``scores``, one per row) orders each query.

    ``metric="dcg"``: :math:`1/\log_2(1 + k)`; ``"ctr"``: :math:`\theta_k` (``propensity``, the expected
    clicks of a page under the PBM); 0 below the cutoff ``k`` (``None``: the whole list). Ties by row order.
    """
    if metric not in _METRICS:
        raise InputError(f"metric must be one of {_METRICS}; got {metric!r}")
    k = check_k(k, whole=None)
    rank, _ = _new_ranks(features, scores)
    if metric == "dcg":
        lam = 1.0 / np.log2(1.0 + rank)
    else:
        if propensity is None:
            raise InputError("metric='ctr' needs the propensities θ per rank (propensity=)")
        longest = int(rank.max(initial=1)) if k is None else min(k, int(rank.max(initial=1)))
        theta = _check_theta(propensity, longest, f"a page of {longest} results")
        lam = np.where(rank <= len(theta), theta[np.minimum(rank, len(theta)) - 1], 0.0)
    if k is not None:
        lam = np.where(rank <= k, lam, 0.0)
    return lam


def expected_metric(features, scores, relevance, *, k: int | None = 10, metric: str = "dcg", propensity=None,
                    query_weights=None) -> float:
    r"""The estimand V of the module docstring computed from known relevance (a simulation's truth).

    .. math:: V = \sum_q P(q) \sum_{d \in D_q} \lambda(\mathrm{rank}_{new}(d))\, \alpha_{qd}

    ``relevance``: α per row of ``features`` (the click probability at rank 1, e.g.
    :attr:`ClickSimulation.relevance`); ``query_weights``: P(q) per query of ``features`` (default
    uniform, the traffic of :func:`~rankwise.clicks.simulate_clicks_protocol`).
    """
    lam = rank_weights(features, scores, k=k, metric=metric, propensity=propensity)
    alpha = np.asarray(relevance, dtype=np.float64)
    if alpha.shape != lam.shape or not np.all(np.isfinite(alpha)):
        raise InputError(f"relevance must hold one finite value per row of features {lam.shape}; got shape {alpha.shape}")
    nq = features.n_queries
    per_q = np.bincount(np.repeat(np.arange(nq), np.diff(features.query_offsets)), weights=lam * alpha, minlength=nq)
    if query_weights is None:
        return float(per_q.mean())
    w = np.asarray(query_weights, dtype=np.float64)
    if w.shape != (nq,) or np.any(w < 0) or not np.isfinite(w).all() or w.sum() <= 0:
        raise InputError(f"query_weights must be {nq} non-negative weights with a positive sum; got shape {w.shape}")
    return float(per_q @ w / w.sum())


def _session_sum(log, values):
    return np.add.reduceat(values, log.session_offsets[:-1]) if len(values) else np.zeros(log.n_sessions)


def _normal(method, n, estimate, se, confidence):
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2.0))
    return CounterfactualEstimate(method, float(estimate), float(se), float(estimate - z * se),
                                  float(estimate + z * se), int(n), float(confidence), "normal")


def _session_values(log, features, scores, *, propensity, exposure, k, metric, methods, direct) -> dict:
    """Per-session values of each method: ``ips`` and ``dr`` arrays (N,) whose means are the
    estimates; ``snips`` the pair (Y, w) of the ratio (module docstring)."""
    from rankwise.clicks.ips import _direct_values, feature_rows

    theta = _check_theta(propensity, log.max_rank, f"the log's longest page ({log.max_rank} results)")
    lam_f = rank_weights(features, scores, k=k, metric=metric, propensity=theta)
    f_row = feature_rows(log, features)[log.pair]  # features row of every log row
    theta_log = theta[log.ranks - 1]
    if exposure is None:
        rho = theta_log
    else:
        rho = np.asarray(exposure, dtype=np.float64)
        if rho.shape != (len(log.doc),):
            raise InputError(f"exposure must hold one value per row of the log ({len(log.doc)},); got shape {rho.shape}")
        if not np.all(np.isfinite(rho) & (rho > 0)):
            i = int(np.flatnonzero(~(np.isfinite(rho) & (rho > 0)))[0])
            raise InputError(f"exposure must be positive and finite on every displayed row (a shown document has "
                             f"positive expected examination); row {i} has {rho[i]!r}")
    lam = lam_f[f_row]
    c = log.clicked.astype(np.float64)
    n_fq = features.n_queries
    qrow_f = np.repeat(np.arange(n_fq), np.diff(features.query_offsets))
    sess_q = qrow_f[f_row[log.session_offsets[:-1]]]  # features query of every session
    Y = _session_sum(log, lam * c / rho)
    cols = {}
    if "ips" in methods:
        cols["ips"] = Y
    if "snips" in methods:
        Lam = np.bincount(qrow_f, weights=lam_f, minlength=n_fq)[sess_q]  # Λ_q over every candidate of q
        raw = _session_sum(log, lam * theta_log / rho)
        cols["snips"] = (Y, np.where(Lam > 0, raw / np.where(Lam > 0, Lam, 1.0), 1.0))
    if "dr" in methods:
        m = _direct_values(direct, log, features, theta)
        dm_q = np.bincount(qrow_f, weights=lam_f * m, minlength=n_fq)
        cols["dr"] = dm_q[sess_q] + _session_sum(log, lam * (c - theta_log * m[f_row]) / rho)
    return cols


def counterfactual_estimates(log: ClickLog, features, scores, *, propensity, exposure=None, k: int | None = 10,
                             metric: str = "dcg", methods=COUNTERFACTUAL_METHODS, direct=None,
                             confidence: float = 0.95, interval: str = "normal", n_bootstrap: int = 2000,
                             random_state=0) -> dict:
    r"""IPS, SNIPS and doubly robust estimates of a new ranker's DCG@k or click-through from a click log.

    See the module docstring for the estimand, the estimators and their assumptions.

    Parameters
    ----------
    log : ClickLog
        Sessions (result pages with clicks) logged by another policy; every (query, doc) of it must
        have a row in ``features``.
    features : RankingDataset
        The candidates :math:`D_q` of every query (its ``doc_ids`` name the log's documents, or its row
        numbers when it has none, as :func:`~rankwise.clicks.click_dataset`).
    scores : array (n_rows,)
        The new ranker's score of every row of ``features`` (e.g. ``ranker.predict(features.X)``).
    propensity : array (R,)
        Examination θ per rank 1..R relative to rank 1 (θ[0] == 1), R at least the log's longest page
        (and k for ``metric="ctr"``).
    exposure : array (n_log_rows,), optional
        ρ of every displayed row of ``log`` (in the log's row order): the logging policy's expected
        examination of that (query, doc), :math:`\sum_k P_\pi(\mathrm{rank}(d)=k \mid q)\,\theta_k` with the
        same θ. Default: :math:`\theta_{\mathrm{rank}_{log}}` (a deterministic logger).
    k : int or None, default 10
        Cutoff of the new ranker's list; ``None``: the whole list.
    metric : {"dcg", "ctr"}
    methods : iterable of {"ips", "snips", "dr"}
    direct : array (n_rows,) or callable, optional
        The direct model of DR: :math:`\hat m_{qd}` (relevance on θ's scale, values below 0 taken as 0)
        for every row of ``features``, or ``direct(log, features, propensity)`` returning it (the form of
        :func:`~rankwise.clicks.click_dataset`'s ``direct=``; e.g. :func:`~rankwise.clicks.direct_relevance`,
        cross-fitted by query). Needed by ``"dr"``.
    confidence : float, default 0.95
    interval : {"normal", "bootstrap"}
    n_bootstrap : int
        Resamples of the sessions for ``interval="bootstrap"``.
    random_state : int

    Returns
    -------
    dict
        ``{method: CounterfactualEstimate}`` in the order of ``methods``.
    """
    if not isinstance(log, ClickLog):
        raise InputError(f"log must be a ClickLog (sessions: the intervals resample them); got {type(log).__name__}")
    methods = tuple(methods)
    bad = [m for m in methods if m not in COUNTERFACTUAL_METHODS]
    if bad or not methods:
        raise InputError(f"methods must be a non-empty subset of {COUNTERFACTUAL_METHODS}; got {methods!r}")
    if interval not in ("normal", "bootstrap"):
        raise InputError(f"interval must be 'normal' or 'bootstrap'; got {interval!r}")
    check_params("counterfactual_estimates", {"confidence": confidence},
                 {"confidence": [Interval("real", 0, 1, closed="neither")]})
    if log.n_sessions < 2:
        raise InputError(f"log needs at least 2 sessions for a standard error; got {log.n_sessions}")
    if "dr" in methods and direct is None:
        raise InputError("method 'dr' needs a direct model of the relevance (direct=, an array or a callable)")
    cols = _session_values(log, features, scores, propensity=propensity, exposure=exposure, k=k, metric=metric,
                           methods=methods, direct=direct)
    out = {}
    n = log.n_sessions
    for meth in methods:
        if meth == "snips":
            Yv, w = cols[meth]
            if w.sum() <= 0:
                raise InputError("SNIPS is undefined on this log: no session displays a document of the new ranker's "
                                 "top k (every control variate w_s is 0); use IPS or DR")
            est = Yv.sum() / w.sum()
            se = np.sqrt(np.sum((Yv - est * w) ** 2) / (n * (n - 1))) / w.mean()
        else:
            est = cols[meth].mean()
            se = cols[meth].std(ddof=1) / np.sqrt(n)
        out[meth] = _normal(meth, n, est, se, confidence)
    if interval == "bootstrap":
        from rankwise.report.significance import bootstrap_means

        names = [m for m in methods if m != "snips"]
        mat = [cols[m] for m in names] + ([*cols["snips"]] if "snips" in methods else [])
        means = bootstrap_means(np.column_stack(mat), n_resamples=n_bootstrap, random_state=random_state)
        tail = (1.0 - confidence) / 2.0
        for meth in methods:
            boot = means[:, -2] / means[:, -1] if meth == "snips" else means[:, names.index(meth)]
            lo, hi = np.quantile(boot, [tail, 1.0 - tail])
            e = out[meth]
            out[meth] = CounterfactualEstimate(meth, e.estimate, e.stderr, float(lo), float(hi), e.n, e.confidence,
                                               "bootstrap")
    return out
