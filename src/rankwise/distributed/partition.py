"""Dask DataFrames whose partitions hold whole queries, and readers that produce them.

A ranking collection is a Dask DataFrame with a query-id column (``qid``), a ``label``
column, feature columns and optionally ``doc_id``. rankwise keeps one invariant on it:

.. math::

    \\forall q:\\ |\\{p : q \\in \\mathrm{qids}(P_p)\\}| = 1

— every query lives in exactly one partition, its rows contiguous there and in input order.
Per-query metrics, listwise gradients and XGBoost's ``group_ptr`` are then computed on whole
lists, so results do not change with the number of partitions or workers (the bug of
rankers that split groups at partition boundaries). :func:`whole_queries` establishes it,
checking first (one pass over the qid column) and reshuffling by qid only when needed.

References
----------
M. Rocklin. Dask: parallel computation with blocked algorithms and task scheduling.
Proc. 14th Python in Science Conference (SciPy), 2015.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rankwise.distributed._deps import require_dask
from rankwise.errors import InputError, ParseError

__all__ = ["from_pandas", "from_dataset", "read_svmlight", "read_parquet", "whole_queries",
           "check_whole_queries", "to_dataset"]

ROW = "_rankwise_row"
# global row key = partition number * 2**40 + position in the partition: increasing in the
# collection's row order without a counting pass (partitions of up to 2**40 rows).
_ROW_STRIDE = np.int64(1) << np.int64(40)


# ----------------------------------------------------------------------------- helpers

def _check_frame(frame, columns, *, name: str = "frame"):
    _, dd = require_dask()
    if not isinstance(frame, dd.DataFrame):
        raise InputError(f"{name} must be a dask.dataframe.DataFrame; got {type(frame).__name__} "
                         "(use rankwise.distributed.from_pandas for a pandas frame)")
    missing = [c for c in columns if c is not None and c not in frame.columns]
    if missing:
        raise InputError(f"{name} has no column(s) {missing}; its columns are {list(frame.columns)[:12]}")


def _add_row_key(part, partition_info=None):
    k = 0 if partition_info is None else int(partition_info["number"])
    return part.assign(**{ROW: np.int64(k) * _ROW_STRIDE + np.arange(len(part), dtype=np.int64)})


def with_row_key(frame):
    """``frame`` plus an int64 column ``_rankwise_row`` increasing in the collection's row order."""
    meta = frame._meta.assign(**{ROW: np.zeros(0, dtype=np.int64)})
    return frame.map_partitions(_add_row_key, meta=meta)


def _regroup_partition(part, qid: str):
    """Rows in input order (by the row key when present), then queries made contiguous stably."""
    from rankwise.data.groups import group_by_qid

    if len(part) == 0:
        return part
    if ROW in part.columns and not part[ROW].is_monotonic_increasing:
        part = part.sort_values(ROW, kind="stable")
    g = group_by_qid(part[qid].to_numpy(), name=qid)
    if g.order is not None:
        part = part.iloc[g.order]
    return part


def _partition_qids(part, qid: str):
    return np.asarray(part[qid].unique())


def _first_shared_qid(qid_lists):
    """A qid present in two partitions (and their numbers), or None."""
    seen = {}
    for k, arr in enumerate(qid_lists):
        for q in arr.tolist():
            j = seen.setdefault(q, k)
            if j != k:
                return q, j, k
    return None


def check_whole_queries(frame, *, qid: str = "qid") -> bool:
    """True when no query id appears in two partitions of ``frame`` (one pass over ``qid``)."""
    dask, _ = require_dask()
    _check_frame(frame, [qid])
    parts = frame[[qid]].to_delayed()
    lists = dask.compute(*[dask.delayed(_partition_qids)(p, qid) for p in parts])
    total = sum(len(a) for a in lists)
    if total == 0:
        return True
    return len(np.unique(np.concatenate(lists))) == total


