r"""Rankers that learn the position bias jointly with the ranking: Unbiased LambdaMART and DLA.

- :class:`UnbiasedLambdaMART` (Hu, Wang, Peng & Li, "Unbiased LambdaMART: an unbiased pairwise
  learning-to-rank algorithm", WWW 2019), a :class:`~rankwise.models.GBDTRanker` fitted on a click data set
  (one group per session, rows in rank order, labels the clicks; :func:`rankwise.clicks.session_dataset`):
  LambdaMART's pairwise gradients on the (clicked a, unclicked b) pairs of every session divided by position
  biases :math:`t^+_{k_a} t^-_{k_b}` (a clicked at rank k_a, b unclicked at k_b), which are re-estimated after
  every boosting round from the current pairwise losses,

  .. math:: t^+_k = \Bigl(\frac{\sum_{(a, b): k_a = k} L_{ab} / t^-_{k_b}}
            {\sum_{(a, b): k_a = 1} L_{ab} / t^-_{k_b}}\Bigr)^{1/(p+1)}, \qquad
            t^-_k = \Bigl(\frac{\sum_{(a, b): k_b = k} L_{ab} / t^+_{k_a}}
            {\sum_{(a, b): k_b = 1} L_{ab} / t^+_{k_a}}\Bigr)^{1/(p+1)},

  sums over the pairs of all sessions, :math:`L_{ab} = \log(1 + e^{-\sigma (s_a - s_b)})`. Each rank's sum is
  divided by the number of sessions that show the rank (the paper's pages all have the same length, where
  this is a constant factor). The gradient is the training engine's pair kernel (:mod:`rankwise.losses._engine`,
  the ``ranknet`` loss) on the distinct result pages with *given pair weights*: page u's
  :math:`M_u[a, b] / (t^+_{k_a} t^-_{k_b})`, :math:`M_u[a, b]` the weight of the sessions of page u in which a
  was clicked and b not. The pair weight is |ΔDCG| of swapping a and b in the page's current ranking
  (``pair_weights="delta_dcg"``), or ΔNDCG as in the paper (``"delta_ndcg"``: each session's pairs divided by
  its ideal DCG, folded into :math:`M_u`).

- :class:`DLA` (Ai et al., SIGIR 2018) lives in :mod:`rankwise.clicks.dla` (re-exported here).
"""
from __future__ import annotations

import warnings

import numpy as np

from rankwise._validation import Interval, Options, warn_user
from rankwise.clicks._joint_kernels import block_bias_sums as _block_bias_sums
from rankwise.clicks._joint_kernels import session_pair_counts as _session_pair_counts
from rankwise.clicks.dla import DLA  # noqa: F401  (moved; re-exported until callers import it from dla)
from rankwise.clicks.sessions import _codes_of_groups, _rows_of
from rankwise.data.clicklog import ClickLog
from rankwise.errors import InputError
from rankwise.models.gbdt import GBDTRanker

__all__ = ["pages", "UnbiasedLambdaMART", "DLA"]


def pages(log: ClickLog, features):
    """The distinct result pages of ``log``: ``(page_offsets, X, position, clicks, n_sessions, pair_counts)``.

    ``pair_counts`` is a flat array of the M_u[a, b] blocks, page u's block of n_u² entries starting
    at ``pair_offsets[u]`` (returned as the 7th element).

    .. deprecated::
        Nothing in rankwise uses this 7-tuple any more; the click learners take
        :func:`~rankwise.clicks.session_dataset` (one group per result page). It will be removed in the next release.
    """
    import pandas as pd

    warn_user("rankwise.clicks.pages is deprecated and will be removed in the next release: the click learners "
              "take rankwise.clicks.session_dataset(log, features) (one group per result page, rows in rank "
              "order)", DeprecationWarning)

    from rankwise.clicks.ips import feature_rows

    rows = feature_rows(log, features)
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
    counts = _pair_blocks(log.clicked, off, page_of, p_off, np.ones(log.n_sessions), clicks)
    n_sess = np.bincount(page_of, minlength=n_pages).astype(np.float64)
    position = (np.arange(p_off[-1]) - np.repeat(p_off[:-1], sizes) + 1).astype(np.int64)
    return p_off, np.asarray(X, dtype=np.float64), position, clicks, n_sess, counts, m_off


