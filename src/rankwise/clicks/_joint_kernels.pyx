# cython: language_level=3
"""Compiled kernels of the click rankers: the result pages of a click data set (a hash and a byte comparison of
each session's rows: :mod:`rankwise.clicks.sessions`), the pages' blocks of (clicked, unclicked) pair weights
and the pairwise-loss sums of Unbiased LambdaMART's position-bias update (its gradients are the training
engine's, on the blocks as given pair weights: :mod:`rankwise.clicks.joint`)."""
import numpy as np

from libc.math cimport exp, log1p
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcmp, memcpy


def session_pair_counts(const int64_t[::1] off, const double[::1] clicked, const int64_t[::1] page_of,
                        const int64_t[::1] p_off, const int64_t[::1] m_off, const double[::1] weight,
                        double[::1] counts, double[::1] clicks):
    """Add, for every session s (rows ``off[s]:off[s + 1]``, in rank order) and every pair of its ranks (a, b)
    with a clicked and b not, ``weight[s]`` to its page's ``counts[m_off[page_of[s]] + a n + b]`` (n: the
    session's length, its page's), and for every click a, ``weight[s]`` to ``clicks[p_off[page_of[s]] + a]``."""
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
                clicks[p_off[page_of[s]] + a] += w
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


def group_hashes(const uint8_t[:, ::1] rows, const int64_t[::1] off, uint64_t seed, uint64_t[::1] out):
    """A 64-bit hash of each group's bytes (group g: rows ``off[g]:off[g + 1]`` of ``rows``, a row's bytes in
    order, the rows in order), mixed with ``out[g]`` (the caller's start value) and ``seed``: equal groups get
    equal hashes; different groups collide rarely (the caller checks every group against its code's first)."""
    cdef Py_ssize_t g, k
    cdef uint64_t h, x, h1, h2, h3, x1, x2, x3
    cdef const uint8_t* p
    cdef int64_t length
    with nogil:
        for g in range(off.shape[0] - 1):
            length = (off[g + 1] - off[g]) * rows.shape[1]
            h = (out[g] ^ seed) * 0x9E3779B97F4A7C15ULL + <uint64_t>length
            if length > 0:
                p = &rows[off[g], 0]
                k = 0
                # four independent lanes over 32 bytes at a time (no chain of dependent multiplies), then folded
                h1, h2, h3 = h ^ 0x1ULL, h ^ 0x2ULL, h ^ 0x3ULL
                while k + 32 <= length:
                    memcpy(&x, p + k, 8)
                    memcpy(&x1, p + k + 8, 8)
                    memcpy(&x2, p + k + 16, 8)
                    memcpy(&x3, p + k + 24, 8)
                    h = (h ^ x) * 0xBF58476D1CE4E5B9ULL
                    h1 = (h1 ^ x1) * 0xBF58476D1CE4E5B9ULL
                    h2 = (h2 ^ x2) * 0xBF58476D1CE4E5B9ULL
                    h3 = (h3 ^ x3) * 0xBF58476D1CE4E5B9ULL
                    h ^= h >> 31
                    h1 ^= h1 >> 31
                    h2 ^= h2 >> 31
                    h3 ^= h3 >> 31
                    k += 32
                h = ((h * 0x94D049BB133111EBULL) ^ h1) * 0xBF58476D1CE4E5B9ULL
                h = ((h ^ (h >> 29)) ^ h2) * 0x94D049BB133111EBULL
                h = ((h ^ (h >> 31)) ^ h3) * 0xBF58476D1CE4E5B9ULL
                while k + 8 <= length:
                    memcpy(&x, p + k, 8)
                    h = (h ^ x) * 0xBF58476D1CE4E5B9ULL
                    h ^= h >> 31
                    k += 8
                if k < length:
                    x = 0
                    memcpy(&x, p + k, length - k)
                    h = (h ^ x) * 0x94D049BB133111EBULL
                    h ^= h >> 29
            out[g] = h ^ (h >> 32)


def groups_equal_first(const uint8_t[:, ::1] rows, const int64_t[::1] off, const int64_t[::1] code,
                       const int64_t[::1] first):
    """Whether every group's bytes (as in :func:`group_hashes`) equal those of its code's first group
    (``first[code[g]]``), lengths included."""
    cdef Py_ssize_t g
    cdef int64_t f, w = rows.shape[1]
    cdef bint ok = True
    with nogil:
        for g in range(off.shape[0] - 1):
            f = first[code[g]]
            if f == g:
                continue
            if off[g + 1] - off[g] != off[f + 1] - off[f]:
                ok = False
                break
            if (w > 0 and off[g + 1] > off[g]
                    and memcmp(&rows[off[g], 0], &rows[off[f], 0], (off[g + 1] - off[g]) * w) != 0):
                ok = False
                break
    return ok
