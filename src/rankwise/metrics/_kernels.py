"""Numba kernels: one loop over queries, one over the tie groups of each sorted query.

Every kernel receives a query's items sorted by descending score and ``gstart`` (True where a
group of tied scores starts). The value computed is the exact expectation of the measure over
uniformly random orderings inside each tie group; with groups of size one (every rule except
``ties="average"``) it is the measure of that one ranking.

Kernels release the GIL, and a kernel over a range of queries needs nothing from the others,
so :func:`map_queries` splits large inputs into contiguous query ranges of about equal row
count and runs them on a few threads (the per-query kernel plus a parallel map over queries).
The threads live for one call, so the module holds no pool: nothing to break across
``fork()`` and nothing shared between callers' threads. Their number is numba's
``NUMBA_NUM_THREADS`` (default: the CPUs this process may use); rankwise never changes it.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from numba import njit

#: inputs with fewer rows are computed on the calling thread (threads would cost more than they save)
PARALLEL_MIN_ROWS = 200_000


def n_threads(n_rows: int) -> int:
    """Threads for an input of ``n_rows`` rows: 1 below ``PARALLEL_MIN_ROWS``, else NUMBA_NUM_THREADS."""
    if n_rows < PARALLEL_MIN_ROWS:
        return 1
    return max(1, min(int(numba.config.NUMBA_NUM_THREADS), os.cpu_count() or 1))


def query_chunks(offsets, n_chunks: int) -> np.ndarray:
    """Query boundaries ``b`` splitting the rows into ``n_chunks`` ranges of about equal size:
    chunk ``i`` holds queries ``b[i]:b[i+1]``."""
    nq = len(offsets) - 1
    targets = offsets[-1] * np.arange(1, n_chunks) / n_chunks
    cuts = np.clip(np.searchsorted(offsets, targets), 0, nq)
    return np.unique(np.r_[0, cuts, nq])


def map_queries(kernel, offsets, *args):
    """``kernel(offsets, *args)``, one value (or tuple of values) per query, computed on query
    ranges in parallel for large inputs and concatenated in query order."""
    threads = n_threads(int(offsets[-1]) if len(offsets) else 0)
    bounds = query_chunks(offsets, threads) if threads > 1 else None
    if bounds is None or len(bounds) <= 2:
        return kernel(offsets, *args)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        parts = list(pool.map(lambda i: kernel(offsets[bounds[i]:bounds[i + 1] + 1], *args),
                              range(len(bounds) - 1)))
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate(col) for col in zip(*parts))
    return np.concatenate(parts)

# discount kinds
DISC_LOG2 = 0  # 1 / log2(p + 1)            (Burges et al. 2005)
DISC_JARVELIN = 1  # 1 / max(1, log2 p)     (Jarvelin & Kekalainen 2002; trec_eval, LETOR)
DISC_ONE = 2  # 1                           (counts: precision, recall)

# What a kernel makes of the per-row values it is given. Kernels take the labels and apply the
# gain themselves, on the rows they visit, rather than a gain array built by a separate pass
# over every row. All three are non-decreasing, so the ideal order of the labels is the ideal
# order of the gains.
G_VALUE = 0  # the value itself (a precomputed gain, or 0/1 relevance)
G_EXP2 = 1  # 2^y - 1
G_ABOVE = 2  # 1 if y >= thr else 0 (binary relevance)


def sort_queries(offsets, neg_scores, key, mode):
    """Global row permutation sorting each query by ``neg_scores`` ascending (scores descending).

    mode 0: stable (ties keep input order); 1: ties ordered by ``key`` (then input order);
    2: numba's unstable quicksort as is, whose tie order is what ranx sees.
    See :func:`sort_gather`, which does the work.
    """
    neg_scores = np.asarray(neg_scores, dtype=np.float64)
    return sort_gather(offsets, -neg_scores, np.zeros(len(neg_scores)), key, mode)[0]


def sort_gather(offsets, scores, labels, key, mode, groups=False, want_perm=True):
    """Sort each query by descending score; return ``(perm, scores[perm], labels[perm], gstart)``.

    ``gstart`` (only with ``groups=True``, else None) is True where a run of equal scores
    starts in the sorted order; ``perm`` is None with ``want_perm=False`` (one array less to
    write: the sort is bound by memory traffic). Modes as :func:`sort_queries`.

    Modes 0/1 sort one uint64 per item: an order-preserving bit pattern of the score (smaller
    for higher scores) with its low ``nb`` bits replaced by the item's index in its query
    (``2**nb`` >= the query's length). Queries of similar length are packed into one
    ``[n, width]`` matrix (padding sorts last) and sorted row-wise by ``numpy.sort``, whose SIMD
    sorting networks (x86-simd-sort, Highway) are several times faster on short rows than a
    per-query comparison sort; the index is read back from the low bits. Items whose truncated
    patterns coincide are exact ties, already in input order, unless their scores differ below
    the truncation: such runs are re-sorted exactly by score (stable), and runs of equal scores
    by ``key`` in mode 1, so the result is exact.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    labels = np.ascontiguousarray(labels, dtype=np.float64)
    n = scores.shape[0]
    if mode == 2:
        perm = _sort_quicksort(offsets, -scores)
        ss, ys = scores[perm], labels[perm]
        gstart = _group_starts(offsets, ss) if groups else None
        return perm, ss, ys, gstart
    key = np.ascontiguousarray(key, dtype=np.float64)
    perm = np.empty(n if want_perm else 0, dtype=np.int64)
    ss = np.empty(n)
    ys = np.empty(n)
    gstart = np.ones(n, dtype=np.bool_) if groups else np.ones(0, dtype=np.bool_)
    if n == 0:
        return perm if want_perm else None, ss, ys, gstart if groups else None
    out = (want_perm, perm, ss, ys, gstart)

    def sort_range(q0, q1):  # queries q0..q1-1 write rows offsets[q0]:offsets[q1] only
        _sort_range(offsets[q0:q1 + 1], scores, labels, key, mode, groups, out)

    threads = n_threads(n)
    bounds = query_chunks(offsets, threads) if threads > 1 else np.array([0, len(offsets) - 1])
    if len(bounds) <= 2:
        sort_range(0, len(offsets) - 1)
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(sort_range, bounds[:-1], bounds[1:]))
    return perm if want_perm else None, ss, ys, gstart if groups else None


