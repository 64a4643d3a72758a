r"""The Dual Learning Algorithm (Ai, Bi, Luo, Guo & Croft, SIGIR 2018): a neural ranker and a per-rank
propensity model learned together from clicks, on the shared torch training loop.

A ranking network f (:class:`~rankwise.models.NeuralRanker`'s scorer) and a propensity tower g (one logit
per rank) are trained on the same minibatches of result pages by the same optimiser. On a page showing
documents d_1..d_n at ranks 1..n with clicks c_1..c_n,

.. math::

    r_k = \operatorname{softmax}_k\bigl(f(x_{d_1}), \dots, f(x_{d_n})\bigr), \qquad
    \theta_k = \operatorname{softmax}_k(g_1, \dots, g_n),

    \ell_{\text{rank}} = -\sum_k c_k \, \frac{\theta_1}{\theta_k} \log r_k, \qquad
    \ell_{\text{prop}} = -\sum_k c_k \, \frac{r_1}{r_k} \log \theta_k,

the weights θ_1/θ_k and r_1/r_k held fixed in each step (no gradient flows through them, each is
clipped at e^20): the ranker minimises the inverse-propensity-weighted softmax cross-entropy, the tower
the inverse-relevance-weighted one — the "dual" of the two estimation problems. The fitted
``propensity_`` is θ_k/θ_1 (rank 1 = 1).

The tower is a submodule of the trained module, so early stopping, checkpoints, save/load and pickling
keep it with the ranker; its loss reads it through :func:`rankwise.train.loop.run_epochs`'s
``loss_fn.bind(module)`` extension point.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from rankwise._validation import Interval, warn_user
from rankwise.data.clicklog import ClickLog
from rankwise.errors import InputError
from rankwise.models.neural import NeuralRanker

__all__ = ["DLA"]

#: each inverse weight (θ_1/θ_k, r_1/r_k) is at most e^20
_MAX_LOG_WEIGHT = 20.0


def dla_losses(scores, logits, clicks, where):
    """``(ranker loss, tower loss)`` summed over a padded batch of pages (see the module docstring).

    ``scores``, ``clicks``, ``where``: ``[B, L]`` (a page's rank k is its column k-1); ``logits``: the
    tower's ``[L]`` logits of ranks 1..L, or ``[B, L]``.
    """
    import torch

    g = logits.to(scores.dtype).expand_as(scores)
    zero = torch.zeros((), dtype=scores.dtype)
    log_r = _log_softmax_where(scores, where, zero)
    log_t = _log_softmax_where(g, where, zero)
    # weights relative to rank 1 (column 0, present on every page); padded cells get 0 before anything multiplies
    w_rank = torch.where(where, torch.exp((log_t[:, :1] - log_t).clamp(max=_MAX_LOG_WEIGHT)), zero).detach()
    w_prop = torch.where(where, torch.exp((log_r[:, :1] - log_r).clamp(max=_MAX_LOG_WEIGHT)), zero).detach()
    return -(clicks * w_rank * log_r).sum(), -(clicks * w_prop * log_t).sum()


def _log_softmax_where(x, where, zero):
    """Log-softmax of each row over its real items (``where``), 0 on padded cells: the values and gradients of
    :func:`rankwise.losses.listwise._masked_log_softmax` in three operations instead of nine (a row without
    real items is 0 there too, and its padded cells pass no gradient back to ``x``)."""
    import torch

    return torch.where(where, torch.log_softmax(torch.where(where, x, -math.inf), dim=-1), zero)


class _DLALoss:
    """The training loss of :class:`DLA`: unbound, it holds nothing (models stay picklable); the loop binds
    it to the module being trained (:func:`rankwise.train.loop.run_epochs`)."""

    def bind(self, module):
        return _BoundDLALoss(module.tower.logits)

    def __call__(self, scores, labels, where, weights=None):
        raise TypeError("the DLA loss reads the propensity tower of the module being trained: call bind(module)")


class _BoundDLALoss:
    def __init__(self, logits):
        self.logits = logits

    def __call__(self, scores, labels, where, weights=None):
        width, n_ranks = scores.shape[-1], self.logits.shape[0]
        if width > n_ranks:
            raise InputError(f"DLA: a page of {width} results, but the propensity tower has {n_ranks} ranks")
        clicks = labels if weights is None else labels * weights
        l_rank, l_prop = dla_losses(scores, self.logits[:width], clicks, where)
        return l_rank + l_prop


def _build_dla_module(scorer, n_ranks: int):
    import torch
    from torch import nn

    class PropensityTower(nn.Module):
        """One logit per rank: θ_k = softmax(logits)_k over the ranks a page shows."""

        def __init__(self):
            super().__init__()
            self.logits = nn.Parameter(torch.zeros(int(n_ranks)))

    class DLANetwork(nn.Module):
        """The ranker (``scorer``, whose scores are the model's) and the propensity tower, trained together."""

        def __init__(self):
            super().__init__()
            self.scorer = scorer  # first: its first parameter gives the number of inputs (pickling)
            self.tower = PropensityTower()

        def forward(self, x, where):
            return self.scorer(x, where)

    return DLANetwork()


def _row_codes(X) -> np.ndarray:
    """One code per row of ``X``, equal for equal rows (bitwise): rows hashed, and the hash's groups checked
    against their first row (a collision falls back to sorting the rows)."""
    import pandas as pd

    if sp.issparse(X):
        Xc = sp.csr_matrix(X)
        keys = [Xc.indices[a:b].tobytes() + Xc.data[a:b].tobytes() for a, b in zip(Xc.indptr[:-1], Xc.indptr[1:])]
        return pd.factorize(pd.Series(keys, dtype=object))[0].astype(np.int64)
    Xd = np.ascontiguousarray(X)
    row_bytes = Xd.dtype.itemsize * Xd.shape[1]
    # each row's bits as 64-bit words where they fit evenly (fewer, wider columns), else as the item's width
    bits = Xd.view(np.uint64 if row_bytes % 8 == 0 else np.dtype(f"u{Xd.dtype.itemsize}"))
    # a polynomial hash of the rows' bit patterns, over blocks of rows that stay in cache (no copy of X)
    h = np.empty(len(bits), dtype=np.uint64)
    step = max(1, (1 << 21) // max(row_bytes, 1))
    with np.errstate(over="ignore"):
        for a in range(0, len(bits), step):
            block, hb = bits[a:a + step], np.zeros(min(step, len(bits) - a), dtype=np.uint64)
            for j in range(bits.shape[1]):
                hb *= np.uint64(0x100000001B3)
                hb += block[:, j]
            h[a:a + step] = hb
    codes = pd.factorize(h)[0].astype(np.int64)
    first = np.full(codes.max(initial=-1) + 1, -1, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    rep = first[codes]
    if all(np.array_equal(bits[a:a + step], bits[rep[a:a + step]]) for a in range(0, len(bits), step)):
        return codes
    rows = Xd.view(np.dtype((np.void, Xd.dtype.itemsize * Xd.shape[1]))).ravel()
    return np.unique(rows, return_inverse=True)[1].astype(np.int64).ravel()


def _merge_repeated_pages(train):
    """``train`` with the pages that show the same rows in the same order merged into one.

    The loss is linear in the clicks and depends otherwise only on a page's rows and their ranks, so
    merging repeated pages and summing their (weighted) clicks keeps the training objective exactly; the
    merged clicks are scaled by n_pages/n_sessions so that the objective, a mean over pages, stays the mean
    over sessions. Without repeats or weights ``train`` is returned as it is.
    """
    from rankwise.clicks.sessions import _codes_of_groups, _first_appearance_codes, _rows_of
    from rankwise.data.ranking_input import RankingInput

    X, off = train.X, train.offsets
    sizes = np.diff(off)
    if sp.issparse(X):
        codes = _row_codes(X)
        page_of, first = _first_appearance_codes(np.array([codes[a:b].tobytes() for a, b in zip(off[:-1], off[1:])],
                                                          dtype=object))
    else:  # the pages' bytes hashed and compared in compiled code
        page_of, first = _codes_of_groups(X, off)
    n_pages, n_sessions = len(first), len(sizes)
    if n_pages == n_sessions and train.sample_weight is None:
        return train
    src_rows, new_off = _rows_of(off, first)
    # every row's target: the same rank on its page's merged copy (row i of session s: new_off[page of s] + i - off[s])
    target = np.repeat(new_off[page_of] - off[:-1], sizes)
    target += np.arange(off[-1])
    clicks = train.y if train.sample_weight is None else train.y * train.sample_weight
    y = np.bincount(target, weights=clicks, minlength=new_off[-1]) * (n_pages / n_sessions)
    return RankingInput(X[src_rows], y, new_off, np.asarray(train.qids)[first], None, None)


class DLA(NeuralRanker):
    """Dual Learning Algorithm (Ai et al., SIGIR 2018): a neural ranker and a per-rank propensity model
    learned together from clicks; see the module docstring.

    A :class:`~rankwise.models.NeuralRanker` whose loss is DLA's pair of inverse-weighted softmax
    cross-entropies and whose module carries the propensity tower; it fits on a click data set,
    :func:`rankwise.clicks.session_dataset` (one group per session, rows in rank order, labels = clicks),
    or the same as arrays ``fit(X, clicks, qid=session)`` with each session's rows in displayed order.
    Repeated pages (the same rows in the same order) are merged before training, their clicks summed
    (the training objective is unchanged).

    Parameters
    ----------
    hidden, architecture, n_heads, n_layers, dropout : the ranking network, as in NeuralRanker.
    max_iter : int
        Epochs over the (distinct) pages.
    batch_queries : int
        Pages per minibatch.
    learning_rate : float
        AdamW step size of the ranking network.
    propensity_learning_rate : float
        Step size of the propensity logits (one per rank: a few parameters that see every page, so they
        take a larger step than the network; no weight decay).
    alpha : float
        Decoupled weight decay of the ranking network.
    standardize, eval_metric, early_stopping_rounds, random_state, verbose, n_jobs
        As in :class:`~rankwise.models.NeuralRanker` (``eval_set`` is scored with ``eval_metric``: clicks
        of held-out sessions, or true labels where known).

    (``epochs``, ``lr``, ``propensity_lr``, ``batch_pages`` and ``weight_decay`` are former names of
    ``max_iter``, ``learning_rate``, ``propensity_learning_rate``, ``batch_queries`` and ``alpha``; they
    still work for one release, with a DeprecationWarning. So does ``fit(log, features)``.)

    Attributes
    ----------
    propensity_ : ndarray of float64, shape (n_ranks,)
        θ_k/θ_1 from the propensity tower (``propensity_[0] == 1``).
    n_ranks_ : int
        Ranks of the tower: the longest training page.
    module_, history_, scaler_mean_, scaler_scale_, best_iteration_, best_score_ : as NeuralRanker.

    References
    ----------
    Q. Ai, K. Bi, C. Luo, J. Guo and W. B. Croft. Unbiased learning to rank with unbiased propensity
    estimation. SIGIR 2018.
    """

    _deprecated_params = {"epochs": "max_iter", "lr": "learning_rate", "propensity_lr": "propensity_learning_rate",
                          "batch_pages": "batch_queries", "weight_decay": "alpha"}
    _parameter_constraints = {
        **{k: v for k, v in NeuralRanker._parameter_constraints.items() if k != "loss"},
        "propensity_learning_rate": [Interval("real", 0, closed="neither")],
    }

    def __init__(self, *, hidden=(64, 32), architecture="mlp", n_heads=2, n_layers=1, max_iter=30, batch_queries=32,
                 learning_rate=1e-3, propensity_learning_rate=0.05, alpha=0.0, dropout=0.0, standardize=True,
                 eval_metric="ndcg@10", early_stopping_rounds=None, random_state=None, verbose="auto", n_jobs=None,
                 **deprecated):
        self.hidden = hidden
        self.architecture = architecture
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.max_iter = max_iter
        self.batch_queries = batch_queries
        self.learning_rate = learning_rate
        self.propensity_learning_rate = propensity_learning_rate
        self.alpha = alpha
        self.dropout = dropout
        self.standardize = standardize
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs
        self._init_deprecated(deprecated)

    def _make_loss(self):
        return _DLALoss()

    def _build_module(self, n_inputs):
        return _build_dla_module(super()._build_module(n_inputs), self.n_ranks_)

    def _param_groups(self, module):
        return [{"params": list(module.scorer.parameters())},
                {"params": [module.tower.logits], "lr": float(self.propensity_learning_rate), "weight_decay": 0.0}]

    def _untrained_hint(self) -> str:
        return ("Check that the sessions have clicks below rank 1 and that the clicks vary within sessions; raise "
                "the learning rate or the number of iterations")

    def fit(self, X, y=None, *, qid=None, sample_weight=None, eval_set=None, group=None, checkpoint=None, resume=None):
        """Fit on a click data set: ``X`` = :func:`rankwise.clicks.session_dataset` (one group per session,
        rows in rank order, labels = clicks), or rows ``X`` with clicks ``y`` grouped by session ``qid``.

        ``eval_set``, ``checkpoint`` and ``resume`` as in :meth:`rankwise.models.NeuralRanker.fit`.
        ``fit(log, features)`` (a :class:`~rankwise.data.ClickLog` and its features) is the former form:
        it still works, with a DeprecationWarning.
        """
        if isinstance(X, ClickLog):
            from rankwise.clicks.sessions import session_dataset

            warn_user("DLA.fit(log, features) is deprecated and will be removed in the next release; use "
                      "DLA().fit(rankwise.clicks.session_dataset(log, features))", DeprecationWarning)
            X, y = session_dataset(X, y), None
        self._check_params()
        train, val, metric = self._setup_common(X, y, qid, sample_weight, eval_set, group)
        with self._torch_threads():
            return self._fit_validated(train, val, metric, checkpoint, resume)

    def _fit_validated(self, train, val, metric, checkpoint, resume, hooks=None):
        if np.any(train.y < 0):
            i = int(np.flatnonzero(train.y < 0)[0])
            raise InputError(f"DLA: the labels are clicks (0/1, or counts), so they must be non-negative; got "
                             f"{train.y[i]:g} at row {i}")
        self.n_ranks_ = int(np.diff(train.offsets).max())
        super()._fit_validated(_merge_repeated_pages(train), val, metric, checkpoint, resume, hooks)
        self._set_propensity()
        return self

    def _set_propensity(self):
        g = self.module_.tower.logits.detach().double().numpy()
        self.propensity_ = np.exp(g - g[0])

    def _get_state(self):
        state, arrays = super()._get_state()
        state["n_ranks_"] = int(self.n_ranks_)
        return state, arrays

    def _set_state(self, state, arrays):
        try:
            self.n_ranks_ = int(state["n_ranks_"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"DLA state: n_ranks_ must be a positive integer ({exc})") from None
        if self.n_ranks_ < 1:
            raise InputError(f"DLA state: n_ranks_ must be a positive integer; got {self.n_ranks_}")
        super()._set_state(state, arrays)
        self._set_propensity()