def _pair_blocks(y, off, page_of, p_off, weight, clicks=None):
    """The pages' blocks of (clicked, unclicked) pair weights: per session s (rows ``off[s]:off[s + 1]`` in rank
    order, clicks ``y``) and pair of its ranks (a clicked, b not), ``weight[s]`` added to entry (a, b) of its
    page's n x n block (page ``page_of[s]``, rows ``p_off[u]:p_off[u + 1]``; the blocks one after another,
    :func:`rankwise.losses._engine.pairs_offsets`). ``clicks`` (per page row), if given: ``weight[s]`` added
    for each click."""
    from rankwise.losses._engine import pairs_offsets

    p_off = np.ascontiguousarray(p_off, dtype=np.int64)
    m_off = pairs_offsets(p_off)
    counts = np.zeros(int(m_off[-1]))
    _session_pair_counts(np.ascontiguousarray(off, dtype=np.int64), np.ascontiguousarray(y, dtype=np.float64),
                         np.ascontiguousarray(page_of, dtype=np.int64), p_off, m_off,
                         np.ascontiguousarray(weight, dtype=np.float64), counts,
                         np.zeros(int(p_off[-1])) if clicks is None else clicks)
    return counts


def _ideal_dcg_weights(y, off):
    """1 / (ideal DCG) of each session of clicks ``y`` (1 for a session without a click): the ΔNDCG factor."""
    sizes = np.diff(off)
    n_clicks = np.add.reduceat(y, off[:-1]) if len(y) else np.zeros(0)
    disc = np.cumsum(1.0 / np.log2(2.0 + np.arange(int(sizes.max(initial=0)) + 1)))
    return 1.0 / np.where(n_clicks > 0, disc[np.maximum(n_clicks.astype(np.int64) - 1, 0)], 1.0)


