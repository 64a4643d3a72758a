# cython: language_level=3
"""Compiled sweeps of :mod:`rankwise.losses._sorted_hinge` (pairwise hinge) and
:mod:`rankwise.losses._sorted_exp` (RankBoost): Fenwick trees indexed by label rank, one list at a time.

The batch kernels fill rows ``lo:hi`` of their output arrays without the GIL; the Python modules run
them on row ranges with threads (each row is computed alone, so the result does not depend on the
number of threads). Inputs are ``[batch, list]`` arrays already sorted by ascending score per row,
padding last (``_sorted_hinge._prepare_sorted``); ``rank`` is the label rank (ties share one),
``K`` the number of label ranks of each row, ``lengths`` its number of real items.
"""
import numpy as np

from libc.math cimport INFINITY, exp, log, log1p
from libc.stdint cimport int64_t


# ------------------------------------------------------------------------------- Fenwick trees
cdef inline void _fen_add(double* tree, int64_t n, int64_t pos, double val) noexcept nogil:
    cdef int64_t i = pos + 1
    while i <= n:
        tree[i - 1] += val
        i += i & (-i)


cdef inline double _fen_prefix(const double* tree, int64_t pos) noexcept nogil:
    """Sum of entries [0, pos)."""
    cdef double acc = 0.0
    cdef int64_t i = pos
    while i > 0:
        acc += tree[i - 1]
        i -= i & (-i)
    return acc


cdef inline double _logaddexp(double a, double b) noexcept nogil:
    if a == -INFINITY:
        return b
    if b == -INFINITY:
        return a
    if a > b:
        return a + log1p(exp(b - a))
    return b + log1p(exp(a - b))


cdef inline void _lfen_add(double* tree, int64_t n, int64_t pos, double val) noexcept nogil:
    cdef int64_t i = pos + 1
    while i <= n:
        tree[i - 1] = _logaddexp(tree[i - 1], val)
        i += i & (-i)


cdef inline double _lfen_prefix(const double* tree, int64_t pos) noexcept nogil:
    """log of the sum of exp(entries) over [0, pos); -inf when empty."""
    cdef double acc = -INFINITY
    cdef int64_t i = pos
    while i > 0:
        acc = _logaddexp(acc, tree[i - 1])
        i -= i & (-i)
    return acc


cdef inline void _fill(double* x, int64_t n, double v) noexcept nogil:
    cdef int64_t k
    for k in range(n):
        x[k] = v


# ------------------------------------------------------------------------------- pairwise hinge
cdef double _hinge_one(const double* s, const double* y, const double* w, const int64_t* rank, int64_t n,
                       int64_t K, double c0, double c1, double* g, double* tie_out, double* work) noexcept nogil:
    """One list already sorted by ascending score; ``rank`` = label rank (ties share one).
    Writes the gradient (in the same sorted order) into ``g`` and the tied weight into ``tie_out``;
    returns the value. ``work``: 4 K doubles."""
    tie_out[0] = 0.0
    if n < 2:
        return 0.0
    cdef double* t0 = work
    cdef double* ty = work + K
    cdef double* ts = work + 2 * K
    cdef double* tys = work + 3 * K
    cdef double* wc = ts  # the tie weights are summed before the sweeps use ts, tys
    cdef double* w2c = tys
    cdef int64_t k, c, i, j, p
    cdef double tie = 0.0, value = 0.0, thr, a0, ay, a_s, ays, m, ci, b0, by
    # weight of tied pairs (constant, used by the Kendall hinge)
    _fill(work, 4 * K, 0.0)
    for k in range(n):
        wc[rank[k]] += w[k]
        w2c[rank[k]] += w[k] * w[k]
    for c in range(K):
        tie += 0.5 * (wc[c] * wc[c] - w2c[c])
    tie_out[0] = tie
    _fill(work, 4 * K, 0.0)
    # pass 1: i as the upper item; J_i = {j: y_j < y_i, s_j > s_i - 1}; sweep s descending
    p = n - 1
    for i in range(n - 1, -1, -1):
        thr = s[i] - 1.0
        while p >= 0 and s[p] > thr:
            _fen_add(t0, K, rank[p], w[p])
            _fen_add(ty, K, rank[p], w[p] * y[p])
            _fen_add(ts, K, rank[p], w[p] * s[p])
            _fen_add(tys, K, rank[p], w[p] * y[p] * s[p])
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
        value += w[i] * (ci * (m * a0 + a_s) - ((c1 * (m * ay + ays)) if c1 != 0.0 else 0.0))
        g[i] -= w[i] * (ci * a0 - ((c1 * ay) if c1 != 0.0 else 0.0))
    # pass 2: j as the lower item; K_j = {i: y_i > y_j, s_i < s_j + 1}; sweep s ascending
    _fill(t0, 2 * K, 0.0)
    p = 0
    for j in range(n):
        thr = s[j] + 1.0
        while p < n and s[p] < thr:
            _fen_add(t0, K, rank[p], w[p])
            _fen_add(ty, K, rank[p], w[p] * y[p])
            p += 1
        b0 = _fen_prefix(t0, K) - _fen_prefix(t0, rank[j] + 1)
        if b0 == 0.0:
            continue
        by = _fen_prefix(ty, K) - _fen_prefix(ty, rank[j] + 1)
        g[j] += w[j] * (c0 * b0 + ((c1 * (by - y[j] * b0)) if c1 != 0.0 else 0.0))
    return value


