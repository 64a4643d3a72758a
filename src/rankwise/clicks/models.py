r"""Click models (Chuklin, Markov & de Rijke, *Click Models for Web Search*, 2015).

Every model is an estimator: ``fit(log)`` returns the model; ``click_probabilities(log,
conditional=...)``; ``log_likelihood(log)`` and ``perplexity(log)`` as the book defines them
(§5.1–5.2); ``relevance()`` per (query, doc).

Parameters are proportions estimated as :math:`(n_1 + 1) / (n + 2)` — a Beta(1, 1) pseudo-count,
PyClick's convention — so that a (query, doc) pair never clicked gets no zero probability and an
unseen pair gets 1/2. EM runs ``max_iter`` iterations (the book's experiments use a fixed number)
or stops when no parameter moves by more than ``tol``.

Held-out evaluation (the book's protocol, §5.1): test sessions whose query does not occur in the
training log are left out; the results say how many (``n_sessions``, ``n_dropped``).

.. math::

   LL(M) = \frac{1}{|S|} \sum_{s \in S} \sum_{r=1}^{n} \log P_M(C_r = c_r^{(s)} \mid C_{<r} = c_{<r}^{(s)}),
   \qquad
   p_r(M) = 2^{-\frac{1}{|S|} \sum_{s \in S} \bigl(c_r^{(s)} \log_2 q_r^{(s)}
            + (1 - c_r^{(s)}) \log_2 (1 - q_r^{(s)})\bigr)},

with :math:`q_r^{(s)} = P_M(C_r = 1)` the full (unconditional) click probability and the
overall perplexity the mean of :math:`p_r` over ranks.

The log-likelihood is **per session** (a sum over the page's results). PyClick's
``LogLikelihood`` divides each session's sum by its number of results first (per result: ten
times smaller on a page of 10); :class:`EvalResult` carries both (``float(result)`` and
``result.per_result``).

References
----------
A. Chuklin, I. Markov, M. de Rijke. *Click Models for Web Search*. Morgan & Claypool, 2015
(ch. 3 models, ch. 4 estimation, ch. 5 evaluation).
N. Craswell, O. Zoeter, M. Taylor, B. Ramsey. "An experimental comparison of click position-bias
models." WSDM 2008 (CM, PBM).
G. Dupret, B. Piwowarski. "A user browsing model to predict search engine click data from past
observations." SIGIR 2008 (UBM).
F. Guo, C. Liu, Y. M. Wang. "Efficient multiple-click models in web search." WSDM 2009 (DCM).
F. Guo et al. "Click chain model in web search." WWW 2009 (CCM).
O. Chapelle, Y. Zhang. "A dynamic Bayesian network click model for web search ranking." WWW 2009
(DBN, SDBN).
"""
from __future__ import annotations

import time

import numpy as np
from sklearn.base import BaseEstimator

from rankwise._validation import Interval, check_params
from rankwise.clicks import _kernels as K
from rankwise.data.clicklog import ClickLog
from rankwise.errors import InputError, NotFittedError
from rankwise.models import persistence

__all__ = ["ClickModel", "GCTR", "RCTR", "DCTR", "PBM", "CM", "UBM", "DCM", "CCM", "DBN", "SDBN",
           "CLICK_MODELS", "EvalResult", "PerplexityResult", "simulate_clicks"]


def _ratio(num, den):
    """(n₁ + 1) / (n + 2): the Beta(1, 1) pseudo-count estimate (PyClick's)."""
    return (np.asarray(num, dtype=np.float64) + 1.0) / (np.asarray(den, dtype=np.float64) + 2.0)


class EvalResult(float):
    """A float (the mean per-session log-likelihood) that also says how many sessions it covers.

    ``per_result`` is the same log-likelihood in PyClick's convention: each session's log P(clicks)
    divided by its number of results, then averaged over the sessions (on pages of 10 results, the
    per-session value divided by 10)."""

    n_sessions: int
    n_dropped: int
    per_result: float

    def __new__(cls, value, n_sessions, n_dropped, per_result=float("nan")):
        obj = super().__new__(cls, value)
        obj.n_sessions, obj.n_dropped = int(n_sessions), int(n_dropped)
        obj.per_result = float(per_result)
        return obj