def _block_entries(p_off, pos, grad_counts):
    """``(nz, a_rank, b_rank)``: the nonzero entries of the pages' pair blocks and the 0-based ranks of their
    clicked (a) and unclicked (b) rows."""
    from rankwise.losses._engine import pairs_offsets

    m_off = pairs_offsets(p_off)
    nz = np.flatnonzero(grad_counts)
    page = np.searchsorted(m_off, nz, side="right") - 1
    n = np.diff(p_off)[page]
    k = nz - m_off[page]
    return nz, pos[p_off[page] + k // n], pos[p_off[page] + k % n]


def _ulm_terms(scores, p_off, pos, counts, grad_counts, t_plus, t_minus, sigma, *, entries=None, n_jobs=None,
               want_value=False, hess_floor=1e-9):
    """One round of Unbiased LambdaMART on result pages (rows of a page in rank order, ``pos`` their 0-based
    ranks; ``counts``/``grad_counts`` the pages' pair blocks of :func:`_pair_blocks`, the latter with the ΔNDCG
    factor where it applies; ``entries``: :func:`_block_entries`, computed once per fit):
    ``((grad, hess[, value]), num_p, num_m)``. The gradient and Hessian are the engine's ``ranknet`` pair kernel
    (|ΔDCG| weights) on the given pair weights ``grad_counts[a, b] / (t⁺_{k_a} t⁻_{k_b})``; ``num_p``/``num_m``
    the loss sums of the bias update (:func:`rankwise.clicks._joint_kernels.block_bias_sums`)."""
    from rankwise import losses
    from rankwise.losses._engine import pairs_offsets

    s = np.ascontiguousarray(scores, dtype=np.float64)
    inv_tp, inv_tm = 1.0 / np.asarray(t_plus, dtype=np.float64), 1.0 / np.asarray(t_minus, dtype=np.float64)
    nz, a_rank, b_rank = _block_entries(p_off, pos, grad_counts) if entries is None else entries
    pairs = np.zeros(len(grad_counts))
    pairs[nz] = grad_counts[nz] * inv_tp[a_rank] * inv_tm[b_rank]
    out = losses.grad_hess("ranknet", s, np.zeros(len(s)), p_off, pairs=pairs, hess_floor=hess_floor,
                           return_value=want_value, n_jobs=n_jobs, sigma=float(sigma), pair_weights="delta_ndcg",
                           gain="linear")
    num_p, num_m = np.zeros(len(s)), np.zeros(len(s))
    _block_bias_sums(s, np.ascontiguousarray(p_off, dtype=np.int64), pairs_offsets(p_off),
                     np.ascontiguousarray(counts, dtype=np.float64), inv_tp[pos], inv_tm[pos], float(sigma), num_p,
                     num_m)
    return out, num_p, num_m


class _ClickPages:
    """A click data set as Unbiased LambdaMART boosts it (the former class's layout, found from the rows): the
    *pages*, the distinct result lists (sessions whose rows have the same features in the same order: they
    score alike in every round), on whose rows the trees are grown, and per page the n x n blocks of the
    weights of its sessions' (clicked a, unclicked b) pairs -- ``counts`` (session weights: the bias sums) and
    ``grad_counts`` (times 1/ideal DCG of the session with ``normalise``: the gradient's given pair weights).
    The sessions enter only through these sums, so a round costs O(Σ n_u²) over the pages whatever the number
    of sessions or of distinct click patterns.

    ``page_data``: the pages as the RankingInput the trees see (labels: clicks per page row, weighted).
    """

    def __init__(self, train, normalise: bool):
        from rankwise.data.ranking_input import RankingInput

        X = train.X.toarray() if hasattr(train.X, "toarray") else np.asarray(train.X)
        off, y = train.offsets, np.asarray(train.y, dtype=np.float64)
        gw = np.ones(train.n_queries) if train.sample_weight is None else train.sample_weight[off[:-1]]
        page, first_page = _codes_of_groups(X, off)
        p_rows, p_off = _rows_of(off, first_page)
        sizes = np.diff(p_off)
        self.p_off = p_off
        self.pos = np.arange(int(p_off[-1])) - np.repeat(p_off[:-1], sizes)
        clicks = np.zeros(int(p_off[-1]))
        self.counts = _pair_blocks(y, off, page, p_off, gw, clicks)
        self.grad_counts = (_pair_blocks(y, off, page, p_off, gw * _ideal_dcg_weights(y, off)) if normalise
                            else self.counts)
        self.entries = _block_entries(p_off, self.pos, self.grad_counts)
        R = self.R = int(sizes.max(initial=1))
        # the weight of the sessions showing rank k: of those at least k + 1 long
        by_length = np.bincount(np.diff(off), weights=gw, minlength=R + 1)
        self.shown = np.maximum(np.cumsum(by_length[::-1])[::-1][1:R + 1], 1.0)
        self.page_data = RankingInput(train.X[p_rows], clicks, p_off, np.asarray(train.qids)[first_page], None,
                                      None)


class UnbiasedLambdaMART(GBDTRanker):
    r"""Unbiased LambdaMART (Hu et al., WWW 2019): a :class:`~rankwise.models.GBDTRanker` trained on clicks.

    ``fit(X, y, *, qid=...)`` takes a click data set: one group per session (result page), its rows the
    displayed documents *in rank order* (a row's rank is its 1-based position in its group), ``y`` the clicks
    (0/1) -- :func:`rankwise.clicks.session_dataset` builds it from a :class:`~rankwise.data.ClickLog` and a
    feature set, and a RankingDataset passed as ``X`` carries its own labels and groups. ``predict(X)``
    scores documents like any GBDTRanker.

    Each boosting round's gradient is the training engine's LambdaMART pair kernel (the ``ranknet`` loss
    with |ΔDCG| pair weights: :mod:`rankwise.losses._engine`) on the pairs (i clicked, j not clicked) of
    every session, each pair weighted by :math:`1 / (t^+_{k_i} t^-_{k_j})` (given pair weights: per result
    page the weight of its sessions with i clicked and j not, divided by the biases); the position biases are then
    re-estimated from the pairwise losses at the round's scores (module docstring), with the exponent
    1/(p+1). Sessions without a click, or without an unclicked document, give no pair.

    Parameters
    ----------
    sigma : float
        Slope of the pairwise logistic loss.
    p : float
        Regularisation exponent of the bias estimates (1/(p+1) power; 0 in the paper's default).
    pair_weights : {"delta_dcg", "delta_ndcg"}
        The LambdaMART weight of a pair: |ΔDCG| of swapping it in the current ranking of its session
        (the default, as before), or |ΔNDCG| (divided by the session's ideal DCG: sessions with many
        clicks weigh less).
    n_estimators, learning_rate, num_leaves, max_depth, min_child_samples, subsample, colsample_bytree,
    reg_lambda, backend_params, eval_metric, early_stopping_rounds, random_state, n_jobs, verbose, loss_every
        As :class:`~rankwise.models.GBDTRanker` (LightGBM trees). ``eval_set`` (with ``eval_metric``) may
        be a click data set or one with relevance labels; with ``early_stopping_rounds`` ``predict`` uses
        the best round and ``t_plus_``/``t_minus_`` are that round's.
    sample_weight (fit) : one weight per session (the same on each of its rows): multiplies its pairs in
        the gradient and in the bias estimates.

    As the former class did, the trees are grown on the log's distinct result pages (sessions whose rows have
    the same features in the same order, found from the rows), each page row's gradient the sum over the
    sessions that show it: the engine runs once per round on the pages with, per page, the n x n block of
    its sessions' (clicked, unclicked) pair weights as given pair weights. Neither changes the gradient or
    the bias sums (sums over sessions); a round costs O(Σ n²) over the pages, whatever the number of sessions
    or of their click patterns, and a log that repeats its pages trains on far fewer rows
    (``min_child_samples`` counts page rows).

    Attributes
    ----------
    t_plus_, t_minus_ : position biases of clicked and unclicked documents over ranks 1..R, relative to rank 1
        (the biases the last round's gradient used were estimated in the round before).
    booster_, n_estimators_, history_, best_iteration_ : as GBDTRanker.

    Calling ``fit(log, features)`` with a :class:`~rankwise.data.ClickLog` (the former surface) still works
    for one release, with a DeprecationWarning: it fits on ``session_dataset(log, features)``.
    """

    loss = "ranknet"  # the engine's pair kernel; the click weights come from fit (not parameters)
    backend = "lightgbm"
    _hess_floor = 1e-9
    _parameter_constraints = {
        **{k: v for k, v in GBDTRanker._parameter_constraints.items() if k not in ("loss", "backend")},
        "sigma": [Interval("real", 0, closed="neither")],
        "p": [Interval("real", 0)],
        "pair_weights": [Options("delta_dcg", "delta_ndcg")],
    }

    def __init__(self, *, sigma: float = 1.0, p: float = 0.0, pair_weights: str = "delta_dcg",
                 n_estimators: int = 100, learning_rate: float = 0.05, num_leaves: int = 31, max_depth=None,
                 min_child_samples: int = 20, subsample: float = 1.0, colsample_bytree: float = 1.0,
                 reg_lambda: float = 0.0, backend_params=None, eval_metric: str = "ndcg@10",
                 early_stopping_rounds=None, random_state=0, n_jobs=None, verbose="auto", loss_every=10):
        self.sigma = sigma
        self.p = p
        self.pair_weights = pair_weights
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.max_depth = max_depth
        self.min_child_samples = min_child_samples
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.reg_lambda = reg_lambda
        self.backend_params = backend_params
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.loss_every = loss_every

    @property
    def loss_params(self) -> dict:
        """The engine loss's hyperparameters: logistic pairs of slope ``sigma`` with |ΔNDCG|-type weights, linear
        gain; on given pair weights (the pages' click pair counts) the engine's pair weight is |ΔDCG| of the swap
        (gain difference 1, max DCG 1), the ΔNDCG factor of ``pair_weights="delta_ndcg"`` is in the counts."""
        return {"sigma": float(self.sigma), "pair_weights": "delta_ndcg", "gain": "linear"}

    def fit(self, X, y=None, *, qid=None, sample_weight=None, eval_set=None, group=None):
        """Boost on a click data set (class docstring): ``X`` a RankingDataset of sessions (e.g.
        :func:`~rankwise.clicks.session_dataset`), or rows with ``y`` = clicks and ``qid`` = session.
        (No ``checkpoint``/``resume``: the position biases would have to be in the checkpoint.)"""
        if isinstance(X, ClickLog):
            from rankwise.clicks.sessions import session_dataset

            warnings.warn("UnbiasedLambdaMART.fit(log, features) is deprecated and will be removed in the next "
                          "release; use fit(rankwise.clicks.session_dataset(log, features))", DeprecationWarning,
                          stacklevel=2)
            X, y = session_dataset(X, y), None
        self.__dict__.pop("_bias_rounds", None)
        try:
            super().fit(X, y, qid=qid, sample_weight=sample_weight, eval_set=eval_set, group=group)
        finally:
            self.__dict__.pop("_pages", None)
        rounds = self.__dict__.pop("_bias_rounds")
        best = getattr(self, "best_iteration_", None)
        # the biases after round r were estimated from the scores before round r + 1's tree: after the best
        # round's tree they are the next round's (the last round's own when it is the best)
        tp, tm = rounds[-1] if best is None else rounds[min(best + 1, len(rounds) - 1)]
        self.t_plus_, self.t_minus_ = tp.copy(), tm.copy()
        return self

    def _validate_fit(self, X, y, qid, **kw):
        train, val = super()._validate_fit(X, y, qid, **kw)
        yv = np.asarray(train.y)
        bad = (yv != 0) & (yv != 1)
        if bad.any():
            raise InputError(f"UnbiasedLambdaMART: y must be clicks (0 or 1 per displayed document); got "
                             f"{yv[bad][0]:g} in row {int(np.flatnonzero(bad)[0])}")
        if train.sample_weight is not None:
            w, off = train.sample_weight, train.offsets
            if np.any(np.repeat(w[off[:-1]], np.diff(off)) != w):
                raise InputError("UnbiasedLambdaMART: sample_weight is one weight per session; give every row of a "
                                 "session (query) the same weight")
        self._pages = _ClickPages(train, self.pair_weights == "delta_ndcg")
        return self._pages.page_data, val

    def _objective(self, on_value=None, start=0):
        sigma, expo = float(self.sigma), 1.0 / (1.0 + float(self.p))
        cache = {}
        rounds = self._bias_rounds = []
        calls = [int(start)]

        def unbiased_lambdamart_objective(preds, train_data):
            if not cache:
                pg = self.__dict__.pop("_pages")
                cache.update(pg=pg, tp=np.ones(pg.R), tm=np.ones(pg.R))
                rounds.append((cache["tp"], cache["tm"]))
            c, pg = cache, cache["pg"]
            k = calls[0]
            calls[0] += 1
            want = on_value is not None and self.loss_every is not None and k % int(self.loss_every) == 0
            out, num_p, num_m = _ulm_terms(preds, pg.p_off, pg.pos, pg.counts, pg.grad_counts, c["tp"], c["tm"],
                                           sigma, entries=pg.entries, n_jobs=self.n_jobs, want_value=want,
                                           hess_floor=1e-300)
            if want:
                on_value(out[2])
            # per session showing the rank (sessions of different lengths); ranks never seen clicked (unclicked)
            # keep their bias
            sp = np.bincount(pg.pos, weights=num_p, minlength=pg.R) / pg.shown
            sm = np.bincount(pg.pos, weights=num_m, minlength=pg.R) / pg.shown
            if sp[0] > 0:
                c["tp"] = np.where(sp > 0, (sp / sp[0]) ** expo, c["tp"])
            if sm[0] > 0:
                c["tm"] = np.where(sm > 0, (sm / sm[0]) ** expo, c["tm"])
            rounds.append((c["tp"], c["tm"]))
            return out[0], np.maximum(out[1], self._hess_floor)

        return None, unbiased_lambdamart_objective

    def _untrained_hint(self) -> str:
        return ("No tree split the training rows: check that the sessions have both clicked and unclicked "
                f"documents, lower min_child_samples (now {self.min_child_samples}), or raise learning_rate / "
                "n_estimators")

    # -- persistence: the booster and the position biases
    def _get_state(self):
        state, arrays = super()._get_state()
        if hasattr(self, "t_plus_"):
            arrays = {**arrays, "t_plus": np.asarray(self.t_plus_), "t_minus": np.asarray(self.t_minus_)}
        return state, arrays

    def _set_state(self, state, arrays):
        super()._set_state(state, arrays)
        if "t_plus" in arrays:
            self.t_plus_ = np.asarray(arrays["t_plus"], dtype=np.float64)
            self.t_minus_ = np.asarray(arrays["t_minus"], dtype=np.float64)
