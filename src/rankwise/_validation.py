"""Validation at the public boundary: arrays in, clear messages out (never a numpy traceback).

The bottom layer with :mod:`rankwise.errors`: every package may import it, and it imports
nothing from rankwise but the errors. Checks that need the query grouping live one layer up, in
:mod:`rankwise.data.ranking_input`.

Also the one place where model hyper-parameters are checked: every model declares
``_parameter_constraints`` (as scikit-learn's estimators do) and :func:`check_params` validates
them with one message format, ``Model: name must be <what>; got <value>``.
"""
from __future__ import annotations

import contextlib
import contextvars
import numbers
import os
import sys
import warnings

import numpy as np

from rankwise.errors import InputError


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category=UserWarning) -> None:
    """``warnings.warn`` pointing at the first frame outside rankwise: the user's own line."""
    frame, level = sys._getframe(0), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


# ---------------------------------------------------------------------------------------------
# parameter constraints (declared per model, checked here)


class Interval:
    """Numbers of one kind (``"int"`` or ``"real"``) in an interval; ``None`` bounds are open ends.

    ``closed`` is ``"both"``, ``"left"``, ``"right"`` or ``"neither"`` (for the finite bounds).
    Booleans are never numbers here, and reals must be finite.
    """

    def __init__(self, kind: str, left=None, right=None, *, closed: str = "both"):
        if kind not in ("int", "real") or closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"bad Interval({kind!r}, closed={closed!r})")
        self.kind, self.left, self.right, self.closed = kind, left, right, closed

    def accepts(self, v) -> bool:
        if isinstance(v, (bool, np.bool_)):
            return False
        if self.kind == "int":
            if not isinstance(v, numbers.Integral):
                return False
        else:
            if not isinstance(v, numbers.Real) or not np.isfinite(float(v)):
                return False
        lo_ok = self.left is None or (v >= self.left if self.closed in ("both", "left") else v > self.left)
        hi_ok = self.right is None or (v <= self.right if self.closed in ("both", "right") else v < self.right)
        return bool(lo_ok and hi_ok)

    def describe(self) -> str:
        what = "an integer" if self.kind == "int" else "a finite number"
        if self.left is not None and self.right is None:
            op = ">=" if self.closed in ("both", "left") else ">"
            return f"{what} {op} {self.left:g}" if self.kind == "real" else f"{what} {op} {self.left}"
        if self.left is None and self.right is not None:
            op = "<=" if self.closed in ("both", "right") else "<"
            return f"{what} {op} {self.right}"
        if self.left is None:
            return what
        lb = "[" if self.closed in ("both", "left") else "("
        rb = "]" if self.closed in ("both", "right") else ")"
        return f"{what} in {lb}{self.left}, {self.right}{rb}"


class Options:
    """One of a fixed set of values (compared with ``==``; strings, None, numbers)."""

    def __init__(self, *values):
        self.values = tuple(values)

    def accepts(self, v) -> bool:
        try:
            return any(v == o and type(v) is type(o) for o in self.values if not isinstance(v, np.ndarray))
        except Exception:  # noqa: BLE001 - an odd object that cannot be compared is not an option
            return False

    def describe(self) -> str:
        return f"one of {self.values!r}" if len(self.values) > 1 else repr(self.values[0])


def _is_random_state(v) -> bool:
    if v is None or isinstance(v, (np.random.Generator, np.random.RandomState)):
        return True
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) and 0 <= int(v) < 2**63


_NAMED = {
    "boolean": (lambda v: isinstance(v, (bool, np.bool_)), "a bool"),
    "callable": (callable, "a callable"),
    "dict": (lambda v: isinstance(v, dict), "a dict"),
    "string": (lambda v: isinstance(v, str), "a string"),
    "random_state": (_is_random_state, "an int >= 0, a numpy Generator/RandomState or None"),
    "n_jobs": (lambda v: v is None or (isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))
                                       and int(v) != 0), "None or a non-zero integer (-1: all cores)"),
}


def _describe(c) -> str:
    if c is None:
        return "None"
    if isinstance(c, str):
        return _NAMED[c][1]
    return c.describe()


def _accepts(c, v) -> bool:
    if c is None:
        return v is None
    if isinstance(c, str):
        return bool(_NAMED[c][0](v))
    return c.accepts(v)


