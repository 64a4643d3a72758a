# cython: language_level=3
"""Compiled kernels of the ranking measures (re-exported by :mod:`rankwise.metrics._kernels`, which
holds the Python orchestration: the threads over query ranges, the packed row-wise sort).

Every measure kernel receives a query's items sorted by descending score and ``gstart`` (True where a
group of tied scores starts) and computes the exact expectation of the measure over uniformly random
orderings inside each tie group. Kernels release the GIL; a call over a range of queries needs nothing
from the others. Inputs are taken as contiguous float64 / int64 / bool arrays (converted when they are
not: the conversion copies nothing when they already are).
"""
import numpy as np

from libc.math cimport exp2, isnan, log2
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

from rankwise._native.sort cimport argsort_f64, sort_f64, sort_i64


cdef inline object _f64(x):
    return np.ascontiguousarray(x, dtype=np.float64)


cdef inline object _i64(x):
    return np.ascontiguousarray(x, dtype=np.int64)


cdef inline object _u8(x):
    """A read-only bool input as bytes (typed memoryviews do not take NumPy's bool format)."""
    return np.ascontiguousarray(x, dtype=np.bool_).view(np.uint8)


cdef inline int64_t _longest(const int64_t[::1] offsets) noexcept nogil:
    cdef int64_t n = 0
    cdef Py_ssize_t q
    for q in range(offsets.shape[0] - 1):
        n = max(n, offsets[q + 1] - offsets[q])
    return n


# ---------------------------------------------------------------------------------------------------
# sorting (see _kernels.sort_gather)

def _group_starts(offsets, ss):
    """True where a run of equal (sorted) scores starts, and at every query's first row."""
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const double[::1] s = _f64(ss)
    g_a = np.ones(s.shape[0], dtype=np.bool_)
    cdef unsigned char[::1] g = g_a.view(np.uint8)
    cdef Py_ssize_t q
    cdef int64_t t
    with nogil:
        for q in range(off.shape[0] - 1):
            for t in range(off[q] + 1, off[q + 1]):
                g[t] = s[t] != s[t - 1]
    return g_a


def _pack_rows(offsets, qs, bits, int nb, out):
    """Row ``r`` of ``out``: the packed keys of query ``qs[r]`` (ascending = scores descending),
    then padding (all ones)."""
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const int64_t[::1] q = _i64(qs)
    cdef const uint64_t[::1] b = np.ascontiguousarray(bits, dtype=np.uint64)
    cdef uint64_t[:, ::1] o = out
    cdef uint64_t sign = (<uint64_t>1) << 63
    cdef uint64_t ones = ~(<uint64_t>0)
    cdef uint64_t high = ~(((<uint64_t>1) << nb) - 1)
    cdef uint64_t pad = ones  # above every real key: a finite score's pattern never has all top bits set
    cdef Py_ssize_t w = o.shape[1], r
    cdef int64_t a, m, t
    cdef uint64_t u, neg, k
    with nogil:
        for r in range(q.shape[0]):
            a = off[q[r]]
            m = off[q[r] + 1] - a
            for t in range(m):
                u = b[a + t]
                if u == sign:  # -0.0 is 0.0
                    u = 0
                # ascending float order as unsigned integers: flip all bits of negatives, the sign
                # bit of the others (branch-free); then complement, for descending scores
                neg = (<uint64_t>0) - (u >> 63)
                k = ~(u ^ (neg | sign))
                o[r, t] = (k & high) | <uint64_t>t
            for t in range(m, w):
                o[r, t] = pad