def _sort_range(offsets, scores, labels, key, mode, groups, out):
    """The packed row-wise sort of :func:`sort_gather` for the queries of ``offsets``."""
    want_perm, perm, ss, ys, gstart = out
    bits = scores.view(np.uint64)
    width = _bucket_widths(np.diff(offsets))
    order = np.argsort(width, kind="stable")
    ws = width[order]
    cuts = np.flatnonzero(np.r_[True, ws[1:] != ws[:-1], True])
    for c0, c1 in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        w = int(ws[c0])
        if w == 0:
            continue
        qs = order[c0:c1]
        nb = max(1, (w - 1).bit_length())
        packed = np.empty((len(qs), w), dtype=np.uint64)
        _pack_rows(offsets, qs, bits, nb, packed)
        packed.sort(axis=1)  # releases the GIL, like the numba kernels around it
        _unpack_rows(offsets, qs, packed, nb, scores, labels, key, mode, want_perm, perm, ss, ys, groups, gstart)


def _bucket_widths(sizes: np.ndarray) -> np.ndarray:
    """Row width per query: its length up to 16, then steps of about 1.25x (at most ~25% padding)."""
    top = int(sizes.max(initial=0))
    allowed = list(range(0, 17))
    w = 16
    while w < top:
        w = int(np.ceil(w * 1.25 / 8.0) * 8)
        allowed.append(w)
    allowed = np.asarray(allowed, dtype=np.int64)
    return allowed[np.searchsorted(allowed, sizes)]


@njit(cache=True, nogil=True)
def _group_starts(offsets, ss):
    """True where a run of equal (sorted) scores starts, and at every query's first row."""
    g = np.ones(ss.shape[0], dtype=np.bool_)
    for q in range(offsets.shape[0] - 1):
        for t in range(offsets[q] + 1, offsets[q + 1]):
            g[t] = ss[t] != ss[t - 1]
    return g