def hinge_rows(const double[:, ::1] s, const double[:, ::1] y, const double[:, ::1] w, const int64_t[:, ::1] rank,
               const int64_t[::1] K, const int64_t[::1] lengths, double c0, double c1, Py_ssize_t lo, Py_ssize_t hi,
               double[::1] val, double[::1] tie, double[:, ::1] grad):
    """Rows ``lo:hi`` of the sorted pairwise hinge: per-row value ``val``, tied-pair weight ``tie``
    and gradient ``grad`` (in the sorted order; ``grad`` zero on entry)."""
    cdef int64_t kmax = 1
    cdef Py_ssize_t b
    for b in range(lo, hi):
        kmax = max(kmax, K[b])
    work_a = np.empty(4 * kmax)
    cdef double[::1] work = work_a
    with nogil:
        for b in range(lo, hi):
            val[b] = _hinge_one(&s[b, 0], &y[b, 0], &w[b, 0], &rank[b, 0], lengths[b], K[b], c0, c1, &grad[b, 0],
                                &tie[b], &work[0])


# ------------------------------------------------------------------------------------- RankBoost
cdef double _exp_one(const double* s, const double* y, const double* w, const int64_t* rank, int64_t n, int64_t K,
                     double c0, double c1, double T, double* g, double* h, double* yv, double* work) noexcept nogil:
    """One list sorted by ascending score; ``rank`` = label rank (ties share one). Adds the
    gradient and the Hessian diagonal (same sorted order) into ``g`` and ``h``; returns the value.
    ``yv``: n doubles; ``work``: 4 K doubles."""
    if n < 2:
        return 0.0
    cdef int64_t k, p, q
    cdef double ymin = y[0], eT, value = 0.0, thr, a, e, bb, a0, a1, m, ck, lin, gl, ay, ays, cq, b0, bw
    for k in range(n):
        ymin = min(ymin, y[k])
    for k in range(n):
        yv[k] = y[k] - ymin  # c_ij only sees label differences: shifted labels are >= 0, so their logs exist
    eT = exp(T)
    # A: k the upper item, j inside the window (s_j < s_k + T, y_j < y_k); sweep s ascending
    cdef double* la = work  # log sum w_j e^{s_j}
    cdef double* lb = work + K  # log sum w_j y_j e^{s_j}
    _fill(work, 2 * K, -INFINITY)
    p = 0
    for k in range(n):
        thr = s[k] + T
        while p < n and s[p] < thr:
            if w[p] > 0:
                _lfen_add(la, K, rank[p], log(w[p]) + s[p])
                if c1 != 0.0 and yv[p] > 0:
                    _lfen_add(lb, K, rank[p], log(w[p] * yv[p]) + s[p])
            p += 1
        a = _lfen_prefix(la, rank[k])
        if a == -INFINITY or w[k] == 0.0:
            continue
        e = (c0 + c1 * yv[k]) * exp(a - s[k])
        if c1 != 0.0:
            bb = _lfen_prefix(lb, rank[k])
            if bb > -INFINITY:
                e -= c1 * exp(bb - s[k])
            e = max(e, 0.0)
        value += w[k] * e
        g[k] -= w[k] * e
        h[k] += w[k] * e
    # B: k the upper item, j outside the window (s_j >= s_k + T): linear part; sweep s descending
    cdef double* f0 = work
    cdef double* f1 = work + K
    cdef double* fy = work + 2 * K
    cdef double* fys = work + 3 * K
    _fill(work, 4 * K, 0.0)
    q = n - 1
    for k in range(n - 1, -1, -1):
        thr = s[k] + T
        while q >= 0 and s[q] >= thr:
            _fen_add(f0, K, rank[q], w[q])
            _fen_add(f1, K, rank[q], w[q] * s[q])
            if c1 != 0.0:
                _fen_add(fy, K, rank[q], w[q] * yv[q])
                _fen_add(fys, K, rank[q], w[q] * yv[q] * s[q])
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
    cdef double* lc = work + 2 * K  # log sum w_i (c0 + c1 y_i) e^{-s_i}
    cdef double* ld = work + 3 * K  # log sum w_i e^{-s_i}
    _fill(lc, 2 * K, -INFINITY)
    q = n - 1
    for k in range(n - 1, -1, -1):
        thr = s[k] - T
        while q >= 0 and s[q] > thr:
            cq = c0 + c1 * yv[q]
            if w[q] > 0 and cq > 0:
                _lfen_add(lc, K, K - 1 - rank[q], log(w[q] * cq) - s[q])
            if w[q] > 0 and c1 != 0.0:
                _lfen_add(ld, K, K - 1 - rank[q], log(w[q]) - s[q])
            q -= 1
        a = _lfen_prefix(lc, K - 1 - rank[k])
        if a == -INFINITY or w[k] == 0.0:
            continue
        e = exp(a + s[k])
        if c1 != 0.0:
            bb = _lfen_prefix(ld, K - 1 - rank[k])
            if bb > -INFINITY:
                e -= c1 * yv[k] * exp(bb + s[k])
            e = max(e, 0.0)
        g[k] += w[k] * e
        h[k] += w[k] * e
    # D: k the lower item, i outside the window (s_i <= s_k - T): phi' = -e^T; sweep s ascending
    _fill(f0, 2 * K, 0.0)
    p = 0
    for k in range(n):
        thr = s[k] - T
        while p < n and s[p] <= thr:
            _fen_add(f0, K, K - 1 - rank[p], w[p] * (c0 + c1 * yv[p]))
            _fen_add(f1, K, K - 1 - rank[p], w[p])
            p += 1
        b0 = _fen_prefix(f0, K - 1 - rank[k])
        if w[k] == 0.0:
            continue
        bw = _fen_prefix(f1, K - 1 - rank[k])
        if bw == 0.0:
            continue
        g[k] += w[k] * eT * (b0 - c1 * yv[k] * bw)
    return value


def exp_rows(const double[:, ::1] s, const double[:, ::1] y, const double[:, ::1] w, const int64_t[:, ::1] rank,
             const int64_t[::1] K, const int64_t[::1] lengths, double c0, double c1, double T, Py_ssize_t lo,
             Py_ssize_t hi, double[::1] val, double[:, ::1] grad, double[:, ::1] hess):
    """Rows ``lo:hi`` of the sorted RankBoost sweeps: per-row value ``val``, gradient ``grad`` and
    Hessian diagonal ``hess`` (in the sorted order; both zero on entry)."""
    cdef int64_t kmax = 1
    cdef Py_ssize_t b
    for b in range(lo, hi):
        kmax = max(kmax, K[b])
    work_a = np.empty(4 * kmax)
    yv_a = np.empty(max(s.shape[1], 1))
    cdef double[::1] work = work_a
    cdef double[::1] yv = yv_a
    with nogil:
        for b in range(lo, hi):
            val[b] = _exp_one(&s[b, 0], &y[b, 0], &w[b, 0], &rank[b, 0], lengths[b], K[b], c0, c1, T, &grad[b, 0],
                              &hess[b, 0], &yv[0], &work[0])
