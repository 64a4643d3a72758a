"""Validation at the public boundary: arrays in, clear messages out (never a numpy traceback).

The bottom layer with :mod:`rankwise.errors`: every package may import it, and it imports
nothing from rankwise but the errors. Checks that need the query grouping live one layer up, in
:mod:`rankwise.data.ranking_input`.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from rankwise.errors import InputError


def check_features(X, *, name: str = "X", allow_nan: bool = False):
    """Dense float32 2-d array or scipy CSR (float32); never densifies a sparse matrix."""
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float32) if X.format != "csr" or X.dtype != np.float32 else X
        data = X.data
    else:
        try:
            X = np.asarray(X, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{name} must be a numeric 2-d array or scipy sparse matrix; {exc}") from None
        if X.ndim != 2:
            raise InputError(f"{name} must be 2-d (n_rows, n_features); got shape {X.shape}")
        data = X
    if not allow_nan:
        bad = ~np.isfinite(data)
        if bad.any():
            kind = "NaN" if np.isnan(data[bad]).any() else "inf"
            raise InputError(f"{name} contains {kind} values ({int(bad.sum())} entries); "
                             "impute or drop them first")
    return X


def check_vector(v, n: int, *, name: str, dtype=np.float64, allow_nan: bool = False) -> np.ndarray:
    """A 1-d finite vector of length ``n``."""
    try:
        arr = np.asarray(v, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be numeric; {exc}") from None
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-d; got shape {arr.shape}")
    if len(arr) != n:
        raise InputError(f"{name} has {len(arr)} entries but X has {n} rows; they must match")
    if not allow_nan and arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise InputError(f"{name} contains NaN or inf")
    return arr


K_MAX = 2**63 - 1  # the metric kernels index in int64; any k beyond a list's length cuts nothing


def check_k(k, name: str = "k", *, allow_none: bool = True, whole: int | None = 0) -> int | None:
    """The one check of a cut-off ``k`` (metrics, losses, structured hinges, GPPMs).

    ``k=None`` means the whole list and returns ``whole`` (``0`` by default, the metric kernels'
    "no cut-off"; callers that need the list length pass it); with ``allow_none=False`` a ``k``
    is required. Otherwise ``k`` is an integer in ``[1, 2**63 - 1]``, returned as a Python int.
    A ``k`` larger than a list is fine and cuts nothing from it.
    """
    if k is None:
        if not allow_none:
            raise InputError(f"{name} must be a positive integer; got None")
        return whole
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        tail = " or None (whole list)" if allow_none else ""
        raise InputError(f"{name} must be a positive integer{tail}; got {k!r}")
    if k < 1:
        if not allow_none:
            raise InputError(f"{name} must be a positive integer; got {k}")
        raise InputError(f"{name} must be >= 1 (or None for the whole list); got {k}")
    if k > K_MAX:
        raise InputError(f"{name} must be at most 2**63 - 1 (any value above a list's length keeps the whole "
                         f"list); got {k}")
    return int(k)


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """An integer hyper-parameter ``>= minimum`` (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_nonneg_float(value, name: str, *, positive: bool = False) -> float:
    """A finite non-negative (or, with ``positive=True``, positive) real hyper-parameter."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number; got {value!r}") from None
    if not np.isfinite(v) or v < 0 or (positive and v == 0):
        raise InputError(f"{name} must be a finite {'positive' if positive else 'non-negative'} number; got {value!r}")
    return v


def fit_seed(random_state) -> int:
    """The integer seed of one ``fit``: ``random_state`` itself, or a fresh one for ``None``."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state)
    raise InputError(f"random_state must be an int or None; got {random_state!r}")
