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
The sweeps are compiled (``_sorted_kernels.pyx``); lists run in parallel on threads.
"""
from __future__ import annotations

import functools

import numpy as np

from rankwise.losses._deferred import deferred
from rankwise.losses._sorted_hinge import _prepare_sorted, run_ranges
from rankwise.losses._sorted_kernels import exp_rows

torch = deferred("torch", globals())


def _batch(s, y, w, rank, K, lengths, c0, c1, T):
    """Per-row value, gradient and Hessian diagonal (sorted order) of the sweeps, rows on threads."""
    B, L = s.shape
    val = np.zeros(B)
    grad = np.zeros((B, L))
    hess = np.zeros((B, L))
    run_ranges(lambda lo, hi: exp_rows(s, y, w, rank, K, lengths, c0, c1, T, lo, hi, val, grad, hess), lengths)
    return val, grad, hess


def sorted_exp_terms(s, y, w, mask, c0: float, c1: float, T: float):
    """Per-list value, per-item gradient and Hessian diagonal (tensors of ``s``'s dtype and device)."""
    ss, ys, ws, rank, K, lengths, order = _prepare_sorted(s, y, w, mask)
    val, gs, hs = _batch(ss, ys, ws, rank, K, lengths, float(c0), float(c1), float(T))
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