class PerplexityResult(tuple):
    """``(overall, per_rank)`` that also says how many sessions it covers (``n_sessions``,
    ``n_dropped``) and how many sessions show each rank (``sessions_per_rank``)."""

    def __new__(cls, overall, per_rank, n_sessions, n_dropped, sessions_per_rank):
        obj = super().__new__(cls, (float(overall), np.asarray(per_rank)))
        obj.n_sessions, obj.n_dropped = int(n_sessions), int(n_dropped)
        obj.sessions_per_rank = np.asarray(sessions_per_rank)
        return obj

    @property
    def overall(self):
        return self[0]

    @property
    def per_rank(self):
        return self[1]


def _check_log(log, name="log"):
    if not isinstance(log, ClickLog):
        raise InputError(f"{name} must be a rankwise.clicks.ClickLog (see read_click_log); got {type(log).__name__}")
    if log.n_sessions == 0:
        raise InputError(f"{name} has no session")


class ClickModel(persistence.ParamsInFile, BaseEstimator):
    """Base class: the estimator contract, (query, doc) lookup and evaluation.

    Parameters are declared in ``_parameter_constraints`` and checked at the start of ``fit``;
    ``get_params``/``set_params``, ``sklearn.clone`` and ``repr`` (the class and its non-default
    parameters) are scikit-learn's."""

    #: "independent", "cascade" or "ubm" (which kernels compute the click probabilities)
    family = "independent"
    uses_em = False
    _parameter_constraints = {"max_iter": [Interval("int", 1)], "tol": [Interval("real", 0)]}

    def __init__(self, *, max_iter: int = 50, tol: float = 1e-6):
        self.max_iter = max_iter
        self.tol = tol

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            persistence.register_model(cls)

    # -- saving and loading (rankwise.models.persistence: one .npz, no pickle) ---------------------
    def save(self, path):
        """Save the fitted model; :func:`rankwise.models.load` reads it back (the models' format, no pickle).
        Query and document ids are kept with their type: numbers as numeric arrays, anything else as text."""
        return persistence.save(self, path)

    def _check_is_fitted(self) -> None:
        self._check_fitted()

    def _get_state(self):
        state, arrays = {}, {}
        for name, v in vars(self).items():
            if not name.endswith("_") or name in ("pair_index_", "queries_"):
                continue
            if isinstance(v, np.ndarray) and v.dtype.kind in "biuf":
                arrays[name] = v
            elif isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
                state[name] = v.item() if isinstance(v, np.generic) else v
        ids = {"queries": self.queries_, "pair_query": self.pair_index_.get_level_values(0),
               "pair_doc": self.pair_index_.get_level_values(1)}
        for name, values in ids.items():
            v = np.asarray(values)
            if v.dtype.kind in "iuf":
                arrays[f"ids/{name}"] = v
            else:
                state[f"ids/{name}"] = [str(x) for x in v]
        return state, arrays

    def _set_state(self, state, arrays):
        import pandas as pd

        def ids(name):
            return arrays[f"ids/{name}"] if f"ids/{name}" in arrays else np.asarray(state[f"ids/{name}"], dtype=object)
        for name, v in arrays.items():
            if not name.startswith("ids/"):
                setattr(self, name, np.asarray(v))
        for name, v in state.items():
            if not name.startswith("ids/"):
                setattr(self, name, v)
        self.queries_ = pd.Index(ids("queries"))
        self.pair_index_ = pd.MultiIndex.from_arrays([ids("pair_query"), ids("pair_doc")])
        for name in ("alpha_", "sigma_"):
            if hasattr(self, name) and len(getattr(self, name)) != len(self.pair_index_):
                raise ValueError(f"{name} has {len(getattr(self, name))} entries for {len(self.pair_index_)} pairs")

    # -- fitting ---------------------------------------------------------------------------------
    def fit(self, log: ClickLog, *, features=None):
        """Estimate the parameters from a click log; returns the model. (``features``: unused, the
        signature of every click learner.)"""
        _check_log(log)
        check_params(type(self).__name__, self.get_params(deep=False), self._parameter_constraints)
        t0 = time.perf_counter()
        import pandas as pd

        self.pair_index_ = pd.MultiIndex.from_arrays(list(log.pair_keys()))
        self.queries_ = pd.Index(log.queries)
        self.max_rank_ = log.max_rank
        self.n_iter_ = 0
        self._fit(log)
        self.fit_time_ = time.perf_counter() - t0
        self.fit_sessions_ = log.n_sessions
        return self

    def _fit(self, log):  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_fitted(self):
        if not hasattr(self, "pair_index_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted; call fit(log) first")

    def _pairs_of(self, log) -> np.ndarray:
        """Index of each row's (query, doc) in the training pairs; -1 for pairs never seen."""
        import pandas as pd

        q, d = log.pair_keys()
        idx = self.pair_index_.get_indexer(pd.MultiIndex.from_arrays([q, d]))
        return idx[log.pair]

    @staticmethod
    def _lookup(values, rows_pair, default=0.5):
        out = np.full(len(rows_pair), default, dtype=np.float64)
        seen = rows_pair >= 0
        out[seen] = values[rows_pair[seen]]
        return out

    def _check_ranks(self, log):
        if log.max_rank > self.max_rank_:
            raise InputError(f"the log has sessions of {log.max_rank} results but the model was fitted on at most "
                             f"{self.max_rank_}: rank parameters beyond rank {self.max_rank_} are unknown")

    # -- probabilities -----------------------------------------------------------------------------
    def _row_params(self, log):
        """Per-row parameter arrays for the family's kernel."""
        raise NotImplementedError  # pragma: no cover

    def click_probabilities(self, log: ClickLog, *, conditional: bool = False) -> np.ndarray:
        """Click probability of every row of ``log``.

        ``conditional=False``: the full probability P(C_r = 1) (used by perplexity);
        ``conditional=True``: P(C_r = 1 | C_1..C_{r-1} as observed) (used by the log-likelihood).
        (query, doc) pairs not seen in training get the prior value 1/2."""
        self._check_fitted()
        _check_log(log)
        self._check_ranks(log)
        out = np.empty(len(log.doc), dtype=np.float64)
        params = self._row_params(log)
        if self.family == "independent":
            out[:] = params
        elif self.family == "cascade":
            a, k0, k1 = params
            K.cascade_probs(log.session_offsets, a, k0, k1, log.clicked, bool(conditional), out)
        else:
            a, gamma = params
            K.ubm_probs(log.session_offsets, a, log.ranks, gamma, log.clicked, bool(conditional), out,
                        np.empty(log.max_rank + 1))
        return out

    # -- evaluation --------------------------------------------------------------------------------
    def _known_sessions(self, log):
        keep = self.queries_.get_indexer(log.queries[log.query]) >= 0
        return keep

    def _held_out(self, log):
        self._check_fitted()
        _check_log(log, "test_log")
        keep = self._known_sessions(log)
        n_drop = int((~keep).sum())
        if not keep.any():
            raise InputError(f"none of the {log.n_sessions} test sessions has a query seen in training; "
                             "held-out evaluation leaves such sessions out (Chuklin et al. 2015, §5.1)")
        return (log if n_drop == 0 else log.subset(keep)), n_drop

    def session_log_likelihoods(self, log: ClickLog) -> np.ndarray:
        """log P(c_1..c_n) of each session (natural log), by the chain rule over conditional probabilities."""
        p = self.click_probabilities(log, conditional=True)
        out = np.empty(log.n_sessions)
        K.session_loglik(log.session_offsets, p, log.clicked, out)
        return out

    def log_likelihood(self, test_log: ClickLog) -> EvalResult:
        """Mean per-session log-likelihood (natural log) on held-out sessions of known queries;
        ``.per_result``: the mean over sessions of log P(clicks) / (results on the page), the
        quantity PyClick's ``LogLikelihood`` reports."""
        log, n_drop = self._held_out(test_log)
        ll = self.session_log_likelihoods(log)
        return EvalResult(float(ll.mean()), log.n_sessions, n_drop, float((ll / log.sizes).mean()))

    def perplexity(self, test_log: ClickLog) -> PerplexityResult:
        """``(overall, per_rank)`` perplexity of the full click probabilities on held-out sessions
        of known queries; overall = mean of the per-rank values (Chuklin et al. 2015, §5.2)."""
        log, n_drop = self._held_out(test_log)
        q = np.clip(self.click_probabilities(log, conditional=False), K.EPS, 1 - K.EPS)
        c = log.clicked.astype(bool)
        l2 = np.where(c, np.log2(q), np.log2(1 - q))
        r = log.ranks - 1
        n = np.bincount(r, minlength=log.max_rank)
        s = np.bincount(r, weights=l2, minlength=log.max_rank)
        per_rank = 2.0 ** (-s / np.maximum(n, 1))
        return PerplexityResult(per_rank[n > 0].mean(), per_rank, log.n_sessions, n_drop, n)

    # -- relevance -------------------------------------------------------------------------------
    def relevance(self):
        """Per (query, doc) relevance estimate as a DataFrame ``query, doc, relevance`` (the
        model's attractiveness, times satisfaction for the DBN family)."""
        self._check_fitted()
        import pandas as pd

        q = self.pair_index_.get_level_values(0)
        d = self.pair_index_.get_level_values(1)
        return pd.DataFrame({"query": np.asarray(q), "doc": np.asarray(d), "relevance": self._relevance()})

    def _relevance(self):
        return self.alpha_

    # -- simulation ------------------------------------------------------------------------------
    def sample(self, log: ClickLog, *, random_state=None) -> ClickLog:
        """A copy of ``log`` (same sessions, queries, documents) with clicks drawn from this model."""
        self._check_fitted()
        _check_log(log)
        self._check_ranks(log)
        rng = np.random.default_rng(random_state)
        n = len(log.doc)
        u1, u2 = rng.random(n), rng.random(n)
        out = np.zeros(n, dtype=np.uint8)
        params = self._row_params(log)
        if self.family == "independent":
            out[:] = u1 < params
        elif self.family == "cascade":
            a, k0, k1 = params
            K.simulate_cascade(log.session_offsets, a, k0, k1, u1, u2, out)
        else:
            a, gamma = params
            K.simulate_ubm(log.session_offsets, a, log.ranks, gamma, u1, out)
        return ClickLog(log.session_offsets.copy(), log.query.copy(), log.queries, log.doc.copy(), log.docs, out,
                        None, dict(log.session_data))

    def _converged(self, old, new) -> bool:
        return max(float(np.max(np.abs(o - n), initial=0.0)) for o, n in zip(old, new)) <= self.tol

    def _em(self, params, step):
        """Run EM from ``params`` (a tuple of arrays): ``step(params)`` gives the next tuple; stop
        after ``max_iter`` iterations or when no parameter moved by more than ``tol``. Sets
        ``n_iter_`` and returns the last parameters."""
        for it in range(int(self.max_iter)):
            new = step(params)
            done = self._converged(params, new)
            params = new
            self.n_iter_ = it + 1
            if done:
                break
        return params

    def _position_em(self, log, index, n_gamma):
        """EM of PBM and UBM (§4.2): α per pair, γ per examination index (``index`` per row)."""
        def step(params):
            a, g = params
            na, da = np.zeros_like(a), np.zeros_like(a)
            ng, dg = np.zeros_like(g), np.zeros_like(g)
            K.pbm_stats(log.pair, index, log.clicked, a, g, na, da, ng, dg)
            return _ratio(na, da), _ratio(ng, dg)
        return self._em((np.full(log.n_pairs, 0.5), np.full(n_gamma, 0.5)), step)