def _unpack_rows(offsets, qs, packed, int nb, scores, labels, key, int mode, bint want_perm, perm, ss, ys,
                 bint groups, gstart):
    """Write the sorted scores and labels (and ``perm``, the group starts, when asked) from
    row-sorted packed keys, re-sorting runs of equal truncated keys exactly (stable by score; runs
    of equal scores by ``key`` in mode 1, then input order)."""
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const int64_t[::1] q = _i64(qs)
    cdef const uint64_t[:, ::1] pk = packed
    cdef const double[::1] sc = _f64(scores)
    cdef const double[::1] lab = _f64(labels)
    cdef const double[::1] ky = _f64(key)
    cdef int64_t[::1] pm = perm  # outputs: written in place, never converted
    cdef double[::1] so = ss
    cdef double[::1] yo = ys
    cdef unsigned char[::1] gs = gstart.view(np.uint8)
    cdef Py_ssize_t w = pk.shape[1]
    sub_a = np.empty(w, dtype=np.int64)
    tmp_a = np.empty(w, dtype=np.int64)
    ord_a = np.empty(w, dtype=np.int64)
    vals_a = np.empty(w)
    cdef int64_t[::1] sub = sub_a
    cdef int64_t[::1] tmp = tmp_a
    cdef int64_t[::1] o = ord_a
    cdef double[::1] vals = vals_a
    cdef uint64_t low = ((<uint64_t>1) << nb) - 1
    cdef uint64_t high = ~low
    cdef uint64_t prev, hi, key_t
    cdef Py_ssize_t r
    cdef int64_t a, m, t, i, j, u, v, n
    cdef bint clash, exact
    cdef double x0
    with nogil:
        for r in range(q.shape[0]):
            a = off[q[r]]
            m = off[q[r] + 1] - a
            clash = False  # two items with equal truncated keys
            prev = (pk[r, 0] & high) ^ high  # differs from the first key's high part
            for t in range(m):
                key_t = pk[r, t]
                i = <int64_t>(key_t & low)
                if want_perm:
                    pm[a + t] = a + i
                so[a + t] = sc[a + i]
                yo[a + t] = lab[a + i]
                hi = key_t & high
                clash = clash | (hi == prev)
                prev = hi
            if clash:
                i = 0
                while i < m:
                    hi = pk[r, i] & high
                    j = i + 1
                    while j < m and (pk[r, j] & high) == hi:
                        j += 1
                    exact = True  # a run of one, or of exactly equal scores already in input order
                    if j - i > 1:
                        x0 = so[a + i]
                        for t in range(i + 1, j):
                            if so[a + t] != x0:
                                exact = False
                                break
                    if not (exact and (mode == 0 or j - i == 1)):
                        n = j - i
                        for t in range(n):
                            sub[t] = <int64_t>(pk[r, i + t] & low)  # ascending input index
                            vals[t] = -sc[a + sub[t]]
                        if not exact:
                            argsort_f64(&vals[0], n, &o[0])
                            for t in range(n):
                                tmp[t] = sub[o[t]]
                            for t in range(n):
                                sub[t] = tmp[t]
                        if mode == 1:  # runs of exactly equal scores: order by key, then input order
                            u = 0
                            while u < n:
                                v = u + 1
                                while v < n and sc[a + sub[v]] == sc[a + sub[u]]:
                                    v += 1
                                if v - u > 1:
                                    for t in range(v - u):
                                        vals[t] = ky[a + sub[u + t]]
                                    argsort_f64(&vals[0], v - u, &o[0])
                                    for t in range(v - u):
                                        tmp[t] = sub[u + o[t]]
                                    for t in range(v - u):
                                        sub[u + t] = tmp[t]
                                u = v
                        for t in range(n):
                            if want_perm:
                                pm[a + i + t] = a + sub[t]
                            so[a + i + t] = sc[a + sub[t]]
                            yo[a + i + t] = lab[a + sub[t]]
                    i = j
            if groups:
                for t in range(1, m):
                    gs[a + t] = so[a + t] != so[a + t - 1]


cdef inline bint _qs_lt(double a, double b) noexcept nogil:
    """numba's float order for sorting: NaN after every number."""
    return a < b or (isnan(b) and not isnan(a))


cdef inline void _qs_swap(int64_t* R, int64_t i, int64_t j) noexcept nogil:
    cdef int64_t t = R[i]
    R[i] = R[j]
    R[j] = t


cdef void _qs_insertion(const double* A, int64_t* R, int64_t low, int64_t high) noexcept nogil:
    """Insertion sort of R[low..high] (inclusive) by A[R[.]]."""
    cdef int64_t i, j, k
    cdef double x
    if high <= low:
        return
    for i in range(low + 1, high + 1):
        k = R[i]
        x = A[k]
        j = i
        while j > low and _qs_lt(x, A[R[j - 1]]):
            R[j] = R[j - 1]
            j -= 1
        R[j] = k


