# cython: language_level=3
"""Compiled kernel of Spearman's rho (:mod:`rankwise.metrics.correlation`)."""
import numpy as np

from libc.math cimport sqrt
from libc.stdint cimport int64_t

from rankwise._native.sort cimport argsort_f64


def spearman_kernel(const int64_t[::1] offsets, const double[::1] y, const double[::1] pos):
    """Per query: Spearman's rho between the expected score ranks ``pos`` (1 = best) and the labels'
    average ranks, and whether it is defined (at least two items, labels not all equal)."""
    cdef Py_ssize_t nq = offsets.shape[0] - 1
    out_a = np.zeros(nq)
    ok_a = np.zeros(nq, dtype=np.bool_)
    cdef double[::1] out = out_a
    cdef unsigned char[::1] ok = ok_a.view(np.uint8)
    cdef int64_t nmax = 0
    cdef Py_ssize_t q
    for q in range(nq):
        nmax = max(nmax, offsets[q + 1] - offsets[q])
    o_a = np.empty(nmax, dtype=np.int64)
    lr_a = np.empty(nmax)
    cdef int64_t[::1] o = o_a
    cdef double[::1] lr = lr_a
    cdef int64_t a, n, i, j, t
    cdef double mean, sxy, syy, sxx, r
    with nogil:
        for q in range(nq):
            a = offsets[q]
            n = offsets[q + 1] - a
            if n < 2:
                continue
            argsort_f64(&y[a], n, &o[0])
            i = 0
            while i < n:  # average ranks of the labels (1 = lowest)
                j = i + 1
                while j < n and y[a + o[j]] == y[a + o[i]]:
                    j += 1
                for t in range(i, j):
                    lr[o[t]] = (i + 1 + j) / 2.0
                i = j
            mean = (n + 1) / 2.0
            sxy = 0.0
            syy = 0.0
            for t in range(n):
                r = n + 1 - pos[a + t]  # score rank, n = best
                sxy += (r - mean) * (lr[t] - mean)
                syy += (lr[t] - mean) ** 2
            if syy > 0:
                sxx = n * (n * n - 1) / 12.0
                out[q] = sxy / sqrt(sxx * syy)
                ok[q] = 1
    return out_a, ok_a
