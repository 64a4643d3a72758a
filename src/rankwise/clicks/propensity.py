r"""Examination propensities (position bias) from click logs: one contract, four estimators.

Under the position-based model a click needs examination and relevance,
:math:`P(C = 1 \mid d, k) = \theta_k \, \gamma_d`, and the propensity of rank k is θ_k. Clicks alone
identify θ only up to a common factor, so every estimator here gives *relative* propensities
:math:`\theta_k / \theta_1` (rank 1 = 1), the quantity inverse-propensity scoring needs.

The contract (every class of :data:`PROPENSITY_ESTIMATORS`, and the click models
:class:`~rankwise.clicks.PBM` / :class:`~rankwise.clicks.UBM`): ``fit(log, *, features=None)`` returns the
estimator; the fitted ``propensity_`` is a float64 array over ranks 1..R with ``propensity_[0] == 1``;
parameters are declared in ``_parameter_constraints`` and checked at the start of ``fit``;
``get_params``/``set_params``/``sklearn.clone`` and ``repr`` (non-default parameters) come from
scikit-learn; ``save(path)`` and :func:`rankwise.models.load` round-trip a fitted estimator (the models'
``.npz`` format, no pickle). ``identifiability_`` (:func:`identifiability`) is set by every ``fit``.

With interventions (randomised result pages):

- :class:`RandTop` — RandTop-n: the top n results shown in a uniformly random order;
  the click-through rate at rank k is then θ_k × (the same mean relevance), so
  :math:`\theta_k/\theta_1 = \mathrm{CTR}_k / \mathrm{CTR}_1` (Joachims, Swaminathan & Schnabel,
  WSDM 2017, §6; Wang et al., WSDM 2018, §3).
- :class:`RandPair` — RandPair / swap: in each session of the experiment the
  documents at the pivot rank and at one other rank k are shown in a random order (each order with
  probability 1/2); :math:`\theta_k/\theta_{pivot}` = clicks at k / clicks at the pivot over those
  sessions (Joachims et al. 2017, swap intervention; Wang et al. 2018, RandPair).

Without interventions:

- :class:`RegressionEM` — Wang, Golbandi, Bendersky, Metzler & Najork, "Position bias estimation
  for unbiased learning to rank in personal search", WSDM 2018: EM on the PBM where the relevance
  γ = f(x) is a regression function of the features (a rankwise GBDT), so that relevance is shared
  across documents and the confounding of rank and relevance is broken.
- :class:`InterventionHarvesting` — Agarwal, Zaitsev, Wang, Li, Najork & Joachims, "Estimating
  position bias without intrusive interventions", WSDM 2019: (query, doc) pairs that different
  rankings put at ranks k and k' form interventional sets; the AllPairs estimator fits θ and the
  sets' relevances by maximum likelihood.

Identifiability. Without interventions θ is identified by documents seen at several ranks (several
rankers, or a stochastic logger); with one deterministic logger only through what the relevance model
cannot express (Chen et al., "Identifiability matters", ICML 2024). :func:`identifiability` gives the
share of (query, document) pairs of a log seen at two or more ranks: 0 for one deterministic logger.

The functions of the previous release (``propensities_randtop``, ``propensities_randpair``,
``regression_em``, ``regression_em_log``, ``harvest_propensities``, ``pbm_propensities``, ``rank_table``)
still work, with a ``DeprecationWarning`` naming their replacement.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator

from rankwise._validation import Interval, Options, check_params, set_deprecated
from rankwise.data.clicklog import ClickCounts, ClickLog
from rankwise.errors import InputError, NotFittedError
from rankwise.models import persistence

__all__ = ["PropensityEstimator", "RandTop", "RandPair", "RegressionEM", "InterventionHarvesting",
           "PROPENSITY_ESTIMATORS", "identifiability",
           "propensities_randtop", "propensities_randpair", "regression_em", "regression_em_log", "rank_table",
           "RegressionEMResult", "harvest_propensities", "HarvestResult", "pbm_propensities"]

#: every propensity estimator class by name (filled as they are defined)
PROPENSITY_ESTIMATORS: dict[str, type] = {}


def _check_log(log, *, counts: bool = False):
    kinds = (ClickLog, ClickCounts) if counts else (ClickLog,)
    if not isinstance(log, kinds):
        what = "a rankwise.data.ClickLog or ClickCounts" if counts else "a rankwise.data.ClickLog (sessions)"
        raise InputError(f"log must be {what}; got {type(log).__name__}")
    if log.n_sessions == 0:
        raise InputError("log has no session")


def _table(log):
    """``(pair, rank, clicks, impressions)``: one row per (query, doc, rank) of a ClickLog or ClickCounts."""
    c = log if isinstance(log, ClickCounts) else log.counts()
    return c.pair, c.rank, c.clicks, c.impressions


def identifiability(log: ClickLog | ClickCounts, *, max_rank: int | None = None) -> float:
    """Share of the (query, document) pairs of ``log`` (shown in the top ``max_rank``; default every rank)
    that are seen at two or more different ranks.

    These pairs are the interventions a log holds without randomisation (Agarwal et al., WSDM 2019): 0
    for one deterministic logging ranker, where position bias is identified only through what a relevance
    model fails to express (Chen et al., ICML 2024); close to 1 under a stochastic logger.
    """
    _check_log(log, counts=True)
    pair, rank, _, _ = _table(log)
    if max_rank is not None:
        keep = rank <= int(max_rank)
        pair, rank = pair[keep], rank[keep]
    if len(pair) == 0:
        return 0.0
    R = int(rank.max()) + 1  # (pair, rank) rows of counts split by row_data repeat: count each once
    ranks_per_pair = np.bincount(np.unique(pair * R + rank) // R, minlength=log.n_pairs)
    shown = ranks_per_pair > 0
    return float(np.count_nonzero(ranks_per_pair >= 2) / np.count_nonzero(shown))


def _nested_state(model, prefix: str):
    """A rankwise model inside an estimator's saved state: ``({class, params, state}, arrays under prefix/)``."""
    state, arrays = model._get_state()
    meta = {"class": type(model).__name__, "params": model._get_params_state(), "state": state}
    return meta, {f"{prefix}/{k}": v for k, v in arrays.items()}


def _nested_model(meta: dict, arrays: dict, prefix: str):
    cls = persistence.MODEL_REGISTRY[meta["class"]]
    model = cls(**cls._params_from_state(meta["params"]))
    model._set_state(meta["state"], {k[len(prefix) + 1:]: v for k, v in arrays.items()
                                     if k.startswith(prefix + "/")})
    return model