def whole_queries(frame, *, qid: str = "qid", npartitions: int | None = None, check: bool = True,
                  keep_row_key: bool = False):
    """Make every query live in one partition, its rows contiguous and in input order.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
        A ranking collection with a ``qid`` column, rows in any order (queries may be
        interleaved across and within partitions).
    qid : str
        Name of the query-id column.
    npartitions : int, optional
        Partitions after a reshuffle (default: as many as ``frame`` has).
    check : bool
        First test (one pass over the ``qid`` column) whether the partitions already hold whole
        queries and reshuffle only when they do not; ``False`` always reshuffles.
    keep_row_key : bool
        Keep the ``_rankwise_row`` column (the input row order; used by
        :func:`rankwise.distributed.evaluate` to order queries by first appearance).

    Returns
    -------
    dask.dataframe.DataFrame
        Same rows and columns. Without a reshuffle the partitions are the input's, each
        regrouped stably; after one (``frame.shuffle(on=qid)``, hash partitioning) each
        partition holds the queries hashed to it, rows of a query in input order.

    Notes
    -----
    The reshuffle is Dask's own (``p2p`` on a distributed cluster, ``tasks`` otherwise): all
    rows move once over the network. Input that is already grouped (one LETOR file per
    partition, Parquet written by :func:`rankwise.data.write_parquet`) skips it.
    """
    dask, _ = require_dask()
    _check_frame(frame, [qid])
    if npartitions is not None and (not isinstance(npartitions, (int, np.integer)) or npartitions < 1):
        raise InputError(f"npartitions must be a positive integer; got {npartitions!r}")
    keyed = with_row_key(frame)
    aligned = False
    if check:
        aligned = check_whole_queries(frame, qid=qid)
    if not aligned:
        keyed = keyed.shuffle(on=qid, npartitions=npartitions or frame.npartitions)
    out = keyed.map_partitions(_regroup_partition, qid, meta=keyed._meta)
    if not keep_row_key:
        out = out.drop(columns=[ROW])
    return out


# ----------------------------------------------------------------------------- constructors

