"""Query grouping: from a per-row ``qid`` to contiguous groups and ``query_offsets``.

The canonical group structure everywhere in rankwise is ``query_offsets``: an int64 array of
length ``n_queries + 1`` with ``offsets[0] = 0`` and the rows of query ``i`` at
``offsets[i]:offsets[i+1]``. Queries keep the order of their first appearance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rankwise.errors import InputError


@dataclass(frozen=True)
class Grouping:
    """Result of :func:`group_by_qid`.

    Attributes
    ----------
    order : ndarray of int64 or None
        Row permutation that makes every query contiguous (stable: rows of a query keep their
        relative order); ``None`` when the input already was contiguous.
    offsets : ndarray of int64, shape (n_queries + 1,)
        Query boundaries in the (re)ordered rows.
    qids : ndarray, shape (n_queries,)
        The query id of each group, in order of first appearance.
    n_moved : int
        Number of rows whose position changed (0 when ``order`` is None).
    first_split : object
        The first query id (in row order) whose rows were split into several runs; None when
        the input was contiguous.
    n_split : int
        Number of queries whose rows were split into several runs.
    """

    order: np.ndarray | None
    offsets: np.ndarray
    qids: np.ndarray
    n_moved: int
    first_split: object = None
    n_split: int = 0

    @property
    def n_queries(self) -> int:
        return len(self.qids)


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and v != v) \
        or type(v).__name__ in ("NAType", "NaTType")


def _as_qid_array(qid, *, name: str = "qid") -> np.ndarray:
    """Query ids as an int64 or string array.

    Integers (or integral floats) become int64, strings stay strings. A Python object array
    must hold one kind: missing ids (None, NaN, pd.NA) are rejected, and so is a mix of
    strings and numbers, because ``1`` and ``"1"`` would otherwise silently become one query.
    """
    # a list such as [1, "1"] would become the strings ["1", "1"]: look at its items one by one
    arr = np.asarray(qid, dtype=object) if isinstance(qid, (list, tuple)) else np.asarray(qid)
    if arr.ndim != 1:
        raise InputError(f"{name} must be one-dimensional (one query id per row); got shape {arr.shape}")
    if arr.dtype.kind == "O":
        values = arr.tolist()
        kinds = {}
        for r, v in enumerate(values):
            if _is_missing(v):
                raise InputError(f"{name} is missing at row {r} (got {v!r}); every row needs a query id")
            if isinstance(v, str):
                kind = "string"
            elif isinstance(v, (int, np.integer, float, np.floating)) and not isinstance(v, (bool, np.bool_)):
                kind = "number"
            else:
                raise InputError(f"{name} must hold integer or string query ids; got {v!r} "
                                 f"({type(v).__name__}) at row {r}")
            if kind not in kinds:
                kinds[kind] = r
                if len(kinds) == 2:
                    rs, rn = kinds["string"], kinds["number"]
                    raise InputError(f"{name} mixes strings and numbers (e.g. {values[rn]!r} at row {rn} and "
                                     f"{values[rs]!r} at row {rs}); use one type, so that ids such as 1 and '1' "
                                     "are not merged or split by accident")
        if "string" in kinds:
            arr = arr.astype(str)
        elif not values:
            arr = np.zeros(0, dtype=np.int64)
        else:
            arr = np.asarray(values)
            if arr.dtype.kind not in "iuf":  # e.g. ints beyond int64
                raise InputError(f"{name} holds integers that do not fit in int64; got e.g. {values[0]!r}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise InputError(f"{name} contains NaN or inf; every row needs a query id")
        if np.any(arr != np.round(arr)):
            raise InputError(f"{name} must hold integer or string query ids; got non-integral floats")
        arr = arr.astype(np.int64)
    if arr.dtype.kind == "b":
        raise InputError(f"{name} must hold integer or string query ids; got booleans")
    return arr


def group_by_qid(qid, *, strict: bool = False, name: str = "qid") -> Grouping:
    """Group rows by query id, regrouping stably when a query's rows are not contiguous.

    Parameters
    ----------
    qid : array-like, shape (n_rows,)
        Query id per row (integers or strings).
    strict : bool
        If True, non-contiguous input is rejected with a message naming the query id and rows
        instead of being regrouped.
    """
    arr = _as_qid_array(qid, name=name)
    n = len(arr)
    if n == 0:
        return Grouping(None, np.zeros(1, dtype=np.int64), arr[:0], 0)
    change = np.flatnonzero(arr[1:] != arr[:-1]) + 1
    starts = np.concatenate(([0], change)).astype(np.int64)
    run_qids = arr[starts]
    uniq, first_idx, inverse = np.unique(run_qids, return_index=True, return_inverse=True)
    if len(uniq) == len(run_qids):  # contiguous
        offsets = np.concatenate((starts, [n])).astype(np.int64)
        return Grouping(None, offsets, run_qids, 0)
    if strict:
        counts = np.bincount(inverse)
        bad = int(np.flatnonzero(counts > 1)[0])
        runs = np.flatnonzero(inverse == bad)
        ends = np.append(starts[1:], n)
        spans = ", ".join(f"{starts[r] + 1}-{ends[r]}" for r in runs[:4])
        more = "" if len(runs) <= 4 else f" and {len(runs) - 4} more"
        raise InputError(
            f"{name}: rows of query {uniq[bad]!r} are not contiguous (rows {spans}{more}, 1-based); "
            "pass strict=False to regroup them stably"
        )
    # Stable regroup, queries in order of first appearance.
    rank_of_uniq = np.empty(len(uniq), dtype=np.int64)
    rank_of_uniq[np.argsort(first_idx, kind="stable")] = np.arange(len(uniq))
    run_lengths = np.diff(np.append(starts, n))
    row_group = np.repeat(rank_of_uniq[inverse], run_lengths)
    order = np.argsort(row_group, kind="stable").astype(np.int64)
    counts = np.bincount(row_group, minlength=len(uniq))
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    qids = uniq[np.argsort(first_idx, kind="stable")]
    n_moved = int(np.count_nonzero(order != np.arange(n)))
    repeat = np.flatnonzero(first_idx[inverse] != np.arange(len(run_qids)))  # runs of a query met before
    first_split = run_qids[repeat[0]].item()
    n_split = int(np.count_nonzero(np.bincount(inverse) > 1))
    return Grouping(order, offsets, qids, n_moved, first_split, n_split)


def offsets_from_sizes(sizes, *, name: str = "group sizes") -> np.ndarray:
    """``query_offsets`` from per-query sizes (LightGBM ``group``/``.query`` style)."""
    s = np.asarray(sizes)
    if s.ndim != 1 or (s.size and (s.dtype.kind not in "iu" and np.any(s != np.round(s)))):
        raise InputError(f"{name} must be a 1-d array of non-negative integers; got {s!r:.80}")
    s = s.astype(np.int64)
    if np.any(s < 0):
        raise InputError(f"{name} must be non-negative; got {int(s.min())}")
    return np.concatenate(([0], np.cumsum(s))).astype(np.int64)


def padded_index(offsets: np.ndarray, *, max_len: int | None = None):
    """Index arrays for a padded ``[n_queries, max_len]`` view of flat rows.

    Returns ``(index, where)``: ``index[i, j]`` is the flat row of item ``j`` of query ``i``
    (0 where padded), ``where`` is True on real items.
    """
    sizes = np.diff(offsets)
    width = int(sizes.max(initial=0)) if max_len is None else int(max_len)
    cols = np.arange(width)
    where = cols[None, :] < sizes[:, None]
    index = np.where(where, offsets[:-1, None] + cols[None, :], 0).astype(np.int64)
    return index, where