@njit(cache=True, nogil=True)
def _pack_rows(offsets, qs, bits, nb, out):
    """Row ``r`` of ``out``: the packed keys of query ``qs[r]`` (ascending = scores descending),
    then padding (all ones)."""
    sign = np.uint64(1) << np.uint64(63)
    ones = ~np.uint64(0)
    high = ~((np.uint64(1) << np.uint64(nb)) - np.uint64(1))
    pad = ones  # above every real key: a finite score's pattern never has all top bits set
    w = out.shape[1]
    for r in range(qs.shape[0]):
        a = offsets[qs[r]]
        m = offsets[qs[r] + 1] - a
        for t in range(m):
            u = bits[a + t]
            u = np.uint64(0) if u == sign else u  # -0.0 is 0.0
            # ascending float order as unsigned integers: flip all bits of negatives, the sign
            # bit of the others (branch-free); then complement, for descending scores
            neg = np.uint64(0) - (u >> np.uint64(63))
            k = ~(u ^ (neg | sign))
            out[r, t] = (k & high) | np.uint64(t)
        for t in range(m, w):
            out[r, t] = pad


@njit(cache=True, nogil=True)
def _unpack_rows(offsets, qs, packed, nb, scores, labels, key, mode, want_perm, perm, ss, ys, groups, gstart):
    """Write the sorted scores and labels (and ``perm``, the group starts, when asked) from
    row-sorted packed keys, re-sorting runs of equal truncated keys exactly."""
    low = (np.uint64(1) << np.uint64(nb)) - np.uint64(1)
    high = ~low
    for r in range(qs.shape[0]):
        a = offsets[qs[r]]
        m = offsets[qs[r] + 1] - a
        row = packed[r]
        clash = False  # two items with equal truncated keys
        prev = (row[0] & high) ^ high  # differs from the first key's high part
        for t in range(m):
            key_t = row[t]
            i = np.int64(key_t & low)
            if want_perm:
                perm[a + t] = a + i
            ss[a + t] = scores[a + i]
            ys[a + t] = labels[a + i]
            hi = key_t & high
            clash |= hi == prev
            prev = hi
        if clash:
            i = 0
            while i < m:
                hi = row[i] & high
                j = i + 1
                while j < m and (row[j] & high) == hi:
                    j += 1
                exact = True  # a run of one, or of exactly equal scores already in input order
                if j - i > 1:
                    x0 = ss[a + i]
                    for t in range(i + 1, j):
                        if ss[a + t] != x0:
                            exact = False
                            break
                if not (exact and (mode == 0 or j - i == 1)):
                    sub = np.empty(j - i, dtype=np.int64)
                    vals = np.empty(j - i)
                    for t in range(j - i):
                        sub[t] = np.int64(row[i + t] & low)  # ascending input index
                        vals[t] = -scores[a + sub[t]]
                    if not exact:
                        sub = sub[np.argsort(vals, kind="mergesort")]
                    if mode == 1:  # runs of exactly equal scores: order by key, then input order
                        u = 0
                        while u < j - i:
                            v = u + 1
                            while v < j - i and scores[a + sub[v]] == scores[a + sub[u]]:
                                v += 1
                            if v - u > 1:
                                ks = np.empty(v - u)
                                for t in range(v - u):
                                    ks[t] = key[a + sub[u + t]]
                                sub[u:v] = sub[u:v][np.argsort(ks, kind="mergesort")]
                            u = v
                    for t in range(j - i):
                        if want_perm:
                            perm[a + i + t] = a + sub[t]
                        ss[a + i + t] = scores[a + sub[t]]
                        ys[a + i + t] = labels[a + sub[t]]
                i = j
        if groups:
            for t in range(1, m):
                gstart[a + t] = ss[a + t] != ss[a + t - 1]


@njit(cache=True, nogil=True)
def _sort_quicksort(offsets, neg_scores):
    """Per-query ``argsort(kind="quicksort")`` as numba implements it (ranx's tie order)."""
    perm = np.empty(neg_scores.shape[0], dtype=np.int64)
    for q in range(offsets.shape[0] - 1):
        a = offsets[q]
        b = offsets[q + 1]
        if b - a == 0:
            continue
        o = np.argsort(neg_scores[a:b], kind="quicksort")
        for j in range(b - a):
            perm[a + j] = a + o[j]
    return perm