def simulate_clicks(model: ClickModel, log: ClickLog, *, random_state=None) -> ClickLog:
    """``model.sample(log)``: clicks drawn from a fitted (or hand-set) click model on ``log``'s pages."""
    return model.sample(log, random_state=random_state)


# ======================================================================= click-through-rate models
class GCTR(ClickModel):
    r"""Global CTR: :math:`P(C_r = 1) = \rho` (Chuklin et al. 2015, §3.1)."""

    def _fit(self, log):
        self.rho_ = float(_ratio(log.clicked.sum(), len(log.clicked)))

    def _row_params(self, log):
        return np.full(len(log.doc), self.rho_)

    def relevance(self):
        raise InputError("GCTR has no per-document parameter; use DCTR or a click model for relevance")


class RCTR(ClickModel):
    r"""Rank-based CTR: :math:`P(C_r = 1) = \rho_r` (Chuklin et al. 2015, §3.1)."""

    def _fit(self, log):
        r = log.ranks - 1
        self.rho_ = _ratio(np.bincount(r, weights=log.clicked, minlength=log.max_rank),
                           np.bincount(r, minlength=log.max_rank))

    def _row_params(self, log):
        return self.rho_[log.ranks - 1]

    def relevance(self):
        raise InputError("RCTR has no per-document parameter; use DCTR or a click model for relevance")


