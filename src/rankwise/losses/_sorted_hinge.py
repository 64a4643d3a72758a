"""O(n log n) pairwise hinge: value and gradient by a sweep over scores with Fenwick trees.

For one list, the weighted pairwise hinge

.. math:: \\sum_{y_i > y_j} w_i w_j (c_0 + c_1 (y_i - y_j)) \\max(0, 1 - (s_i - s_j))

is a sum over the pairs that are *active* (s_j > s_i - 1) and ordered by label (y_j < y_i): a
two-dimensional dominance query. Sorting by score and sweeping a threshold while a Fenwick tree
indexed by label rank accumulates sums of w, w·y, w·s, w·y·s answers every item's query in
O(log n), so value and gradient cost O(n log n) instead of O(n^2) (the counting idea of
Joachims, "Training linear SVMs in linear time", KDD 2006, and Airola, Pahikkala & Salakoski,
"Training linear ranking SVMs in linearithmic time using red-black trees", Pattern Recognition
Letters 32, 2011). Written in numba, parallel over lists.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit, prange

from rankwise.losses._deferred import deferred

torch = deferred("torch", globals())


@njit(cache=True)
def _fen_add(tree, pos, val):
    n = tree.shape[0]
    i = pos + 1
    while i <= n:
        tree[i - 1] += val
        i += i & (-i)


@njit(cache=True)
def _fen_prefix(tree, pos):
    """Sum of entries [0, pos)."""
    acc = 0.0
    i = pos
    while i > 0:
        acc += tree[i - 1]
        i -= i & (-i)
    return acc


@njit(cache=True)
def _one_list(s, y, w, rank, K, c0, c1, g):
    """One list already sorted by ascending score; ``rank`` = label rank (ties share one).
    Writes the gradient (in the same sorted order) into ``g``; returns (value, tied weight)."""
    n = s.shape[0]
    if n < 2:
        return 0.0, 0.0
    # weight of tied pairs (constant, used by the Kendall hinge)
    wc = np.zeros(K)
    w2c = np.zeros(K)
    for k in range(n):
        wc[rank[k]] += w[k]
        w2c[rank[k]] += w[k] * w[k]
    tie = 0.0
    for c in range(K):
        tie += 0.5 * (wc[c] * wc[c] - w2c[c])
    t0 = np.zeros(K)
    ty = np.zeros(K)
    ts = np.zeros(K)
    tys = np.zeros(K)
    value = 0.0
    # pass 1: i as the upper item; J_i = {j: y_j < y_i, s_j > s_i - 1}; sweep s descending
    p = n - 1
    for i in range(n - 1, -1, -1):
        thr = s[i] - 1.0
        while p >= 0 and s[p] > thr:
            _fen_add(t0, rank[p], w[p])
            _fen_add(ty, rank[p], w[p] * y[p])
            _fen_add(ts, rank[p], w[p] * s[p])
            _fen_add(tys, rank[p], w[p] * y[p] * s[p])
            p -= 1
        a0 = _fen_prefix(t0, rank[i])
        if a0 == 0.0:
            continue
        ay = _fen_prefix(ty, rank[i])
        a_s = _fen_prefix(ts, rank[i])
        ays = _fen_prefix(tys, rank[i])
        m = 1.0 - s[i]
        ci = c0 + c1 * y[i]
        # the label sums are only read when c1 != 0: with huge labels they may overflow, and
        # 0 * inf would turn a "none"-weighted gradient into NaN
        value += w[i] * (ci * (m * a0 + a_s) - (c1 * (m * ay + ays) if c1 != 0.0 else 0.0))
        g[i] -= w[i] * (ci * a0 - (c1 * ay if c1 != 0.0 else 0.0))
    # pass 2: j as the lower item; K_j = {i: y_i > y_j, s_i < s_j + 1}; sweep s ascending
    t0[:] = 0.0
    ty[:] = 0.0
    p = 0
    for j in range(n):
        thr = s[j] + 1.0
        while p < n and s[p] < thr:
            _fen_add(t0, rank[p], w[p])
            _fen_add(ty, rank[p], w[p] * y[p])
            p += 1
        b0 = _fen_prefix(t0, K) - _fen_prefix(t0, rank[j] + 1)
        if b0 == 0.0:
            continue
        by = _fen_prefix(ty, K) - _fen_prefix(ty, rank[j] + 1)
        g[j] += w[j] * (c0 * b0 + (c1 * (by - y[j] * b0) if c1 != 0.0 else 0.0))
    return value, tie


@njit(parallel=True, cache=True)
def _batch(s, y, w, rank, K, lengths, c0, c1):
    B, L = s.shape
    val = np.zeros(B)
    tie = np.zeros(B)
    grad = np.zeros((B, L))
    for b in prange(B):
        n = lengths[b]
        v, t = _one_list(s[b, :n], y[b, :n], w[b, :n], rank[b, :n], K[b], c0, c1, grad[b, :n])
        val[b] = v
        tie[b] = t
    return val, tie, grad


@njit(cache=True)
def _batch_serial(s, y, w, rank, K, lengths, c0, c1):
    B, L = s.shape
    val = np.zeros(B)
    tie = np.zeros(B)
    grad = np.zeros((B, L))
    for b in range(B):
        n = lengths[b]
        v, t = _one_list(s[b, :n], y[b, :n], w[b, :n], rank[b, :n], K[b], c0, c1, grad[b, :n])
        val[b] = v
        tie[b] = t
    return val, tie, grad


def _prepare_sorted(s, y, w, mask):
    """Sort each row by score (padding last) and compute label ranks, in numpy.

    The score order needs no stability (the sweeps compare values), so numpy's default
    (SIMD quick)sort is used. Integer labels in [0, 1024) are their own rank (no second sort).
    """
    m = mask.cpu().numpy()
    lengths = m.sum(1).astype(np.int64)
    sv = s.detach().cpu().numpy().astype(np.float64)
    order = np.argsort(np.where(m, sv, np.inf), axis=1)
    take = lambda a: np.take_along_axis(a, order, 1)  # noqa: E731
    ss = take(sv)
    ys = take(y.detach().cpu().numpy().astype(np.float64))
    ws = take(w.detach().cpu().numpy().astype(np.float64))
    ms = take(m)
    yv = np.where(ms, ys, 0.0)
    if np.all((yv == np.round(yv)) & (yv >= 0) & (yv < 1024)):
        rank = yv.astype(np.int64)
        K = rank.max(1) + 1 if rank.size else np.ones(len(rank), np.int64)
    else:
        key = np.where(ms, ys, np.inf)
        oy = np.argsort(key, axis=1)
        ky = np.take_along_axis(key, oy, 1)
        step = np.concatenate([np.zeros((len(ky), 1), np.int64), (ky[:, 1:] != ky[:, :-1]).astype(np.int64)], 1)
        rs = np.cumsum(step, 1)
        rank = np.empty_like(rs)
        np.put_along_axis(rank, oy, rs, 1)
        K = rank.max(1) + 1 if rank.size else np.ones(len(rank), np.int64)
    return ss, ys, ws, rank, K.astype(np.int64), lengths, order


@functools.cache
def sorted_hinge_function():
    """The ``torch.autograd.Function`` of the sweep, built on first use (torch is imported then)."""

    class SortedHinge(torch.autograd.Function):
        """Per-list weighted pairwise hinge and tied-pair weight; gradient from the same sweep."""

        @staticmethod
        def forward(ctx, s, y, w, mask, c0: float, c1: float):
            ss, ys, ws, rank, K, lengths, order = _prepare_sorted(s, y, w, mask)
            # one long list gains nothing from threads; many lists run in parallel
            kernel = _batch if ss.shape[0] > 1 else _batch_serial
            val, tie, gs = kernel(ss, ys, ws, rank, K, lengths, float(c0), float(c1))
            grad = np.zeros_like(gs)
            np.put_along_axis(grad, order, gs, 1)
            ctx.save_for_backward(torch.from_numpy(grad).to(device=s.device, dtype=s.dtype))
            return (torch.from_numpy(val).to(device=s.device, dtype=s.dtype),
                    torch.from_numpy(tie).to(device=s.device, dtype=s.dtype))

        @staticmethod
        def backward(ctx, g_val, g_tie):
            (grad,) = ctx.saved_tensors
            return g_val.unsqueeze(-1) * grad, None, None, None, None, None

    return SortedHinge