cdef int64_t _qs_partition(const double* A, int64_t* R, int64_t low, int64_t high) noexcept nogil:
    """Partition R[low..high] around the median of A at low, middle and high; returns the pivot's
    final place."""
    cdef int64_t mid = (low + high) >> 1
    cdef int64_t i, j
    cdef double pivot
    if _qs_lt(A[R[mid]], A[R[low]]):
        _qs_swap(R, low, mid)
    if _qs_lt(A[R[high]], A[R[mid]]):
        _qs_swap(R, high, mid)
    if _qs_lt(A[R[mid]], A[R[low]]):
        _qs_swap(R, low, mid)
    pivot = A[R[mid]]
    _qs_swap(R, high, mid)  # the pivot waits at the end
    i = low
    j = high - 1
    while True:
        while i < high and _qs_lt(A[R[i]], pivot):
            i += 1
        while j >= low and _qs_lt(pivot, A[R[j]]):
            j -= 1
        if i >= j:
            break
        _qs_swap(R, i, j)
        i += 1
        j -= 1
    _qs_swap(R, i, high)
    return i


cdef void _quicksort_argsort(const double* A, int64_t n, int64_t* R) noexcept nogil:
    """R[0:n] = numba's ``np.argsort(A[0:n], kind="quicksort")``, tie order included: median-of-three
    partitions down to 15 items, then insertion sort; the larger side waits on a stack, the smaller is
    split first (so the stack never holds more than log2(n) + 1 ranges)."""
    cdef int64_t lo[128]
    cdef int64_t hi[128]
    cdef int64_t ns, low, high, i, t
    for t in range(n):
        R[t] = t
    if n < 2:
        return
    lo[0] = 0
    hi[0] = n - 1
    ns = 1
    while ns > 0:
        ns -= 1
        low = lo[ns]
        high = hi[ns]
        while high - low >= 15:
            i = _qs_partition(A, R, low, high)
            if high - i > i - low:  # the right side is larger: it waits
                if high > i:
                    lo[ns] = i + 1
                    hi[ns] = high
                    ns += 1
                high = i - 1
            else:
                if i > low:
                    lo[ns] = low
                    hi[ns] = i - 1
                    ns += 1
                low = i + 1
        _qs_insertion(A, R, low, high)


def quicksort_argsort(a):
    """numba's ``np.argsort(a, kind="quicksort")`` of a 1-d array (int64 indices)."""
    cdef const double[::1] x = _f64(a)
    out_a = np.empty(x.shape[0], dtype=np.int64)
    cdef int64_t[::1] out = out_a
    if x.shape[0]:
        with nogil:
            _quicksort_argsort(&x[0], x.shape[0], &out[0])
    return out_a


def _sort_quicksort(offsets, neg_scores):
    """Per-query ``argsort(kind="quicksort")`` as numba implements it (ranx's tie order)."""
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const double[::1] x = _f64(neg_scores)
    perm_a = np.empty(x.shape[0], dtype=np.int64)
    cdef int64_t[::1] perm = perm_a
    cdef Py_ssize_t q
    cdef int64_t a, b, j
    with nogil:
        for q in range(off.shape[0] - 1):
            a = off[q]
            b = off[q + 1]
            if b - a == 0:
                continue
            _quicksort_argsort(&x[a], b - a, &perm[a])
            for j in range(a, b):
                perm[j] += a
    return perm_a


# ---------------------------------------------------------------------------------------------------
# measures

cdef inline int64_t _group_end(const unsigned char* gstart, int64_t i, int64_t b) noexcept nogil:
    """One past the last row of the tie group that starts at row ``i`` (rows ``< b``)."""
    cdef int64_t j = i + 1
    while j < b and not gstart[j]:
        j += 1
    return j


cdef inline double _unit(bint b) noexcept nogil:
    """1.0 if ``b`` else 0.0, computed without a jump: g++ turns ``(double)(x >= thr)`` into a
    branch, mispredicted on relevance that changes unpredictably from row to row."""
    cdef uint64_t u = (<uint64_t>0x3FF0000000000000) & ((<uint64_t>0) - <uint64_t>b)
    cdef double d
    memcpy(&d, &u, 8)
    return d


cdef inline double _g(double x, int tf, double thr) noexcept nogil:
    """The gain of value ``x`` (``_kernels.G_*``; numpy twin: ``_kernels.apply_gain``)."""
    if tf == 1:
        if x >= 0.0 and x < 53.0 and x == <double>(<int64_t>x):  # integer grade: 2^x - 1 is exact, skip exp2
            return <double>(((<int64_t>1) << (<int64_t>x)) - 1)
        return exp2(x) - 1.0
    if tf == 2:
        return _unit(x >= thr)
    return x


