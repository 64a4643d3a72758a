# cython: language_level=3
"""Compiled kernels of :mod:`rankwise.clicks.joint`: the click counts of the result pages and the
debiased pairwise gradients of Unbiased LambdaMART."""
import numpy as np

from libc.math cimport exp, fabs, log1p, log2
from libc.stdint cimport int64_t, uint8_t

from rankwise._native.sort cimport argsort_f64


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


def ulm_grad(const double[::1] scores, const int64_t[::1] p_off, const int64_t[::1] m_off, const double[::1] counts,
             const double[::1] t_plus, const double[::1] t_minus, double sigma, double[::1] grad, double[::1] hess,
             double[::1] num_p, double[::1] num_m):
    """Gradients of the debiased pairwise loss and the sums that re-estimate t⁺, t⁻.

    Each page's current ranking (for |ΔDCG|) sorts its scores descending, ties in page order."""
    cdef Py_ssize_t u, nu = p_off.shape[0] - 1
    cdef int64_t nmax = 0
    for u in range(nu):
        nmax = max(nmax, p_off[u + 1] - p_off[u])
    neg_a = np.empty(max(nmax, 1))
    order_a = np.empty(max(nmax, 1), dtype=np.int64)
    cur_a = np.empty(max(nmax, 1), dtype=np.int64)
    cdef double[::1] neg = neg_a
    cdef int64_t[::1] order = order_a
    cdef int64_t[::1] cur = cur_a
    cdef int64_t a0, n, r, a, b
    cdef double m, d, rho, loss, delta, w, g, h
    with nogil:
        for u in range(nu):
            a0 = p_off[u]
            n = p_off[u + 1] - a0
            # current rank of each item of the page by score (for |ΔDCG|)
            for r in range(n):
                neg[r] = -scores[a0 + r]
            argsort_f64(&neg[0], n, &order[0])
            for r in range(n):
                cur[order[r]] = r
            for a in range(n):
                for b in range(n):
                    m = counts[m_off[u] + a * n + b]
                    if m == 0.0:
                        continue
                    d = sigma * (scores[a0 + a] - scores[a0 + b])
                    rho = 1.0 / (1.0 + exp(d))  # = σ(-d)
                    loss = log1p(exp(-d)) if d > -30 else -d
                    delta = fabs(1.0 / log2(2.0 + cur[a]) - 1.0 / log2(2.0 + cur[b]))
                    w = m / (t_plus[a0 + a] * t_minus[a0 + b])
                    g = w * sigma * rho * delta
                    h = w * sigma * sigma * rho * (1.0 - rho) * delta
                    grad[a0 + a] -= g
                    grad[a0 + b] += g
                    hess[a0 + a] += h
                    hess[a0 + b] += h
                    num_p[a0 + a] += m * loss / t_minus[a0 + b]
                    num_m[a0 + b] += m * loss / t_plus[a0 + a]
