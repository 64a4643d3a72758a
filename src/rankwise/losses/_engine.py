"""The compiled training engine: value, gradient and Hessian diagonal of a loss, per query, on flat
``(scores, labels, query_offsets)`` arrays.

Every kernel (:mod:`rankwise.losses._engine_kernels`, Cython compiled when the package is built) works on
a contiguous range of queries, on each query's slice of the flat arrays with O(n) scratch memory (no
padding, no pair matrix, no torch), and releases the GIL; :func:`run` splits the queries into ranges of
about equal work and runs them on ``n_jobs`` threads (each query is computed by one thread, start to end,
so results do not depend on the number of threads). The same kernels serve :func:`rankwise.losses.grad_hess`
(LightGBM / XGBoost objectives) and :func:`rankwise.losses.training_loss` (a
``torch.autograd.Function`` for CPU training of the torch models).

Each loss's :class:`~rankwise.losses.LossSpec` says which kernel computes it (``spec.kernel``,
a function of the hyperparameters that returns an :class:`EngineKernel` or None), so nothing
here knows loss names. The kernels reproduce the torch definitions of the losses (the
reference) to rounding: same tie rule (input order), same gain scaling, same linear
continuation of the exponential beyond 50, same thresholds as ``torch.nn.functional.softplus``.

Pair-form kernels enumerate pairs as LightGBM's lambdarank does: the query's items are sorted by
score once, and with a truncation level T only pairs with at least one item among the top T
positions are visited -- O(n log n + n T) time per query, O(n) memory. Without truncation the
logistic pairs are visited with the items grouped by label, only pairs of different labels.
A logistic pair's sigmoid comes from per-item exponentials E_p = exp(σ (s_p - max s)):
sigmoid(-σ (s_i - s_j)) = E_j / (E_i + E_j), one division per pair and no exp, in branch-free
loops that the C++ compiler vectorises (the sums of a row in fixed lanes, so no reassociation and the
same digits on every machine); the value (log(E_i + E_j) - log E_i, a log per pair) only when asked.

Given pair weights (``run(..., pairs=...)``; :func:`rankwise.losses.grad_hess` ``pairs=``): a pair-form loss
on pairs and weights the caller chooses instead of the labels -- per query a dense n x n block W (row-major,
the queries' blocks one after another: :func:`pairs_offsets`), W[i, j] >= 0 the weight of the pair "i above
j". The loss is

    sum_q sum_{i != j, W[i, j] > 0} W[i, j] w_i w_j omega_ij phi(s_i - s_j),

omega_ij the loss's pair weight at gain difference 1 and max DCG 1 (|1/log2(2 + r_i) - 1/log2(2 + r_j)| for
ΔNDCG-type weights, r the current 0-based ranks, ties in input order; 1 for unweighted pairs), the
truncation level and ``norm`` as without given pairs. A pair may carry weight in both directions (W[i, j]
and W[j, i]: e.g. a result page shown in many sessions, i clicked and j not in some, the reverse in others,
with the page's counts of such sessions as W). O(n^2) per query (every entry of the block is read), O(n)
scratch; the pair budget does not apply (the caller has materialised the n^2 block). Losses whose pairs are
not label-ordered pairs (``op_pairwise``, LambdaLoss ``ndcg1``) take no given pairs.

References
----------
G. Ke et al. "LightGBM: a highly efficient gradient boosting decision tree." NeurIPS 2017
(``src/objective/rank_objective.hpp``: the lambdarank gradients, truncation and normalisation).
C. Burges. "From RankNet to LambdaRank to LambdaMART: an overview." MSR-TR-2010-82, 2010.
X. Wang, C. Li, N. Golbandi, M. Bendersky, M. Najork. "The LambdaLoss framework for ranking
metric optimization." CIKM 2018.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from rankwise._validation import equal_work_bounds, kernel_threads
from rankwise.losses._engine_kernels import (  # noqa: F401  (the constants are this module's API)
    EXP_CLIP,
    PHI_EXP,
    PHI_HINGE,
    PHI_LOGISTIC,
    PHI_SQHINGE,
    PT_BREG_KL_EXP,
    PT_BREG_SQ_EXP,
    PT_BREG_SQ_ID,
    PT_EXP,
    PT_LOGISTIC,
    PT_SMOOTHHINGE,
    PT_SQHINGE,
    PT_SQUARED,
    W_LABEL,
    W_LL_LAMBDARANK,
    W_LL_NDCG1,
    W_LL_NDCG2,
    W_LL_NDCG2PP,
    W_NDCG,
    W_NONE,
    W_OP,
    _FAST_SPREAD,
    _approx_ndcg_batch,
    _given_pair_batch,
    _listmle_batch,
    _listnet_batch,
    _pair_batch,
    _pairwise_squared_batch,
    _pointwise_batch,
    _smooth_dcg1_batch,
    _smooth_dcg_batch,
)
from rankwise.losses._utils import pair_budget, pair_budget_error


# ----------------------------------------------------------------------------------------- driver


@dataclass(frozen=True)
class EngineKernel:
    """A compiled per-query kernel with its parameters.

    ``batch(s, y, w, v, off, q0, q1, *params, out_v, out_ok, out_g, out_h)`` computes queries
    ``q0..q1``; ``v`` is a per-row array the kernel reads (utilities). ``out_h`` is the exact
    Hessian diagonal where the loss's spec says ``hessian="exact"`` (the caller replaces it by
    |g| otherwise). ``pair_cost`` is the cost of a query of length n in units of n (n for
    all-pairs kernels, the truncation level for truncated ones, 1 for linear ones), used only to
    balance threads."""

    batch: object
    params: tuple
    pair_cost: int = 1
    utilities: object = None  # (labels -> v) in numpy, or None for v = labels
    checks: tuple = field(default_factory=tuple)  # callables (labels, weights) -> None, raising InputError
    v_checks: tuple = field(default_factory=tuple)  # callables (utilities) -> None, raising InputError
    value_last: bool = False  # the last entry of params says whether to compute the value (run's ``value``)
    # the pairs a query visits, checked against the pair budget before any work (see pairs_visited): None (O(n)
    # or O(n log n) kernels), "all" (every pair), "labels" (the pairs of different labels where the logistic loop
    # groups them: group_sigma > 0 and group_sigma · (max s - min s) <= _FAST_SPREAD; else every pair);
    # ``top`` > 0: only the pairs with an item in the top ``top``
    pairs: str | None = None
    top: int = 0
    group_sigma: float = 0.0
    # the batch function on given pair weights (``batch(s, y, w, v, off, q0, q1, pairs, pairs_offsets, *params,
    # out_v, out_ok, out_g, out_h)``), None where the loss takes none
    given: object = None


def _chunks(off, cost, n_chunks):
    """Query boundaries of ``n_chunks`` ranges of about equal work (n·cost per query)."""
    lengths = np.diff(off).astype(np.float64)
    return equal_work_bounds(np.cumsum(lengths * np.minimum(lengths, cost) + 1.0), n_chunks)


def n_threads(n_jobs) -> int:
    """Threads for ``n_jobs`` (:func:`rankwise._validation.kernel_threads`): None means the limit of the
    enclosing ``limit_threads`` (a model's ``n_jobs``), else ``RANKWISE_NUM_THREADS``, else every CPU this
    process may use; -1 every such CPU."""
    return kernel_threads(n_jobs)


def pairs_visited(kernel: EngineKernel, s, y, off, q: int) -> tuple[int, str]:
    """The pairs query ``q`` visits in ``kernel`` (exact, from its length, labels and score spread) and what
    they are, in words."""
    a, b = int(off[q]), int(off[q + 1])
    n = b - a
    if 0 < kernel.top < n:
        t = kernel.top
        return t * n - t * (t + 1) // 2, f"the pairs with a document in the top {t}"
    if (kernel.pairs == "labels" and n > 1 and kernel.group_sigma > 0
            and kernel.group_sigma * float(s[a:b].max() - s[a:b].min()) <= _FAST_SPREAD):
        counts = np.unique(y[a:b], return_counts=True)[1].astype(object)
        return (n * n - int((counts * counts).sum())) // 2, f"every pair of different labels ({len(counts)} labels)"
    return n * (n - 1) // 2, "every pair"


def check_pairs(kernel: EngineKernel, s, y, off, loss: str = "the loss") -> None:
    """Refuse, before any work, a call in which one query would visit more pairs than the pair budget
    (:func:`rankwise.losses._utils.pair_budget`): an :class:`~rankwise.errors.InputError` naming the loss, the
    query (its index in the call), its size and pair count, and what to do. Only queries whose bound n·(n-1)/2
    (n·T with a truncation level T) exceeds the budget are counted exactly, so the check costs O(#queries)."""
    if kernel.pairs is None:
        return
    budget = pair_budget()
    if math.isinf(budget):
        return
    lengths = np.diff(off)
    if len(lengths) == 0:
        return
    longest = int(lengths.max())
    if (longest * min(longest, kernel.top) if kernel.top > 0 else longest * (longest - 1) // 2) <= budget:
        return  # the usual case: O(#queries), a few ms for 10^6 queries
    n = lengths.astype(np.float64)
    bound = n * np.minimum(n, kernel.top) if kernel.top > 0 else n * (n - 1) / 2
    for q in np.flatnonzero(bound > budget):
        pairs, what = pairs_visited(kernel, s, y, off, int(q))
        if pairs > budget:
            nq = len(off) - 1
            raise pair_budget_error(loss, f"query {int(q)} (0-based, of {nq} in this call)", int(n[q]), pairs,
                                    budget, what)


def pairs_offsets(off) -> np.ndarray:
    """Where each query's block of given pair weights starts in the flat ``pairs`` array (n_q² entries per
    query, the queries in order): ``Q + 1`` offsets, the last the length ``pairs`` must have."""
    n = np.diff(np.asarray(off, dtype=np.int64))
    return np.concatenate([[0], np.cumsum(n * n)]).astype(np.int64)


def run(kernel: EngineKernel, s, y, off, w=None, n_jobs=None, value=True, loss: str = "the loss", pairs=None):
    """Per-query values, whether each query counts (has what the loss needs: an item, a pair, a
    positive ideal DCG), gradient and Hessian diagonal (float64) of one kernel on flat arrays.
    ``value=False``: the caller does not need the values; kernels that can skip them (the
    LambdaMART pair loop) leave them at 0. A query with more pairs than the pair budget is refused
    first (:func:`check_pairs`; ``loss`` names the loss in the message). ``pairs``: given pair weights
    (module docstring; checked by the caller: :func:`pairs_offsets` long, finite, >= 0), the labels then
    choose no pair."""
    s = np.ascontiguousarray(s, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    off = np.ascontiguousarray(off, dtype=np.int64)
    batch, extra = kernel.batch, ()
    if pairs is not None:
        if kernel.given is None:
            from rankwise.errors import InputError

            raise InputError(f"{loss} takes no given pair weights (pairs=): its pairs are not label-ordered "
                             "pairs")
        batch, extra = kernel.given, (np.ascontiguousarray(pairs, dtype=np.float64), pairs_offsets(off))
    else:
        check_pairs(kernel, s, y, off, loss)
    n = len(s)
    w = np.ones(n) if w is None else np.ascontiguousarray(w, dtype=np.float64)
    for check in kernel.checks:
        check(y, w)
    v = y if kernel.utilities is None else np.ascontiguousarray(kernel.utilities(y), dtype=np.float64)
    for check in kernel.v_checks:
        check(v)
    params = kernel.params[:-1] + (bool(value),) if kernel.value_last else kernel.params
    nq = len(off) - 1
    out_v = np.zeros(nq)
    out_ok = np.zeros(nq, dtype=np.bool_)
    ok_u8 = out_ok.view(np.uint8)  # the kernels write it as bytes
    out_g = np.zeros(n)
    out_h = np.zeros(n)
    threads = min(n_threads(n_jobs), max(nq, 1))
    if threads <= 1 or n < 2_000:
        batch(s, y, w, v, off, 0, nq, *extra, *params, out_v, ok_u8, out_g, out_h)
    else:
        bounds = _chunks(off, kernel.pair_cost if pairs is None else 1 << 30, 4 * threads)
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(lambda k: batch(s, y, w, v, off, int(bounds[k]), int(bounds[k + 1]), *extra, *params,
                                        out_v, ok_u8, out_g, out_h), range(len(bounds) - 1)))
    return out_v, out_ok, out_g, out_h


# --------------------------------------------------------------------------- kernel constructors


def pair_kernel(scheme, phi, *, sigma=1.0, scale=1.0, truncation_level=None, norm=False, mu=0.0, exp2=True,
                utilities=None, checks=(), v_checks=()):
    trunc = 0 if truncation_level is None else int(truncation_level)
    cost = 1 << 30 if trunc <= 0 else trunc
    # W_OP and NDCG-Loss1 weigh every ordered pair; the others only pairs of different labels, grouped by label in
    # the logistic loop where the score spread allows it (_pair_query), else found by a loop over every pair
    every = scheme in (W_OP, W_LL_NDCG1)
    return EngineKernel(_pair_batch, (int(scheme), int(phi), float(sigma), float(scale), trunc, bool(norm),
                                      float(mu), bool(exp2), True), cost, utilities, tuple(checks),
                        tuple(v_checks), value_last=True, pairs="all" if every else "labels", top=max(trunc, 0),
                        group_sigma=float(sigma) if phi == PHI_LOGISTIC else 0.0,
                        given=None if every else _given_pair_batch)


def listnet_kernel(tau):
    return EngineKernel(_listnet_batch, (float(tau),), 1)


def listmle_kernel():
    return EngineKernel(_listmle_batch, (), 1 << 30)


def approx_ndcg_kernel(alpha, exp2, checks=()):
    return EngineKernel(_approx_ndcg_batch, (float(alpha), bool(exp2)), 1 << 30, None, tuple(checks), pairs="all")


def smooth_dcg_kernel(k, sigma, exp2, checks=()):
    return EngineKernel(_smooth_dcg_batch, (int(k), float(sigma), bool(exp2)), int(k), None, tuple(checks),
                        pairs="all", top=int(k))


def smooth_dcg1_kernel(sigma, utilities, checks=()):
    return EngineKernel(_smooth_dcg1_batch, (float(sigma),), 1, utilities, tuple(checks))


def pairwise_squared_kernel(utilities=None, checks=()):
    return EngineKernel(_pairwise_squared_batch, (), 1, utilities, tuple(checks))


def pointwise_kernel(kind, *, eta=1.0, t=1.0, alpha=0.25, utilities=None, checks=(), v_checks=()):
    return EngineKernel(_pointwise_batch, (int(kind), float(eta), float(t), float(alpha)), 1, utilities,
                        tuple(checks), tuple(v_checks))


# ------------------------------------------------------------------- label checks and utilities


def exp2_check(loss: str):
    """A check refusing labels whose gain 2^y - 1 overflows float64 (the message of the torch form)."""
    def check(y, w):
        if y.size and float(np.max(y)) >= 1024:
            bad = float(np.max(y))
            from rankwise.errors import InputError

            raise InputError(f"{loss}: label {bad:g} overflows the exp2 gain 2^y - 1 in float64 (labels must be "
                             "< 1024); use the linear gain/utility or rescale the labels")
    return check


def utilities(u, loss: str):
    """``(labels -> v, checks)`` for a utility "linear" or "exp2"; None for a callable (no kernel)."""
    if u == "linear" or u is None:
        return (lambda y: y), ()
    if u == "exp2":
        return (lambda y: np.exp2(y) - 1.0), (exp2_check(loss),)
    return None


def range_check(lo, hi, message):
    """A check that the utilities ``u(y)`` lie in [lo, hi]; ``message(vmin, vmax)`` on failure."""
    def check_v(v):
        if v.size and (float(v.min()) < lo or float(v.max()) > hi):
            from rankwise.errors import InputError

            raise InputError(message(float(v.min()), float(v.max())))
    return check_v