@njit(cache=True, nogil=True, inline="always")
def _group_end(gstart, i, b):
    """One past the last row of the tie group that starts at row ``i`` (rows ``< b``)."""
    j = i + 1
    while j < b and not gstart[j]:
        j += 1
    return j


@njit(cache=True, nogil=True)
def _g(x, tf, thr):
    if tf == 1:
        if x >= 0.0 and x < 53.0 and x == int(x):  # integer grade: 2^x - 1 is exact, skip exp2
            return float((np.int64(1) << np.int64(x)) - 1)
        return np.exp2(x) - 1.0
    if tf == 2:
        return 1.0 if x >= thr else 0.0
    return x


def apply_gain(y, tf, thr=0.0):
    """numpy twin of the kernels' ``_g``: the gain of every row."""
    y = np.asarray(y, dtype=np.float64)
    if tf == G_EXP2:
        return np.exp2(y) - 1.0
    if tf == G_ABOVE:
        return (y >= thr).astype(np.float64)
    return y


@njit(cache=True, nogil=True)
def count_kernel(offsets, v, tf, thr):
    """Rows per query whose gain ``_g(v)`` is positive (0: the query has no relevant row)."""
    nq = offsets.shape[0] - 1
    out = np.zeros(nq, dtype=np.int64)
    for q in range(nq):
        c = 0
        for t in range(offsets[q], offsets[q + 1]):
            if _g(v[t], tf, thr) > 0.0:
                c += 1
        out[q] = c
    return out


@njit(cache=True, nogil=True)
def _disc(p, kind):
    if kind == 0:
        return 1.0 / np.log2(p + 1.0)
    if kind == 1:
        return 1.0 if p <= 2 else 1.0 / np.log2(p)
    return 1.0


@njit(cache=True, nogil=True)
def _disc_table(offsets, k, kind):
    """``disc(p)`` for p = 1..P, P the longest list (or ``k``): computed once, not per item."""
    longest = 0
    for q in range(offsets.shape[0] - 1):
        longest = max(longest, offsets[q + 1] - offsets[q])
    n = longest if k <= 0 else min(k, longest)
    out = np.empty(n + 1)
    out[0] = 0.0
    for p in range(1, n + 1):
        out[p] = _disc(float(p), kind)
    return out


@njit(cache=True, nogil=True)
def dcg_kernel(offsets, v, gstart, k, kind, tf, thr):
    """Expected sum of ``g_i * disc(pos_i)`` over positions <= k (k = 0: whole list), ``g_i = _g(v_i)``.

    Linearity makes the expectation exact: an item of a tie group occupying positions
    s+1..s+m gets the mean discount of those positions (McSherry & Najork 2008).
    """
    nq = offsets.shape[0] - 1
    out = np.zeros(nq)
    disc = _disc_table(offsets, k, kind)
    for q in range(nq):
        a = offsets[q]
        b = offsets[q + 1]
        kk = b - a if k <= 0 else min(k, b - a)
        total = 0.0
        i = a
        while i < b:
            s = i - a
            if s >= kk:
                break
            j = _group_end(gstart, i, b)
            m = j - i
            if m == 1:
                total += _g(v[i], tf, thr) * disc[s + 1]
            else:
                dsum = 0.0
                last = min(j - a, kk)
                for p in range(s + 1, last + 1):
                    dsum += disc[p]
                gs = 0.0
                for t in range(i, j):
                    gs += _g(v[t], tf, thr)
                total += gs * dsum / m
            i = j
        out[q] = total
    return out


