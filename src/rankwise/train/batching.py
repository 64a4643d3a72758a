"""Minibatches of whole queries, bucketed by list length so padding stays small."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp



def query_batches(offsets: np.ndarray, batch_queries: int, *, rng: np.random.Generator | None = None,
                  max_cells: int = 1 << 20) -> list[np.ndarray]:
    """Split queries into batches of at most ``batch_queries`` queries of similar length.

    Queries are sorted by length (ties broken at random when ``rng`` is given, so batches change
    between epochs), cut into consecutive chunks whose padded size ``n_queries * max_len`` stays
    under ``max_cells``, and the chunk order is shuffled. Empty queries are left out.
    """
    sizes = np.diff(offsets)
    keep = np.flatnonzero(sizes > 0)
    tie = rng.random(len(keep)) if rng is not None else np.zeros(len(keep))
    order = keep[np.lexsort((tie, sizes[keep]))]
    batches, start = [], 0
    while start < len(order):
        stop = min(start + batch_queries, len(order))
        # lengths ascend inside `order`, so the last query of a chunk is its longest
        while stop - start > 1 and (stop - start) * sizes[order[stop - 1]] > max_cells:
            stop -= 1
        batches.append(order[start:stop])
        start = stop
    if rng is not None:
        perm = rng.permutation(len(batches))
        batches = [batches[i] for i in perm]
    return batches


def padded_rows(offsets: np.ndarray, queries: np.ndarray):
    """``(rows, where)`` of a padded ``[B, L]`` batch of ``queries``: ``rows[i, j]`` is the row of item ``j`` of
    query ``queries[i]``, ``where`` is True on real items; padded cells hold the batch's first row (so that
    ``X[rows]`` reads real rows only)."""
    queries = np.asarray(queries, dtype=np.int64)
    starts = offsets[queries].astype(np.int64, copy=False)
    sizes = offsets[queries + 1] - starts
    cols = np.arange(int(sizes.max(initial=0)), dtype=np.int64)
    where = cols[None, :] < sizes[:, None]
    nonempty = np.flatnonzero(sizes)
    fill = starts[nonempty[0]] if len(nonempty) else 0
    return np.where(where, starts[:, None] + cols[None, :], fill), where


def gather_padded(X, y, offsets: np.ndarray, queries: np.ndarray, weights=None):
    """Padded ``[B, L, d]`` features (float32), ``[B, L]`` labels and weights (0 where padded), the ``where``
    mask and the row index (:func:`padded_rows`)."""
    rows, where = padded_rows(offsets, queries)
    if isinstance(X, np.ndarray):
        Xr = np.take(X, rows.ravel(), axis=0)  # the same rows as X[rows], in half the time
    else:
        Xr = X[rows.ravel()]
        if sp.issparse(Xr):
            Xr = Xr.toarray()
    Xb = np.asarray(Xr, dtype=np.float32).reshape(rows.shape + (X.shape[1],))
    yb = None if y is None else np.where(where, y[rows], 0.0)
    wb = None if weights is None else np.where(where, weights[rows], 0.0)
    return Xb, yb, wb, where, rows
