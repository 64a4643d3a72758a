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
- :class:`DLA` (Ai, Bi, Luo, Guo & Croft, "Unbiased learning to rank with unbiased propensity
  estimation", SIGIR 2018): a ranking network f and a propensity model g (one logit per rank) trained
  together; f minimises the IPS softmax cross-entropy with weights θ_1/θ_a from g, and g minimises
  the inverse-relevance-weighted softmax cross-entropy with weights r_1/r_a from f (both weights
  held fixed in each step: the "dual" of the two estimation problems).
"""
from __future__ import annotations

import numpy as np

from rankwise._validation import Interval, check_params, set_deprecated
from rankwise.clicks._joint_kernels import page_counts as _page_counts
from rankwise.clicks._joint_kernels import ulm_grad as _ulm_grad
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


class DLA:
    """Dual Learning Algorithm (Ai et al., SIGIR 2018): an MLP ranker and a per-rank propensity model
    learned together from clicks; see the module docstring.

    Parameters
    ----------
    hidden : tuple of int
        Hidden layers of the ranking MLP.
    max_iter, batch_pages, learning_rate : Adam over minibatches of pages (``max_iter`` epochs).
    propensity_learning_rate : float
        Learning rate of the propensity logits (one per rank: a few parameters that see every page,
        so they take a larger step than the network).
    random_state : int

    The former names ``epochs``, ``lr`` and ``propensity_lr`` (before the models' one name per
    hyper-parameter) still work for one release, with a DeprecationWarning.

    Attributes
    ----------
    propensity_ : θ_k/θ_1 from the propensity model (softmax of its logits, relative to rank 1).
    """

    _deprecated_params = {"epochs": "max_iter", "lr": "learning_rate", "propensity_lr": "propensity_learning_rate"}
    _parameter_constraints = {
        "max_iter": [Interval("int", 1)],
        "batch_pages": [Interval("int", 1)],
        "learning_rate": [Interval("real", 0, closed="neither")],
        "propensity_learning_rate": [Interval("real", 0, closed="neither")],
    }

    def __init__(self, *, hidden=(64, 32), max_iter: int = 30, batch_pages: int = 32, learning_rate: float = 1e-3,
                 propensity_learning_rate: float = 0.05, random_state=0, **deprecated):
        self.hidden = hidden
        self.propensity_learning_rate = propensity_learning_rate
        self.max_iter = max_iter
        self.batch_pages = batch_pages
        self.learning_rate = learning_rate
        self.random_state = random_state
        for name, value in deprecated.items():
            set_deprecated(self, name, value, self._deprecated_params)

    def fit(self, log: ClickLog, features):
        import torch
        from torch import nn

        if not isinstance(log, ClickLog):
            raise InputError(f"log must be a ClickLog; got {type(log).__name__}")
        check_params("DLA", vars(self), self._parameter_constraints)
        n_epochs, bp = int(self.max_iter), int(self.batch_pages)
        p_off, X, position, clicks, n_sess, _, _ = pages(log, features)
        if log.max_rank < 2:
            raise InputError("DLA needs pages of at least two results")
        torch.manual_seed(int(self.random_state or 0))
        rng = np.random.default_rng(self.random_state)
        self.mean_ = X.mean(0)
        self.scale_ = X.std(0) + 1e-9
        Z = (X - self.mean_) / self.scale_
        layers, d = [], Z.shape[1]
        for h in self.hidden:
            layers += [nn.Linear(d, int(h)), nn.ReLU()]
            d = int(h)
        layers.append(nn.Linear(d, 1))
        net = nn.Sequential(*layers).double()
        R = log.max_rank
        g_logit = nn.Parameter(torch.zeros(R, dtype=torch.float64))
        opt = torch.optim.Adam([{"params": list(net.parameters()), "lr": float(self.learning_rate)},
                                {"params": [g_logit], "lr": float(self.propensity_learning_rate)}])
        # padded pages
        n_pages = len(p_off) - 1
        L = int(np.diff(p_off).max())
        idx = np.full((n_pages, L), -1)
        for u in range(n_pages):
            idx[u, : p_off[u + 1] - p_off[u]] = np.arange(p_off[u], p_off[u + 1])
        mask_np = idx >= 0
        Zt = torch.tensor(Z)
        C = torch.tensor(np.where(mask_np, clicks[np.maximum(idx, 0)], 0.0) / n_sess[:, None])
        mask = torch.tensor(mask_np)
        idx_t = torch.tensor(np.maximum(idx, 0))
        for _ in range(n_epochs):
            perm = rng.permutation(n_pages)
            for start in range(0, n_pages, bp):
                sel = torch.as_tensor(perm[start:start + bp])
                ii, mm, cc = idx_t[sel], mask[sel], C[sel]
                s = net(Zt[ii.reshape(-1)]).reshape(ii.shape)
                s = torch.where(mm, s, torch.full_like(s, -1e9))
                log_r = torch.log_softmax(s, -1)
                g = g_logit[: ii.shape[1]].expand_as(s)
                g = torch.where(mm, g, torch.full_like(g, -1e9))
                log_t = torch.log_softmax(g, -1)
                # IPS weights θ_1/θ_a and inverse relevance weights r_1/r_a, held fixed (no gradient)
                zero = torch.zeros_like(s)
                # padded slots get weight 0 before anything multiplies them (exp(+1e9) would be inf)
                w_rank = torch.where(mm, torch.exp((log_t[:, :1] - log_t).clamp(max=20.0)), zero).detach()
                w_prop = torch.where(mm, torch.exp((log_r[:, :1] - log_r).clamp(max=20.0)), zero).detach()
                l_rank = -(torch.where(mm, cc * w_rank * log_r, zero)).sum()
                l_prop = -(torch.where(mm, cc * w_prop * log_t, zero)).sum()
                opt.zero_grad()
                (l_rank + l_prop).backward()
                opt.step()
        self.net_ = net
        with torch.no_grad():
            t = torch.softmax(g_logit, 0).numpy()
        self.propensity_ = t / t[0]
        return self

    def predict(self, X):
        import torch

        if not hasattr(self, "net_"):
            raise NotFittedError("this DLA is not fitted; call fit(log, features) first")
        X = X.toarray() if hasattr(X, "toarray") else np.asarray(X, dtype=np.float64)
        with torch.no_grad():
            return self.net_(torch.tensor((X - self.mean_) / self.scale_)).reshape(-1).numpy()
