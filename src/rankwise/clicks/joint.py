r"""Rankers that learn the position bias jointly with the ranking: Unbiased LambdaMART and DLA.

Both work on *pages*: the distinct result lists of the log (same query, same documents in the same
order); a page u shown in n_u sessions has, per position a, the click count C_u[a] and, per pair of
positions (a, b), the number of sessions M_u[a, b] in which a was clicked and b was not.

- :class:`UnbiasedLambdaMART` (Hu, Wang, Peng & Li, "Unbiased LambdaMART: an unbiased pairwise
  learning-to-rank algorithm", WWW 2019): LambdaMART's pairwise gradients on (clicked, unclicked)
  pairs divided by position biases :math:`t^+_{k_a} t^-_{k_b}` (a clicked at rank k_a, b unclicked at
  k_b), which are re-estimated after every boosting round from the current pairwise losses,

  .. math:: t^+_k = \Bigl(\frac{\sum_{(a, b): k_a = k} M_u[a, b]\, L_{ab} / t^-_{k_b}}
            {\sum_{(a, b): k_a = 1} M_u[a, b]\, L_{ab} / t^-_{k_b}}\Bigr)^{1/(p+1)}, \qquad
            t^-_k = \Bigl(\frac{\sum_{(a, b): k_b = k} M_u[a, b]\, L_{ab} / t^+_{k_a}}
            {\sum_{(a, b): k_b = 1} M_u[a, b]\, L_{ab} / t^+_{k_a}}\Bigr)^{1/(p+1)},

  :math:`L_{ab} = \log(1 + e^{-\sigma (s_a - s_b)})`; trees by LightGBM with this custom objective.
  Each rank's sum is divided by the number of sessions that show the rank (the paper's pages all
  have the same length, where this is a constant factor).
  The pair weight |ΔDCG| of swapping a and b in the current ranking is used (ΔNDCG divided by the
  page's ideal DCG in the paper; the per-page constant is dropped here).
- :class:`DLA` (Ai et al., SIGIR 2018) lives in :mod:`rankwise.clicks.dla` (re-exported here).
"""
from __future__ import annotations

import numpy as np

from rankwise.clicks._joint_kernels import page_counts as _page_counts
from rankwise.clicks._joint_kernels import ulm_grad as _ulm_grad
from rankwise.clicks.dla import DLA  # noqa: F401  (moved; re-exported until callers import it from dla)
from rankwise.data.clicklog import ClickLog
from rankwise.errors import InputError, NotFittedError

__all__ = ["pages", "UnbiasedLambdaMART", "DLA"]


def pages(log: ClickLog, features):
    """The distinct result pages of ``log``: ``(page_offsets, X, position, clicks, n_sessions, pair_counts)``.

    ``pair_counts`` is a flat array of the M_u[a, b] blocks, page u's block of n_u² entries starting
    at ``pair_offsets[u]`` (returned as the 7th element)."""
    import pandas as pd

    from rankwise.clicks.ips import _feature_rows

    rows = _feature_rows(log, features)
    off = log.session_offsets
    keys = [log.pair[off[s]:off[s + 1]].tobytes() for s in range(log.n_sessions)]
    page_of, uniq = pd.factorize(pd.Series(keys), sort=False)
    n_pages = len(uniq)
    first = np.full(n_pages, -1, dtype=np.int64)
    first[page_of[::-1]] = np.arange(log.n_sessions - 1, -1, -1)
    sizes = log.sizes[first]
    p_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    m_off = np.concatenate([[0], np.cumsum(sizes ** 2)]).astype(np.int64)
    page_rows = np.concatenate([np.arange(off[s], off[s + 1]) for s in first]) if n_pages else np.zeros(0, np.int64)
    X = features.X[rows[log.pair[page_rows]]]
    if hasattr(X, "toarray"):
        X = X.toarray()
    clicks = np.zeros(p_off[-1])
    counts = np.zeros(m_off[-1])
    _page_counts(off, log.clicked, page_of.astype(np.int64), p_off, m_off, clicks, counts)
    n_sess = np.bincount(page_of, minlength=n_pages).astype(np.float64)
    position = (np.arange(p_off[-1]) - np.repeat(p_off[:-1], sizes) + 1).astype(np.int64)
    return p_off, np.asarray(X, dtype=np.float64), position, clicks, n_sess, counts, m_off


