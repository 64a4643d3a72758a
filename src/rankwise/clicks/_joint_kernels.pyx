# cython: language_level=3
"""Compiled kernels of :mod:`rankwise.clicks.joint`: the click counts of the result pages (``pages``), the
pages' blocks of (clicked, unclicked) pair weights and the pairwise-loss sums of Unbiased LambdaMART's
position-bias update (its gradients are the training engine's, on the blocks as given pair weights)."""
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


def session_pair_counts(const int64_t[::1] off, const double[::1] clicked, const int64_t[::1] page_of,
                        const int64_t[::1] m_off, const double[::1] weight, double[::1] counts):
    """Add, for every session s (rows ``off[s]:off[s + 1]``, in rank order) and every pair of its ranks (a, b)
    with a clicked and b not, ``weight[s]`` to its page's ``counts[m_off[page_of[s]] + a n + b]`` (n: the
    session's length, its page's)."""
    cdef Py_ssize_t s
    cdef int64_t n, a, b, base, r0
    cdef double w
    with nogil:
        for s in range(off.shape[0] - 1):
            r0 = off[s]
            n = off[s + 1] - r0
            base = m_off[page_of[s]]
            w = weight[s]
            for a in range(n):
                if clicked[r0 + a] == 0.0:
                    continue
                for b in range(n):
                    if clicked[r0 + b] == 0.0:
                        counts[base + a * n + b] += w


def block_bias_sums(const double[::1] scores, const int64_t[::1] p_off, const int64_t[::1] m_off,
                    const double[::1] counts, const double[::1] inv_t_plus, const double[::1] inv_t_minus, double sigma,
                    double[::1] num_p, double[::1] num_m):
    """The sums that re-estimate Unbiased LambdaMART's position biases on result pages: for every pair (a, b) of
    a page's rows with count c = ``counts[m_off[u] + a n + b]`` > 0 (the weight of the sessions in which a was
    clicked and b not), with L = log(1 + exp(-σ (s_a - s_b))), ``num_p[a] += c L / t⁻_b`` and
    ``num_m[b] += c L / t⁺_a`` (``inv_t_plus``, ``inv_t_minus``: 1/t of each row's rank). The pairs' gradients
    are the training engine's, on the same counts as given pair weights (:mod:`rankwise.losses._engine`)."""
    cdef Py_ssize_t u, nu = p_off.shape[0] - 1
    cdef int64_t a, b, n, a0, base
    cdef double c, d, loss
    with nogil:
        for u in range(nu):
            a0 = p_off[u]
            n = p_off[u + 1] - a0
            base = m_off[u]
            for a in range(n):
                for b in range(n):
                    c = counts[base + a * n + b]
                    if c == 0.0:
                        continue
                    d = sigma * (scores[a0 + a] - scores[a0 + b])
                    loss = log1p(exp(-d)) if d > -30 else -d
                    num_p[a0 + a] += c * loss * inv_t_minus[a0 + b]
                    num_m[a0 + b] += c * loss * inv_t_plus[a0 + a]
