"""The measures' kernels (compiled: ``_metric_kernels.pyx``) and their Python orchestration.

Every kernel receives a query's items sorted by descending score and ``gstart`` (True where a
group of tied scores starts). The value computed is the exact expectation of the measure over
uniformly random orderings inside each tie group; with groups of size one (every rule except
``ties="average"``) it is the measure of that one ranking.

Kernels release the GIL, and a kernel over a range of queries needs nothing from the others,
so :func:`map_queries` splits large inputs into contiguous query ranges of about equal row
count and runs them on a few threads (the per-query kernel plus a parallel map over queries).
The threads live for one call, so the module holds no pool: nothing to break across
``fork()`` and nothing shared between callers' threads. Their number is
:func:`rankwise._validation.kernel_threads` (``RANKWISE_NUM_THREADS``, a model's ``n_jobs``
under ``limit_threads``, else the CPUs this process may use); results do not depend on it.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rankwise._validation import kernel_threads
from rankwise.metrics._metric_kernels import (  # noqa: F401 (the measures reach them through this module)
    _group_starts, _pack_rows, _sort_quicksort, _unpack_rows, ap_kernel, count_kernel, dcg_kernel, err_kernel,
    expected_rank_kernel, ideal_dcg_kernel, label_pair_discordance, pair_kernel, rr_kernel)

#: inputs with fewer rows are computed on the calling thread (threads would cost more than they save)
PARALLEL_MIN_ROWS = 200_000


def n_threads(n_rows: int) -> int:
    """Threads for an input of ``n_rows`` rows: 1 below ``PARALLEL_MIN_ROWS``, else
    :func:`rankwise._validation.kernel_threads`."""
    if n_rows < PARALLEL_MIN_ROWS:
        return 1
    return kernel_threads(None)


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
    2: numba's unstable quicksort (``np.argsort(kind="quicksort")`` under numba, reimplemented in
    ``_metric_kernels``), whose tie order is what ranx sees.
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
        packed.sort(axis=1)  # releases the GIL, like the compiled kernels around it
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


def apply_gain(y, tf, thr=0.0):
    """numpy twin of the kernels' ``_g``: the gain of every row."""
    y = np.asarray(y, dtype=np.float64)
    if tf == G_EXP2:
        return np.exp2(y) - 1.0
    if tf == G_ABOVE:
        return (y >= thr).astype(np.float64)
    return y


