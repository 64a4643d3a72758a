"""O(n log n) pairwise hinge: value and gradient by a sweep over scores with Fenwick trees.

For one list, the weighted pairwise hinge

.. math:: \\sum_{y_i > y_j} w_i w_j (c_0 + c_1 (y_i - y_j)) \\max(0, 1 - (s_i - s_j))

is a sum over the pairs that are *active* (s_j > s_i - 1) and ordered by label (y_j < y_i): a
two-dimensional dominance query. Sorting by score and sweeping a threshold while a Fenwick tree
indexed by label rank accumulates sums of w, w·y, w·s, w·y·s answers every item's query in
O(log n), so value and gradient cost O(n log n) instead of O(n^2) (the counting idea of
Joachims, "Training linear SVMs in linear time", KDD 2006, and Airola, Pahikkala & Salakoski,
"Training linear ranking SVMs in linearithmic time using red-black trees", Pattern Recognition
Letters 32, 2011). The sweep is compiled (``_sorted_kernels.pyx``); lists run in parallel on threads.
"""
from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rankwise._validation import equal_work_bounds, kernel_threads
from rankwise.losses._deferred import deferred
from rankwise.losses._sorted_kernels import hinge_rows

torch = deferred("torch", globals())


# Batches below this many items in all run on the calling thread: a pool costs more than it saves.
PARALLEL_MIN_ITEMS = 2_000


def run_ranges(fn, lengths):
    """``fn(lo, hi)`` on ranges of rows of about equal work (n log n per row of n items) covering every
    row, on :func:`~rankwise._validation.kernel_threads` threads; one range on the calling thread for
    small batches or a single list. Each row is computed alone, so the result does not depend on the
    number of threads."""
    B = len(lengths)
    # the size first: kernel_threads reads the cgroup's CPU quota, which costs more than a small batch
    threads = 1 if B < 2 or int(lengths.sum()) < PARALLEL_MIN_ITEMS else min(kernel_threads(None), B)
    if threads <= 1:
        fn(0, B)
        return
    bounds = equal_work_bounds(np.cumsum(lengths * np.log2(lengths + 2.0) + 1.0), 4 * threads)
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(lambda k: fn(int(bounds[k]), int(bounds[k + 1])), range(len(bounds) - 1)))


def _batch(s, y, w, rank, K, lengths, c0, c1):
    """Per-row value, tied-pair weight and gradient (sorted order) of the sweep, rows on threads."""
    B, L = s.shape
    val = np.zeros(B)
    tie = np.zeros(B)
    grad = np.zeros((B, L))
    run_ranges(lambda lo, hi: hinge_rows(s, y, w, rank, K, lengths, c0, c1, lo, hi, val, tie, grad), lengths)
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
            val, tie, gs = _batch(ss, ys, ws, rank, K, lengths, float(c0), float(c1))
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
