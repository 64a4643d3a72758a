"""Minibatches of whole queries, bucketed by list length so padding stays small."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from rankwise.data.groups import padded_index


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


def gather_padded(X, y, offsets: np.ndarray, queries: np.ndarray, weights=None):
    """Padded ``[B, L, d]`` features, ``[B, L]`` labels and weights, the ``where`` mask and row index."""
    sub = np.concatenate(([0], np.cumsum(np.diff(offsets)[queries]))).astype(np.int64)
    idx_local, where = padded_index(sub)
    rows_flat = np.concatenate([np.arange(offsets[q], offsets[q + 1]) for q in queries]) if len(queries) else np.zeros(0, np.int64)
    rows = rows_flat[idx_local] if rows_flat.size else idx_local
    Xr = X[rows.ravel()]
    if sp.issparse(Xr):
        Xr = Xr.toarray()
    Xb = np.asarray(Xr, dtype=np.float32).reshape(rows.shape + (X.shape[1],))
    yb = None if y is None else np.where(where, y[rows], 0.0)
    wb = None if weights is None else np.where(where, weights[rows], 0.0)
    return Xb, yb, wb, where, rows