class PropensityEstimator(persistence.ParamsInFile, BaseEstimator):
    """Base class of the propensity estimators (the contract is in the module docstring)."""

    _parameter_constraints: dict = {}
    #: old parameter name -> new name (``_validation.set_deprecated``)
    _deprecated_params: dict = {}
    #: fitted arrays / JSON-able scalars written by ``save``
    _state_arrays: tuple[str, ...] = ("propensity_",)
    _state_scalars: tuple[str, ...] = ("identifiability_", "max_rank_")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            persistence.register_model(cls)
            PROPENSITY_ESTIMATORS[cls.__name__] = cls

    # -- parameters ---------------------------------------------------------------------------
    def _init_deprecated(self, old: dict) -> None:
        for name, value in old.items():
            set_deprecated(self, name, value, self._deprecated_params)

    def set_params(self, **params):
        for name in [n for n in params if n in self._deprecated_params]:
            set_deprecated(self, name, params.pop(name), self._deprecated_params)
        return super().set_params(**params)

    def _validate_params(self) -> None:
        check_params(type(self).__name__, self.get_params(deep=False), self._parameter_constraints)

    # -- fitting ------------------------------------------------------------------------------
    def fit(self, log, *, features=None):
        """Estimate the propensities from ``log``; returns the estimator. ``features`` (a
        :class:`~rankwise.data.RankingDataset`) is used by the estimators that model relevance."""
        self._validate_params()
        self._fit(log, features)
        self.identifiability_ = identifiability(log)
        self.max_rank_ = int(len(self.propensity_))
        return self

    def _fit(self, log, features):  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_is_fitted(self) -> None:
        if not hasattr(self, "propensity_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted; call fit(log) first")

    # -- persistence --------------------------------------------------------------------------
    def _get_state(self):
        state = {k: getattr(self, k) for k in self._state_scalars if hasattr(self, k)}
        arrays = {k: np.asarray(getattr(self, k)) for k in self._state_arrays if hasattr(self, k)}
        return state, arrays

    def _set_state(self, state, arrays):
        for k in self._state_scalars:
            if k in state:
                setattr(self, k, state[k])
        for k in self._state_arrays:
            if k in arrays:
                setattr(self, k, np.asarray(arrays[k]))
        p = np.asarray(self.propensity_, dtype=np.float64)
        if p.ndim != 1 or len(p) == 0 or p[0] != 1.0:
            raise ValueError("propensity_ must be a non-empty 1-d array with propensity_[0] == 1")

    def save(self, path):
        """Save the fitted estimator (JSON + arrays in one ``.npz``; no pickle); load it with
        :func:`rankwise.models.load`."""
        return persistence.save(self, path)


# ------------------------------------------------------------------------------ interventions
class RandTop(PropensityEstimator):
    r"""Relative propensities θ_k/θ_1, k = 1..n, from a RandTop-n experiment.

    .. math:: \hat\theta_k / \hat\theta_1 = \frac{\sum_s c_k^{(s)} / \#\{s: k \text{ shown}\}}
              {\sum_s c_1^{(s)} / \#\{s: 1 \text{ shown}\}}

    over sessions whose top n results were shown in a uniformly random order (every session of the log: a
    :class:`~rankwise.data.ClickLog`, or its aggregate :class:`~rankwise.data.ClickCounts`). Sessions with fewer
    than n results bias the ratio (the ranks below their end see only the longer pages' documents): log the
    experiment on queries with at least n results.

    Parameters
    ----------
    n : int, optional
        The randomised ranks (default: the longest page).

    Attributes
    ----------
    propensity_ : ndarray (n,)
    clicks_, impressions_ : ndarray (n,)
        Clicks and impressions per rank.

    References
    ----------
    T. Joachims, A. Swaminathan, T. Schnabel. "Unbiased learning-to-rank with biased feedback."
    WSDM 2017. X. Wang, N. Golbandi, M. Bendersky, D. Metzler, M. Najork. "Position bias
    estimation for unbiased learning to rank in personal search." WSDM 2018.
    """

    _parameter_constraints = {"n": [None, Interval("int", 1)]}
    _state_arrays = ("propensity_", "clicks_", "impressions_")

    def __init__(self, n: int | None = None):
        self.n = n

    def _fit(self, log, features):
        if isinstance(log, ClickCounts):  # aggregated: clicks and impressions per rank from the counts
            _check_log(log, counts=True)
            n = log.max_rank if self.n is None else int(self.n)
            if not 1 <= n <= log.max_rank:
                raise InputError(f"n must be in [1, {log.max_rank}] (the longest page); got {n}")
            keep = log.rank <= n
            r = log.rank[keep] - 1
            clicks = np.bincount(r, weights=log.clicks[keep], minlength=n)
            shown = np.bincount(r, weights=log.impressions[keep], minlength=n)
        else:
            n, r, keep = _top_ranks(log, self.n, "n", 1)
            clicks = np.bincount(r[keep], weights=log.clicked[keep], minlength=n)
            shown = np.bincount(r[keep], minlength=n).astype(np.float64)
        if clicks[0] == 0:
            raise InputError("no click at rank 1 in the experiment: the relative propensities are undefined")
        ctr = clicks / np.maximum(shown, 1)
        self.clicks_, self.impressions_ = clicks, shown
        self.propensity_ = ctr / ctr[0]