def count_kernel(offsets, v, int tf, double thr):
    """Rows per query whose gain ``_g(v)`` is positive (0: the query has no relevant row)."""
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const double[::1] x = _f64(v)
    cdef Py_ssize_t nq = off.shape[0] - 1, q
    out_a = np.zeros(nq, dtype=np.int64)
    cdef int64_t[::1] out = out_a
    cdef int64_t c, t
    with nogil:
        for q in range(nq):
            c = 0
            if tf == 2:  # _g(x) > 0 is x >= thr: a comparison the compiler vectorises
                for t in range(off[q], off[q + 1]):
                    c += x[t] >= thr
            else:
                for t in range(off[q], off[q + 1]):
                    c += _g(x[t], tf, thr) > 0.0
            out[q] = c
    return out_a


cdef inline double _disc(double p, int kind) noexcept nogil:
    if kind == 0:
        return 1.0 / log2(p + 1.0)
    if kind == 1:
        return 1.0 if p <= 2 else 1.0 / log2(p)
    return 1.0


cdef object _disc_table(const int64_t[::1] off, int64_t k, int kind):
    """``disc(p)`` for p = 1..P, P the longest list (or ``k``): computed once, not per item."""
    cdef int64_t longest = _longest(off)
    cdef int64_t n = longest if k <= 0 else min(k, longest)
    out_a = np.empty(n + 1)
    cdef double[::1] out = out_a
    cdef int64_t p
    out[0] = 0.0
    for p in range(1, n + 1):
        out[p] = _disc(<double>p, kind)
    return out_a


def dcg_kernel(offsets, v, gstart, int64_t k, int kind, int tf, double thr):
    """Expected sum of ``g_i * disc(pos_i)`` over positions <= k (k = 0: whole list), ``g_i = _g(v_i)``.

    Linearity makes the expectation exact: an item of a tie group occupying positions
    s+1..s+m gets the mean discount of those positions (McSherry & Najork 2008).
    """
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const double[::1] x = _f64(v)
    cdef const unsigned char[::1] gst = _u8(gstart)
    cdef Py_ssize_t nq = off.shape[0] - 1, q
    out_a = np.zeros(nq)
    cdef double[::1] out = out_a
    cdef const double[::1] disc = _disc_table(off, k, kind)
    cdef int64_t a, b, kk, i, j, s, m, last, p, t
    cdef double total, dsum, gsum
    with nogil:
        for q in range(nq):
            a = off[q]
            b = off[q + 1]
            kk = b - a if k <= 0 else min(k, b - a)
            total = 0.0
            i = a
            while i < b:
                s = i - a
                if s >= kk:
                    break
                j = _group_end(&gst[0], i, b)
                m = j - i
                if m == 1:
                    total += _g(x[i], tf, thr) * disc[s + 1]
                else:
                    dsum = 0.0
                    last = min(j - a, kk)
                    for p in range(s + 1, last + 1):
                        dsum += disc[p]
                    gsum = 0.0
                    for t in range(i, j):
                        gsum += _g(x[t], tf, thr)
                    total += gsum * dsum / m
                i = j
            out[q] = total
    return out_a