class DCTR(ClickModel):
    r"""Document-based CTR: :math:`P(C_u = 1) = \rho_{qu}` (Chuklin et al. 2015, §3.1)."""

    def _fit(self, log):
        self.alpha_ = _ratio(np.bincount(log.pair, weights=log.clicked, minlength=log.n_pairs),
                             np.bincount(log.pair, minlength=log.n_pairs))

    def _row_params(self, log):
        return self._lookup(self.alpha_, self._pairs_of(log))


class PBM(ClickModel):
    r"""Position-based model: :math:`P(C_u = 1) = \gamma_r \alpha_{qu}` (Craswell et al. 2008;
    Chuklin et al. 2015, §3.2), fitted by EM (§4.2):

    .. math::

       \alpha_{qu}^{(t+1)} = \frac{1}{|S_{qu}|} \sum_{s \in S_{qu}} \Bigl(c_u^{(s)} + (1 - c_u^{(s)})
           \frac{(1 - \gamma_r^{(t)}) \alpha_{qu}^{(t)}}{1 - \gamma_r^{(t)} \alpha_{qu}^{(t)}}\Bigr), \qquad
       \gamma_r^{(t+1)} = \frac{1}{|S|} \sum_{s \in S} \Bigl(c_r^{(s)} + (1 - c_r^{(s)})
           \frac{\gamma_r^{(t)} (1 - \alpha_{qu}^{(t)})}{1 - \gamma_r^{(t)} \alpha_{qu}^{(t)}}\Bigr)

    (with the Beta(1, 1) pseudo-count of the module docstring).
    """

    uses_em = True

    def _fit(self, log):
        self.alpha_, self.gamma_ = self._position_em(log, log.ranks - 1, log.max_rank)

    @property
    def propensity_(self) -> np.ndarray:
        """θ_r/θ_1: the examination probabilities γ_r relative to rank 1 (the propensity estimators'
        form, :mod:`rankwise.clicks.propensity`)."""
        self._check_fitted()
        return np.asarray(self.gamma_ / self.gamma_[0], dtype=np.float64)

    def _row_params(self, log):
        return self._lookup(self.alpha_, self._pairs_of(log)) * self.gamma_[log.ranks - 1]


