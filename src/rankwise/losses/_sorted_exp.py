"""O(n log n) RankBoost: value, gradient and Hessian diagonal of the pairwise exponential by score sweeps.

For one list, with pair coefficients :math:`c_{ij} = c_0 + c_1 (y_i - y_j)`,

.. math:: \\sum_{y_i > y_j} w_i w_j c_{ij}\\, \\varphi(s_i - s_j), \\qquad
   \\varphi(d) = \\begin{cases} e^{-d} & -d < T \\\\ e^{T} (1 - d - T) & -d \\ge T \\end{cases}

is the exponential continued linearly beyond :math:`T` = ``EXP_CLIP`` (the ``safe_exp`` of
every exponential loss here, which keeps values finite for scores up to ±1e4). The pairs split
by the score gap :math:`t = s_j - s_i`: inside the window (:math:`t < T`) the exponential
factorises, :math:`w_i e^{-s_i} \\sum_j w_j c_{ij} e^{s_j}`; outside, :math:`\\varphi` is
linear in the scores. Both sums are two-dimensional dominance queries (label below, score inside
or outside the window), answered for every item by sweeping the scores with Fenwick trees
indexed by label rank -- the exponential sums kept in the log domain (``logaddexp`` trees), so
no partial sum overflows whatever the score range, and no sum is ever formed by subtracting two
large ones. Four sweeps give the value, the gradient and the exact Hessian diagonal
:math:`\\sum_j W_{ij} \\varphi''(s_i - s_j) + W_{ji} \\varphi''(s_j - s_i)` in O(n log n).
Written in numba, parallel over lists.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit, prange

from rankwise.losses._deferred import deferred
from rankwise.losses._sorted_hinge import _fen_add, _fen_prefix, _prepare_sorted

torch = deferred("torch", globals())


@njit(cache=True)
def _logaddexp(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a > b:
        return a + np.log1p(np.exp(b - a))
    return b + np.log1p(np.exp(a - b))


@njit(cache=True)
def _lfen_add(tree, pos, val):
    n = tree.shape[0]
    i = pos + 1
    while i <= n:
        tree[i - 1] = _logaddexp(tree[i - 1], val)
        i += i & (-i)


@njit(cache=True)
def _lfen_prefix(tree, pos):
    """log of the sum of exp(entries) over [0, pos); -inf when empty."""
    acc = -np.inf
    i = pos
    while i > 0:
        acc = _logaddexp(acc, tree[i - 1])
        i -= i & (-i)
    return acc


@njit(cache=True)
def _one_list(s, y, w, rank, K, c0, c1, T, g, h):
    """One list sorted by ascending score; ``rank`` = label rank (ties share one). Adds the
    gradient and the Hessian diagonal (same sorted order) into ``g`` and ``h``; returns the value."""
    n = s.shape[0]
    if n < 2:
        return 0.0
    ymin = y[0]
    for k in range(n):
        ymin = min(ymin, y[k])
    yv = y - ymin  # c_ij only sees label differences: shifted labels are >= 0, so their logs exist
    eT = math.exp(T)
    value = 0.0
    # A: k the upper item, j inside the window (s_j < s_k + T, y_j < y_k); sweep s ascending
    la = np.full(K, -np.inf)  # log sum w_j e^{s_j}
    lb = np.full(K, -np.inf)  # log sum w_j y_j e^{s_j}
    p = 0
    for k in range(n):
        thr = s[k] + T
        while p < n and s[p] < thr:
            if w[p] > 0:
                _lfen_add(la, rank[p], math.log(w[p]) + s[p])
                if c1 != 0.0 and yv[p] > 0:
                    _lfen_add(lb, rank[p], math.log(w[p] * yv[p]) + s[p])
            p += 1
        a = _lfen_prefix(la, rank[k])
        if a == -np.inf or w[k] == 0.0:
            continue
        e = (c0 + c1 * yv[k]) * math.exp(a - s[k])
        if c1 != 0.0:
            bb = _lfen_prefix(lb, rank[k])
            if bb > -np.inf:
                e -= c1 * math.exp(bb - s[k])
            e = max(e, 0.0)
        value += w[k] * e
        g[k] -= w[k] * e
        h[k] += w[k] * e
    # B: k the upper item, j outside the window (s_j >= s_k + T): linear part; sweep s descending
    f0 = np.zeros(K)
    f1 = np.zeros(K)
    fy = np.zeros(K)
    fys = np.zeros(K)
    q = n - 1
    for k in range(n - 1, -1, -1):
        thr = s[k] + T
        while q >= 0 and s[q] >= thr:
            _fen_add(f0, rank[q], w[q])
            _fen_add(f1, rank[q], w[q] * s[q])
            if c1 != 0.0:
                _fen_add(fy, rank[q], w[q] * yv[q])
                _fen_add(fys, rank[q], w[q] * yv[q] * s[q])
            q -= 1
        a0 = _fen_prefix(f0, rank[k])
        if a0 == 0.0 or w[k] == 0.0:
            continue
        a1 = _fen_prefix(f1, rank[k])
        m = 1.0 - s[k] - T
        ck = c0 + c1 * yv[k]
        lin = ck * (a0 * m + a1)
        gl = ck * a0
        if c1 != 0.0:
            ay = _fen_prefix(fy, rank[k])
            ays = _fen_prefix(fys, rank[k])
            lin -= c1 * (ay * m + ays)
            gl -= c1 * ay
        value += w[k] * eT * lin
        g[k] -= w[k] * eT * gl
    # C: k the lower item, i inside the window (s_i > s_k - T, y_i > y_k); sweep s descending.
    # Trees indexed by reversed rank K-1-rank, so "label above" is a prefix.
    lc = np.full(K, -np.inf)  # log sum w_i (c0 + c1 y_i) e^{-s_i}
    ld = np.full(K, -np.inf)  # log sum w_i e^{-s_i}
    q = n - 1
    for k in range(n - 1, -1, -1):
        thr = s[k] - T
        while q >= 0 and s[q] > thr:
            cq = c0 + c1 * yv[q]
            if w[q] > 0 and cq > 0:
                _lfen_add(lc, K - 1 - rank[q], math.log(w[q] * cq) - s[q])
            if w[q] > 0 and c1 != 0.0:
                _lfen_add(ld, K - 1 - rank[q], math.log(w[q]) - s[q])
            q -= 1
        a = _lfen_prefix(lc, K - 1 - rank[k])
        if a == -np.inf or w[k] == 0.0:
            continue
        e = math.exp(a + s[k])
        if c1 != 0.0:
            bb = _lfen_prefix(ld, K - 1 - rank[k])
            if bb > -np.inf:
                e -= c1 * yv[k] * math.exp(bb + s[k])
            e = max(e, 0.0)
        g[k] += w[k] * e
        h[k] += w[k] * e
    # D: k the lower item, i outside the window (s_i <= s_k - T): phi' = -e^T; sweep s ascending
    f0[:] = 0.0
    f1[:] = 0.0
    p = 0
    for k in range(n):
        thr = s[k] - T
        while p < n and s[p] <= thr:
            _fen_add(f0, K - 1 - rank[p], w[p] * (c0 + c1 * yv[p]))
            _fen_add(f1, K - 1 - rank[p], w[p])
            p += 1
        b0 = _fen_prefix(f0, K - 1 - rank[k])
        if w[k] == 0.0:
            continue
        bw = _fen_prefix(f1, K - 1 - rank[k])
        if bw == 0.0:
            continue
        g[k] += w[k] * eT * (b0 - c1 * yv[k] * bw)
    return value


@njit(parallel=True, cache=True)
def _batch(s, y, w, rank, K, lengths, c0, c1, T):
    B, L = s.shape
    val = np.zeros(B)
    grad = np.zeros((B, L))
    hess = np.zeros((B, L))
    for b in prange(B):
        n = lengths[b]
        val[b] = _one_list(s[b, :n], y[b, :n], w[b, :n], rank[b, :n], K[b], c0, c1, T, grad[b, :n], hess[b, :n])
    return val, grad, hess


@njit(cache=True)
def _batch_serial(s, y, w, rank, K, lengths, c0, c1, T):
    B, L = s.shape
    val = np.zeros(B)
    grad = np.zeros((B, L))
    hess = np.zeros((B, L))
    for b in range(B):
        n = lengths[b]
        val[b] = _one_list(s[b, :n], y[b, :n], w[b, :n], rank[b, :n], K[b], c0, c1, T, grad[b, :n], hess[b, :n])
    return val, grad, hess


def sorted_exp_terms(s, y, w, mask, c0: float, c1: float, T: float):
    """Per-list value, per-item gradient and Hessian diagonal (tensors of ``s``'s dtype and device)."""
    ss, ys, ws, rank, K, lengths, order = _prepare_sorted(s, y, w, mask)
    kernel = _batch if ss.shape[0] > 1 else _batch_serial  # one long list gains nothing from threads
    val, gs, hs = kernel(ss, ys, ws, rank, K, lengths, float(c0), float(c1), float(T))
    grad = np.zeros_like(gs)
    hess = np.zeros_like(hs)
    np.put_along_axis(grad, order, gs, 1)
    np.put_along_axis(hess, order, hs, 1)
    to = dict(device=s.device, dtype=s.dtype)
    return torch.from_numpy(val).to(**to), torch.from_numpy(grad).to(**to), torch.from_numpy(hess).to(**to)


@functools.cache
def sorted_exp_function():
    """The ``torch.autograd.Function`` of the sweeps, built on first use (torch is imported then)."""

    class SortedExp(torch.autograd.Function):
        """Per-list RankBoost value; the gradient comes from the same sweeps (first order only)."""

        @staticmethod
        def forward(ctx, s, y, w, mask, c0: float, c1: float, T: float):
            val, grad, _ = sorted_exp_terms(s, y, w, mask, c0, c1, T)
            ctx.save_for_backward(grad)
            return val

        @staticmethod
        def backward(ctx, g_val):
            (grad,) = ctx.saved_tensors
            return g_val.unsqueeze(-1) * grad, None, None, None, None, None, None

    return SortedExp
