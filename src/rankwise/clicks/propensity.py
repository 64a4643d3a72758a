r"""Examination propensities (position bias) from click logs.

Under the position-based model a click needs examination and relevance,
:math:`P(C = 1 \mid d, k) = \theta_k \, \gamma_d`, and the propensity of rank k is θ_k. Clicks alone
identify θ only up to a common factor, so every estimator here returns *relative* propensities
:math:`\theta_k / \theta_1` (rank 1 = 1), the quantity inverse-propensity scoring needs.

With interventions (randomised result pages):

- :func:`propensities_randtop` — RandTop-n: the top n results shown in a uniformly random order;
  the click-through rate at rank k is then θ_k × (the same mean relevance), so
  :math:`\theta_k/\theta_1 = \mathrm{CTR}_k / \mathrm{CTR}_1` (Joachims, Swaminathan & Schnabel,
  WSDM 2017, §6; Wang et al., WSDM 2018, §3).
- :func:`propensities_randpair` — RandPair / swap: in each session of the experiment the
  documents at the pivot rank and at one other rank k are shown in a random order (each order with
  probability 1/2); :math:`\theta_k/\theta_{pivot}` = clicks at k / clicks at the pivot over those
  sessions (Joachims et al. 2017, swap intervention; Wang et al. 2018, RandPair).

Without interventions:

- :func:`regression_em` — Wang, Golbandi, Bendersky, Metzler & Najork, "Position bias estimation
  for unbiased learning to rank in personal search", WSDM 2018: EM on the PBM where the relevance
  γ = f(x) is a regression function of the features (a GBDT), so that relevance is shared across
  documents and the confounding of rank and relevance is broken.
- :func:`harvest_propensities` — Agarwal, Zaitsev, Wang, Li, Najork & Joachims, "Estimating
  position bias without intrusive interventions", WSDM 2019: (query, doc) pairs that different
  rankings put at ranks k and k' form interventional sets; the AllPairs estimator fits θ and the
  sets' relevances by maximum likelihood.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankwise.data.clicklog import ClickCounts, ClickLog
from rankwise.errors import InputError

__all__ = ["propensities_randtop", "propensities_randpair", "regression_em", "regression_em_log", "rank_table",
           "RegressionEMResult",
           "harvest_propensities", "HarvestResult", "pbm_propensities"]


def _check_log(log):
    if not isinstance(log, ClickLog):
        raise InputError(f"log must be a rankwise.clicks.ClickLog; got {type(log).__name__}")
    if log.n_sessions == 0:
        raise InputError("log has no session")


def _top_ranks(log, n, name, lo):
    """Check ``log`` and the rank cut ``n`` (None: the longest page) in [lo, longest page];
    return n, the 0-based rank of every row and the mask of the rows shown in the top n."""
    _check_log(log)
    n = log.max_rank if n is None else int(n)
    if not lo <= n <= log.max_rank:
        raise InputError(f"{name} must be in [{lo}, {log.max_rank}] (the longest page); got {n}")
    r = log.ranks - 1
    return n, r, r < n


def propensities_randtop(log: ClickLog, n: int | None = None) -> np.ndarray:
    r"""Relative propensities θ_k/θ_1, k = 1..n, from a RandTop-n experiment.

    .. math:: \hat\theta_k / \hat\theta_1 = \frac{\sum_s c_k^{(s)}}{\sum_s c_1^{(s)}}

    over sessions whose top n results were shown in a uniformly random order (every session of
    ``log``). ``n`` defaults to the longest page.

    References
    ----------
    T. Joachims, A. Swaminathan, T. Schnabel. "Unbiased learning-to-rank with biased feedback."
    WSDM 2017. X. Wang, N. Golbandi, M. Bendersky, D. Metzler, M. Najork. "Position bias
    estimation for unbiased learning to rank in personal search." WSDM 2018.
    """
    n, r, keep = _top_ranks(log, n, "n", 1)
    clicks = np.bincount(r[keep], weights=log.clicked[keep], minlength=n)
    shown = np.bincount(r[keep], minlength=n)
    if clicks[0] == 0:
        raise InputError("no click at rank 1 in the experiment: the relative propensities are undefined")
    ctr = clicks / np.maximum(shown, 1)
    return ctr / ctr[0]


def propensities_randpair(log: ClickLog, *, pair_rank: str = "pair_rank", pivot: int = 1) -> np.ndarray:
    r"""Relative propensities θ_k/θ_pivot from a RandPair (swap) experiment.

    ``log.session_data[pair_rank]`` gives, per session, the rank k whose document was shown in a
    random order with the pivot's (0 for a session without intervention). Then

    .. math:: \hat\theta_k / \hat\theta_{pivot} = \frac{\sum_{s: k_s = k} c_k^{(s)}}{\sum_{s: k_s = k} c_{pivot}^{(s)}}.

    Returns an array over ranks 1..max_rank, NaN where no session randomised that rank (and 1 at
    the pivot).
    """
    _check_log(log)
    if pair_rank not in log.session_data:
        raise InputError(f"log.session_data has no {pair_rank!r} (the rank paired with the pivot in each "
                         f"session, 0 for none); it has {sorted(log.session_data)}")
    k_s = np.asarray(log.session_data[pair_rank]).astype(np.int64)
    R = log.max_rank
    if not 1 <= pivot <= R:
        raise InputError(f"pivot must be a rank in [1, {R}]; got {pivot}")
    if np.any((k_s < 0) | (k_s > R)):
        raise InputError(f"session_data[{pair_rank!r}] must hold ranks in [0, {R}]")
    k_row = np.repeat(k_s, log.sizes)
    r = log.ranks
    c = log.clicked.astype(np.float64)
    at_k = (k_row > 0) & (r == k_row)
    at_pivot = (k_row > 0) & (r == pivot)
    num = np.bincount(k_row[at_k], weights=c[at_k], minlength=R + 1)
    den = np.bincount(k_row[at_pivot], weights=c[at_pivot], minlength=R + 1)
    out = np.full(R, np.nan)
    ok = den > 0
    out[ok[1:]] = (num / np.where(ok, den, 1))[1:][ok[1:]]
    out[pivot - 1] = 1.0
    return out


def pbm_propensities(model) -> np.ndarray:
    """θ_k/θ_1 of a fitted :class:`~rankwise.clicks.PBM` (its γ_r normalised at rank 1)."""
    g = np.asarray(getattr(model, "gamma_", None) if model is not None else None, dtype=float)
    if g.ndim != 1:
        raise InputError("pbm_propensities takes a fitted PBM")
    return g / g[0]


# ----------------------------------------------------------------------------- regression-EM
@dataclass
class RegressionEMResult:
    """Output of :func:`regression_em`: ``propensity`` (θ_k/θ_1, k = 1..R), ``theta`` (the
    unnormalised θ), ``relevance`` (γ = f(x) per input row), the fitted ``relevance_model`` (a
    LightGBM Booster; with ``cross_fit`` the list of the folds' models, the model of fold j fitted on the
    other folds' queries), ``n_iter`` and the per-iteration mean log-likelihood ``loglik``."""

    propensity: np.ndarray
    theta: np.ndarray
    relevance: np.ndarray
    relevance_model: object
    n_iter: int
    loglik: list


class _StagedBooster:
    """The relevance regression of a warm-started regression-EM: a constant start plus the trees added
    by every M-step; ``predict(X, raw_score=False)`` like a LightGBM Booster."""

    def __init__(self, base, m):
        self.base = base
        self.boosters = []
        self.raw = np.full(m, base)  # raw score on the training rows

    def add(self, booster, X):
        self.boosters.append(booster)
        self.raw = self.raw + booster.predict(X, raw_score=True)

    def num_trees(self):
        return sum(b.num_trees() for b in self.boosters)

    def predict(self, X, raw_score=False):
        F = self.base + sum(b.predict(X, raw_score=True) for b in self.boosters)
        return F if raw_score else 1.0 / (1.0 + np.exp(-F))


def _query_folds(query, m, n_folds, random_state):
    """Fold 0..n_folds-1 of every row, by query (all rows of a query in one fold, queries shuffled)."""
    import pandas as pd

    if query is None:
        raise InputError("cross_fit needs the query of every row (query=...; regression_em_log passes it)")
    q_idx, _ = pd.factorize(np.asarray(query))
    if len(q_idx) != m:
        raise InputError(f"query must have one entry per row ({m}); got {len(q_idx)}")
    n_q = int(q_idx.max()) + 1
    if not 2 <= n_folds <= n_q:
        raise InputError(f"cross_fit must be 0 (off) or a number of folds in [2, {n_q}] (the number of queries); "
                         f"got {n_folds}")
    perm = np.random.default_rng(random_state).permutation(n_q)
    return perm[q_idx] % n_folds


def regression_em(X, rank, clicks, impressions, *, n_iter: int = 30, n_estimators: int | str = 50,
                  learning_rate: float = 0.1, num_leaves: int = 15, min_child_samples: int = 20,
                  tol: float = 1e-5, random_state=0, theta_init=None, group=None,
                  group_l2: float = 1.0, cross_fit: int = 0, warm_start: bool = False,
                  query=None, m_step: str = "expected", validation_fraction: float = 0.2,
                  early_stopping_rounds: int = 20) -> RegressionEMResult:
    r"""Regression-EM (Wang et al., WSDM 2018): PBM propensities with relevance as a function of features.

    Observations are aggregated rows i = (query, doc, rank k_i) with features x_i, n_i
    impressions and c_i clicks. The model is :math:`P(C = 1) = \theta_{k} \gamma(x)`. E-step, for
    the non-clicks:

    .. math:: P(E = 1, R = 0 \mid C = 0) = \frac{\theta_k (1 - \gamma)}{1 - \theta_k \gamma}, \qquad
              P(E = 0, R = 1 \mid C = 0) = \frac{(1 - \theta_k) \gamma}{1 - \theta_k \gamma};

    M-step: :math:`\theta_k = \sum_{i: k_i = k} (c_i + (n_i - c_i) P(E=1 \mid C=0)) / \sum_{i: k_i = k} n_i`
    and γ = f refitted as a GBDT (LightGBM, cross-entropy objective) on the expected relevance
    :math:`(c_i + (n_i - c_i) P(R=1 \mid C=0)) / n_i` with weights n_i. (The paper samples binary
    relevance labels from the posterior; the soft labels give the expectation of that gradient.)

    Parameters
    ----------
    X : array (n_rows, n_features)
    rank : int array (n_rows,), ranks 1..R
    clicks, impressions : arrays (n_rows,), 0 <= clicks <= impressions, impressions > 0
    n_iter : int
        EM iterations (stops earlier when θ moves less than ``tol``; with ``m_step="observed"`` when
        θ/θ_1 moves less than ``tol`` relative to itself).
    n_estimators, learning_rate, num_leaves, min_child_samples : GBDT of the relevance
        (``n_estimators``: trees per M-step, or ``"auto"``: chosen on held-out queries, above).
    theta_init : array (R,), optional
        Starting propensities (default: the click-through rate by rank, scaled to a maximum of 0.9).
    group : array (n_rows,), optional
        Query of each row (``"query"`` in :func:`regression_em_log`). When given, the relevance is :math:`\sigma(f(x) + b_q)` with a per-query
        offset b_q (ridge penalty ``group_l2``), refitted by Newton steps in each M-step: LETOR
        features are normalised per query, so f(x) alone cannot see that a whole query has no
        relevant document, and that query-level error would be charged to the top ranks' θ.
    cross_fit : int
        0 (default): one regression on every row. K >= 2: the queries are split in K folds and the
        relevance of a row is predicted by the regression fitted on the other K - 1 folds, so f
        cannot learn a document's own click rate (its rank's examination) back.
    warm_start : bool
        False (default): each M-step fits ``n_estimators`` new trees from scratch. True: each
        M-step adds ``n_estimators`` trees to the previous regression (a generalised EM: every step
        raises the expected log-likelihood from where the last one ended).
    query : array (n_rows,), optional
        Query of each row, for ``cross_fit`` and ``n_estimators="auto"`` (defaults to ``group``).
    m_step : {"expected", "observed"}
        ``"expected"`` (default): Wang et al.'s EM. ``"observed"``: ECME on the observed-data
        likelihood (above); not with ``group``, ``cross_fit`` or ``warm_start``.
    validation_fraction : float in (0, 1)
        Share of the queries held out to choose the number of trees (``n_estimators="auto"``).
    early_stopping_rounds : int
        ``n_estimators="auto"`` stops adding trees when the held-out loss has not improved for this many.

    Returns
    -------
    RegressionEMResult

    References
    ----------
    X. Wang, N. Golbandi, M. Bendersky, D. Metzler, M. Najork. "Position bias estimation for
    unbiased learning to rank in personal search." WSDM 2018, §4.
    V. Chernozhukov et al. "Double/debiased machine learning for treatment and structural
    parameters." The Econometrics Journal 21(1), 2018 (cross-fitting).
    C. Liu, D. B. Rubin. "The ECME algorithm: a simple extension of EM and ECM with faster monotone
    convergence." Biometrika 81(4), 1994 (``m_step="observed"``).
    """
    import lightgbm as lgb

    X = np.asarray(X, dtype=np.float64)
    rank = np.asarray(rank).astype(np.int64)
    c = np.asarray(clicks, dtype=np.float64)
    n = np.asarray(impressions, dtype=np.float64)
    m = len(rank)
    if X.ndim != 2 or X.shape[0] != m or len(c) != m or len(n) != m:
        raise InputError(f"X must be (n_rows, n_features) and rank, clicks, impressions one entry per row; got "
                         f"X {X.shape}, rank {rank.shape}, clicks {c.shape}, impressions {n.shape}")
    if m == 0:
        raise InputError("regression_em needs at least one row")
    if np.any(rank < 1):
        raise InputError("rank must hold ranks 1..R")
    if np.any(n <= 0) or np.any(c < 0) or np.any(c > n):
        raise InputError("impressions must be > 0 and 0 <= clicks <= impressions on every row")
    if m_step not in ("expected", "observed"):
        raise InputError(f"m_step must be 'expected' (Wang et al.'s EM) or 'observed' (ECME); got {m_step!r}")
    auto = isinstance(n_estimators, str)
    if auto and n_estimators != "auto" or not auto and (isinstance(n_estimators, bool) or int(n_estimators) < 1):
        raise InputError(f"n_estimators must be a positive integer or 'auto'; got {n_estimators!r}")
    if m_step == "observed" and (group is not None or int(cross_fit) or warm_start):
        raise InputError("m_step='observed' takes no group, cross_fit or warm_start (they are options of the "
                         "expected M-step)")
    if auto and warm_start:
        raise InputError("n_estimators='auto' chooses the trees of each fit from scratch; warm_start adds a fixed "
                         "number per M-step: use one or the other")
    if auto:
        f = validation_fraction
        if isinstance(f, bool) or not isinstance(f, (int, float, np.floating, np.integer)) or not 0 < f < 1:
            raise InputError(f"validation_fraction must be a number in (0, 1); got {f!r}")
        if isinstance(early_stopping_rounds, bool) or int(early_stopping_rounds) < 1:
            raise InputError(f"early_stopping_rounds must be a positive integer; got {early_stopping_rounds!r}")
    R = int(rank.max())
    k = rank - 1
    imp_k = np.bincount(k, weights=n, minlength=R)
    if np.any(imp_k == 0):
        raise InputError(f"ranks {np.flatnonzero(imp_k == 0) + 1} have no impression: their propensity is undefined")
    if theta_init is None:
        ctr = np.bincount(k, weights=c, minlength=R) / imp_k
        theta = np.clip(0.9 * ctr / max(ctr.max(), 1e-12), 1e-3, 0.999)
    else:
        theta = np.asarray(theta_init, dtype=np.float64)
        if theta.shape != (R,) or np.any(theta <= 0) or np.any(theta > 1):
            raise InputError(f"theta_init must be {R} values in (0, 1]; got {theta_init!r}")
        theta = theta.copy()
    params = {"objective": "cross_entropy", "learning_rate": float(learning_rate), "num_leaves": int(num_leaves),
              "min_data_in_leaf": int(min_child_samples), "verbosity": -1, "seed": int(random_state or 0),
              "deterministic": True, "force_row_wise": True, "num_threads": 1}
    if group is not None:
        import pandas as pd

        g_idx, _ = pd.factorize(np.asarray(group))
        if len(g_idx) != m:
            raise InputError(f"group must have one entry per row ({m}); got {len(g_idx)}")
        b = np.zeros(int(g_idx.max()) + 1)
    else:
        g_idx, b = np.zeros(m, dtype=np.int64), np.zeros(1)
    cross_fit = int(cross_fit)
    if cross_fit:
        fold = _query_folds(group if query is None else query, m, cross_fit, random_state)
        parts = [(fold != j, fold == j) for j in range(cross_fit)]  # (rows fitted, rows predicted)
    else:
        every = np.ones(m, dtype=bool)
        parts = [(every, every)]
    staged = [None] * len(parts)  # warm start: each part's boosters so far
    held = _held_out_rows(group if query is None else query, m, validation_fraction, random_state) if auto else None

    def train(fit_rows, tgt, init, pbm_t=None):
        """One GBDT on ``fit_rows`` (with 'auto', on their training queries, its trees chosen on the held-out
        ones): cross-entropy on ``tgt`` weighted by the impressions, or with ``pbm_t`` (every row's examination
        probability) the observed-data PBM likelihood of the clicks."""
        tr = np.flatnonzero(fit_rows & ~held if auto else fit_rows)
        p = params
        if pbm_t is not None:
            p = {**params, "metric": "None",
                 "objective": lambda F, _data: _pbm_nll_grad_hess(F, pbm_t[tr], c[tr], n[tr])}

        def data(rows, ref=None):
            return lgb.Dataset(X[rows], label=tgt[rows], weight=None if pbm_t is not None else n[rows], reference=ref,
                               init_score=None if init is None else init[rows])
        d_tr = data(tr)
        if not auto:
            return lgb.train(p, d_tr, num_boost_round=int(n_estimators))
        va = np.flatnonzero(fit_rows & held)
        feval = None
        if pbm_t is not None:
            def feval(F, _data):
                return "pbm_nll", _pbm_nll(F, pbm_t[va], c[va], n[va]) / n[va].sum(), False
        return lgb.train(p, d_tr, num_boost_round=_MAX_AUTO_TREES, valid_sets=[data(va, d_tr)], feval=feval,
                         callbacks=[lgb.early_stopping(int(early_stopping_rounds), verbose=False)])

    if m_step == "observed":
        return _regression_ecme(X, k, c, n, R, theta, train, int(n_iter), tol)

    def fit_relevance(target, b):
        tgt = np.clip(target, 0.0, 1.0)
        F = np.zeros(m)
        models = []
        for j, (fit_rows, pred_rows) in enumerate(parts):
            if warm_start and staged[j] is None:  # the first warm step starts from the mean target
                mu = np.clip(np.average(tgt[fit_rows], weights=n[fit_rows]), 1e-6, 1 - 1e-6)
                staged[j] = _StagedBooster(float(np.log(mu / (1 - mu))), m)
            init = staged[j].raw if warm_start else None
            if group is not None:
                init = b[g_idx] if init is None else init + b[g_idx]
            bst = train(fit_rows, tgt, init)
            if warm_start:
                staged[j].add(bst, X)
                bst = staged[j]
                Fj = bst.raw
            else:
                Fj = bst.predict(X, raw_score=True)
            F[pred_rows] = Fj[pred_rows]
            models.append(bst)
        if group is not None:
            for _ in range(5):  # Newton steps on the per-query offsets, f held fixed
                p = 1.0 / (1.0 + np.exp(-(F + b[g_idx])))
                grad = np.bincount(g_idx, weights=n * (tgt - p), minlength=len(b)) - group_l2 * b
                hess = np.bincount(g_idx, weights=n * p * (1 - p), minlength=len(b)) + group_l2
                b = b + grad / hess
        gam = 1.0 / (1.0 + np.exp(-(F + b[g_idx])))
        return (models[0] if len(models) == 1 else models), b, np.clip(gam, 1e-6, 1 - 1e-6)

    # relevance start: the click-through rate corrected by the starting propensities
    booster, b, gamma = fit_relevance(c / n / theta[k], b)
    history = []
    it = 0
    for it in range(1, int(n_iter) + 1):
        th = theta[k]
        d = 1.0 - th * gamma
        p_e = th * (1.0 - gamma) / d
        p_r = (1.0 - th) * gamma / d
        new_theta = np.bincount(k, weights=c + (n - c) * p_e, minlength=R) / imp_k
        booster, b, gamma = fit_relevance((c + (n - c) * p_r) / n, b)
        new_theta = np.clip(new_theta, 1e-6, 1.0)
        history.append(_click_log_likelihood(new_theta[k] * gamma, c, n) / float(n.sum()))
        moved = float(np.max(np.abs(new_theta - theta)))
        theta = new_theta
        if moved < tol:
            break
    return RegressionEMResult(theta / theta[0], theta, gamma, booster, it, history)


_MAX_AUTO_TREES = 5000  # n_estimators="auto": the most trees one relevance fit may grow


def _held_out_rows(query, m, fraction, random_state):
    """Rows of a random ``fraction`` of the queries (at least one query, never all): where
    ``n_estimators="auto"`` chooses the number of trees."""
    import pandas as pd

    if query is None:
        raise InputError("n_estimators='auto' holds out queries, so it needs the query of every row (query=...; "
                         "regression_em_log passes it)")
    q_idx, _ = pd.factorize(np.asarray(query))
    if len(q_idx) != m:
        raise InputError(f"query must have one entry per row ({m}); got {len(q_idx)}")
    n_q = int(q_idx.max()) + 1
    if n_q < 2:
        raise InputError("n_estimators='auto' needs at least 2 queries (one is held out)")
    n_val = min(max(int(round(fraction * n_q)), 1), n_q - 1)
    val = np.zeros(n_q, dtype=bool)
    val[np.random.default_rng(random_state).permutation(n_q)[:n_val]] = True
    return val[q_idx]


def _pbm_nll_grad_hess(F, t, c, n):
    r"""−ℓ of PBM clicks (c of n, examination probability t, relevance γ = σ(F)) per row: its gradient in F
    and the Fisher information (the expected Hessian, positive; the Hessian itself is not everywhere).

    :math:`-\ell = -c\log t\gamma - (n - c)\log(1 - t\gamma)`,
    :math:`\partial_F(-\ell) = -(1 - \gamma)(c - n t\gamma)/(1 - t\gamma)`,
    :math:`I = n t\gamma(1 - \gamma)^2/(1 - t\gamma)`."""
    g = np.clip(1.0 / (1.0 + np.exp(-F)), 1e-12, 1 - 1e-9)
    d = 1.0 - t * g
    return -(1.0 - g) * (c - n * t * g) / d, np.maximum(n * t * g * (1.0 - g) ** 2 / d, 1e-12)


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
    """``m_step="observed"`` of :func:`regression_em`: F boosted on the observed-data likelihood given θ, then
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
    return RegressionEMResult(theta / theta[0], theta, gamma, staged, it, history)


# -------------------------------------------------------------------------- intervention harvesting
@dataclass
class HarvestResult:
    """Output of :func:`harvest_propensities`: ``propensity`` (θ_k/θ_1), ``pairs`` (k, k' with an
    interventional set), ``set_sizes`` (|S_{k,k'}|), ``ctr`` (ĉ_k, ĉ_k' summed click rates)."""

    propensity: np.ndarray
    pairs: np.ndarray
    set_sizes: np.ndarray
    ctr: np.ndarray


def harvest_propensities(log: ClickLog, *, max_rank: int | None = None, min_set_size: int = 1,
                         max_iter: int = 500) -> HarvestResult:
    r"""Propensities by intervention harvesting (Agarwal et al., WSDM 2019), AllPairs estimator.

    Where the log shows a (query, doc) pair at several ranks (different rankings of the same
    query over time), the pairs seen at both ranks k and k' form the interventional set
    :math:`S_{k,k'}`. With each pair's click-through rate at rank k, :math:`\mathrm{ctr}(q,d,k)`
    (clicks / impressions there), the harvested click rates are
    :math:`\hat c_k^{k,k'} = \sum_{(q,d) \in S_{k,k'}} \mathrm{ctr}(q,d,k)` over
    :math:`N^{k,k'} = |S_{k,k'}|` pairs; under the PBM :math:`E[\hat c_k^{k,k'}] = \theta_k r_{k,k'}`
    with r the mean relevance of the set. AllPairs maximises

    .. math:: \sum_{k \ne k'} \hat c_k^{k,k'} \log(\theta_k r_{k,k'}) +
              (N^{k,k'} - \hat c_k^{k,k'}) \log(1 - \theta_k r_{k,k'})

    over θ and the symmetric r (L-BFGS on logits); θ is returned relative to rank 1.
    (Agarwal et al. weight each pair's clicks by the rankers' session counts; dividing by the
    impressions at each rank gives every pair the same weight at both ranks, the same balance.)

    References
    ----------
    A. Agarwal, I. Zaitsev, X. Wang, C. Li, M. Najork, T. Joachims. "Estimating position bias
    without intrusive interventions." WSDM 2019, §4-5.
    """
    from scipy.optimize import minimize

    R, r, keep = _top_ranks(log, max_rank, "max_rank", 2)
    key = log.pair[keep] * R + r[keep]
    imp = np.bincount(key, minlength=log.n_pairs * R).reshape(log.n_pairs, R)
    clk = np.bincount(key, weights=log.clicked[keep], minlength=log.n_pairs * R).reshape(log.n_pairs, R)
    seen = imp > 0
    ctr = np.divide(clk, imp, out=np.zeros_like(clk), where=seen)
    pairs, sizes, chat = [], [], []
    for a in range(R):
        for b in range(a + 1, R):
            both = seen[:, a] & seen[:, b]
            nb = int(both.sum())
            if nb >= min_set_size:
                pairs.append((a, b))
                sizes.append(nb)
                chat.append((ctr[both, a].sum(), ctr[both, b].sum()))
    if not pairs:
        raise InputError("no (query, doc) pair is shown at two different ranks: nothing to harvest "
                         "(the log needs several rankings of the same queries)")
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
    res = minimize(objective, z0, jac=True, method="L-BFGS-B", options={"maxiter": int(max_iter)})
    th = sig(res.x[:R])
    return HarvestResult(th / th[0], pairs + 1, sizes, chat)


def rank_table(log: ClickLog | ClickCounts):
    """Aggregated observations ``(pair, rank, clicks, impressions)``: one row per (query, doc, rank) of ``log``
    (the rows of :meth:`ClickLog.counts`, or of an aggregated log as it is)."""
    if not isinstance(log, ClickCounts):
        _check_log(log)
        log = log.counts()
    return log.pair, log.rank, log.clicks, log.impressions


def regression_em_log(log: ClickLog | ClickCounts, features, **kwargs) -> RegressionEMResult:
    """:func:`regression_em` on a click log (sessions or their aggregate), with the documents' features
    from ``features`` (a RankingDataset, matched as :func:`rankwise.clicks.click_dataset` matches them)."""
    from rankwise.clicks.ips import _feature_rows

    pair, rank, clk, imp = rank_table(log)
    rows = _feature_rows(log, features)
    X = features.X[rows[pair]]
    if hasattr(X, "toarray"):
        X = X.toarray()
    if kwargs.get("group") == "query":
        kwargs["group"] = log.pair_query[pair]
    if (kwargs.get("cross_fit") or kwargs.get("n_estimators") == "auto") and kwargs.get("query") is None:
        kwargs["query"] = log.pair_query[pair]
    return regression_em(X, rank, clk, imp, **kwargs)