class UBM(ClickModel):
    r"""User browsing model: :math:`P(C_r = 1 \mid C_{<r}) = \gamma_{r r'} \alpha_{qu}`, r' the rank
    of the previous click (0 if none) (Dupret & Piwowarski 2008; Chuklin et al. 2015, §3.5),
    fitted by EM with the PBM updates where γ is indexed by (r, r') (§4.2). ``gamma_[r-1, r']``."""

    family = "ubm"
    uses_em = True

    def _fit(self, log):
        R = log.max_rank
        prev = np.empty(len(log.doc), dtype=np.int64)
        ranks = log.ranks
        K.previous_click_rank(log.session_offsets, ranks, log.clicked, prev)
        a, g = self._position_em(log, (ranks - 1) * R + prev, R * R)
        self.alpha_, self.gamma_ = a, g.reshape(R, R)

    @property
    def propensity_(self) -> np.ndarray:
        """γ_{r,0}/γ_{1,0}: the examination probability at rank r of a user who clicked nothing above r
        (``gamma_[:, 0]``), relative to rank 1. (UBM's examination also depends on the rank r' of the last
        click above, ``gamma_[r - 1, r']``; this is the marginal-free slice r' = 0, which equals PBM's θ_r/θ_1
        when examination does not depend on earlier clicks.)"""
        self._check_fitted()
        g = self.gamma_[:, 0]
        return np.asarray(g / g[0], dtype=np.float64)

    def _row_params(self, log):
        return self._lookup(self.alpha_, self._pairs_of(log)), self.gamma_


