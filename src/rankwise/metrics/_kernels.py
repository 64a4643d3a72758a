"""Numba kernels: one loop over queries, one over the tie groups of each sorted query.

Every kernel receives a query's items sorted by descending score and ``gstart`` (True where a
group of tied scores starts). The value computed is the exact expectation of the measure over
uniformly random orderings inside each tie group; with groups of size one (every rule except
``ties="average"``) it is the measure of that one ranking.
"""
from __future__ import annotations

import numpy as np
from numba import njit

# discount kinds
DISC_LOG2 = 0  # 1 / log2(p + 1)            (Burges et al. 2005)
DISC_JARVELIN = 1  # 1 / max(1, log2 p)     (Jarvelin & Kekalainen 2002; trec_eval, LETOR)
DISC_ONE = 2  # 1                           (counts: precision, recall)


@njit(cache=True)
def sort_queries(offsets, neg_scores, key, mode):
    """Global row permutation sorting each query by ``neg_scores``.

    mode 0: stable (ties keep input order); 1: ties ordered by ``key`` (then input order);
    2: numba's unstable quicksort as is, whose tie order is what ranx sees.

    Modes 0/1 sort one uint64 per item: the order-preserving bit pattern of the score with its
    low bits replaced by the item's index (a plain integer sort, faster than an argsort). Items
    whose truncated patterns coincide are then re-sorted exactly by score (stable), and runs of
    exactly equal scores by ``key`` in mode 1, so the result is exact whatever the truncation.
    """
    n = neg_scores.shape[0]
    perm = np.empty(n, dtype=np.int64)
    bits = (neg_scores + 0.0).view(np.uint64)  # + 0.0 folds -0.0 into 0.0
    sign = np.uint64(1) << np.uint64(63)
    for q in range(offsets.shape[0] - 1):
        a = offsets[q]
        b = offsets[q + 1]
        m = b - a
        if m == 0:
            continue
        seg = neg_scores[a:b]
        if mode == 2:
            o = np.argsort(seg, kind="quicksort")
        else:
            nb = 1
            while (1 << nb) < m:
                nb += 1
            low = (np.uint64(1) << np.uint64(nb)) - np.uint64(1)
            high = ~low
            keys = np.empty(m, dtype=np.uint64)
            for t in range(m):
                u = bits[a + t]
                u = ~u if (u & sign) else (u | sign)
                keys[t] = (u & high) | np.uint64(t)
            keys.sort()
            o = np.empty(m, dtype=np.int64)
            for t in range(m):
                o[t] = np.int64(keys[t] & low)
            i = 0
            while i < m:
                j = i + 1
                hi = keys[i] & high
                while j < m and (keys[j] & high) == hi:
                    j += 1
                if j - i > 1:  # equal truncated keys: exact stable order by score
                    sub = o[i:j].copy()  # ascending input index
                    vals = np.empty(j - i)
                    for t in range(j - i):
                        vals[t] = seg[sub[t]]
                    o[i:j] = sub[np.argsort(vals, kind="mergesort")]
                i = j
            if mode == 1:  # runs of exactly equal scores: order by key, then input order
                i = 0
                while i < m:
                    j = i + 1
                    while j < m and seg[o[j]] == seg[o[i]]:
                        j += 1
                    if j - i > 1:
                        sub = o[i:j].copy()
                        ks = np.empty(j - i)
                        for t in range(j - i):
                            ks[t] = key[a + sub[t]]
                        o[i:j] = sub[np.argsort(ks, kind="mergesort")]
                    i = j
        for j in range(m):
            perm[a + j] = a + o[j]
    return perm


@njit(cache=True)
def _disc(p, kind):
    if kind == 0:
        return 1.0 / np.log2(p + 1.0)
    if kind == 1:
        return 1.0 if p <= 2 else 1.0 / np.log2(p)
    return 1.0


@njit(cache=True)
def dcg_kernel(offsets, g, gstart, k, kind):
    """Expected sum of ``g_i * disc(pos_i)`` over positions <= k (k = 0: whole list).

    Linearity makes the expectation exact: an item of a tie group occupying positions
    s+1..s+m gets the mean discount of those positions (McSherry & Najork 2008).
    """
    nq = offsets.shape[0] - 1
    out = np.zeros(nq)
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
            j = i + 1
            while j < b and not gstart[j]:
                j += 1
            m = j - i
            if m == 1:
                total += g[i] * _disc(s + 1.0, kind)
            else:
                dsum = 0.0
                last = min(j - a, kk)
                for p in range(s + 1, last + 1):
                    dsum += _disc(float(p), kind)
                gs = 0.0
                for t in range(i, j):
                    gs += g[t]
                total += gs * dsum / m
            i = j
        out[q] = total
    return out


@njit(cache=True)
def ideal_dcg_kernel(offsets, g, k, kind):
    """DCG of the gains sorted in decreasing order (ties in gains do not matter)."""
    nq = offsets.shape[0] - 1
    out = np.zeros(nq)
    for q in range(nq):
        a = offsets[q]
        b = offsets[q + 1]
        n = b - a
        kk = n if k <= 0 else min(k, n)
        total = 0.0
        if kk < n and kk <= 32:
            # top-kk by insertion into a small sorted buffer: O(n kk) worst case, no full sort
            buf = np.empty(kk)
            cnt = 0
            for t in range(a, b):
                x = g[t]
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
                total += buf[p - 1] * _disc(float(p), kind)
        else:
            gs = np.sort(g[a:b])
            for p in range(1, kk + 1):
                total += gs[n - p] * _disc(float(p), kind)
        out[q] = total
    return out