class RandPair(PropensityEstimator):
    r"""Relative propensities from a RandPair (swap) experiment.

    ``log.session_data[pair_rank]`` gives, per session, the rank k whose document was shown in a
    random order with the pivot's (0 for a session without intervention). Then

    .. math:: \hat\theta_k / \hat\theta_{pivot} = \frac{\sum_{s: k_s = k} c_k^{(s)}}{\sum_{s: k_s = k} c_{pivot}^{(s)}},

    and ``propensity_`` is that ratio divided by rank 1's (with ``pivot=1``, the ratio itself).

    The estimate depends on the log only through the clicks at the pivot and at rank k of the sessions of
    each intervention k, so ``log`` may also be aggregated: a :class:`~rankwise.data.ClickCounts` whose
    ``row_data[pair_rank]`` holds the intervention of the sessions counted in each row
    (``session_log.counts(by=pair_rank)``, or drawn directly by a simulation); the estimate is then the
    same as on the session log. Every session of an intervention must show both the pivot and rank k
    (``fit`` checks: on a session log, each randomised session's length; on counts, that the impressions at
    the pivot and at k agree per intervention).

    Parameters
    ----------
    pair_rank : str
        The ``session_data`` entry (``row_data`` of counts) holding each session's randomised rank.
    pivot : int
        The rank every randomised rank was paired with.
    max_rank : int, optional
        Estimate ranks 1..max_rank (default: the longest page). Every one of them must have been
        randomised with the pivot (with a click at the pivot), or ``fit`` says which were not.

    Attributes
    ----------
    propensity_ : ndarray (max_rank,)
    pivot_ratio_ : ndarray (max_rank,)
        θ_k/θ_pivot.
    pair_sessions_ : ndarray (max_rank,)
        Sessions that randomised each rank with the pivot.
    """

    _parameter_constraints = {"pair_rank": ["string"], "pivot": [Interval("int", 1)],
                              "max_rank": [None, Interval("int", 2)]}
    _state_arrays = ("propensity_", "pivot_ratio_", "pair_sessions_")

    def __init__(self, pair_rank: str = "pair_rank", *, pivot: int = 1, max_rank: int | None = None):
        self.pair_rank = pair_rank
        self.pivot = pivot
        self.max_rank = max_rank

    def _intervention_rows(self, log):
        """``(k per row, rank, clicks, impressions, sessions per intervention)`` of a session log or of counts."""
        pair_rank, pivot, R = self.pair_rank, self.pivot, log.max_rank
        counts = isinstance(log, ClickCounts)
        where = "row_data" if counts else "session_data"
        data = log.row_data if counts else log.session_data
        if pair_rank not in data:
            raise InputError(f"log.{where} has no {pair_rank!r} (the rank paired with the pivot in each "
                             f"session, 0 for none); it has {sorted(data)}")
        k = np.asarray(data[pair_rank]).astype(np.int64)
        if not 1 <= pivot <= R:
            raise InputError(f"pivot must be a rank in [1, {R}]; got {pivot}")
        if np.any((k < 0) | (k > R)):
            raise InputError(f"{where}[{pair_rank!r}] must hold ranks in [0, {R}]")
        if counts:
            at_pivot = (k > 0) & (log.rank == pivot)
            sessions = np.bincount(k[at_pivot], weights=log.impressions[at_pivot], minlength=R + 1)
            at_k = (k > 0) & (log.rank == k)
            shown_k = np.bincount(k[at_k], weights=log.impressions[at_k], minlength=R + 1)
            bad = np.flatnonzero(shown_k[1:] != sessions[1:]) + 1
            bad = bad[bad != pivot]
            if len(bad):
                raise InputError(f"the sessions pairing rank {bad[0]} with the pivot (rank {pivot}) show rank "
                                 f"{bad[0]} {shown_k[bad[0]]:g} times and the pivot {sessions[bad[0]]:g} times: every "
                                 "session of the experiment must show both")
            return k, log.rank, log.clicks, sessions[1:]
        short = np.flatnonzero((k > 0) & (log.sizes < np.maximum(k, pivot)))
        if len(short):
            s = int(short[0])
            raise InputError(f"session {s} pairs rank {k[s]} with the pivot (rank {pivot}) but shows "
                             f"{log.sizes[s]} documents: every session of the experiment must show both")
        return (np.repeat(k, log.sizes), log.ranks, log.clicked.astype(np.float64),
                np.bincount(k, minlength=R + 1)[1:].astype(np.float64))

    def _ratios(self, log):
        """θ_k/θ_pivot over ranks 1..longest page (NaN where no session randomised k with a pivot click),
        and the sessions randomising each rank."""
        _check_log(log, counts=True)
        k_row, r, c, sessions = self._intervention_rows(log)
        R, pivot = log.max_rank, self.pivot
        at_k = (k_row > 0) & (r == k_row)
        at_pivot = (k_row > 0) & (r == pivot)
        num = np.bincount(k_row[at_k], weights=c[at_k], minlength=R + 1)
        den = np.bincount(k_row[at_pivot], weights=c[at_pivot], minlength=R + 1)
        out = np.full(R, np.nan)
        ok = den > 0
        out[ok[1:]] = (num / np.where(ok, den, 1))[1:][ok[1:]]
        out[pivot - 1] = 1.0
        return out, sessions

    def _fit(self, log, features):
        ratio, sessions = self._ratios(log)
        R = len(ratio) if self.max_rank is None else int(self.max_rank)
        if R > len(ratio):
            raise InputError(f"max_rank must be in [2, {len(ratio)}] (the longest page); got {R}")
        ratio, sessions = ratio[:R], sessions[:R]
        missing = np.flatnonzero(~np.isfinite(ratio)) + 1
        if len(missing):
            raise InputError(f"ranks {missing.tolist()} were never randomised with the pivot (rank {self.pivot}) in a "
                             "session with a click at the pivot: their propensity is not identified; log more "
                             "randomised sessions or pass max_rank to estimate the ranks above them")
        if not ratio[0] > 0:
            raise InputError("no click at rank 1 in the sessions pairing it with the pivot: propensities relative "
                             "to rank 1 are undefined")
        self.pivot_ratio_, self.pair_sessions_ = ratio, sessions
        self.propensity_ = ratio / ratio[0]


def _top_ranks(log, n, name, lo):
    """Check ``log`` and the rank cut ``n`` (None: the longest page) in [lo, longest page];
    return n, the 0-based rank of every row and the mask of the rows shown in the top n."""
    _check_log(log)
    n = log.max_rank if n is None else int(n)
    if not lo <= n <= log.max_rank:
        raise InputError(f"{name} must be in [{lo}, {log.max_rank}] (the longest page); got {n}")
    r = log.ranks - 1
    return n, r, r < n


# ----------------------------------------------------------------------------- regression-EM
@dataclass
class RegressionEMResult:
    """Output of the deprecated :func:`regression_em`: ``propensity`` (θ_k/θ_1, k = 1..R), ``theta`` (the
    unnormalised θ), ``relevance`` (γ = f(x) per input row), the fitted ``relevance_model`` (with
    ``cross_fit`` the list of the folds' models, the model of fold j fitted on the other folds' queries),
    ``n_iter`` and the per-iteration mean log-likelihood ``loglik``. :class:`RegressionEM` has them as
    ``propensity_``, ``theta_``, ``relevance_``, ``relevance_model_``, ``n_iter_`` and ``loglik_``."""

    propensity: np.ndarray
    theta: np.ndarray
    relevance: np.ndarray
    relevance_model: object
    n_iter: int
    loglik: list


def _raw_score(model, X):
    """The raw score of a relevance regression: a rankwise ranker's ``predict`` or a LightGBM Booster's."""
    return model.predict(X) if hasattr(model, "n_estimators_") else model.predict(X, raw_score=True)


class _StagedBooster:
    """The relevance regression of a warm-started regression-EM: a constant start plus the trees added
    by every M-step (each a rankwise :class:`~rankwise.models.GBDTRanker` fitted from the score so far, or
    a LightGBM Booster); ``predict(X, raw_score=False)`` like a LightGBM Booster."""

    def __init__(self, base, m):
        self.base = base
        self.boosters = []
        self.raw = np.full(m, base)  # raw score on the training rows

    def add(self, booster, X):
        self.boosters.append(booster)
        self.raw = self.raw + _raw_score(booster, X)

    def num_trees(self):
        return sum(b.n_estimators_ if hasattr(b, "n_estimators_") else b.num_trees() for b in self.boosters)

    def predict(self, X, raw_score=False):
        F = self.base + sum(_raw_score(b, X) for b in self.boosters)
        return F if raw_score else 1.0 / (1.0 + np.exp(-F))


def _query_folds(query, m, n_folds, random_state):
    """Fold 0..n_folds-1 of every row, by query (all rows of a query in one fold, queries shuffled)."""
    from rankwise.clicks._split import query_codes, query_folds

    q_idx, n_q = query_codes(query, m, why="cross_fit")
    if not 2 <= n_folds <= n_q:
        raise InputError(f"cross_fit must be 0 (off) or a number of folds in [2, {n_q}] (the number of queries); "
                         f"got {n_folds}")
    return query_folds(n_q, n_folds, random_state)[q_idx]


#: rows per pseudo-query of the relevance regression (its loss is a sum over rows: the grouping only
#: shares the rows between the gradient kernel's threads)
_BLOCK = 1024