def ideal_dcg_kernel(offsets, v, int64_t k, int kind, int tf, double thr):
    """DCG of the gains ``_g(v)`` sorted in decreasing order (``_g`` is non-decreasing, so the
    values are ranked and only the top ``k`` are turned into gains).

    Integer grades below 64 (every LETOR / MSLR label) are counted in a histogram, one step per
    item; other values go through a small sorted top-k buffer (k <= 32) or a sort. Both paths
    add the same terms in the same order.
    """
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const double[::1] x = _f64(v)
    cdef Py_ssize_t nq = off.shape[0] - 1, q
    out_a = np.zeros(nq)
    cdef double[::1] out = out_a
    cdef const double[::1] disc = _disc_table(off, k, kind)
    cdef int64_t hist[64]
    cdef double buf[32]
    srt_a = np.empty(max(1, _longest(off)))
    cdef double[::1] srt = srt_a
    cdef int64_t a, b, n, kk, top, t, gr, p, c, cnt, j, e
    cdef double total, xv, gain
    for gr in range(64):
        hist[gr] = 0
    with nogil:
        for q in range(nq):
            a = off[q]
            b = off[q + 1]
            n = b - a
            kk = n if k <= 0 else min(k, n)
            total = 0.0
            top = -1
            t = a
            while t < b:
                xv = x[t]
                if not (xv >= 0.0 and xv < 64):
                    break
                gr = <int64_t>xv
                if gr != xv:
                    break
                hist[gr] += 1
                if gr > top:
                    top = gr
                t += 1
            if t == b:  # every value an integer grade: walk the histogram from the top grade
                p = 1
                for gr in range(top, -1, -1):
                    c = hist[gr]
                    hist[gr] = 0
                    if p <= kk and c > 0:
                        gain = _g(<double>gr, tf, thr)
                        for e in range(min(c, kk - p + 1)):
                            total += gain * disc[p]
                            p += 1
                out[q] = total
                continue
            for gr in range(top + 1):
                hist[gr] = 0
            if kk < n and kk <= 32:
                # top-kk by insertion into a small sorted buffer: O(n kk) worst case, no full sort
                cnt = 0
                for t in range(a, b):
                    xv = x[t]
                    if cnt == kk and xv <= buf[kk - 1]:
                        continue
                    j = cnt if cnt < kk else kk - 1
                    while j > 0 and buf[j - 1] < xv:
                        buf[j] = buf[j - 1]
                        j -= 1
                    buf[j] = xv
                    if cnt < kk:
                        cnt += 1
                for p in range(1, kk + 1):
                    total += _g(buf[p - 1], tf, thr) * disc[p]
            else:
                for t in range(n):
                    srt[t] = x[a + t]
                sort_f64(&srt[0], n)
                for p in range(1, kk + 1):
                    total += _g(srt[n - p], tf, thr) * disc[p]
            out[q] = total
    return out_a


def ap_kernel(offsets, v, gstart, bint singletons, int64_t k, int denom_kind, int tf, double thr):
    """Expected average precision; relevance ``_g(v)`` is 0/1 in sorted order.

    A relevant item of a tie group (size m, r relevant, s items and c relevant before it) sits
    at offset j with probability 1/m, and then the other r-1 relevant items of the group fill
    the j-1 slots before it with expected count (j-1)(r-1)/(m-1). Precision at its position
    is linear in that count, so
    E[sum] = sum_j (r/m) (c + 1 + (j-1)(r-1)/(m-1)) / (s+j)   exactly.
    denom_kind: 0 = number of relevant items R, 1 = min(R, k). ``singletons``: every tie group
    has one item (any rule but "average", or no tied scores).
    Returns (value, R) per query.
    """
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const double[::1] x = _f64(v)
    cdef const unsigned char[::1] gst = _u8(gstart)
    cdef Py_ssize_t nq = off.shape[0] - 1, q
    out_a = np.zeros(nq)
    nrel_a = np.zeros(nq)
    cdef double[::1] out = out_a
    cdef double[::1] nrel = nrel_a
    cdef int64_t a, b, kk, t, i, j, s, m, last, jj
    cdef double acc, c, r, R, d, extra, pos
    with nogil:
        for q in range(nq):
            a = off[q]
            b = off[q + 1]
            kk = b - a if k <= 0 else min(k, b - a)
            acc = 0.0
            c = 0.0
            if singletons and kk == b - a:
                # no tie groups and no cutoff: one branch-free pass, whose count is R
                pos = 0.0  # t - a + 1 as a double, counted rather than converted (the same values)
                for t in range(a, b):
                    r = _g(x[t], tf, thr)
                    c += r
                    pos += 1.0
                    acc += r * c / pos
                R = c
                nrel[q] = R
                d = min(R, <double>k) if denom_kind == 1 and k > 0 else R
                out[q] = acc / d if d > 0.0 else 0.0
                continue
            R = 0.0
            for t in range(a, b):
                R += _g(x[t], tf, thr)
            nrel[q] = R
            if R == 0.0:
                kk = 0
            if singletons:  # no tie groups: a branch-free loop over the top kk
                pos = 0.0
                for t in range(a, a + kk):
                    r = _g(x[t], tf, thr)
                    c += r
                    pos += 1.0
                    acc += r * c / pos
                kk = 0
            i = a
            while i < b:
                s = i - a
                if s >= kk:
                    break
                j = _group_end(&gst[0], i, b)
                m = j - i
                if m == 1:  # the common case, spelled out: one item at position s + 1
                    r = _g(x[i], tf, thr)
                    if r > 0.0:
                        acc += (c + 1.0) / (s + 1.0)
                    c += r
                    i = j
                    continue
                r = 0.0
                for t in range(i, j):
                    r += _g(x[t], tf, thr)
                if r > 0.0:
                    last = min(m, kk - s)
                    for jj in range(1, last + 1):
                        extra = 0.0 if m == 1 else (jj - 1.0) * (r - 1.0) / (m - 1.0)
                        acc += (r / m) * (c + 1.0 + extra) / (s + jj)
                c += r
                i = j
            if denom_kind == 1 and k > 0:
                d = min(R, <double>k)
            else:
                d = R
            out[q] = acc / d if d > 0.0 else 0.0
    return out_a, nrel_a