@njit(cache=True)
def ap_kernel(offsets, rel, gstart, k, denom_kind):
    """Expected average precision; ``rel`` is 0/1 in sorted order.

    A relevant item of a tie group (size m, r relevant, s items and c relevant before it) sits
    at offset j with probability 1/m, and then the other r-1 relevant items of the group fill
    the j-1 slots before it with expected count (j-1)(r-1)/(m-1). Precision at its position
    is linear in that count, so
    E[sum] = sum_j (r/m) (c + 1 + (j-1)(r-1)/(m-1)) / (s+j)   exactly.
    denom_kind: 0 = number of relevant items R, 1 = min(R, k).
    Returns (value, R) per query.
    """
    nq = offsets.shape[0] - 1
    out = np.zeros(nq)
    nrel = np.zeros(nq)
    for q in range(nq):
        a = offsets[q]
        b = offsets[q + 1]
        R = 0.0
        for t in range(a, b):
            R += rel[t]
        nrel[q] = R
        kk = b - a if k <= 0 else min(k, b - a)
        acc = 0.0
        c = 0.0
        if R == 0.0:
            kk = 0
        i = a
        while i < b:
            s = i - a
            if s >= kk:
                break
            j = i + 1
            while j < b and not gstart[j]:
                j += 1
            m = j - i
            r = 0.0
            for t in range(i, j):
                r += rel[t]
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


@njit(cache=True)
def rr_kernel(offsets, rel, gstart, k):
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
            j = i + 1
            while j < b and not gstart[j]:
                j += 1
            m = j - i
            r = 0
            for t in range(i, j):
                if rel[t] > 0:
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


@njit(cache=True)
def err_kernel(offsets, R, gstart, k):
    """Expected reciprocal rank (Chapelle et al. 2009) with stop probabilities ``R``.

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
            j = i + 1
            while j < b and not gstart[j]:
                j += 1
            m = j - i
            if m == 1:
                total += P * R[i] / (s + 1.0)
                P *= 1.0 - R[i]
            else:
                L = min(m, kk - s)
                vals = np.sort(R[i:j])
                E = np.zeros(L)
                u = 0
                while u < m:
                    v = vals[u]
                    cnt = 0
                    while u < m and vals[u] == v:
                        cnt += 1
                        u += 1
                    if v == 0.0:
                        continue
                    for l in range(L):
                        E[l] = 0.0
                    E[0] = 1.0
                    n = 0
                    skipped = False
                    for t in range(i, j):
                        if not skipped and R[t] == v:
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
                    total += P * cnt * v * acc / m
                for t in range(i, j):
                    P *= 1.0 - R[t]
            i = j
        out[q] = total
    return out


@njit(cache=True)
def pair_kernel(offsets, y, gstart, rel_thr):
    """Pair counts per query in sorted order; a pair inside a tie group counts half each way.

    Returns, per query, columns:
    0 concordant pairs (higher label ranked above), 1 discordant, 2 pairs with distinct labels,
    3 pairs with equal labels, 4 relevant-above-irrelevant (AUC numerator), 5 n_rel * n_irrel.
    """
    nq = offsets.shape[0] - 1
    out = np.zeros((nq, 6))
    for q in range(nq):
        a = offsets[q]
        b = offsets[q + 1]
        # tie-group id per item
        gid = np.empty(b - a, dtype=np.int64)
        g = -1
        for t in range(a, b):
            if gstart[t]:
                g += 1
            gid[t - a] = g
        C = 0.0
        D = 0.0
        T = 0.0
        A = 0.0
        nr = 0.0
        for t in range(a, b):
            if y[t] >= rel_thr:
                nr += 1.0
        for u in range(a, b):
            ru = y[u] >= rel_thr
            for v in range(u + 1, b):
                if y[u] == y[v]:
                    T += 1.0
                    continue
                w = 0.5 if gid[u - a] == gid[v - a] else 1.0
                if y[u] > y[v]:
                    C += w
                    D += 1.0 - w
                else:
                    D += w
                    C += 1.0 - w
                rv = y[v] >= rel_thr
                if ru and not rv:
                    A += w
                elif rv and not ru:
                    A += 1.0 - w
        n = b - a
        out[q, 0] = C
        out[q, 1] = D
        out[q, 2] = n * (n - 1) / 2.0 - T
        out[q, 3] = T
        out[q, 4] = A
        out[q, 5] = nr * (n - nr)
    return out


@njit(cache=True)
def expected_rank_kernel(offsets, gstart):
    """Expected 1-based position of every item (the midpoint of its tie group's positions)."""
    n = gstart.shape[0]
    pos = np.empty(n)
    for q in range(offsets.shape[0] - 1):
        a = offsets[q]
        b = offsets[q + 1]
        i = a
        while i < b:
            j = i + 1
            while j < b and not gstart[j]:
                j += 1
            mid = (i - a + 1 + j - a) / 2.0
            for t in range(i, j):
                pos[t] = mid
            i = j
    return pos