@njit(cache=True, nogil=True)
def ideal_dcg_kernel(offsets, v, k, kind, tf, thr):
    """DCG of the gains ``_g(v)`` sorted in decreasing order (``_g`` is non-decreasing, so the
    values are ranked and only the top ``k`` are turned into gains).

    Integer grades below 64 (every LETOR / MSLR label) are counted in a histogram, one step per
    item; other values go through a small sorted top-k buffer (k <= 32) or a sort. Both paths
    add the same terms in the same order.
    """
    nq = offsets.shape[0] - 1
    out = np.zeros(nq)
    disc = _disc_table(offsets, k, kind)
    H = 64
    hist = np.zeros(H, dtype=np.int64)
    for q in range(nq):
        a = offsets[q]
        b = offsets[q + 1]
        n = b - a
        kk = n if k <= 0 else min(k, n)
        total = 0.0
        top = -1
        t = a
        while t < b:
            x = v[t]
            if not (x >= 0.0 and x < H):
                break
            gr = int(x)
            if gr != x:
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
                    gain = _g(float(gr), tf, thr)
                    for _ in range(min(c, kk - p + 1)):
                        total += gain * disc[p]
                        p += 1
            out[q] = total
            continue
        for gr in range(top + 1):
            hist[gr] = 0
        if kk < n and kk <= 32:
            # top-kk by insertion into a small sorted buffer: O(n kk) worst case, no full sort
            buf = np.empty(kk)
            cnt = 0
            for t in range(a, b):
                x = v[t]
                if cnt == kk and x <= buf[kk - 1]:
                    continue
                j = cnt if cnt < kk else kk - 1
                while j > 0 and buf[j - 1] < x:
                    buf[j] = buf[j - 1]
                    j -= 1
                buf[j] = x
                if cnt < kk:
                    cnt += 1
            for p in range(1, kk + 1):
                total += _g(buf[p - 1], tf, thr) * disc[p]
        else:
            gs = np.sort(v[a:b])
            for p in range(1, kk + 1):
                total += _g(gs[n - p], tf, thr) * disc[p]
        out[q] = total
    return out


@njit(cache=True, nogil=True)
def ap_kernel(offsets, v, gstart, singletons, k, denom_kind, tf, thr):
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
    nq = offsets.shape[0] - 1
    out = np.zeros(nq)
    nrel = np.zeros(nq)
    for q in range(nq):
        a = offsets[q]
        b = offsets[q + 1]
        kk = b - a if k <= 0 else min(k, b - a)
        acc = 0.0
        c = 0.0
        if singletons and kk == b - a:
            # no tie groups and no cutoff: one branch-free pass, whose count is R
            for t in range(a, b):
                r = _g(v[t], tf, thr)
                c += r
                acc += r * c / (t - a + 1.0)
            R = c
            nrel[q] = R
            d = min(R, float(k)) if denom_kind == 1 and k > 0 else R
            out[q] = acc / d if d > 0.0 else 0.0
            continue
        R = 0.0
        for t in range(a, b):
            R += _g(v[t], tf, thr)
        nrel[q] = R
        if R == 0.0:
            kk = 0
        if singletons:  # no tie groups: a branch-free loop over the top kk
            for t in range(a, a + kk):
                r = _g(v[t], tf, thr)
                c += r
                acc += r * c / (t - a + 1.0)
            kk = 0
        i = a
        while i < b:
            s = i - a
            if s >= kk:
                break
            j = _group_end(gstart, i, b)
            m = j - i
            if m == 1:  # the common case, spelled out: one item at position s + 1
                r = _g(v[i], tf, thr)
                if r > 0.0:
                    acc += (c + 1.0) / (s + 1.0)
                c += r
                i = j
                continue
            r = 0.0
            for t in range(i, j):
                r += _g(v[t], tf, thr)
            if r > 0.0:
                last = min(m, kk - s)
                for jj in range(1, last + 1):
                    extra = 0.0 if m == 1 else (jj - 1.0) * (r - 1.0) / (m - 1.0)
                    acc += (r / m) * (c + 1.0 + extra) / (s + jj)
            c += r
            i = j
        if denom_kind == 1 and k > 0:
            d = min(R, float(k))
        else:
            d = R
        out[q] = acc / d if d > 0.0 else 0.0
    return out, nrel