def _row_blocks(m: int) -> np.ndarray:
    nb = max(1, m // _BLOCK)
    return np.arange(m, dtype=np.int64) * nb // max(m, 1)


class RegressionEM(PropensityEstimator):
    r"""Regression-EM (Wang et al., WSDM 2018): PBM propensities with relevance as a function of features.

    Observations are aggregated rows i = (query, doc, rank k_i) of the log (:meth:`ClickLog.counts`)
    with the document's features x_i, n_i impressions and c_i clicks. The model is
    :math:`P(C = 1) = \theta_{k} \gamma(x)`. E-step, for the non-clicks:

    .. math:: P(E = 1, R = 0 \mid C = 0) = \frac{\theta_k (1 - \gamma)}{1 - \theta_k \gamma}, \qquad
              P(E = 0, R = 1 \mid C = 0) = \frac{(1 - \theta_k) \gamma}{1 - \theta_k \gamma};

    M-step: :math:`\theta_k = \sum_{i: k_i = k} (c_i + (n_i - c_i) P(E=1 \mid C=0)) / \sum_{i: k_i = k} n_i`
    and γ = σ(f) refitted by ``estimator`` on the expected relevance
    :math:`(c_i + (n_i - c_i) P(R=1 \mid C=0)) / n_i` with sample weights n_i (the paper samples binary
    relevance labels from the posterior; the soft labels give the expectation of that gradient).

    Parameters
    ----------
    estimator : rankwise ranker, optional
        The relevance regression of the M-step: a rankwise model with a pointwise loss whose raw score
        f gives γ = σ(f), fitted as ``estimator.fit(X, target, qid=blocks, sample_weight=impressions)``
        (its loss must be a sum over rows, e.g. ``"sigmoid_ce"``: the rows are grouped in blocks of
        1024 only to share them between threads). Default (None):
        ``GBDTRanker("sigmoid_ce", n_estimators=n_estimators, learning_rate=learning_rate,
        num_leaves=num_leaves, min_child_samples=min_child_samples, random_state=random_state,
        n_jobs=n_jobs, loss_every=None, verbose=False)``. A given estimator is cloned for each fit
        (its ``n_jobs`` set to this ``n_jobs`` when that is not None); the tree parameters below are then
        unused and must stay at their defaults.
    max_iter : int
        EM iterations (stops earlier when θ moves less than ``tol``; with ``m_step="observed"`` when
        θ/θ_1 moves less than ``tol`` relative to itself). (``n_iter``: deprecated name.)
    n_estimators, learning_rate, num_leaves, min_child_samples : GBDT of the default relevance model
        (``n_estimators``: trees per M-step, or ``"auto"``: chosen on held-out queries, below).
        *Changed*: 100 trees per M-step (the former private LightGBM regression grew 50 from LightGBM's
        boost-from-average start; the rankwise GBDT starts each fit from a score of 0, and with 100 trees its
        propensities were at least as close to the truth in every simulated run measured, docs/clicks.md).
    theta_init : array (R,), optional
        Starting propensities (default: the click-through rate by rank, scaled to a maximum of 0.9).
    group : {None, "query"}
        ``"query"``: the relevance is :math:`\sigma(f(x) + b_q)` with a per-query offset b_q (ridge penalty
        ``group_l2``), refitted by Newton steps in each M-step: LETOR features are normalised per query,
        so f(x) alone cannot see that a whole query has no relevant document, and that query-level error
        would be charged to the top ranks' θ.
    cross_fit : int
        0 (default): one regression on every row. K >= 2: the queries are split in K folds and the
        relevance of a row is predicted by the regression fitted on the other K - 1 folds, so f
        cannot learn a document's own click rate (its rank's examination) back.
    warm_start : bool
        False (default): each M-step fits a new regression. True: each M-step adds ``n_estimators``
        trees to the previous regression (a generalised EM).
    m_step : {"expected", "observed"}
        ``"expected"`` (default): Wang et al.'s EM. ``"observed"``: ECME on the observed-data
        likelihood (F boosted on the PBM likelihood given θ, then θ maximised exactly given γ);
        not with ``group``, ``cross_fit`` or ``warm_start``.
    validation_fraction : float in (0, 1)
        Share of the queries held out to choose the number of trees (``n_estimators="auto"``).
    early_stopping_rounds : int
        ``n_estimators="auto"`` stops adding trees when the held-out loss has not improved for this many.
    random_state : int, optional
        Seed of the folds, the held-out queries and the trees.
    n_jobs : int, optional
        Threads of the relevance regression (the default estimator's ``n_jobs``; None: GBDTRanker's default).

    Every option fits the default relevance model, the configured ``GBDTRanker("sigmoid_ce", ...)``, on
    ``n_jobs`` threads: ``group`` and ``warm_start`` from a given start (per-query offsets, the previous M-steps'
    trees: ``GBDTRanker.fit(init_score=...)``); ``n_estimators="auto"`` with early stopping on the held-out
    queries' weighted cross-entropy (``eval_metric="loss"``, from LightGBM's start, the logit of the mean
    target); ``m_step="observed"`` on the PBM likelihood's own gradient (``GBDTRanker.fit(objective=...)``).
    These options take no ``estimator``.

    Attributes
    ----------
    propensity_ : ndarray (R,)
        θ_k/θ_1.
    theta_ : ndarray (R,)
        The unnormalised θ.
    relevance_ : ndarray
        γ per (query, doc, rank) row of the log's counts (:meth:`ClickLog.counts` order).
    relevance_model_ : object
        The fitted relevance regression (with ``cross_fit``, the list of the folds' models). ``save`` keeps it
        when it is one rankwise model (the default); a loaded estimator has None in the other cases.
    n_iter_ : int
    loglik_ : ndarray
        Mean log-likelihood of the clicks per impression after each iteration.
    identifiability_ : float
        :func:`identifiability` of the log.

    References
    ----------
    X. Wang, N. Golbandi, M. Bendersky, D. Metzler, M. Najork. "Position bias estimation for
    unbiased learning to rank in personal search." WSDM 2018, §4.
    V. Chernozhukov et al. "Double/debiased machine learning for treatment and structural
    parameters." The Econometrics Journal 21(1), 2018 (cross-fitting).
    C. Liu, D. B. Rubin. "The ECME algorithm: a simple extension of EM and ECM with faster monotone
    convergence." Biometrika 81(4), 1994 (``m_step="observed"``).
    """

    _parameter_constraints = {
        "max_iter": [Interval("int", 1)],
        "n_estimators": [Interval("int", 1), Options("auto")],
        "learning_rate": [Interval("real", 0, closed="neither")],
        "num_leaves": [Interval("int", 2)],
        "min_child_samples": [Interval("int", 0)],
        "tol": [Interval("real", 0)],
        "random_state": [None, Interval("int", 0)],
        "group": [None, Options("query")],
        "group_l2": [Interval("real", 0)],
        "cross_fit": [Interval("int", 0)],
        "warm_start": ["boolean"],
        "m_step": [Options("expected", "observed")],
        "validation_fraction": [Interval("real", 0, 1, closed="neither")],
        "early_stopping_rounds": [Interval("int", 1)],
        "n_jobs": [None, Interval("int", 1)],
    }
    _deprecated_params = {"n_iter": "max_iter"}
    _state_arrays = ("propensity_", "theta_", "relevance_", "loglik_")
    _state_scalars = ("identifiability_", "max_rank_", "n_iter_")
    #: the tree parameters of the default estimator
    _TREE_DEFAULTS = {"n_estimators": 100, "learning_rate": 0.1, "num_leaves": 15, "min_child_samples": 20}

    def __init__(self, estimator=None, *, max_iter: int = 30, n_estimators: int | str = 100,
                 learning_rate: float = 0.1, num_leaves: int = 15, min_child_samples: int = 20, tol: float = 1e-5,
                 random_state: int | None = 0, theta_init=None, group: str | None = None, group_l2: float = 1.0,
                 cross_fit: int = 0, warm_start: bool = False, m_step: str = "expected",
                 validation_fraction: float = 0.2, early_stopping_rounds: int = 20, n_jobs: int | None = None,
                 **old):
        self.estimator = estimator
        self.max_iter = max_iter
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.tol = tol
        self.random_state = random_state
        self.theta_init = theta_init
        self.group = group
        self.group_l2 = group_l2
        self.cross_fit = cross_fit
        self.warm_start = warm_start
        self.m_step = m_step
        self.validation_fraction = validation_fraction
        self.early_stopping_rounds = early_stopping_rounds
        self.n_jobs = n_jobs
        self._init_deprecated(old)

    # -- the relevance regression -----------------------------------------------------------------
    def _uses_estimator(self) -> bool:
        return (self.m_step == "expected" and self.group is None and not self.warm_start
                and self.n_estimators != "auto")

    def _relevance_estimator(self):
        from sklearn.base import clone

        if self.estimator is None:
            from rankwise.models import GBDTRanker

            if self.n_estimators == "auto":  # up to _MAX_AUTO_TREES, stopped on the held-out queries' loss
                trees = dict(n_estimators=_MAX_AUTO_TREES, early_stopping_rounds=int(self.early_stopping_rounds),
                             eval_metric="loss")
            else:
                trees = dict(n_estimators=int(self.n_estimators))
            return GBDTRanker("sigmoid_ce", **trees, learning_rate=float(self.learning_rate),
                              num_leaves=int(self.num_leaves), min_child_samples=int(self.min_child_samples),
                              random_state=self.random_state, n_jobs=self.n_jobs, loss_every=None, verbose=False)
        est = clone(self.estimator)
        if self.n_jobs is not None and "n_jobs" in est.get_params(deep=False):
            est.set_params(n_jobs=self.n_jobs)
        return est

    def _check_estimator(self):
        if self.estimator is None:
            return
        if not (hasattr(self.estimator, "fit") and hasattr(self.estimator, "predict")
                and hasattr(self.estimator, "get_params")):
            raise InputError(f"RegressionEM: estimator must be a rankwise ranker (fit/predict/get_params) or None; "
                             f"got {type(self.estimator).__name__}")
        if not self._uses_estimator():
            raise InputError("RegressionEM: estimator is the M-step regression of the expected EM; group, warm_start, "
                             "n_estimators='auto' and m_step='observed' fit their own relevance model and take none")
        changed = [k for k, v in self._TREE_DEFAULTS.items() if getattr(self, k) != v]
        if changed:
            raise InputError(f"RegressionEM: {', '.join(changed)} set the default estimator's trees; with estimator= "
                             "given, set them on the estimator")

    # -- fitting ------------------------------------------------------------------------------------
    def _fit(self, log, features):
        from rankwise.clicks.ips import _feature_rows

        _check_log(log, counts=True)
        if features is None:
            raise InputError("RegressionEM.fit needs features=... (a RankingDataset with the documents' features: "
                             "the relevance is a regression on them)")
        pair, rank, clk, imp = _table(log)
        rows = _feature_rows(log, features)
        X = features.X[rows[pair]]
        if hasattr(X, "toarray"):
            X = X.toarray()
        query = log.pair_query[pair]
        self._fit_arrays(X, rank, clk, imp, group=query if self.group == "query" else None, query=query)

    def _fit_arrays(self, X, rank, clicks, impressions, *, group=None, query=None):
        """The algorithm on aggregated rows (the array form of the deprecated :func:`regression_em`)."""
        self._check_estimator()
        X = np.asarray(X, dtype=np.float64)
        rank = np.asarray(rank).astype(np.int64)
        c = np.asarray(clicks, dtype=np.float64)
        n = np.asarray(impressions, dtype=np.float64)
        m = len(rank)
        if X.ndim != 2 or X.shape[0] != m or len(c) != m or len(n) != m:
            raise InputError(f"X must be (n_rows, n_features) and rank, clicks, impressions one entry per row; got "
                             f"X {X.shape}, rank {rank.shape}, clicks {c.shape}, impressions {n.shape}")
        if m == 0:
            raise InputError("regression-EM needs at least one row")
        if np.any(rank < 1):
            raise InputError("rank must hold ranks 1..R")
        if np.any(n <= 0) or np.any(c < 0) or np.any(c > n):
            raise InputError("impressions must be > 0 and 0 <= clicks <= impressions on every row")
        m_step, auto, warm_start = self.m_step, self.n_estimators == "auto", bool(self.warm_start)
        cross_fit, random_state = int(self.cross_fit), self.random_state
        if m_step == "observed" and (group is not None or cross_fit or warm_start):
            raise InputError("m_step='observed' takes no group, cross_fit or warm_start (they are options of the "
                             "expected M-step)")
        if auto and warm_start:
            raise InputError("n_estimators='auto' chooses the trees of each fit from scratch; warm_start adds a fixed "
                             "number per M-step: use one or the other")
        R = int(rank.max())
        k = rank - 1
        imp_k = np.bincount(k, weights=n, minlength=R)
        if np.any(imp_k == 0):
            raise InputError(f"ranks {np.flatnonzero(imp_k == 0) + 1} have no impression: their propensity is "
                             "undefined")
        if self.theta_init is None:
            ctr = np.bincount(k, weights=c, minlength=R) / imp_k
            theta = np.clip(0.9 * ctr / max(ctr.max(), 1e-12), 1e-3, 0.999)
        else:
            theta = np.asarray(self.theta_init, dtype=np.float64)
            if theta.shape != (R,) or np.any(theta <= 0) or np.any(theta > 1):
                raise InputError(f"theta_init must be {R} values in (0, 1]; got {self.theta_init!r}")
            theta = theta.copy()
        if group is not None:
            import pandas as pd

            g_idx, _ = pd.factorize(np.asarray(group))
            if len(g_idx) != m:
                raise InputError(f"group must have one entry per row ({m}); got {len(g_idx)}")
            b = np.zeros(int(g_idx.max()) + 1)
        else:
            g_idx, b = np.zeros(m, dtype=np.int64), np.zeros(1)
        if query is None:
            query = group
        if cross_fit:
            fold = _query_folds(query, m, cross_fit, random_state)
            parts = [(fold != j, fold == j) for j in range(cross_fit)]  # (rows fitted, rows predicted)
        else:
            every = np.ones(m, dtype=bool)
            parts = [(every, every)]
        staged = [None] * len(parts)  # warm start: each part's boosters so far
        held = _held_out_rows(query, m, self.validation_fraction, random_state) if auto else None

        def train(fit_rows, tgt, init, pbm_t):
            """The configured relevance GBDT on ``fit_rows``, boosted from ``init`` on the observed-data PBM
            likelihood of the clicks (``pbm_t``: every row's examination probability, :class:`_PBMObjective`);
            with 'auto' on their training queries, its trees chosen on the held-out ones' likelihood."""
            tr = np.flatnonzero(fit_rows & ~held if auto else fit_rows)
            va = np.flatnonzero(fit_rows & held) if auto else tr[:0]
            fit_kw = {}
            if auto:
                fit_kw = dict(eval_set=(X[va], tgt[va], _row_blocks(len(va))), eval_init_score=init[va])
            return self._relevance_estimator().fit(X[tr], tgt[tr], qid=_row_blocks(len(tr)), init_score=init[tr],
                                                   objective=_PBMObjective(pbm_t, c, n, tr, va), **fit_kw)

        if m_step == "observed":
            return self._set_fitted(*_regression_ecme(X, k, c, n, R, theta, train, int(self.max_iter), self.tol))

        use_estimator = self._uses_estimator()

        def fit_relevance(target, b):
            tgt = np.clip(target, 0.0, 1.0)
            F = np.zeros(m)
            models = []
            for j, (fit_rows, pred_rows) in enumerate(parts):
                if use_estimator:  # the configured rankwise model (a sum of per-row losses)
                    tr = np.flatnonzero(fit_rows)
                    est = self._relevance_estimator()
                    est.fit(X[tr], tgt[tr], qid=_row_blocks(len(tr)), sample_weight=n[tr])
                    pr = np.flatnonzero(pred_rows)
                    F[pr] = est.predict(X[pr])
                    models.append(est)
                    continue
                if warm_start and staged[j] is None:  # the first warm step starts from the mean target
                    mu = np.clip(np.average(tgt[fit_rows], weights=n[fit_rows]), 1e-6, 1 - 1e-6)
                    staged[j] = _StagedBooster(float(np.log(mu / (1 - mu))), m)
                init = staged[j].raw if warm_start else None
                if group is not None:
                    init = b[g_idx] if init is None else init + b[g_idx]
                # the configured rankwise model, boosted from the start (previous trees, per-query offsets)
                bst = self._relevance_estimator()
                tr = np.flatnonzero(fit_rows & ~held if auto else fit_rows)
                start, fit_kw = init, {}
                if init is None:  # 'auto' alone: from the mean target, as LightGBM's boost from average
                    base = _mean_logit(tgt[tr], n[tr])
                    start = np.full(m, base)
                if auto:  # the trees chosen on the held-out queries' weighted cross-entropy
                    va = np.flatnonzero(fit_rows & held)
                    fit_kw = dict(eval_set=(X[va], tgt[va], _row_blocks(len(va))), eval_init_score=start[va],
                                  eval_sample_weight=n[va])
                bst.fit(X[tr], tgt[tr], qid=_row_blocks(len(tr)), sample_weight=n[tr], init_score=start[tr],
                        **fit_kw)
                if init is None:
                    staged_auto = _StagedBooster(base, m)
                    staged_auto.add(bst, X)
                    bst = staged_auto
                if warm_start:
                    staged[j].add(bst, X)
                    bst = staged[j]
                    Fj = bst.raw
                else:
                    Fj = bst.raw if init is None else _raw_score(bst, X)
                F[pred_rows] = Fj[pred_rows]
                models.append(bst)
            if group is not None:
                for _ in range(5):  # Newton steps on the per-query offsets, f held fixed
                    p = 1.0 / (1.0 + np.exp(-(F + b[g_idx])))
                    grad = np.bincount(g_idx, weights=n * (tgt - p), minlength=len(b)) - self.group_l2 * b
                    hess = np.bincount(g_idx, weights=n * p * (1 - p), minlength=len(b)) + self.group_l2
                    b = b + grad / hess
            gam = 1.0 / (1.0 + np.exp(-(F + b[g_idx])))
            return (models[0] if len(models) == 1 else models), b, np.clip(gam, 1e-6, 1 - 1e-6)

        # relevance start: the click-through rate corrected by the starting propensities
        model, b, gamma = fit_relevance(c / n / theta[k], b)
        history = []
        it = 0
        for it in range(1, int(self.max_iter) + 1):
            th = theta[k]
            d = 1.0 - th * gamma
            p_e = th * (1.0 - gamma) / d
            p_r = (1.0 - th) * gamma / d
            new_theta = np.bincount(k, weights=c + (n - c) * p_e, minlength=R) / imp_k
            model, b, gamma = fit_relevance((c + (n - c) * p_r) / n, b)
            new_theta = np.clip(new_theta, 1e-6, 1.0)
            history.append(_click_log_likelihood(new_theta[k] * gamma, c, n) / float(n.sum()))
            moved = float(np.max(np.abs(new_theta - theta)))
            theta = new_theta
            if moved < self.tol:
                break
        return self._set_fitted(theta, gamma, model, it, history)

    def _set_fitted(self, theta, gamma, model, n_iter, history):
        self.theta_ = theta
        self.propensity_ = theta / theta[0]
        self.relevance_ = gamma
        self.relevance_model_ = model
        self.n_iter_ = int(n_iter)
        self.loglik_ = np.asarray(history, dtype=np.float64)
        self.max_rank_ = int(len(theta))
        return self

    def _result(self) -> RegressionEMResult:
        return RegressionEMResult(self.propensity_, self.theta_, self.relevance_, self.relevance_model_,
                                  self.n_iter_, list(self.loglik_))

    # -- persistence --------------------------------------------------------------------------------
    def _get_params_state(self) -> dict:
        params = self.get_params(deep=False)
        est = params["estimator"]
        if est is not None:
            params["estimator"] = {"class": type(est).__name__, "params": est._get_params_state()}
        if params["theta_init"] is not None:
            params["theta_init"] = [float(v) for v in np.asarray(params["theta_init"], dtype=np.float64)]
        return params

    @classmethod
    def _params_from_state(cls, params: dict) -> dict:
        est = params.get("estimator")
        if isinstance(est, dict):
            model_cls = persistence.MODEL_REGISTRY[est["class"]]
            params = dict(params, estimator=model_cls(**model_cls._params_from_state(est["params"])))
        return params

    def _get_state(self):
        state, arrays = super()._get_state()
        model = getattr(self, "relevance_model_", None)
        if model is not None and hasattr(model, "_get_state") and type(model).__name__ in persistence.MODEL_REGISTRY:
            state["relevance_model"], more = _nested_state(model, "relevance_model")
            arrays.update(more)
        return state, arrays

    def _set_state(self, state, arrays):
        super()._set_state(state, arrays)
        meta = state.get("relevance_model")
        self.relevance_model_ = None if meta is None else _nested_model(meta, arrays, "relevance_model")


_MAX_AUTO_TREES = 5000  # n_estimators="auto": the most trees one relevance fit may grow


def _mean_logit(y, w):
    """The logit of the weighted mean label, as LightGBM's cross-entropy objective computes its start (boost
    from average): float32 labels and weights, their products summed in order in double, the mean clipped to
    [1e-15, 1 - 1e-15] (LightGBM's kEpsilon, a float)."""
    y32, w32 = np.asarray(y, dtype=np.float32), np.asarray(w, dtype=np.float32)
    suml = float(np.cumsum((y32 * w32).astype(np.float64))[-1])
    sumw = float(np.cumsum(w32.astype(np.float64))[-1])
    eps = float(np.float32(1e-15))
    p = min(max(suml / sumw, eps), 1.0 - eps)
    return float(np.log(p / (1.0 - p)))


def _held_out_rows(query, m, fraction, random_state):
    """Rows of a random ``fraction`` of the queries (at least one query, never all): where
    ``n_estimators="auto"`` chooses the number of trees."""
    from rankwise.clicks._split import held_out_queries, query_codes

    q_idx, n_q = query_codes(query, m, why="n_estimators='auto' holds out queries, so it")
    if n_q < 2:
        raise InputError("n_estimators='auto' needs at least 2 queries (one is held out)")
    return held_out_queries(n_q, fraction, random_state)[q_idx]


def _pbm_nll_grad_hess(F, t, c, n):
    r"""−ℓ of PBM clicks (c of n, examination probability t, relevance γ = σ(F)) per row: its gradient in F
    and the Fisher information (the expected Hessian, positive; the Hessian itself is not everywhere).

    :math:`-\ell = -c\log t\gamma - (n - c)\log(1 - t\gamma)`,
    :math:`\partial_F(-\ell) = -(1 - \gamma)(c - n t\gamma)/(1 - t\gamma)`,
    :math:`I = n t\gamma(1 - \gamma)^2/(1 - t\gamma)`."""
    g = np.clip(1.0 / (1.0 + np.exp(-F)), 1e-12, 1 - 1e-9)
    d = 1.0 - t * g
    return -(1.0 - g) * (c - n * t * g) / d, np.maximum(n * t * g * (1.0 - g) ** 2 / d, 1e-12)


class _PBMObjective:
    """The observed-data PBM likelihood of the clicks as a per-row objective of ``GBDTRanker.fit(objective=...)``
    (``m_step="observed"``): ``c`` clicks of ``n`` impressions at examination probability ``t`` per row; the
    training rows ``tr`` (gradient and Fisher information, :func:`_pbm_nll_grad_hess`) and the held-out rows
    ``va`` (``eval_loss``: −ℓ per impression)."""

    def __init__(self, t, c, n, tr, va):
        self.tr = (t[tr], c[tr], n[tr])
        self.va = (t[va], c[va], n[va])

    def grad_hess(self, scores):
        return _pbm_nll_grad_hess(scores, *self.tr)

    def eval_loss(self, scores):
        return _pbm_nll(scores, *self.va) / self.va[2].sum()


def _click_log_likelihood(q, c, n):
    """Σ c log q + (n − c) log(1 − q): c clicks of n at click probability q (clipped to (0, 1))."""
    q = np.clip(q, 1e-12, 1 - 1e-12)
    return float(np.sum(c * np.log(q) + (n - c) * np.log(1 - q)))


def _pbm_nll(F, t, c, n):
    return -_click_log_likelihood(t / (1.0 + np.exp(-F)), c, n)


def _theta_given_gamma(k, c, n, gamma, R, n_steps=60):
    r"""Per rank, the θ_k in (0, 1] that maximises ℓ given γ: the root of
    :math:`\sum_{i: k_i = k} c_i/\theta - (n_i - c_i)\gamma_i/(1 - \theta\gamma_i)` (decreasing in θ; concave ℓ),
    by bisection; 1 where ℓ still rises at θ = 1, and the smallest bracket where a rank has no click."""
    def slope(th):
        t = th[k]
        return np.bincount(k, weights=c / t - (n - c) * gamma / (1.0 - t * gamma), minlength=R)

    lo, hi = np.full(R, 1e-12), np.ones(R)
    at_one = slope(hi) >= 0
    for _ in range(n_steps):
        mid = 0.5 * (lo + hi)
        up = slope(mid) > 0
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    return np.where(at_one, 1.0, 0.5 * (lo + hi))


def _regression_ecme(X, k, c, n, R, theta, train, n_iter, tol):
    """``m_step="observed"`` of :class:`RegressionEM`: F boosted on the observed-data likelihood given θ, then
    θ maximised exactly given γ = σ(F), until θ/θ_1 moves less than ``tol`` (relative) or ``n_iter`` rounds."""
    m = len(k)
    every = np.ones(m, dtype=bool)
    history = []
    it = 0
    staged, gamma = None, None
    for it in range(1, n_iter + 1):
        t = theta[k]
        mu = np.clip(c.sum() / np.sum(n * t), 1e-6, 1 - 1e-6)
        base = float(np.log(mu / (1 - mu)))  # start: the constant relevance that fits the clicks given θ

        staged = _StagedBooster(base, m)
        staged.add(train(every, c / n, np.full(m, base), pbm_t=t), X)
        gamma = np.clip(1.0 / (1.0 + np.exp(-staged.raw)), 1e-6, 1 - 1e-6)
        new_theta = np.clip(_theta_given_gamma(k, c, n, gamma, R), 1e-6, 1.0)
        history.append(_click_log_likelihood(new_theta[k] * gamma, c, n) / float(n.sum()))
        moved = float(np.max(np.abs(new_theta / new_theta[0] - theta / theta[0]) / (theta / theta[0])))
        theta = new_theta
        if moved < tol:
            break
    return theta, gamma, staged, it, history


# -------------------------------------------------------------------------- intervention harvesting
@dataclass
class HarvestResult:
    """Output of the deprecated :func:`harvest_propensities`: ``propensity`` (θ_k/θ_1), ``pairs`` (k, k' with
    an interventional set), ``set_sizes`` (|S_{k,k'}|), ``ctr`` (ĉ_k, ĉ_k' summed click rates).
    :class:`InterventionHarvesting` has them as ``propensity_``, ``pairs_``, ``set_sizes_``, ``ctr_``."""

    propensity: np.ndarray
    pairs: np.ndarray
    set_sizes: np.ndarray
    ctr: np.ndarray


class InterventionHarvesting(PropensityEstimator):
    r"""Propensities by intervention harvesting (Agarwal et al., WSDM 2019), AllPairs estimator.

    Where the log shows a (query, doc) pair at several ranks — sessions of the same query under
    different rankings: two or more logging rankers, or one ranker changing over time — the pairs seen
    at both ranks k and k' form the interventional set :math:`S_{k,k'}`. With each pair's click-through
    rate at rank k, :math:`\mathrm{ctr}(q,d,k)` (clicks / impressions there), the harvested click rates are
    :math:`\hat c_k^{k,k'} = \sum_{(q,d) \in S_{k,k'}} \mathrm{ctr}(q,d,k)` over
    :math:`N^{k,k'} = |S_{k,k'}|` pairs; under the PBM :math:`E[\hat c_k^{k,k'}] = \theta_k r_{k,k'}`
    with r the mean relevance of the set. AllPairs maximises

    .. math:: \sum_{k \ne k'} \hat c_k^{k,k'} \log(\theta_k r_{k,k'}) +
              (N^{k,k'} - \hat c_k^{k,k'}) \log(1 - \theta_k r_{k,k'})

    over θ and the symmetric r (L-BFGS on logits); θ is returned relative to rank 1.
    (Agarwal et al. weight each pair's clicks by the rankers' session counts; dividing by the
    impressions at each rank gives every pair the same weight at both ranks, the same balance.)
    With one deterministic logger no pair moves (:func:`identifiability` is 0) and ``fit`` says so.

    Parameters
    ----------
    max_rank : int, optional
        Estimate ranks 1..max_rank (default: the longest page).
    min_set_size : int
        Interventional sets with fewer pairs are left out.
    max_iter : int
        L-BFGS iterations.

    Attributes
    ----------
    propensity_ : ndarray (max_rank,)
    pairs_ : ndarray (P, 2)
        The rank pairs (k, k'), 1-based, with an interventional set.
    set_sizes_ : ndarray (P,)
        |S_{k,k'}|: the (query, doc) pairs seen at both ranks (the diagnostic of how much each rank
        pair is informed).
    ctr_ : ndarray (P, 2)
        ĉ_k, ĉ_k' (summed click rates).
    n_iter_ : int
        L-BFGS iterations run.
    identifiability_ : float
        :func:`identifiability` of the log.

    References
    ----------
    A. Agarwal, I. Zaitsev, X. Wang, C. Li, M. Najork, T. Joachims. "Estimating position bias
    without intrusive interventions." WSDM 2019, §4-5.
    """

    _parameter_constraints = {"max_rank": [None, Interval("int", 2)], "min_set_size": [Interval("int", 1)],
                              "max_iter": [Interval("int", 1)]}
    _state_arrays = ("propensity_", "pairs_", "set_sizes_", "ctr_")
    _state_scalars = ("identifiability_", "max_rank_", "n_iter_")

    def __init__(self, *, max_rank: int | None = None, min_set_size: int = 1, max_iter: int = 500):
        self.max_rank = max_rank
        self.min_set_size = min_set_size
        self.max_iter = max_iter

    def _fit(self, log, features):
        from scipy.optimize import minimize

        _check_log(log, counts=True)
        R = log.max_rank if self.max_rank is None else int(self.max_rank)
        if not 2 <= R <= log.max_rank:
            raise InputError(f"max_rank must be in [2, {log.max_rank}] (the longest page); got {R}")
        pair, rank, clicks, impressions = _table(log)
        keep = rank <= R
        key = pair[keep] * R + rank[keep] - 1
        imp = np.bincount(key, weights=impressions[keep], minlength=log.n_pairs * R).reshape(log.n_pairs, R)
        clk = np.bincount(key, weights=clicks[keep], minlength=log.n_pairs * R).reshape(log.n_pairs, R)
        seen = imp > 0
        ctr = np.divide(clk, imp, out=np.zeros_like(clk), where=seen)
        pairs, sizes, chat = [], [], []
        for a in range(R):
            for b in range(a + 1, R):
                both = seen[:, a] & seen[:, b]
                nb = int(both.sum())
                if nb >= self.min_set_size:
                    pairs.append((a, b))
                    sizes.append(nb)
                    chat.append((ctr[both, a].sum(), ctr[both, b].sum()))
        if not pairs:
            raise InputError("no (query, doc) pair is shown at two different ranks: nothing to harvest "
                             "(the log needs several rankings of the same queries: two or more logging rankers, "
                             "or a stochastic one; identifiability(log) = 0)")
        pairs = np.array(pairs)
        sizes = np.array(sizes, dtype=np.float64)
        chat = np.array(chat)
        # every rank must be connected to rank 1 through the pairs
        reach = {0}
        changed = True
        while changed:
            changed = False
            for a, b in pairs:
                if (a in reach) != (b in reach):
                    reach |= {a, b}
                    changed = True
        if len(reach) < R:
            missing = sorted(set(range(R)) - reach)
            raise InputError(f"ranks {[m + 1 for m in missing]} share no interventional set with rank 1 (directly or "
                             "through other ranks): their propensity is not identified")
        P = len(pairs)

        def sig(x):
            return 0.5 * (1.0 + np.tanh(0.5 * x))

        def objective(z):
            lt, lr = z[:R], z[R:]
            th, rel = sig(lt), sig(lr)
            f = 0.0
            g_t = np.zeros(R)
            g_r = np.zeros(P)
            for side in (0, 1):
                kk = pairs[:, side]
                q = np.clip(th[kk] * rel, 1e-12, 1 - 1e-12)
                cc = chat[:, side]
                f -= np.sum(cc * np.log(q) + (sizes - cc) * np.log(1 - q))
                dq = -(cc / q - (sizes - cc) / (1 - q))
                np.add.at(g_t, kk, dq * rel * th[kk] * (1 - th[kk]))
                g_r += dq * th[kk] * rel * (1 - rel)
            return f, np.concatenate([g_t, g_r])

        z0 = np.concatenate([np.full(R, 1.0), np.zeros(P)])
        res = minimize(objective, z0, jac=True, method="L-BFGS-B", options={"maxiter": int(self.max_iter)})
        th = sig(res.x[:R])
        self.propensity_ = th / th[0]
        self.pairs_, self.set_sizes_, self.ctr_ = pairs + 1, sizes, chat
        self.n_iter_ = int(res.nit)

    def _result(self) -> HarvestResult:
        return HarvestResult(self.propensity_, self.pairs_, self.set_sizes_, self.ctr_)


# ----------------------------------------------------------------------- deprecated functions
def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"rankwise.clicks.{old} is deprecated and will be removed in the next release; use {new}",
                  DeprecationWarning, stacklevel=3)