class UnbiasedLambdaMART:
    """Unbiased LambdaMART (Hu et al., WWW 2019) on a click log; see the module docstring.

    Parameters
    ----------
    n_estimators, learning_rate, num_leaves, min_child_samples : LightGBM trees.
    sigma : float
        Slope of the pairwise logistic loss.
    p : float
        Regularisation exponent of the bias estimates (1/(p+1) power; 0 in the paper's default).
    random_state : int

    Attributes
    ----------
    t_plus_, t_minus_ : position biases of clicked and unclicked documents, relative to rank 1.
    booster_ : the LightGBM booster; ``predict(X)`` scores documents.
    """

    def __init__(self, *, n_estimators: int = 100, learning_rate: float = 0.05, num_leaves: int = 31,
                 min_child_samples: int = 20, sigma: float = 1.0, p: float = 0.0, random_state=0):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.sigma = sigma
        self.p = p
        self.random_state = random_state

    def fit(self, log: ClickLog, features):
        import lightgbm as lgb

        if not isinstance(log, ClickLog):
            raise InputError(f"log must be a ClickLog; got {type(log).__name__}")
        if not self.sigma > 0 or self.p < 0:
            raise InputError(f"sigma must be > 0 and p >= 0; got sigma={self.sigma}, p={self.p}")
        p_off, X, position, clicks, n_sess, counts, m_off = pages(log, features)
        R = int(position.max())
        t_plus, t_minus = np.ones(R), np.ones(R)
        shown = np.maximum(np.bincount(position - 1, weights=np.repeat(n_sess, np.diff(p_off)), minlength=R), 1.0)
        sigma, expo = float(self.sigma), 1.0 / (1.0 + float(self.p))
        state = {"tp": t_plus, "tm": t_minus}

        def objective(preds, dataset):
            tp, tm = state["tp"], state["tm"]
            grad = np.zeros(len(preds))
            hess = np.zeros(len(preds))
            num_p, num_m = np.zeros(len(preds)), np.zeros(len(preds))
            _ulm_grad(np.asarray(preds, dtype=np.float64), p_off, m_off, counts, tp[position - 1],
                      tm[position - 1], sigma, grad, hess, num_p, num_m)
            # per session showing the rank: pages of different lengths (lists shorter than the page)
            # would otherwise make the deep ranks look rarely clicked
            sp = np.bincount(position - 1, weights=num_p, minlength=R) / shown
            sm = np.bincount(position - 1, weights=num_m, minlength=R) / shown
            # ranks never seen clicked (unclicked) keep their bias
            if sp[0] > 0:
                state["tp"] = np.where(sp > 0, (sp / sp[0]) ** expo, tp)
            if sm[0] > 0:
                state["tm"] = np.where(sm > 0, (sm / sm[0]) ** expo, tm)
            return grad, np.maximum(hess, 1e-9)

        params = {"objective": objective, "learning_rate": float(self.learning_rate),
                  "num_leaves": int(self.num_leaves), "min_data_in_leaf": int(self.min_child_samples),
                  "verbosity": -1, "seed": int(self.random_state or 0), "deterministic": True,
                  "force_row_wise": True, "num_threads": 1}
        ds = lgb.Dataset(X, label=np.zeros(len(X)), free_raw_data=False)
        self.booster_ = lgb.train(params, ds, num_boost_round=int(self.n_estimators))
        self.t_plus_, self.t_minus_ = state["tp"], state["tm"]
        return self

    def predict(self, X):
        if not hasattr(self, "booster_"):
            raise NotFittedError("this UnbiasedLambdaMART is not fitted; call fit(log, features) first")
        X = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
        return self.booster_.predict(X, raw_score=True)