@njit(cache=True, nogil=True)
def rr_kernel(offsets, v, gstart, k, tf, thr):
    """Expected reciprocal rank of the first relevant item (0 if none within k).

    In the first tie group holding relevant items (s before it, size m, r relevant), the first
    relevant one is at offset j with probability C(m-j, r-1) / C(m, r).
    """
    nq = offsets.shape[0] - 1
    out = np.zeros(nq)
    for q in range(nq):
        a = offsets[q]
        b = offsets[q + 1]
        kk = b - a if k <= 0 else min(k, b - a)
        i = a
        while i < b:
            s = i - a
            if s >= kk:
                break
            j = _group_end(gstart, i, b)
            m = j - i
            r = 0
            for t in range(i, j):
                if _g(v[t], tf, thr) > 0:
                    r += 1
            if r > 0:
                p = r / m  # P(first relevant at offset 1)
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
    return out


@njit(cache=True, nogil=True)
def err_kernel(offsets, v, gstart, k, tf, thr, denom):
    """Expected reciprocal rank (Chapelle et al. 2009) with stop probabilities ``R = _g(v) / denom``.

    ERR = sum_r (1/r) R_r prod_{i<r} (1 - R_i). Inside a tie group of size m reached with
    probability P, item a at offset t contributes P R_a / (s+t) times the mean, over the
    (t-1)-subsets of the other items of the group, of prod (1 - R). Those means E_l are
    normalised elementary symmetric polynomials, built by the convex recurrence
    E'_l = ((n-l)/n) E_l + (l/n) x E_{l-1} (no large binomials, no cancellation).
    """
    nq = offsets.shape[0] - 1
    out = np.zeros(nq)
    for q in range(nq):
        a = offsets[q]
        b = offsets[q + 1]
        kk = b - a if k <= 0 else min(k, b - a)
        P = 1.0
        total = 0.0
        i = a
        while i < b:
            s = i - a
            if s >= kk or P == 0.0:
                break
            j = _group_end(gstart, i, b)
            m = j - i
            if m == 1:
                Ri = _g(v[i], tf, thr) / denom
                total += P * Ri / (s + 1.0)
                P *= 1.0 - Ri
            else:
                L = min(m, kk - s)
                R = np.empty(m)
                for t in range(m):
                    R[t] = _g(v[i + t], tf, thr) / denom
                vals = np.sort(R)
                E = np.zeros(L)
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
                        if not skipped and R[t] == x0:
                            skipped = True
                            continue
                        x = 1.0 - R[t]
                        n += 1
                        top = min(n, L - 1)
                        for l in range(top, 0, -1):
                            E[l] = ((n - l) / n) * E[l] + (l / n) * x * E[l - 1]
                    acc = 0.0
                    for t in range(1, L + 1):
                        acc += E[t - 1] / (s + t)
                    total += P * cnt * x0 * acc / m
                for t in range(m):
                    P *= 1.0 - R[t]
            i = j
        out[q] = total
    return out


@njit(cache=True, inline="always")
def _fen_add(tree, i, v):
    i += 1
    while i < tree.shape[0]:
        tree[i] += v
        i += i & (-i)


@njit(cache=True, inline="always")
def _fen_sum(tree, i):
    """Sum of the entries 0..i-1."""
    s = 0.0
    while i > 0:
        s += tree[i]
        i -= i & (-i)
    return s


@njit(cache=True)
def _label_ranks(y, a, b):
    """Dense rank of every label of rows a..b-1 (0 = smallest), the number of distinct labels
    and the number of pairs of equal labels."""
    n = b - a
    order = np.argsort(y[a:b], kind="mergesort")
    rank = np.empty(n, dtype=np.int64)
    L = 0
    T = 0.0
    i = 0
    while i < n:
        j = i
        v = y[a + order[i]]
        while j < n and y[a + order[j]] == v:
            j += 1
        for t in range(i, j):
            rank[order[t]] = L
        c = j - i
        T += c * (c - 1) / 2.0
        L += 1
        i = j
    return rank, L, T