def from_pandas(frame, *, npartitions: int = 2, qid: str = "qid"):
    """A Dask collection of whole queries from a pandas DataFrame (rows in any order).

    Queries are regrouped stably (order of first appearance) and cut into ``npartitions``
    partitions at query boundaries, balancing rows; no query is split.
    """
    import pandas as pd

    dask, dd = require_dask()
    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"frame must be a pandas DataFrame; got {type(frame).__name__}")
    if qid not in frame.columns:
        raise InputError(f"qid={qid!r} is not a column of the frame; columns are {list(frame.columns)[:12]}")
    if not isinstance(npartitions, (int, np.integer)) or npartitions < 1:
        raise InputError(f"npartitions must be a positive integer; got {npartitions!r}")
    if frame[qid].isna().any():
        raise InputError(f"qid column {qid!r} has missing values; every row needs a query id")
    from rankwise.data.groups import group_by_qid

    g = group_by_qid(frame[qid].to_numpy(), name=qid)
    if g.order is not None:
        frame = frame.iloc[g.order]
    frame = frame.reset_index(drop=True)
    cuts = _balanced_cuts(g.offsets, int(npartitions))
    pieces = [frame.iloc[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
    return dd.from_delayed([dask.delayed(p) for p in pieces], meta=frame.iloc[:0], verify_meta=False)


def _balanced_cuts(offsets: np.ndarray, n: int) -> np.ndarray:
    """Row cut points at query boundaries giving ``<= n`` non-empty pieces of similar size."""
    total = int(offsets[-1])
    targets = np.linspace(0, total, n + 1)[1:-1]
    idx = np.searchsorted(offsets, targets)  # first boundary >= target
    cuts = np.unique(np.concatenate(([0], offsets[np.clip(idx, 0, len(offsets) - 1)], [total])))
    return cuts.astype(np.int64)


def from_dataset(dataset, *, npartitions: int = 2, qid: str = "qid", label: str = "label",
                 doc_id: str = "doc_id"):
    """A Dask collection of whole queries from a :class:`rankwise.data.RankingDataset`.

    Columns as :func:`rankwise.data.to_pandas` (``qid``, ``label``, ``doc_id`` when present,
    then the features), cut at query boundaries into ``npartitions`` partitions.
    """
    from rankwise.data import RankingDataset, to_pandas

    if not isinstance(dataset, RankingDataset):
        raise InputError(f"dataset must be a RankingDataset; got {type(dataset).__name__}")
    return from_pandas(to_pandas(dataset, qid=qid, label=label, doc_id=doc_id), npartitions=npartitions, qid=qid)


def _dataset_frame(ds, n_features: int, *, names=None):
    import pandas as pd

    X = ds.X.toarray() if hasattr(ds.X, "toarray") else np.asarray(ds.X)
    if X.shape[1] < n_features:
        X = np.hstack([X, np.zeros((X.shape[0], n_features - X.shape[1]), dtype=X.dtype)])
    names = names or [f"f{j}" for j in range(n_features)]
    head = {"qid": ds.qid, "label": ds.labels}
    if ds.doc_ids is not None:
        head["doc_id"] = ds.doc_ids.astype(object)
    return pd.concat([pd.DataFrame(head), pd.DataFrame(X.astype(np.float32, copy=False), columns=names)], axis=1)


def _read_file_frame(path: str, n_features: int, zero_based: bool, with_doc_id: bool):
    from rankwise.data import read_svmlight as _read

    ds = _read(path, zero_based=zero_based, n_features=n_features, dense=True)
    out = _dataset_frame(ds, n_features)
    if with_doc_id and "doc_id" not in out.columns:
        out.insert(2, "doc_id", np.full(len(out), "", dtype=object))
    return out


def _n_features_of_file(path: str, zero_based: bool) -> int:
    from rankwise.data import read_svmlight as _read

    return _read(path, zero_based=zero_based).n_features


def _parse_block(block: bytes, path: str, start: int, n_features: int | None, zero_based: bool):
    """Parse one newline-aligned byte block of an SVMlight file (every line needs ``qid:``)."""
    from rankwise.data import svmlight as S

    label = f"{path} (block at byte {start})"
    p = S._parse_bytes(label, block, zero_based=zero_based, n_features=n_features)
    if p["n_rows"] and not bool(np.all(p["has_qid"])):
        r = int(np.flatnonzero(~p["has_qid"])[0])
        raise ParseError(label, int(p["line_no"][r]),
                         "no 'qid:' on this line; reading one file in blocks needs 'qid:<integer>' on every line "
                         "(read the file whole, blocksize=None, to use a .query group file)")
    return p


def _block_max_index(block, path, start, zero_based):
    return _parse_block(block, path, start, None, zero_based)["max_index"]


def _block_frame(block, path, start, n_features, zero_based, with_doc_id):
    import pandas as pd

    from rankwise.data import _svmlight_kernel as K

    p = _parse_block(block, path, start, n_features, zero_based)
    n = p["n_rows"]
    X = K.scatter_dense(p["indptr"], p["indices"], p["values"], n, n_features) if n else \
        np.zeros((0, n_features), np.float32)
    head = {"qid": p["qids"].astype(np.int64), "label": p["labels"].astype(np.float64)}
    if with_doc_id:
        ds_, de_ = p["docid_s"], p["docid_e"]
        raw = bytes(p["buf"])
        head["doc_id"] = np.array([raw[a:b].decode("utf-8", "replace") for a, b in zip(ds_.tolist(), de_.tolist())],
                                  dtype=object)
    return pd.concat([pd.DataFrame(head),
                      pd.DataFrame(np.asarray(X, dtype=np.float32), columns=[f"f{j}" for j in range(n_features)])],
                     axis=1)


def read_svmlight(paths, *, blocksize: int | str | None = None, n_features: int | None = None,
                  zero_based: bool = False, doc_ids: bool = False, npartitions: int | None = None):
    """Read LETOR / SVMlight files into a Dask collection of whole queries.

    Parameters
    ----------
    paths : str, Path or list of them
        One or many files (a glob pattern is expanded). ``.gz``/``.bz2``/``.xz`` files are read
        whole (one partition per file); plain files can be cut into blocks.
    blocksize : int or str, optional
        Cut each plain file into newline-aligned blocks of about this many bytes (``"64MiB"``),
        one partition each; every line then needs ``qid:``. A query cut by a block boundary
        is made whole by :func:`whole_queries` (which reshuffles only in that case).
    n_features : int, optional
        Number of feature columns; by default the largest index over all files (one extra
        parsing pass).
    zero_based : bool
        As in :func:`rankwise.data.read_svmlight`.
    doc_ids : bool
        Add a ``doc_id`` column from ``#docid = X`` comments.
    npartitions : int, optional
        Partitions after a reshuffle, if one is needed.

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``qid`` (int64), ``label`` (float64), ``doc_id`` (when asked), ``f0..f{d-1}``
        (float32).
    """
    import glob

    dask, dd = require_dask()
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = []
    for p in paths:
        p = str(p)
        matched = sorted(glob.glob(p)) if any(ch in p for ch in "*?[") else [p]
        if not matched:
            raise InputError(f"paths: the pattern {p!r} matches no file")
        files.extend(matched)
    for f in files:
        if not Path(f).is_file():
            raise InputError(f"paths: {f!r} is not a file")
    if n_features is not None and (not isinstance(n_features, (int, np.integer)) or n_features < 1):
        raise InputError(f"n_features must be a positive integer or None; got {n_features!r}")

    def compressed(f):
        with open(f, "rb") as fh:
            head = fh.read(6)
        return head[:2] == b"\x1f\x8b" or head[:3] == b"BZh" or head[:6] == b"\xfd7zXZ\x00"

    whole = [f for f in files if blocksize is None or compressed(f)]
    blocked = [f for f in files if f not in whole]
    blocks = []  # (delayed bytes, path, start)
    if blocked:
        from dask.bytes import read_bytes

        for f in blocked:
            _, parts = read_bytes(f, delimiter=b"\n", blocksize=blocksize, sample=False)
            starts = _block_starts(f, blocksize, len(parts[0]))
            for b, s in zip(parts[0], starts):
                blocks.append((b, f, s))
    if n_features is None:
        tasks = [dask.delayed(_n_features_of_file)(f, zero_based) for f in whole]
        tasks += [dask.delayed(_block_max_index)(b, f, s, zero_based) for b, f, s in blocks]
        counts = dask.compute(*tasks)
        nf_whole = list(counts[:len(whole)])
        nf_blocks = [m + 1 for m in counts[len(whole):]]
        n_features = max(nf_whole + nf_blocks)
    parts = [dask.delayed(_read_file_frame)(f, n_features, zero_based, doc_ids) for f in whole]
    parts += [dask.delayed(_block_frame)(b, f, s, n_features, zero_based, doc_ids) for b, f, s in blocks]
    import pandas as pd

    meta = {"qid": pd.Series([], dtype=np.int64), "label": pd.Series([], dtype=np.float64)}
    if doc_ids:
        meta["doc_id"] = pd.Series([], dtype=object)
    meta.update({f"f{j}": pd.Series([], dtype=np.float32) for j in range(n_features)})
    frame = dd.from_delayed(parts, meta=pd.DataFrame(meta), verify_meta=False)
    return whole_queries(frame, npartitions=npartitions)


def _block_starts(path, blocksize, n):
    from dask.utils import parse_bytes

    size = Path(path).stat().st_size
    bs = parse_bytes(blocksize) if isinstance(blocksize, str) else int(blocksize)
    return [min(i * bs, size) for i in range(n)]


def read_parquet(path, *, qid: str = "qid", columns=None, npartitions: int | None = None, **kwargs):
    """Read Parquet (a file, a directory or a glob) into a Dask collection of whole queries.

    ``kwargs`` go to :func:`dask.dataframe.read_parquet`. Files written query-grouped (e.g. by
    :func:`rankwise.data.write_parquet`, one file per shard) need no reshuffle.
    """
    _, dd = require_dask()
    frame = dd.read_parquet(path, columns=columns, **kwargs)
    if qid not in frame.columns:
        raise InputError(f"qid={qid!r} is not a column of {path!s}; columns are {list(frame.columns)[:12]}")
    return whole_queries(frame, qid=qid, npartitions=npartitions)


def to_dataset(frame, *, qid: str = "qid", label: str = "label", features=None, doc_id: str | None = None):
    """Compute a (small enough) collection into one :class:`rankwise.data.RankingDataset`."""
    from rankwise.data import from_pandas as _from_pandas

    _check_frame(frame, [qid, label])
    pdf = frame.compute()
    if ROW in pdf.columns:
        pdf = pdf.drop(columns=[ROW])
    return _from_pandas(pdf.reset_index(drop=True), qid=qid, label=label, features=features, doc_id=doc_id)


def feature_columns(frame, *, qid: str = "qid", label: str = "label", doc_id: str | None = None, features=None):
    """The feature columns: ``features`` checked against the frame, or every numeric other column."""
    import pandas as pd

    reserved = {qid, label, doc_id, ROW, "doc_id", "score"}
    if features is None:
        feats = [c for c in frame.columns if c not in reserved and pd.api.types.is_numeric_dtype(frame._meta[c])]
        if not feats:
            raise InputError("the frame has no numeric feature columns besides qid/label; pass features=[...]")
        return feats
    feats = list(features)
    missing = [f for f in feats if f not in frame.columns]
    if missing:
        raise InputError(f"features: columns {missing[:5]} are not in the frame")
    return feats
