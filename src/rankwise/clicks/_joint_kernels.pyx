# cython: language_level=3
"""Compiled kernels of :mod:`rankwise.clicks.joint`: the click counts of the result pages (DLA) and the
pairwise-loss sums of Unbiased LambdaMART's position-bias update."""
import numpy as np

from libc.math cimport exp, log1p
from libc.stdint cimport int64_t, uint8_t


def page_counts(const int64_t[::1] off, const uint8_t[::1] clicked, const int64_t[::1] page_of,
                const int64_t[::1] p_off, const int64_t[::1] m_off, double[::1] clicks, double[::1] counts):
    """Add each session's clicks to its page's per-position counts ``clicks`` and, per pair of positions
    (a, b) with a clicked and b not, 1 to the page's ``counts[m_off[u] + a n + b]``."""
    cdef Py_ssize_t s
    cdef int64_t u, n, a, b
    with nogil:
        for s in range(off.shape[0] - 1):
            u = page_of[s]
            n = off[s + 1] - off[s]
            for a in range(n):
                if clicked[off[s] + a]:
                    clicks[p_off[u] + a] += 1.0
                    for b in range(n):
                        if not clicked[off[s] + b]:
                            counts[m_off[u] + a * n + b] += 1.0


def bias_sums(const double[::1] scores, const int64_t[::1] off, const double[::1] clicked,
              const double[::1] inv_t_plus, const double[::1] inv_t_minus, double sigma, double[::1] num_p,
              double[::1] num_m):
    """The sums that re-estimate Unbiased LambdaMART's position biases, one group (session) after another:
    for every pair (a clicked, b not) of a group, with L = log(1 + exp(-σ (s_a - s_b))),
    ``num_p[a] += L / t⁻_b`` and ``num_m[b] += L / t⁺_a`` (``inv_t_plus``, ``inv_t_minus``: 1/t of each row's
    rank). The pairs' gradients are the training engine's (:mod:`rankwise.losses._engine`)."""
    cdef Py_ssize_t u, nu = off.shape[0] - 1
    cdef int64_t a, b
    cdef double d, loss
    with nogil:
        for u in range(nu):
            for a in range(off[u], off[u + 1]):
                if clicked[a] == 0.0:
                    continue
                for b in range(off[u], off[u + 1]):
                    if clicked[b] != 0.0:
                        continue
                    d = sigma * (scores[a] - scores[b])
                    loss = log1p(exp(-d)) if d > -30 else -d
                    num_p[a] += loss * inv_t_minus[b]
                    num_m[b] += loss * inv_t_plus[a]