# ============================================================================== cascade family
class _Cascade(ClickModel):
    family = "cascade"

    def _first_last(self, log):
        first = np.empty(log.n_sessions, dtype=np.int64)
        last = np.empty(log.n_sessions, dtype=np.int64)
        K.last_first_click(log.session_offsets, log.clicked, first, last)
        return first, last

    @staticmethod
    def _within(log):
        off = log.session_offsets
        return np.arange(len(log.doc)) - np.repeat(off[:-1], np.diff(off))

    def _fit_alpha_to_last_click(self, log):
        """Set ``alpha_`` by the MLE of DCM and SDBN (§4.1): clicks over the rows at or above the
        last click (all rows of a session without click). Returns per row: clicked, and clicked
        as the session's last click."""
        _, last = self._first_last(log)
        n = log.sizes
        lr = np.where(last < 0, n - 1, last)
        j = self._within(log)
        examined = j <= np.repeat(lr, n)
        c = log.clicked == 1
        self.alpha_ = _ratio(np.bincount(log.pair, weights=c, minlength=log.n_pairs),
                             np.bincount(log.pair, weights=examined, minlength=log.n_pairs))
        return c, c & (j == np.repeat(last, n))


class CM(_Cascade):
    r"""Cascade model: the user scans down and stops at the first click (Craswell et al. 2008;
    Chuklin et al. 2015, §3.3). :math:`\kappa^1 = 0, \kappa^0 = 1`. MLE (§4.1): α_qu = clicks /
    examinations counting the ranks at or above the first click (all ranks of a session without
    click); clicks after the first one are ignored in fitting and get probability ~0 (clamped to
    1e-6) in evaluation."""

    def _fit(self, log):
        first, _ = self._first_last(log)
        n = log.sizes
        f = np.where(first < 0, n - 1, first)
        j = self._within(log)
        examined = j <= np.repeat(f, n)
        clicked_first = (j == np.repeat(first, n)) & (log.clicked == 1)
        self.alpha_ = _ratio(np.bincount(log.pair, weights=clicked_first, minlength=log.n_pairs),
                             np.bincount(log.pair, weights=examined, minlength=log.n_pairs))

    def _row_params(self, log):
        a = self._lookup(self.alpha_, self._pairs_of(log))
        return a, np.ones_like(a), np.zeros_like(a)


class DCM(_Cascade):
    r"""Dependent click model (Guo et al. 2009; Chuklin et al. 2015, §3.4): after a click at rank r
    the user goes on with probability λ_r; :math:`\kappa^1 = \lambda_r, \kappa^0 = 1`. The book's
    MLE (§4.1): with l the last clicked rank (the last rank of a session without click),

    .. math:: \alpha_{qu} = \frac{\sum_s I(c_u = 1)}{\sum_s I(r_u \le l)}, \qquad
              \lambda_r = \frac{\sum_s I(c_r = 1, r \ne l)}{\sum_s I(c_r = 1)}.
    """

    def _fit(self, log):
        c, is_last = self._fit_alpha_to_last_click(log)
        r = log.ranks - 1
        not_last = c & ~is_last
        self.lambda_ = _ratio(np.bincount(r, weights=not_last, minlength=log.max_rank),
                              np.bincount(r, weights=c, minlength=log.max_rank))

    def _row_params(self, log):
        a = self._lookup(self.alpha_, self._pairs_of(log))
        return a, np.ones_like(a), self.lambda_[log.ranks - 1]


class SDBN(_Cascade):
    r"""Simplified DBN (Chapelle & Zhang 2009; Chuklin et al. 2015, §3.8): the DBN with γ = 1;
    :math:`\kappa^1 = 1 - \sigma_{qu}, \kappa^0 = 1`. MLE (§4.1), l the last clicked rank:

    .. math:: \alpha_{qu} = \frac{\sum_s I(c_u = 1)}{\sum_s I(r_u \le l)}, \qquad
              \sigma_{qu} = \frac{\sum_s I(r_u = l)}{\sum_s I(c_u = 1)}.
    """

    def _fit(self, log):
        c, is_last = self._fit_alpha_to_last_click(log)
        self.sigma_ = _ratio(np.bincount(log.pair, weights=is_last, minlength=log.n_pairs),
                             np.bincount(log.pair, weights=c, minlength=log.n_pairs))

    def _row_params(self, log):
        rp = self._pairs_of(log)
        a = self._lookup(self.alpha_, rp)
        return a, np.ones_like(a), 1.0 - self._lookup(self.sigma_, rp)

    def _relevance(self):
        return self.alpha_ * self.sigma_