def propensities_randtop(log: ClickLog, n: int | None = None) -> np.ndarray:
    """Deprecated: ``RandTop(n).fit(log).propensity_`` (:class:`RandTop`)."""
    _deprecated("propensities_randtop", "RandTop(n).fit(log).propensity_")
    return RandTop(n).fit(log).propensity_


def propensities_randpair(log: ClickLog, *, pair_rank: str = "pair_rank", pivot: int = 1) -> np.ndarray:
    """Deprecated: ``RandPair(pair_rank).fit(log).propensity_`` (:class:`RandPair`). Returns θ_k/θ_pivot over
    ranks 1..longest page, NaN where no session randomised that rank (``RandPair.fit`` refuses such ranks)."""
    _deprecated("propensities_randpair", "RandPair(pair_rank, pivot=...).fit(log).propensity_")
    est = RandPair(pair_rank, pivot=pivot)
    est._validate_params()
    return est._ratios(log)[0]


def pbm_propensities(model) -> np.ndarray:
    """Deprecated: a fitted :class:`~rankwise.clicks.PBM`'s ``propensity_``."""
    _deprecated("pbm_propensities", "PBM().fit(log).propensity_")
    p = getattr(model, "propensity_", None) if model is not None else None
    if p is None:
        raise InputError("pbm_propensities takes a fitted PBM")
    return np.asarray(p, dtype=np.float64)


