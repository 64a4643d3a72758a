"""Validated ranking input for the models: ``(X, y, qid)`` or a RankingDataset, grouped by query.

Lives in the models layer (not in :mod:`rankwise._validation`, the bottom layer) because it
groups rows with :func:`rankwise.data.groups.group_by_qid`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankwise._validation import check_features, check_vector
from rankwise.data.groups import group_by_qid
from rankwise.errors import InputError


def _check_sample_weight(sample_weight, n: int, prefix: str) -> np.ndarray:
    """One finite, non-negative weight per row (the same check for arrays and RankingDatasets)."""
    sw = check_vector(sample_weight, n, name=f"{prefix}sample_weight")
    if np.any(sw < 0):
        raise InputError(f"{prefix}sample_weight must be non-negative; got {int(np.sum(sw < 0))} negative "
                         f"entries (min {float(sw.min()):g})")
    return sw


def qid_from_group(group, n: int, *, prefix: str = "") -> np.ndarray:
    """Per-row query ids ``0, 0, ..., 1, ...`` from LightGBM/XGBoost-style group sizes.

    ``group[i]`` is the number of consecutive rows of query ``i``; the sizes must be
    non-negative integers summing to the number of rows.
    """
    try:
        g = np.asarray(group)
    except (TypeError, ValueError):
        g = None
    if g is None or g.ndim != 1 or g.dtype.kind not in "iuf" or (g.dtype.kind == "f" and not np.all(g == np.round(g))):
        raise InputError(f"{prefix}group must be a 1-d array of query sizes (LightGBM's layout: group[i] consecutive "
                         f"rows belong to query i); got {type(group).__name__}"
                         + (f" of shape {g.shape}" if g is not None else ""))
    g = g.astype(np.int64)
    if np.any(g < 0) or int(g.sum()) != n:
        raise InputError(f"{prefix}group sizes must be non-negative and sum to the number of rows ({n}); "
                         f"they sum to {int(g.sum())}" + (" and some are negative" if np.any(g < 0) else ""))
    return np.repeat(np.arange(len(g), dtype=np.int64), g)


@dataclass
class RankingInput:
    """Validated training input, rows regrouped so every query is contiguous."""

    X: object  # ndarray float32 or csr_matrix
    y: np.ndarray  # float64
    offsets: np.ndarray  # int64, n_queries + 1
    qids: np.ndarray
    sample_weight: np.ndarray | None  # per row, or None
    order: np.ndarray | None  # permutation applied to the caller's rows (None = unchanged)

    @property
    def n_queries(self) -> int:
        return len(self.offsets) - 1


def check_ranking_input(X, y=None, qid=None, *, sample_weight=None, group=None, prefix: str = "",
                        allow_nan_features: bool = False, method: str = "fit", min_features: int = 0) -> RankingInput:
    """Validate ``(X, y, qid)`` or a RankingDataset (passed as ``X``) and group the rows by query.

    ``group`` (query sizes, LightGBM's layout) is accepted instead of ``qid``. ``method`` names
    the caller in messages (``"fit"``, ``"score"``).
    """
    if hasattr(X, "query_offsets") and hasattr(X, "labels"):  # a RankingDataset
        ds = X
        if y is not None or qid is not None or group is not None:
            raise InputError(f"{prefix}y, qid and group must be None when a RankingDataset is given")
        Xv = check_features(ds.X, name=f"{prefix}X", allow_nan=allow_nan_features, min_features=min_features)
        yv = check_vector(ds.labels, Xv.shape[0], name=f"{prefix}labels")
        offsets = np.asarray(ds.query_offsets, dtype=np.int64)
        qids = np.asarray(ds.query_ids) if hasattr(ds, "query_ids") else np.arange(len(offsets) - 1)
        sw = None if sample_weight is None else _check_sample_weight(sample_weight, Xv.shape[0], prefix)
        return RankingInput(Xv, yv, offsets, qids, sw, None)
    Xv = check_features(X, name=f"{prefix}X", allow_nan=allow_nan_features, min_features=min_features)
    n = Xv.shape[0]
    if y is None:
        raise InputError(f"{prefix}y is required: this ranker requires y to be passed, but the target y is None; "
                         f"give one relevance label per row, {method}(X, y, qid=qid)")
    if group is not None:
        if qid is not None:
            raise InputError(f"{prefix}give qid (one query id per row) or group (query sizes), not both")
        qid = qid_from_group(group, n, prefix=prefix)
    if qid is None:
        raise InputError(f"{prefix}qid is required: one query id per row, e.g. {method}(X, y, qid=qid)"
                         + (" (or LightGBM-style query sizes: fit(X, y, group=sizes))" if method == "fit" else ""))
    yv = check_vector(y, n, name=f"{prefix}y")
    qarr = np.asarray(qid)
    if qarr.ndim != 1 or len(qarr) != n:
        raise InputError(f"{prefix}qid has shape {qarr.shape} but X has {n} rows; one query id per row is expected")
    grouping = group_by_qid(qarr, name=f"{prefix}qid")
    sw = None if sample_weight is None else _check_sample_weight(sample_weight, n, prefix)
    if grouping.order is not None:
        o = grouping.order
        Xv = Xv[o]
        yv = yv[o]
        sw = None if sw is None else sw[o]
    return RankingInput(Xv, yv, grouping.offsets, grouping.qids, sw, grouping.order)