def check_params(owner: str, params: dict, constraints: dict) -> None:
    """Check every declared parameter against its constraints (a list: any one may match).

    Raises :class:`~rankwise.errors.InputError` ``"owner: name must be A or B; got value"``
    for the first parameter that satisfies none.
    """
    for name, allowed in constraints.items():
        if name not in params:
            continue
        v = params[name]
        if not any(_accepts(c, v) for c in allowed):
            what = " or ".join(_describe(c) for c in allowed)
            raise InputError(f"{owner}: {name} must be {what}; got {v!r}")


def set_deprecated(obj, name: str, value, renames: dict) -> None:
    """Set a constructor argument given under a deprecated ``name`` on ``obj``, with a DeprecationWarning.

    ``renames``: old name -> new name, or (new name, function old value -> new value). A name not
    in it is the TypeError Python raises for an unknown keyword argument.
    """
    owner = type(obj).__name__
    if name not in renames:
        raise TypeError(f"{owner}.__init__() got an unexpected keyword argument {name!r}")
    new = renames[name]
    new, convert = (new, None) if isinstance(new, str) else new
    warn_user(f"{owner}: the parameter {name!r} is deprecated and will be removed in the next "
              f"release; use {new!r}" + (" (alpha = 1/C)" if name == "C" else ""), DeprecationWarning)
    setattr(obj, new, value if convert is None else convert(value))


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (for arguments of methods; constructor parameters use check_params)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _cgroup_cpu_limit(root: str = "/sys/fs/cgroup") -> float | None:
    """The CPU quota of this process's cgroup in CPUs (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` /
    ``cpu.cfs_period_us``), or None when there is none or it cannot be read."""
    try:
        with open(os.path.join(root, "cpu.max"), encoding="ascii") as fh:
            quota, period = fh.read().split()[:2]
        return None if quota == "max" else float(quota) / float(period)
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(root, "cpu", "cpu.cfs_quota_us"), encoding="ascii") as fh:
            quota = float(fh.read())
        with open(os.path.join(root, "cpu", "cpu.cfs_period_us"), encoding="ascii") as fh:
            period = float(fh.read())
        return None if quota <= 0 or period <= 0 else quota / period
    except (OSError, ValueError):
        return None


_QUOTA_READ: dict = {}


def _cgroup_quota() -> float | None:
    """:func:`_cgroup_cpu_limit`, read once per process (a container's quota does not change while it
    runs, and the kernels ask for their thread count on every call: the read costs ~0.1 ms)."""
    reader = _cgroup_cpu_limit  # keyed by the reader, so a replaced one (tests) is read afresh
    if reader not in _QUOTA_READ:
        _QUOTA_READ.clear()
        _QUOTA_READ[reader] = reader()
    return _QUOTA_READ[reader]