def regression_em(X, rank, clicks, impressions, *, n_iter: int | None = None, max_iter: int | None = None,
                  group=None, query=None, **kwargs) -> RegressionEMResult:
    """Deprecated: :class:`RegressionEM` (``RegressionEM(...).fit(log, features=...)``) on aggregated rows.

    The parameters are :class:`RegressionEM`'s (``n_iter`` = ``max_iter``); ``group`` and ``query`` give
    the query of every row (the per-query offsets, the folds of ``cross_fit``, the held-out queries of
    ``n_estimators="auto"``)."""
    _deprecated("regression_em", "RegressionEM(...).fit(log, features=...)")
    if n_iter is not None and max_iter is not None:
        raise InputError("give max_iter (n_iter is its deprecated name), not both")
    it = max_iter if max_iter is not None else 30 if n_iter is None else n_iter
    est = RegressionEM(max_iter=it, group=None if group is None else "query", **kwargs)
    est._validate_params()
    return est._fit_arrays(X, rank, clicks, impressions, group=group, query=query)._result()


def regression_em_log(log: ClickLog | ClickCounts, features, *, n_iter: int | None = None,
                      max_iter: int | None = None, **kwargs) -> RegressionEMResult:
    """Deprecated: ``RegressionEM(...).fit(log, features=features)`` (:class:`RegressionEM`)."""
    _deprecated("regression_em_log", "RegressionEM(...).fit(log, features=...)")
    if n_iter is not None and max_iter is not None:
        raise InputError("give max_iter (n_iter is its deprecated name), not both")
    it = max_iter if max_iter is not None else 30 if n_iter is None else n_iter
    return RegressionEM(max_iter=it, **kwargs).fit(log, features=features)._result()


def harvest_propensities(log: ClickLog, *, max_rank: int | None = None, min_set_size: int = 1,
                         max_iter: int = 500) -> HarvestResult:
    """Deprecated: :class:`InterventionHarvesting` (``InterventionHarvesting().fit(log)``)."""
    _deprecated("harvest_propensities", "InterventionHarvesting().fit(log)")
    est = InterventionHarvesting(max_rank=max_rank, min_set_size=min_set_size, max_iter=max_iter)
    return est.fit(log)._result()


def rank_table(log: ClickLog | ClickCounts):
    """Deprecated: ``log.counts()`` (:class:`~rankwise.data.ClickCounts`: ``pair``, ``rank``, ``clicks``,
    ``impressions``). Aggregated observations ``(pair, rank, clicks, impressions)``: one row per (query, doc,
    rank) of ``log`` (an aggregated log as it is)."""
    _deprecated("rank_table", "log.counts() (its pair, rank, clicks, impressions)")
    _check_log(log, counts=True)
    return _table(log)