def rr_kernel(offsets, v, gstart, int64_t k, int tf, double thr):
    """Expected reciprocal rank of the first relevant item (0 if none within k).

    In the first tie group holding relevant items (s before it, size m, r relevant), the first
    relevant one is at offset j with probability C(m-j, r-1) / C(m, r).
    """
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const double[::1] x = _f64(v)
    cdef const unsigned char[::1] gst = _u8(gstart)
    cdef Py_ssize_t nq = off.shape[0] - 1, q
    out_a = np.zeros(nq)
    cdef double[::1] out = out_a
    cdef int64_t a, b, kk, i, j, s, m, r, t, jj
    cdef double p, val
    with nogil:
        for q in range(nq):
            a = off[q]
            b = off[q + 1]
            kk = b - a if k <= 0 else min(k, b - a)
            i = a
            while i < b:
                s = i - a
                if s >= kk:
                    break
                j = _group_end(&gst[0], i, b)
                m = j - i
                r = 0
                for t in range(i, j):
                    if _g(x[t], tf, thr) > 0:
                        r += 1
                if r > 0:
                    p = (<double>r) / (<double>m)  # P(first relevant at offset 1)
                    val = 0.0
                    for jj in range(1, m - r + 2):
                        if s + jj > kk:
                            break
                        val += p / (s + jj)
                        if m - jj > 0:
                            p *= (m - jj - r + 1.0) / (m - jj)
                    out[q] = val
                    break
                i = j
    return out_a


def err_kernel(offsets, v, gstart, int64_t k, int tf, double thr, double denom):
    """Expected reciprocal rank (Chapelle et al. 2009) with stop probabilities ``R = _g(v) / denom``.

    ERR = sum_r (1/r) R_r prod_{i<r} (1 - R_i). Inside a tie group of size m reached with
    probability P, item a at offset t contributes P R_a / (s+t) times the mean, over the
    (t-1)-subsets of the other items of the group, of prod (1 - R). Those means E_l are
    normalised elementary symmetric polynomials, built by the convex recurrence
    E'_l = ((n-l)/n) E_l + (l/n) x E_{l-1} (no large binomials, no cancellation).
    """
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const double[::1] x = _f64(v)
    cdef const unsigned char[::1] gst = _u8(gstart)
    cdef Py_ssize_t nq = off.shape[0] - 1, q
    out_a = np.zeros(nq)
    cdef double[::1] out = out_a
    cdef int64_t longest = max(1, _longest(off))
    Rs_a = np.empty(longest)
    vals_a = np.empty(longest)
    E_a = np.empty(longest)
    cdef double[::1] Rs = Rs_a
    cdef double[::1] vals = vals_a
    cdef double[::1] E = E_a
    cdef int64_t a, b, kk, i, j, s, m, L, u, cnt, l, n, t, top
    cdef double P, total, Ri, x0, xx, acc
    cdef bint skipped
    with nogil:
        for q in range(nq):
            a = off[q]
            b = off[q + 1]
            kk = b - a if k <= 0 else min(k, b - a)
            P = 1.0
            total = 0.0
            i = a
            while i < b:
                s = i - a
                if s >= kk or P == 0.0:
                    break
                j = _group_end(&gst[0], i, b)
                m = j - i
                if m == 1:
                    Ri = _g(x[i], tf, thr) / denom
                    total += P * Ri / (s + 1.0)
                    P *= 1.0 - Ri
                else:
                    L = min(m, kk - s)
                    for t in range(m):
                        Rs[t] = _g(x[i + t], tf, thr) / denom
                        vals[t] = Rs[t]
                    sort_f64(&vals[0], m)
                    for l in range(L):
                        E[l] = 0.0
                    u = 0
                    while u < m:
                        x0 = vals[u]
                        cnt = 0
                        while u < m and vals[u] == x0:
                            cnt += 1
                            u += 1
                        if x0 == 0.0:
                            continue
                        for l in range(L):
                            E[l] = 0.0
                        E[0] = 1.0
                        n = 0
                        skipped = False
                        for t in range(m):
                            if not skipped and Rs[t] == x0:
                                skipped = True
                                continue
                            xx = 1.0 - Rs[t]
                            n += 1
                            top = min(n, L - 1)
                            for l in range(top, 0, -1):
                                E[l] = ((<double>(n - l)) / n) * E[l] + ((<double>l) / n) * xx * E[l - 1]
                        acc = 0.0
                        for t in range(1, L + 1):
                            acc += E[t - 1] / (s + t)
                        total += P * cnt * x0 * acc / m
                    for t in range(m):
                        P *= 1.0 - Rs[t]
                i = j
            out[q] = total
    return out_a


