"""pandas DataFrames and Parquet files with a query-id column.

A frame holds one row per document: a query-id column, a label column, optional doc-id column,
and feature columns (by default every other numeric column).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from rankwise.data.dataset import RankingDataset
from rankwise.errors import InputError

__all__ = ["from_pandas", "to_pandas", "read_parquet", "write_parquet"]


def from_pandas(frame, *, qid: str = "qid", label: str = "label", features=None, doc_id: str | None = None,
                strict: bool = False) -> RankingDataset:
    """Build a :class:`RankingDataset` from a DataFrame with a query-id column.

    Parameters
    ----------
    frame : pandas.DataFrame
    qid, label : str
        Column names of the query id and the relevance label.
    features : list of str, optional
        Feature columns in order; default: every numeric column other than ``qid``, ``label``
        and ``doc_id``, in frame order. If any of them is a pandas sparse column (as
        :func:`to_pandas` makes from a CSR ``X``), ``X`` is built as CSR, never densified.
    doc_id : str, optional
        Column of document ids; when None, a column named ``doc_id`` is used if present.
    strict : bool
        Reject non-contiguous queries instead of regrouping them (see ``RankingDataset.from_arrays``).
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"frame must be a pandas DataFrame; got {type(frame).__name__}")
    cols = list(frame.columns)
    for role, name in (("qid", qid), ("label", label)):
        if name not in frame.columns:
            raise InputError(f"{role}={name!r} is not a column of the frame; columns are {cols[:10]}")
    if doc_id is None and "doc_id" in frame.columns:
        doc_id = "doc_id"
    if doc_id is not None and doc_id not in frame.columns:
        raise InputError(f"doc_id={doc_id!r} is not a column of the frame; columns are {cols[:10]}")
    reserved = {qid, label, doc_id}
    if features is None:
        features = [c for c in cols if c not in reserved and pd.api.types.is_numeric_dtype(frame[c])]
        if not features:
            raise InputError("the frame has no numeric feature columns besides qid/label; pass features=[...]")
    else:
        features = list(features)
        missing = [f for f in features if f not in frame.columns]
        if missing:
            raise InputError(f"feature columns {missing[:5]} are not in the frame")
        bad = [f for f in features if not pd.api.types.is_numeric_dtype(frame[f])]
        if bad:
            raise InputError(f"feature columns must be numeric; {bad[:5]} are not")
    lab = frame[label]
    if lab.isna().any():
        raise InputError(f"label column {label!r} has {int(lab.isna().sum())} missing values; every row needs a label")
    if not pd.api.types.is_numeric_dtype(lab) or pd.api.types.is_bool_dtype(lab):
        bad = next((v for v in lab.tolist() if not isinstance(v, (int, float, np.integer, np.floating))
                    or isinstance(v, bool)), lab.iloc[0])
        raise InputError(f"label column {label!r} must hold numbers (relevance grades); got e.g. {bad!r}")
    q = frame[qid]
    if q.isna().any():
        raise InputError(f"qid column {qid!r} has missing values; every row needs a query id")
    if any(isinstance(frame[f].dtype, pd.SparseDtype) for f in features):
        X = _sparse_features(frame, features)  # pandas sparse columns become CSR, never dense
    else:
        with np.errstate(over="ignore"):
            X = frame[features].to_numpy(dtype=np.float32, na_value=np.nan)
        if np.isinf(X).any():
            r, c = (int(i[0]) for i in np.nonzero(np.isinf(X)))
            raise InputError(f"feature column {features[c]!r} has {frame[features[c]].iloc[r]!r} at row {r}: infinite "
                             "or beyond the float32 range; features must be finite (NaN for missing)")
    docs = None if doc_id is None else frame[doc_id].astype(str).to_numpy()
    return RankingDataset.from_arrays(X, lab.to_numpy(dtype=np.float64), q.to_numpy(), strict=strict,
                                      doc_ids=docs, feature_names=[str(f) for f in features], _stacklevel=3)


def _sparse_features(frame, features) -> sp.csr_matrix:
    """CSR float32 from feature columns of which some are pandas sparse.

    A sparse column whose fill value is 0 gives its stored entries; any other column (dense, or
    sparse with a non-zero fill such as NaN, which stands for missing values) gives its
    non-zero entries, NaN included, as explicit entries.
    """
    import pandas as pd

    rows, cols, vals = [], [], []
    for j, f in enumerate(features):
        col = frame[f]
        if isinstance(col.dtype, pd.SparseDtype) and col.dtype.fill_value == 0:
            arr = col.array
            idx = np.asarray(arr.sp_index.indices, dtype=np.int64)
            v = np.asarray(arr.sp_values, dtype=np.float64)
        else:
            dense = col.sparse.to_dense() if isinstance(col.dtype, pd.SparseDtype) else col
            d = dense.to_numpy(dtype=np.float64, na_value=np.nan)
            idx = np.flatnonzero(d != 0)  # NaN != 0: missing values stay, as explicit NaN
            v = d[idx]
        rows.append(idx)
        cols.append(np.full(len(idx), j, dtype=np.int64))
        vals.append(v)
    data = np.concatenate(vals).astype(np.float32)
    return sp.csr_matrix((data, (np.concatenate(rows), np.concatenate(cols))), shape=(len(frame), len(features)))


def to_pandas(dataset: RankingDataset, *, qid: str = "qid", label: str = "label", doc_id: str = "doc_id"):
    """DataFrame with columns ``qid``, ``label``, (``doc_id``), then one column per feature
    (see :meth:`RankingDataset.to_pandas`)."""
    if not isinstance(dataset, RankingDataset):
        raise InputError(f"to_pandas takes a RankingDataset; got {type(dataset).__name__}")
    return dataset.to_pandas(qid=qid, label=label, doc_id=doc_id)


def write_parquet(dataset: RankingDataset, path, **kwargs) -> None:
    """Write :func:`to_pandas` of the data set to Parquet (dense columns)."""
    frame = to_pandas(dataset, **kwargs)
    for c in frame.columns:
        if isinstance(frame[c].dtype, __import__("pandas").SparseDtype):
            frame[c] = frame[c].sparse.to_dense()  # Parquet has no sparse columns
    from rankwise._io import atomic_write

    with atomic_write(path) as fh:  # the old file or the whole new one, never a torn Parquet file
        frame.to_parquet(fh, index=False)


def read_parquet(path, *, qid: str = "qid", label: str = "label", features=None, doc_id: str | None = None,
                 strict: bool = False) -> RankingDataset:
    """Read a Parquet file with a query-id column (see :func:`from_pandas`)."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise InputError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
    return from_pandas(frame, qid=qid, label=label, features=features, doc_id=doc_id, strict=strict)
