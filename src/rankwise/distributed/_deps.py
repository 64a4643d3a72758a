"""Optional-dependency guard: ``rankwise.distributed`` needs Dask (``pip install rankwise[dask]``)."""
from __future__ import annotations

INSTALL_HINT = "pip install rankwise[dask]"


def require_dask():
    """Import and return ``(dask, dask.dataframe)``; a clear ImportError when they are missing."""
    try:
        import dask
        import dask.dataframe as dd
    except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
        raise ImportError(
            f"rankwise.distributed needs Dask (dask[dataframe] and distributed), which is not installed "
            f"({exc}); install the optional extra with: {INSTALL_HINT}") from exc
    return dask, dd


def require_distributed():
    """Import and return ``distributed``; a clear ImportError when it is missing."""
    try:
        import distributed
    except ImportError as exc:  # pragma: no cover
        raise ImportError(
            f"rankwise.distributed needs dask.distributed ({exc}); install the optional extra with: "
            f"{INSTALL_HINT}") from exc
    return distributed