# ---------------------------------------------------------------------------------------------------
# pairs

cdef inline void _fen_add(double* tree, int64_t size, int64_t i, double x) noexcept nogil:
    i += 1
    while i < size:
        tree[i] += x
        i += i & (-i)


cdef inline double _fen_sum(const double* tree, int64_t i) noexcept nogil:
    """Sum of the entries 0..i-1."""
    cdef double s = 0.0
    while i > 0:
        s += tree[i]
        i -= i & (-i)
    return s


cdef int64_t _label_ranks(const double* y, int64_t n, int64_t* order, int64_t* rank, double* T) noexcept nogil:
    """Dense rank of every label of ``y[0:n]`` (0 = smallest) into ``rank``; returns the number of
    distinct labels and sets ``T`` to the number of pairs of equal labels (``order``: scratch)."""
    cdef int64_t L = 0, i = 0, j, t, c
    cdef double x
    T[0] = 0.0
    argsort_f64(y, n, order)
    while i < n:
        j = i
        x = y[order[i]]
        while j < n and y[order[j]] == x:
            j += 1
        for t in range(i, j):
            rank[order[t]] = L
        c = j - i
        T[0] += c * (c - 1) / 2.0
        L += 1
        i = j
    return L


def pair_kernel(offsets, y, gstart, double rel_thr):
    """Pair counts per query in sorted order; a pair inside a tie group counts half each way.

    Returns, per query, columns:
    0 concordant pairs (higher label ranked above), 1 discordant, 2 pairs with distinct labels,
    3 pairs with equal labels, 4 relevant-above-irrelevant (AUC numerator), 5 n_rel * n_irrel.

    O(n log n) per query: labels are ranked once, then the tie groups are visited in ranking
    order with a Fenwick tree counting, for each item, the items of earlier groups with a
    smaller / larger label (pairs across groups count whole); pairs inside a group with
    distinct labels count half concordant, half discordant.
    """
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const double[::1] yv = _f64(y)
    cdef const unsigned char[::1] gst = _u8(gstart)
    cdef Py_ssize_t nq = off.shape[0] - 1, q
    out_a = np.zeros((nq, 6))
    cdef double[:, ::1] out = out_a
    cdef int64_t longest = _longest(off) + 1
    rank_a = np.empty(longest, dtype=np.int64)
    order_a = np.empty(longest, dtype=np.int64)
    gr_a = np.empty(longest, dtype=np.int64)
    tree_a = np.empty(longest + 1)
    cdef int64_t[::1] rank = rank_a
    cdef int64_t[::1] order = order_a
    cdef int64_t[::1] gr = gr_a
    cdef double[::1] tree = tree_a
    cdef int64_t a, b, n, L, i, j, m, t, rk, u, w, c
    cdef double nr, T, before, rel_before, Cs, Ds, W, A, rg, less, leq, eq
    with nogil:
        for q in range(nq):
            a = off[q]
            b = off[q + 1]
            n = b - a
            nr = 0.0
            for t in range(a, b):
                if yv[t] >= rel_thr:
                    nr += 1.0
            out[q, 5] = nr * (n - nr)
            if n < 2:
                continue
            L = _label_ranks(&yv[a], n, &order[0], &rank[0], &T)
            for t in range(L + 1):
                tree[t] = 0.0
            before = 0.0
            rel_before = 0.0
            Cs = 0.0
            Ds = 0.0
            W = 0.0
            A = 0.0
            i = a
            while i < b:
                j = _group_end(&gst[0], i, b)
                m = j - i
                rg = 0.0
                for t in range(i, j):
                    rk = rank[t - a]
                    less = _fen_sum(&tree[0], rk)
                    leq = _fen_sum(&tree[0], rk + 1)
                    Ds += less  # an earlier item with a smaller label: ranked against the labels
                    Cs += before - leq
                    if yv[t] >= rel_thr:
                        rg += 1.0
                if m > 1:  # pairs of distinct labels inside the group
                    for t in range(m):
                        gr[t] = rank[i - a + t]
                    sort_i64(&gr[0], m)
                    eq = 0.0
                    u = 0
                    while u < m:
                        w = u + 1
                        while w < m and gr[w] == gr[u]:
                            w += 1
                        c = w - u
                        eq += c * (c - 1) / 2.0
                        u = w
                    W += m * (m - 1) / 2.0 - eq
                A += (m - rg) * (rel_before + 0.5 * rg)
                for t in range(i, j):
                    _fen_add(&tree[0], L + 1, rank[t - a], 1.0)
                before += m
                rel_before += rg
                i = j
            out[q, 0] = Cs + W / 2.0
            out[q, 1] = Ds + W / 2.0
            out[q, 2] = n * (n - 1) / 2.0 - T
            out[q, 3] = T
            out[q, 4] = A
    return out_a