def available_cpus() -> int:
    """The CPUs this process may actually use: its affinity mask (``os.sched_getaffinity``, what
    ``taskset`` and container CPU sets restrict), capped by the cgroup CPU quota (``docker --cpus``,
    Kubernetes limits), rounded down, at least 1. ``os.cpu_count()`` (the machine's cores, what
    OpenMP libraries such as LightGBM use by default) ignores both."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _cgroup_quota()
    if quota is not None:
        n = min(n, max(1, int(quota)))
    return max(1, n)


def n_jobs_threads(n_jobs) -> int | None:
    """Threads for ``n_jobs`` (scikit-learn's convention, counted on :func:`available_cpus`: -1 all of
    them, -2 all but one; None: leave as is)."""
    if n_jobs is None:
        return None
    return int(n_jobs) if n_jobs > 0 else max(1, available_cpus() + 1 + int(n_jobs))


#: the thread limit of :func:`limit_threads` in force (None: no limit), read by the compiled loss engine
_THREAD_LIMIT = contextvars.ContextVar("rankwise_thread_limit", default=None)


def thread_limit() -> int | None:
    """The limit set by the innermost :func:`limit_threads` (None outside one)."""
    return _THREAD_LIMIT.get()


def kernel_threads(n_jobs=None) -> int:
    """Threads for rankwise's compiled kernels (they release the GIL; Python threads run them on
    ranges of queries): ``n_jobs`` if given (-1: every CPU), else the limit of the enclosing
    :func:`limit_threads` (a model's ``n_jobs``), else ``RANKWISE_NUM_THREADS`` when set, else every CPU
    this process may use (:func:`available_cpus`)."""
    if n_jobs is None:
        n_jobs = thread_limit()
    if n_jobs is None:
        env = os.environ.get("RANKWISE_NUM_THREADS", "").strip()
        if env:
            try:
                n_jobs = int(env)
            except ValueError:
                raise InputError(f"RANKWISE_NUM_THREADS must be a whole number of threads; got {env!r}") from None
    if n_jobs is None or n_jobs == -1:
        return available_cpus()
    return max(1, int(n_jobs))


def equal_work_bounds(cum_work, n_chunks: int) -> np.ndarray:
    """Boundaries ``b`` splitting items whose cumulative work is ``cum_work`` (non-decreasing, one entry per
    item) into about ``n_chunks`` ranges of equal work: range ``i`` holds items ``b[i]:b[i+1]``. How the
    kernels share a call's queries (or lists) between :func:`kernel_threads` threads."""
    n = len(cum_work)
    cuts = np.searchsorted(cum_work, cum_work[-1] * np.arange(1, n_chunks) / n_chunks)
    return np.unique(np.r_[0, np.clip(cuts, 0, n), n])


@contextlib.contextmanager
def torch_single_thread():
    """Run torch on one intra-op thread inside the block (restored after): for work too small for torch's
    threads to pay (the theory code's tiny tensors, the linear scorer's matrix-vector products), where the
    threads' synchronisation and their spinning after each parallel region only take cores from other work."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def limit_threads(n_jobs):
    """Run the block on ``n_jobs`` threads (:func:`n_jobs_threads`; None: change nothing) in every pool
    rankwise drives: torch's intra-op threads (when torch is loaded), the BLAS/OpenMP pools threadpoolctl controls (OpenBLAS,
    MKL, the OpenMP runtime of LightGBM and XGBoost when loaded) and the threads of rankwise's compiled
    kernels (:func:`thread_limit`, read by :func:`kernel_threads`); restored after. LightGBM's ``num_threads`` and
    XGBoost's ``nthread`` are set by GBDTRanker itself."""
    n = n_jobs_threads(n_jobs)
    if n is None:
        yield None
        return
    undo = []
    token = _THREAD_LIMIT.set(n)
    undo.append(lambda: _THREAD_LIMIT.reset(token))
    torch = sys.modules.get("torch")
    if torch is not None:
        # only a torch already loaded: importing it (seconds) for a block that never uses it -- a GBDT fit on the
        # compiled engine -- would cost more than the block. A block that loads torch itself sets its threads
        # (the torch rankers, GBDTRanker's torch path: one thread between rounds).
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        undo.append(lambda: torch.set_num_threads(before))
    try:
        from threadpoolctl import threadpool_limits

        limiter = threadpool_limits(limits=n)
        undo.append(limiter.restore_original_limits)
    except ImportError:  # pragma: no cover - scikit-learn depends on threadpoolctl
        pass
    try:
        yield n
    finally:
        for step in reversed(undo):
            step()


# ---------------------------------------------------------------------------------------------
# arrays


class InputTypeError(InputError, TypeError):
    """An array of the wrong kind (not numbers): an InputError that is also a TypeError, as numpy's."""


def issparse(X) -> bool:
    """``scipy.sparse.issparse(X)`` without importing scipy: no sparse matrix exists before scipy.sparse is
    imported, so until then the answer is False (``import rankwise.metrics`` stays free of scipy)."""
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.issparse(X)


def feature_names_of(X):
    """Column names of a DataFrame whose column names are all strings, else None (scikit-learn's rule)."""
    cols = getattr(X, "columns", None)
    if cols is None or issparse(X) or hasattr(X, "query_offsets"):
        return None
    names = np.asarray([c for c in cols], dtype=object)
    if len(names) and all(isinstance(c, str) for c in names):
        return names
    return None