@njit(cache=True, nogil=True)
def pair_kernel(offsets, y, gstart, rel_thr):
    """Pair counts per query in sorted order; a pair inside a tie group counts half each way.

    Returns, per query, columns:
    0 concordant pairs (higher label ranked above), 1 discordant, 2 pairs with distinct labels,
    3 pairs with equal labels, 4 relevant-above-irrelevant (AUC numerator), 5 n_rel * n_irrel.

    O(n log n) per query: labels are ranked once, then the tie groups are visited in ranking
    order with a Fenwick tree counting, for each item, the items of earlier groups with a
    smaller / larger label (pairs across groups count whole); pairs inside a group with
    distinct labels count half concordant, half discordant.
    """
    nq = offsets.shape[0] - 1
    out = np.zeros((nq, 6))
    for q in range(nq):
        a = offsets[q]
        b = offsets[q + 1]
        n = b - a
        nr = 0.0
        for t in range(a, b):
            if y[t] >= rel_thr:
                nr += 1.0
        out[q, 5] = nr * (n - nr)
        if n < 2:
            continue
        rank, L, T = _label_ranks(y, a, b)
        tree = np.zeros(L + 1)
        before = 0.0
        rel_before = 0.0
        Cs = 0.0
        Ds = 0.0
        W = 0.0
        A = 0.0
        i = a
        while i < b:
            j = _group_end(gstart, i, b)
            m = j - i
            rg = 0.0
            for t in range(i, j):
                r = rank[t - a]
                less = _fen_sum(tree, r)
                leq = _fen_sum(tree, r + 1)
                Ds += less  # an earlier item with a smaller label: ranked against the labels
                Cs += before - leq
                if y[t] >= rel_thr:
                    rg += 1.0
            if m > 1:  # pairs of distinct labels inside the group
                gr = np.sort(rank[i - a:j - a])
                eq = 0.0
                u = 0
                while u < m:
                    v = u + 1
                    while v < m and gr[v] == gr[u]:
                        v += 1
                    c = v - u
                    eq += c * (c - 1) / 2.0
                    u = v
                W += m * (m - 1) / 2.0 - eq
            A += (m - rg) * (rel_before + 0.5 * rg)
            for t in range(i, j):
                _fen_add(tree, rank[t - a], 1.0)
            before += m
            rel_before += rg
            i = j
        out[q, 0] = Cs + W / 2.0
        out[q, 1] = Ds + W / 2.0
        out[q, 2] = n * (n - 1) / 2.0 - T
        out[q, 3] = T
        out[q, 4] = A
    return out


@njit(cache=True, nogil=True)
def label_pair_discordance(y, gstart, a, b):
    """For the rows a..b-1 of one sorted query: the distinct labels (ascending), their counts,
    and ``M[p, r]`` (p > r) = expected number of pairs with labels (p, r) ranked with the
    smaller label above (a pair inside a tie group counts 1/2). O(n L) for L distinct labels."""
    rank, L, _ = _label_ranks(y, a, b)
    labels = np.empty(L)
    counts = np.zeros(L)
    for t in range(a, b):
        labels[rank[t - a]] = y[t]
        counts[rank[t - a]] += 1.0
    M = np.zeros((L, L))
    cnt = np.zeros(L)  # items of earlier tie groups, per label
    i = a
    while i < b:
        j = _group_end(gstart, i, b)
        for t in range(i, j):
            p = rank[t - a]
            for r in range(p):
                M[p, r] += cnt[r]
        if j - i > 1:  # inside the group, every pair of distinct labels is misordered half the time
            gr = np.sort(rank[i - a:j - a])
            u = 0
            while u < j - i:
                v = u + 1
                while v < j - i and gr[v] == gr[u]:
                    v += 1
                w = 0
                while w < u:
                    x = w + 1
                    while x < u and gr[x] == gr[w]:
                        x += 1
                    M[gr[u], gr[w]] += 0.5 * (v - u) * (x - w)
                    w = x
                u = v
        for t in range(i, j):
            cnt[rank[t - a]] += 1.0
        i = j
    return labels, counts, M


@njit(cache=True, nogil=True)
def expected_rank_kernel(offsets, gstart):
    """Expected 1-based position of every item (the midpoint of its tie group's positions)."""
    n = gstart.shape[0]
    pos = np.empty(n)
    for q in range(offsets.shape[0] - 1):
        a = offsets[q]
        b = offsets[q + 1]
        i = a
        while i < b:
            j = _group_end(gstart, i, b)
            mid = (i - a + 1 + j - a) / 2.0
            for t in range(i, j):
                pos[t] = mid
            i = j
    return pos
