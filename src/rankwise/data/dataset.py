"""``RankingDataset``: query-grouped rows of features and relevance labels.

Rows of a query are contiguous; ``query_offsets`` (int64, ``n_queries + 1``) is the group
structure, ``query_ids`` names the queries in order. ``X`` is dense float32 or scipy CSR
float32 and is never densified behind the user's back.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, NamedTuple

import numpy as np
import scipy.sparse as sp

from rankwise._validation import check_features, check_vector
from rankwise.data.groups import _as_qid_array, group_by_qid, padded_index
from rankwise.errors import InputError

__all__ = ["RankingDataset", "Query", "PaddedBatch", "concat"]

_FORMAT_VERSION = 1


class Query(NamedTuple):
    """One query of a :class:`RankingDataset` (rows ``start:stop``)."""

    qid: object
    X: object
    labels: np.ndarray
    doc_ids: np.ndarray | None
    start: int
    stop: int


@dataclass
class PaddedBatch:
    """A padded ``[n_batch_queries, width]`` view.

    Attributes
    ----------
    values : ndarray, shape (n, width) or (n, width, k)
        The padded values; padded cells hold ``pad_value``.
    where : ndarray of bool, shape (n, width)
        True on real items, False on padding.
    index : ndarray of int64, shape (n, width)
        Flat row of each cell (0 on padding; use ``where``).
    query_index : ndarray of int64, shape (n,)
        Position (in the data set) of each query of the batch.
    """

    values: np.ndarray
    where: np.ndarray
    index: np.ndarray
    query_index: np.ndarray


def _reject_inf(X) -> None:
    """NaN is a missing value and stays; inf is an error (the writers and models cannot take it)."""
    data = X.data if sp.issparse(X) else X.reshape(-1)
    if data.size == 0:
        return
    # fmax/fmin skip NaN and allocate nothing: two cheap passes in the common, finite case
    if not (np.isinf(np.fmax.reduce(data)) or np.isinf(np.fmin.reduce(data))):
        return
    k = int(np.flatnonzero(np.isinf(data))[0])
    if sp.issparse(X):
        r = int(np.searchsorted(X.indptr, k, side="right") - 1)
        c = int(X.indices[k])
    else:
        r, c = divmod(k, X.shape[1])
    raise InputError(f"X contains inf (first at row {r}, column {c}: {data[k]}); features must be finite, "
                     "with NaN for a missing value")


def _noncontiguous_message(qid: np.ndarray, line_numbers, source) -> str | None:
    """Name the first query whose rows are split, with its row (or line) spans."""
    n = len(qid)
    change = np.flatnonzero(qid[1:] != qid[:-1]) + 1
    starts = np.concatenate(([0], change))
    ends = np.append(starts[1:], n)
    run_q = qid[starts]
    seen = {}
    for r, q in enumerate(run_q.tolist()):
        if q in seen:
            runs = [k for k, qq in enumerate(run_q.tolist()) if qq == q]
            if line_numbers is not None:
                spans = [f"{int(line_numbers[starts[k]])}-{int(line_numbers[ends[k] - 1])}" for k in runs[:4]]
                unit = "lines"
            else:
                spans = [f"{starts[k] + 1}-{ends[k]}" for k in runs[:4]]
                unit = "rows (1-based)"
            more = "" if len(runs) <= 4 else f" and {len(runs) - 4} more runs"
            where = f"{source}: " if source else ""
            return (f"{where}rows of query {q!r} are not contiguous ({unit} {', '.join(spans)}{more}); "
                    "pass strict=False to regroup them stably")
        seen[q] = r
    return None


class RankingDataset:
    """Query-grouped learning-to-rank data.

    Parameters
    ----------
    X : ndarray (n_rows, n_features) or scipy sparse matrix
        Features; stored as float32 (dense) or CSR float32. NaN means "missing" and is kept;
        ``inf`` is rejected (no file format or model takes it).
    labels : array-like, shape (n_rows,)
        Relevance labels (float64, finite).
    query_offsets : array-like of int, shape (n_queries + 1,)
        Query ``i`` owns rows ``query_offsets[i]:query_offsets[i+1]``; every query has >= 1 row.
    query_ids : array-like, shape (n_queries,), optional
        Distinct query ids (default ``0..n_queries-1``).
    doc_ids : array-like of str, shape (n_rows,), optional
    feature_names : list of str, optional

    Attributes
    ----------
    regrouped_rows : int
        Rows moved by :meth:`from_arrays` to make queries contiguous (0 when none were).
    row_order : ndarray of int64 or None
        The permutation :meth:`from_arrays` applied: row ``k`` here is input row ``row_order[k]``.

    Notes
    -----
    Use :meth:`from_arrays` for flat rows with a per-row ``qid`` (the public boundary); the
    constructor takes rows that are already grouped.
    """

    def __init__(self, X, labels, query_offsets, query_ids=None, *, doc_ids=None, feature_names=None,
                 allow_nan: bool = True):
        X = check_features(X, name="X", allow_nan=allow_nan)
        if not sp.issparse(X):
            X = np.ascontiguousarray(X)
        _reject_inf(X)
        n = X.shape[0]
        self.X = X
        self.labels = check_vector(labels, n, name="labels", dtype=np.float64)
        off = np.asarray(query_offsets)
        if off.ndim != 1 or len(off) < 1 or off.dtype.kind not in "iu":
            raise InputError(f"query_offsets must be a 1-d integer array of length n_queries + 1; got {off!r:.80}")
        off = off.astype(np.int64)
        if off[0] != 0 or off[-1] != n:
            raise InputError(f"query_offsets must start at 0 and end at n_rows={n}; "
                             f"got {int(off[0])} .. {int(off[-1])}")
        if np.any(np.diff(off) <= 0):
            k = int(np.flatnonzero(np.diff(off) <= 0)[0])
            raise InputError(f"query_offsets must increase strictly (every query has at least one row); "
                             f"query {k} has {int(off[k + 1] - off[k])} rows")
        self.query_offsets = off
        nq = len(off) - 1
        if query_ids is None:
            qids = np.arange(nq, dtype=np.int64)
        else:
            qids = _as_qid_array(query_ids, name="query_ids")
            if len(qids) != nq:
                raise InputError(f"query_ids must have one id per query ({nq}); got shape {qids.shape}")
            uniq, counts = np.unique(qids, return_counts=True)
            if len(uniq) != nq:
                raise InputError(f"query_ids must be distinct; {uniq[counts > 1][0].item()!r} appears "
                                 f"{int(counts.max())} times")
        self.query_ids = qids
        if doc_ids is not None:
            doc_ids = np.asarray(doc_ids).astype(str)
            if doc_ids.shape != (n,):
                raise InputError(f"doc_ids must have one id per row ({n}); got shape {doc_ids.shape}")
        self.doc_ids = doc_ids
        if feature_names is not None:
            feature_names = [str(f) for f in feature_names]
            if len(feature_names) != X.shape[1]:
                raise InputError(f"feature_names has {len(feature_names)} names but X has {X.shape[1]} columns")
        self.feature_names = feature_names
        self.regrouped_rows = 0
        self.row_order = None
        self._qid = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(cls, X, labels, qid, *, strict: bool = False, doc_ids=None, feature_names=None,
                    allow_nan: bool = True, _line_numbers=None, _source=None,
                    _stacklevel: int = 2) -> "RankingDataset":
        """Build from flat rows with a per-row ``qid``.

        Rows of a query that are not contiguous are regrouped stably (queries in order of first
        appearance, rows of a query in input order) and a ``UserWarning`` says how many rows
        moved and names the first query found split; the count is also stored in
        ``regrouped_rows`` and the permutation in ``row_order``. With ``strict=True`` such input
        is rejected with a message naming the query id and its row spans. Query ids are
        integers or strings, one kind per call: missing ids (None, NaN) and a mix of strings and
        numbers are rejected.
        """
        X = check_features(X, name="X", allow_nan=allow_nan)
        n = X.shape[0]
        qarr = np.asarray(qid, dtype=object) if isinstance(qid, (list, tuple)) else np.asarray(qid)
        if qarr.ndim != 1 or len(qarr) != n:
            raise InputError(f"qid has shape {qarr.shape} but X has {n} rows; one query id per row is expected")
        qarr = _as_qid_array(qarr, name="qid")
        labels = check_vector(labels, n, name="labels", dtype=np.float64)
        if n == 0:
            raise InputError("X has no rows; a RankingDataset needs at least one query")
        g = group_by_qid(qarr, strict=False)
        if g.order is not None and strict:
            raise InputError(_noncontiguous_message(np.asarray(qarr), _line_numbers, _source))
        if doc_ids is not None:
            doc_ids = np.asarray(doc_ids).astype(str)
            if doc_ids.shape != (n,):
                raise InputError(f"doc_ids must have one id per row ({n}); got shape {doc_ids.shape}")
        if g.order is not None:
            where = f"{_source}: " if _source else ""
            split = f"query {g.first_split!r}" if g.n_split == 1 else \
                f"{g.n_split} queries (the first: {g.first_split!r})"
            warnings.warn(f"{where}the rows of {split} are not contiguous; {g.n_moved} of {n} rows were "
                          "regrouped stably (see regrouped_rows and row_order); "
                          "pass strict=True to reject such input", UserWarning, stacklevel=_stacklevel)
            o = g.order
            X = X[o]
            labels = labels[o]
            doc_ids = None if doc_ids is None else doc_ids[o]
        ds = cls(X, labels, g.offsets, g.qids, doc_ids=doc_ids, feature_names=feature_names, allow_nan=allow_nan)
        ds.regrouped_rows = g.n_moved
        ds.row_order = g.order
        return ds

    # ------------------------------------------------------------------ basic views
    def __len__(self) -> int:
        return self.X.shape[0]

    @property
    def n_queries(self) -> int:
        return len(self.query_offsets) - 1

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def query_sizes(self) -> np.ndarray:
        """Rows per query (int64, shape ``(n_queries,)``)."""
        return np.diff(self.query_offsets)

    @property
    def qid(self) -> np.ndarray:
        """Query id of every row."""
        if self._qid is None:
            self._qid = np.repeat(self.query_ids, self.query_sizes)
        return self._qid

    def __iter__(self) -> Iterator[Query]:
        off = self.query_offsets
        for i in range(self.n_queries):
            a, b = int(off[i]), int(off[i + 1])
            yield Query(self.query_ids[i], self.X[a:b], self.labels[a:b],
                        None if self.doc_ids is None else self.doc_ids[a:b], a, b)

    def __repr__(self) -> str:
        kind = "csr" if sp.issparse(self.X) else "dense"
        return (f"RankingDataset(rows={len(self)}, queries={self.n_queries}, features={self.n_features}, "
                f"X={kind}, doc_ids={'yes' if self.doc_ids is not None else 'no'})")

    def summary(self) -> dict:
        """Counts: rows, queries, features, label histogram, list lengths, queries without relevant rows."""
        labels, counts = np.unique(self.labels, return_counts=True)
        sizes = self.query_sizes
        qmax = np.maximum.reduceat(self.labels, self.query_offsets[:-1])
        return {
            "rows": len(self), "queries": self.n_queries, "features": self.n_features,
            "labels": {(int(l) if l == int(l) else float(l)): int(c) for l, c in zip(labels, counts)},
            "list_length": {"min": int(sizes.min()), "median": float(np.median(sizes)), "max": int(sizes.max())},
            "queries_without_relevant": int(np.sum(qmax <= 0)),
            "sparse": bool(sp.issparse(self.X)),
        }

    # ------------------------------------------------------------------ selection
    def take(self, query_index) -> "RankingDataset":
        """The queries at positions ``query_index`` (in that order)."""
        qi = np.asarray(query_index)
        if qi.dtype == bool:
            if qi.shape != (self.n_queries,):
                raise InputError(f"boolean query_index must have n_queries={self.n_queries} entries; got {qi.shape}")
            qi = np.flatnonzero(qi)
        if qi.ndim != 1 or (qi.size and qi.dtype.kind not in "iu"):
            raise InputError(f"query_index must be a 1-d array of query positions; got {qi!r:.80}")
        qi = qi.astype(np.int64)
        if qi.size == 0:
            raise InputError("query_index is empty; a RankingDataset needs at least one query")
        if qi.min() < 0 or qi.max() >= self.n_queries:
            raise InputError(f"query_index must lie in [0, {self.n_queries}); got {int(qi.min())}..{int(qi.max())}")
        if len(np.unique(qi)) != len(qi):
            raise InputError("query_index lists a query more than once")
        sizes = self.query_sizes[qi]
        starts = self.query_offsets[qi]
        rows = np.repeat(starts - np.concatenate(([0], np.cumsum(sizes)[:-1])), sizes) + np.arange(sizes.sum())
        out = RankingDataset(self.X[rows], self.labels[rows], np.concatenate(([0], np.cumsum(sizes))),
                             self.query_ids[qi], doc_ids=None if self.doc_ids is None else self.doc_ids[rows],
                             feature_names=self.feature_names)
        return out

    def subset(self, query_ids) -> "RankingDataset":
        """The queries with the given ids, in the order given."""
        want = np.asarray(query_ids, dtype=object) if isinstance(query_ids, (list, tuple)) else np.asarray(query_ids)
        if want.ndim == 0:
            want = want[None]
        pos = {q: i for i, q in enumerate(self.query_ids.tolist())}
        kind = type(next(iter(pos))) if pos else None
        idx, unknown = [], []
        for q in want.tolist():
            if q not in pos:
                # tolerate int/str spellings of the same id ("7" for 7, np.int64(7) for 7)
                try:
                    key = kind(q)
                except (TypeError, ValueError):
                    key = None
                if key not in pos or (kind is int and isinstance(q, float) and q != key):
                    unknown.append(q)
                    continue
                q = key
            idx.append(pos[q])
        if unknown:
            what = f"query id {unknown[0]!r} is" if len(unknown) == 1 else \
                f"query ids {unknown[:5]!r}{' ...' if len(unknown) > 5 else ''} ({len(unknown)}) are"
            raise InputError(f"{what} not in this data set (it has {self.n_queries} "
                             f"{kind.__name__ if kind else ''} query ids, e.g. {self.query_ids[:3].tolist()})")
        return self.take(np.asarray(idx, dtype=np.int64))

    @classmethod
    def concat(cls, datasets) -> "RankingDataset":
        """Stack data sets (queries in the given order).

        The result is CSR if any part is sparse (never densified). ``doc_ids`` are kept only when
        every part has them. Query ids must be distinct across parts.
        """
        parts = list(datasets)
        if not parts:
            raise InputError("concat needs at least one RankingDataset")
        for k, p in enumerate(parts):
            if not isinstance(p, RankingDataset):
                raise InputError(f"datasets[{k}] is a {type(p).__name__}, not a RankingDataset")
        d = parts[0].n_features
        for k, p in enumerate(parts):
            if p.n_features != d:
                raise InputError(f"datasets[{k}] has {p.n_features} features but datasets[0] has {d}")
        names = parts[0].feature_names
        if any(p.feature_names != names for p in parts):
            raise InputError("feature_names differ between the data sets; they must be equal to concatenate")
        qids = np.concatenate([p.query_ids for p in parts])
        uniq, counts = np.unique(qids, return_counts=True)
        if len(uniq) != len(qids):
            raise InputError(f"query id {uniq[counts > 1][0].item()!r} occurs in more than one data set; "
                             "query ids must be distinct to concatenate")
        if any(sp.issparse(p.X) for p in parts):
            X = sp.vstack([sp.csr_matrix(p.X) for p in parts], format="csr")
        else:
            X = np.concatenate([p.X for p in parts])
        labels = np.concatenate([p.labels for p in parts])
        sizes = np.concatenate([p.query_sizes for p in parts])
        doc_ids = None
        if all(p.doc_ids is not None for p in parts):
            doc_ids = np.concatenate([p.doc_ids for p in parts])
        return cls(X, labels, np.concatenate(([0], np.cumsum(sizes))), qids, doc_ids=doc_ids, feature_names=names)

    # ------------------------------------------------------------------ padding
    def _row_values(self, values):
        if values is None:
            return self.labels
        if sp.issparse(values):
            raise InputError("values is sparse; a padded view needs dense values (pass X.toarray() "
                             "explicitly if that is really wanted)")
        v = np.asarray(values)
        if v.ndim not in (1, 2) or v.shape[0] != len(self):
            raise InputError(f"values must have one entry (or row) per data set row ({len(self)}); got shape {v.shape}")
        return v

    def padded(self, values=None, *, bucket=False, pad_value=0):
        """Padded ``[n_queries, max_len]`` view of per-row ``values`` (default: ``labels``).

        Returns a :class:`PaddedBatch`; with ``bucket=True`` (or a list of width boundaries)
        returns a list of PaddedBatch, one per length bucket (see :meth:`buckets`).
        """
        if bucket is not False and bucket is not None:
            return self.buckets(values, boundaries=None if bucket is True else bucket, pad_value=pad_value)
        v = self._row_values(values)
        index, where = padded_index(self.query_offsets)
        out = v[index]
        out[~where] = pad_value
        return PaddedBatch(out, where, index, np.arange(self.n_queries, dtype=np.int64))

    def buckets(self, values=None, *, boundaries=None, pad_value=0) -> list[PaddedBatch]:
        """Padded batches of queries of similar length, so that padding waste stays small.

        Queries go to the bucket of the smallest boundary >= their length (default boundaries:
        powers of two, so at most half of any batch is padding); each batch is as wide as its
        longest query. Batches come in increasing width; ``query_index`` maps back.
        """
        v = self._row_values(values)
        sizes = self.query_sizes
        if boundaries is None:
            key = np.ceil(np.log2(sizes)).astype(np.int64)
        else:
            b = np.sort(np.asarray(boundaries, dtype=np.int64))
            if b.ndim != 1 or b.size == 0 or b[0] < 1:
                raise InputError(f"boundaries must be positive integer widths; got {boundaries!r}")
            key = np.searchsorted(b, sizes, side="left")
        out = []
        for k in np.unique(key):
            qi = np.flatnonzero(key == k)
            off = np.concatenate(([0], np.cumsum(sizes[qi])))
            idx, where = padded_index(off)
            rows = np.repeat(self.query_offsets[qi] - off[:-1], sizes[qi]) + np.arange(off[-1])
            flat = np.where(where, rows[idx], 0)
            vals = v[flat]
            vals[~where] = pad_value
            out.append(PaddedBatch(vals, where, flat.astype(np.int64), qi.astype(np.int64)))
        return out

    # ------------------------------------------------------------------ binary cache
    def save(self, path) -> None:
        """Save as a directory of ``.npy`` arrays plus ``meta.json`` (no pickle).

        ``meta.json`` records a digest of every array (dtype, shape and bytes), which
        :meth:`load` checks: a damaged or swapped array is refused, never served. The folder is
        written atomically (:func:`rankwise._io.atomic_folder`): into a hidden temporary folder
        beside ``path``, fsynced, then swapped in, so that ``path`` holds the complete previous
        save or the complete new one, whatever happens (a full disk: a
        :class:`~rankwise.errors.WriteError` naming the path; the process killed). An existing
        ``path`` is replaced only if it holds nothing but a save's files (an empty folder is fine);
        a folder with other files in it is an ``InputError``, never deleted.
        """
        self._save(path)

    def _save(self, path, extra: dict | None = None, *, replace_any: bool = False) -> None:
        """``replace_any``: the folder is rankwise's own (a cache slot), replaced whatever it holds."""
        from rankwise._io import atomic_folder
        from rankwise.data._digest import array_digest, digest_algorithm

        meta = {"format": "rankwise.RankingDataset", "version": _FORMAT_VERSION,
                "sparse": bool(sp.issparse(self.X)), "shape": list(self.X.shape),
                "feature_names": self.feature_names, "has_doc_ids": self.doc_ids is not None}
        arrays = {}
        if sp.issparse(self.X):
            arrays.update({"X_data.npy": self.X.data, "X_indices.npy": self.X.indices, "X_indptr.npy": self.X.indptr})
        else:
            arrays["X.npy"] = self.X
        arrays.update({"labels.npy": self.labels, "query_offsets.npy": self.query_offsets,
                       "query_ids.npy": self.query_ids})
        if self.doc_ids is not None:
            arrays["doc_ids.npy"] = self.doc_ids
        algorithm = digest_algorithm()
        meta["digests"] = {"algorithm": algorithm}
        with atomic_folder(path, replaceable=None if replace_any else _check_replaceable) as tmp:
            for name, arr in arrays.items():
                arr = np.ascontiguousarray(arr)
                with open(tmp / name, "wb") as fh:
                    # through .write (not ndarray.tofile, whose short write on a full disk is an
                    # OSError without errno): ENOSPC reaches the WriteError
                    np.save(_Writes(fh), arr)
                meta["digests"][name] = array_digest(arr, algorithm)
            meta.update(extra or {})
            with open(tmp / "meta.json", "w", encoding="utf-8") as fh:
                fh.write(json.dumps(meta))

    @classmethod
    def load(cls, path, *, mmap_mode: str | None = None, verify: bool = True) -> "RankingDataset":
        """Load what :meth:`save` wrote (``mmap_mode="r"`` maps the arrays instead of reading them).

        Every array is checked against the digest recorded when it was saved (``verify=False``
        skips this, e.g. to map a large data set without reading it once), and the arrays'
        structure always is (dtypes, shapes, CSR indices in range, offsets increasing): a damaged
        folder is an ``InputError`` naming it, never a wrong data set or a crash.
        """
        path = Path(path)
        if not os.path.lexists(path):  # a save killed mid-swap leaves the previous folder beside it
            from rankwise._io import recover_folder

            recover_folder(path)
        meta = cls._read_meta(path)
        return cls._from_meta(path, meta, mmap_mode, verify=verify)

    @staticmethod
    def _read_meta(path: Path) -> dict:
        try:
            meta = json.loads((path / "meta.json").read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no meta.json; not a saved RankingDataset") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"{path / 'meta.json'}: not valid JSON ({exc})") from None
        except (UnicodeDecodeError, RecursionError) as exc:
            raise InputError(f"{path / 'meta.json'}: not valid JSON ({type(exc).__name__})") from None
        if not isinstance(meta, dict):
            raise InputError(f"{path / 'meta.json'}: not a saved RankingDataset (the JSON is not an object)")
        return meta

    @classmethod
    def _from_meta(cls, path: Path, meta: dict, mmap_mode, *, verify: bool = True, strict: bool = False):
        """``strict`` (the parsed-data cache): digests required, CSR rows in canonical order."""
        try:
            return cls._load_arrays(path, meta, mmap_mode, verify, strict)
        except InputError:
            raise
        except Exception as exc:  # a missing or damaged array, a meta entry of the wrong type
            raise InputError(f"{path}: corrupt saved RankingDataset ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:200]}); delete the folder to rebuild it") from None

    @classmethod
    def _load_arrays(cls, path, meta, mmap_mode, verify=True, strict=False):
        from rankwise.data._digest import array_digest

        if meta.get("format") != "rankwise.RankingDataset" or meta.get("version") != _FORMAT_VERSION:
            raise InputError(f"{path}: saved with format {meta.get('format')!r} version {meta.get('version')!r}; "
                             f"expected rankwise.RankingDataset version {_FORMAT_VERSION}")
        digests = meta.get("digests")
        if (digests is not None or strict) and not isinstance(digests, dict):
            raise InputError(f"{path}: corrupt saved RankingDataset (meta.json 'digests' is not an object)")

        def bad(what):
            return InputError(f"{path}: corrupt saved RankingDataset ({what}); delete the folder to rebuild it")

        def ld(name):
            arr = np.load(path / name, mmap_mode=mmap_mode, allow_pickle=False)
            if verify and digests is not None:
                want = digests.get(name)
                got = array_digest(arr, digests.get("algorithm"))
                if want is None or got is None:
                    raise bad(f"no usable digest recorded for {name}")
                if got != want:
                    raise bad(f"{name} does not match the digest recorded when it was saved")
            return arr

        shape = meta["shape"]
        if not (isinstance(shape, list) and len(shape) == 2 and all(type(v) is int and v >= 0 for v in shape)):
            raise bad(f"meta.json shape {shape!r} is not two non-negative integers")
        n, d = shape
        if meta["sparse"]:
            data, indices, indptr = ld("X_data.npy"), ld("X_indices.npy"), ld("X_indptr.npy")
            if data.dtype != np.float32 or data.ndim != 1 or indices.ndim != 1 or indptr.ndim != 1 \
                    or indices.dtype.kind not in "iu" or indptr.dtype.kind not in "iu":
                raise bad("the CSR arrays have the wrong dtypes or dimensions")
            if len(indptr) != n + 1 or len(indices) != len(data) or indptr[0] != 0 or indptr[-1] != len(data):
                raise bad("the CSR arrays' lengths disagree with each other or with the shape")
            # checked here, before scipy's or the compiled kernels index with them (an index out of range crashes)
            if np.any(np.diff(indptr) < 0):
                raise bad("X_indptr.npy decreases")
            if len(indices) and (indices.min() < 0 or indices.max() >= d):
                raise bad(f"a column index in X_indices.npy is outside [0, {d})")
            X = sp.csr_matrix((data, indices, indptr), shape=(n, d))
            if strict and not X.has_canonical_format:
                raise bad("the column indices of a row are not strictly increasing")
        else:
            X = ld("X.npy")
            if X.dtype != np.float32 or X.shape != (n, d):
                raise bad(f"X.npy is {X.dtype} {X.shape}; meta.json says float32 {(n, d)}")
        labels = ld("labels.npy")
        off = np.asarray(ld("query_offsets.npy"))
        query_ids = np.asarray(ld("query_ids.npy"))
        doc_ids = np.asarray(ld("doc_ids.npy")) if meta["has_doc_ids"] else None
        names = meta["feature_names"]
        if off.ndim != 1 or off.dtype.kind not in "iu" or len(off) < 2 or np.any(np.diff(off) <= 0) \
                or labels.ndim != 1 or len(labels) != n or off[0] != 0 or off[-1] != n \
                or query_ids.ndim != 1 or len(query_ids) != len(off) - 1 \
                or (doc_ids is not None and (doc_ids.shape != (n,) or doc_ids.dtype.kind != "U")):
            raise InputError(f"{path}: inconsistent saved arrays (rows, labels and query_offsets disagree)")
        if labels.dtype != np.float64 or not np.all(np.isfinite(labels)):
            raise InputError(f"{path}: corrupt saved RankingDataset (labels are not finite floats)")
        if query_ids.dtype.kind not in "iuU" or len(np.unique(query_ids)) != len(query_ids):
            raise bad("query_ids.npy holds a repeated id or ids of another kind")
        if names is not None and (not isinstance(names, list) or len(names) != d
                                  or not all(isinstance(f, str) for f in names)):
            raise bad("meta.json feature_names do not name the columns")
        if not (verify and digests is not None):  # verified arrays are those saved, which had no inf
            try:
                _reject_inf(X)
            except InputError:
                raise bad("X holds inf") from None
        ds = cls.__new__(cls)
        ds.X = X
        ds.labels = labels
        ds.query_offsets = off.astype(np.int64, copy=False)
        ds.query_ids = query_ids
        ds.doc_ids = doc_ids
        ds.feature_names = names
        ds.regrouped_rows = 0
        ds.row_order = None
        ds._qid = None
        return ds

    def to_pandas(self, *, qid: str = "qid", label: str = "label", doc_id: str = "doc_id"):
        """DataFrame with columns ``qid``, ``label``, (``doc_id``), then one column per feature.

        Feature columns are named by ``feature_names`` or ``f0, f1, ...``. A CSR ``X`` becomes
        pandas sparse columns (not densified). :func:`rankwise.data.from_pandas` reads it back.
        """
        import pandas as pd

        names = self.feature_names or [f"f{j}" for j in range(self.n_features)]
        if sp.issparse(self.X):
            feats = pd.DataFrame.sparse.from_spmatrix(self.X, columns=names)
        else:
            feats = pd.DataFrame(self.X, columns=names, copy=False)
        head = {qid: self.qid, label: self.labels}
        if self.doc_ids is not None:
            head[doc_id] = self.doc_ids
        front = pd.DataFrame(head)
        clash = set(front.columns) & set(names)
        if clash:
            raise InputError(f"feature names {sorted(clash)} clash with the qid/label/doc_id column names; "
                             "pass other names via qid=/label=/doc_id=")
        return pd.concat([front, feats], axis=1)


class _Writes:
    """A file seen only through its ``write`` (numpy then writes in chunks, not with ``tofile``)."""

    def __init__(self, fh):
        self.write = fh.write


#: the files RankingDataset.save writes (a folder holding only these, or nothing, may be replaced)
_SAVE_FILES = frozenset({"meta.json", "X.npy", "X_data.npy", "X_indices.npy", "X_indptr.npy", "labels.npy",
                         "query_offsets.npy", "query_ids.npy", "doc_ids.npy"})


def _check_replaceable(path: Path) -> None:
    """Refuse to replace a folder that holds anything but a save's files (the user's own files)."""
    from rankwise._io import is_temp_name

    if path.is_symlink() or not path.is_dir():
        raise InputError(f"cannot save to {path}: it is a file, not a folder; give a folder name")
    try:
        foreign = sorted(e.name for e in os.scandir(path) if not (e.is_file(follow_symlinks=False)
                                                                  and (e.name in _SAVE_FILES or is_temp_name(e.name))))
    except OSError:
        return  # unreadable: the swap reports what is wrong
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise InputError(f"cannot save to {path}: the folder holds files that are not a saved RankingDataset "
                         f"({shown}); saving replaces the whole folder, so give a new or empty folder")


def concat(datasets) -> RankingDataset:
    """Stack data sets; see :meth:`RankingDataset.concat`."""
    return RankingDataset.concat(datasets)