def check_features(X, *, name: str = "X", allow_nan: bool = False, min_features: int = 0):
    """Dense float32 2-d array or scipy CSR (float32); never densifies a sparse matrix.

    Complex values are refused (casting would drop the imaginary part silently); with
    ``min_features`` a matrix with fewer columns is refused. Finite values beyond float32's
    range (which the cast would turn into inf) are refused as such.
    """
    X0 = X
    if issparse(X):
        import scipy.sparse as sp

        if np.iscomplexobj(X.data if hasattr(X, "data") else X):
            raise InputError(f"{name} has complex values (dtype {X.dtype}): Complex data not supported; ranking "
                             "features must be real numbers")
        with np.errstate(over="ignore"):  # values beyond float32 are reported below, by name
            X = sp.csr_matrix(X, dtype=np.float32) if X.format != "csr" or X.dtype != np.float32 else X
        data = X.data
    else:
        if np.iscomplexobj(X) if not hasattr(X, "dtypes") else any(np.iscomplexobj(np.empty(0, d)) for d in X.dtypes):
            raise InputError(f"{name} has complex values: Complex data not supported; ranking features must be real "
                             "numbers")
        try:
            with warnings.catch_warnings(), np.errstate(over="ignore"):
                warnings.simplefilter("error", np.exceptions.ComplexWarning)
                X = np.asarray(X, dtype=np.float32)
        except (TypeError, ValueError, np.exceptions.ComplexWarning) as exc:
            if isinstance(exc, np.exceptions.ComplexWarning):
                raise InputError(f"{name} has complex values: Complex data not supported; ranking features must be "
                                 "real numbers") from None
            raise InputTypeError(f"{name} must be a numeric 2-d array or scipy sparse matrix; {exc}") from None
        if X.ndim != 2:
            raise InputError(f"{name} must be 2-d (n_rows, n_features); got shape {X.shape}"
                             + ("; Reshape your data: X.reshape(-1, 1) if it holds one feature, X.reshape(1, -1) "
                                "if it holds one row" if X.ndim == 1 else ""))
        data = X
    if X.shape[1] < min_features:
        raise InputError(f"{name} has {X.shape[1]} feature(s) (shape={X.shape}) while a minimum of {min_features} is "
                         "required: a ranker needs at least one feature column")
    if not allow_nan and not _all_finite(data):
        bad = ~np.isfinite(data)
        if bad.any():
            if not np.isnan(data[bad]).any() and _finite_before_cast(X0, bad):
                raise InputError(f"{name} has {int(bad.sum())} finite value(s) beyond float32's range (|x| <= "
                                 f"{float(np.finfo(np.float32).max):.4g}); rankwise keeps features as float32: "
                                 "rescale them (e.g. log1p) first")
            kind = "NaN" if np.isnan(data[bad]).any() else "inf"
            raise InputError(f"{name} contains {kind} values ({int(bad.sum())} entries); "
                             "impute or drop them first")
    return X


def _all_finite(a: np.ndarray) -> bool:
    """Whether every entry of the float array ``a`` is finite: its minimum and maximum are (a NaN makes both
    NaN, an inf one of them), two passes without the temporary arrays of ``np.isfinite(a)`` (on a large
    fresh array their page faults cost several times the passes themselves)."""
    return a.size == 0 or bool(np.isfinite(a.min()) and np.isfinite(a.max()))


def _finite_before_cast(X0, bad) -> bool:
    """Whether the entries that are inf after the float32 cast were all finite in the caller's array."""
    try:
        orig = X0.tocsr().data if issparse(X0) else np.asarray(X0)
        orig = np.asarray(orig, dtype=np.float64)
        return orig.shape == bad.shape and bool(np.all(np.isfinite(orig[bad])))
    except (TypeError, ValueError):
        return False


def check_vector(v, n: int, *, name: str, dtype=np.float64, allow_nan: bool = False) -> np.ndarray:
    """A 1-d finite vector of length ``n``."""
    if np.iscomplexobj(v):
        raise InputError(f"{name} has complex values; it must be real")
    try:
        arr = np.asarray(v, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be numeric; {exc}") from None
    if arr.ndim == 2 and arr.shape[1] == 1 and len(arr) == n:
        raise InputError(f"{name} must be 1-d; got shape {arr.shape} (a column): pass {name}.ravel()")
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-d; got shape {arr.shape}")
    if len(arr) != n:
        raise InputError(f"{name} has {len(arr)} entries but X has {n} rows; they must match")
    if not allow_nan and arr.dtype.kind == "f" and not _all_finite(arr):
        raise InputError(f"{name} contains NaN or inf")
    return arr


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


def fit_seed(random_state) -> int:
    """The integer seed of one ``fit``: ``random_state`` itself, or a fresh one for ``None``."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state)
    raise InputError(f"random_state must be an int or None; got {random_state!r}")