class DBN(_Cascade):
    r"""Dynamic Bayesian network model (Chapelle & Zhang 2009; Chuklin et al. 2015, §3.8): after a
    click the user is satisfied with probability σ_qu and stops; otherwise goes on with γ.
    :math:`\kappa^1 = \gamma (1 - \sigma_{qu}), \kappa^0 = \gamma`. Fitted by EM (§4.2): the
    posteriors of E_r and S_r given a session's clicks are exact (forward over the ranks above
    the last click, backward over the ranks below), and the M-step averages them.
    """

    uses_em = True
    _parameter_constraints = {**ClickModel._parameter_constraints,
                              "gamma": [None, Interval("real", 0, 1, closed="right")]}

    def __init__(self, *, max_iter: int = 50, tol: float = 1e-6, gamma=None):
        super().__init__(max_iter=max_iter, tol=tol)
        self.gamma = gamma

    def _fit(self, log):
        fixed = self.gamma is not None  # its range: _parameter_constraints, checked by fit
        n = len(log.doc)
        work = [np.empty(n) for _ in range(5)]

        def step(params):
            a, s, g = params[0], params[1], float(params[2][0])
            na, da, ns, ds = (np.zeros(log.n_pairs) for _ in range(4))
            gs = np.zeros(2)
            K.dbn_stats(log.session_offsets, log.pair, log.clicked, a, s, g, *work, na, da, ns, ds, gs)
            g2 = g if fixed else float(_ratio(gs[0], gs[1]))
            return _ratio(na, da), _ratio(ns, ds), np.array([g2])
        g0 = float(self.gamma) if fixed else 0.5
        a, s, g = self._em((np.full(log.n_pairs, 0.5), np.full(log.n_pairs, 0.5), np.array([g0])), step)
        self.alpha_, self.sigma_, self.gamma_ = a, s, float(g[0])

    def _row_params(self, log):
        rp = self._pairs_of(log)
        a = self._lookup(self.alpha_, rp)
        return a, np.full_like(a, self.gamma_), self.gamma_ * (1.0 - self._lookup(self.sigma_, rp))

    def _relevance(self):
        return self.alpha_ * self.sigma_


class CCM(_Cascade):
    r"""Click chain model (Guo et al. 2009; Chuklin et al. 2015, §3.6): after an examined
    non-click the user goes on with τ₁; after a click with :math:`\tau_2 (1 - \alpha_{qu}) +
    \tau_3 \alpha_{qu}`. :math:`\kappa^0 = \tau_1`, :math:`\kappa^1 = \tau_2(1-\alpha) + \tau_3\alpha`.
    Fitted by EM (ch. 4) with a latent Z ~ Bernoulli(α) choosing τ₃ or τ₂ after a click."""

    uses_em = True

    def _fit(self, log):
        n = len(log.doc)
        work = [np.empty(n) for _ in range(5)]

        def step(params):
            a, tau = params
            na, da = np.zeros(log.n_pairs), np.zeros(log.n_pairs)
            ts = np.zeros(6)
            K.ccm_stats(log.session_offsets, log.pair, log.clicked, a, tau, *work, na, da, ts)
            return _ratio(na, da), _ratio(ts[0::2], ts[1::2])
        self.alpha_, self.tau_ = self._em((np.full(log.n_pairs, 0.5), np.full(3, 0.5)), step)

    def _row_params(self, log):
        a = self._lookup(self.alpha_, self._pairs_of(log))
        t1, t2, t3 = self.tau_
        return a, np.full_like(a, t1), t2 * (1.0 - a) + t3 * a


#: every click model by name
CLICK_MODELS = {c.__name__: c for c in (GCTR, RCTR, DCTR, PBM, CM, UBM, DCM, CCM, DBN, SDBN)}