def label_pair_discordance(y, gstart, int64_t a, int64_t b):
    """For the rows a..b-1 of one sorted query: the distinct labels (ascending), their counts,
    and ``M[p, r]`` (p > r) = expected number of pairs with labels (p, r) ranked with the
    smaller label above (a pair inside a tie group counts 1/2). O(n L) for L distinct labels."""
    cdef const double[::1] yv = _f64(y)
    cdef const unsigned char[::1] gst = _u8(gstart)
    cdef int64_t n = b - a
    rank_a = np.empty(max(n, 1), dtype=np.int64)
    order_a = np.empty(max(n, 1), dtype=np.int64)
    gr_a = np.empty(max(n, 1), dtype=np.int64)
    cdef int64_t[::1] rank = rank_a
    cdef int64_t[::1] order = order_a
    cdef int64_t[::1] gr = gr_a
    cdef double T
    cdef int64_t L = _label_ranks(&yv[a], n, &order[0], &rank[0], &T) if n > 0 else 0
    labels_a = np.empty(L)
    counts_a = np.zeros(L)
    M_a = np.zeros((L, L))
    cnt_a = np.zeros(max(L, 1))  # items of earlier tie groups, per label
    cdef double[::1] labels = labels_a
    cdef double[::1] counts = counts_a
    cdef double[:, ::1] M = M_a
    cdef double[::1] cnt = cnt_a
    cdef int64_t t, i, j, p, r, u, v, w, xx
    with nogil:
        for t in range(a, b):
            labels[rank[t - a]] = yv[t]
            counts[rank[t - a]] += 1.0
        i = a
        while i < b:
            j = _group_end(&gst[0], i, b)
            for t in range(i, j):
                p = rank[t - a]
                for r in range(p):
                    M[p, r] += cnt[r]
            if j - i > 1:  # inside the group, every pair of distinct labels is misordered half the time
                for t in range(j - i):
                    gr[t] = rank[i - a + t]
                sort_i64(&gr[0], j - i)
                u = 0
                while u < j - i:
                    v = u + 1
                    while v < j - i and gr[v] == gr[u]:
                        v += 1
                    w = 0
                    while w < u:
                        xx = w + 1
                        while xx < u and gr[xx] == gr[w]:
                            xx += 1
                        M[gr[u], gr[w]] += 0.5 * (v - u) * (xx - w)
                        w = xx
                    u = v
            for t in range(i, j):
                cnt[rank[t - a]] += 1.0
            i = j
    return labels_a, counts_a, M_a


def expected_rank_kernel(offsets, gstart):
    """Expected 1-based position of every item (the midpoint of its tie group's positions)."""
    cdef const int64_t[::1] off = _i64(offsets)
    cdef const unsigned char[::1] gst = _u8(gstart)
    cdef Py_ssize_t n = gst.shape[0], q
    pos_a = np.empty(n)
    cdef double[::1] pos = pos_a
    cdef int64_t a, b, i, j, t
    cdef double mid
    with nogil:
        for q in range(off.shape[0] - 1):
            a = off[q]
            b = off[q + 1]
            i = a
            while i < b:
                j = _group_end(&gst[0], i, b)
                mid = (i - a + 1 + j - a) / 2.0
                for t in range(i, j):
                    pos[t] = mid
                i = j
    return pos_a
