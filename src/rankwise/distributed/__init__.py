"""rankwise past one machine: Dask collections of whole queries, and PyTorch DDP training.

Everything here runs on an existing distributed engine — Dask (``dask.distributed``) for
reading, evaluation, gradient boosting (XGBoost's and LightGBM's own collectives) and scoring, and
PyTorch ``DistributedDataParallel`` (gloo, CPU) for data-parallel linear and neural training.
The invariant every function keeps: **a query is never split across partitions** (or ranks),
so per-query quantities — metrics, listwise gradients — are the single-machine ones.

The Dask functions need the optional extra ``pip install rankwise[dask]``: each imports Dask
when called, and says what to install when it is missing. The DDP functions (``fit_ddp``,
``fit_shard``, ``python -m rankwise.distributed.ddp``) need PyTorch only. ``import rankwise``
does not import this package, and importing it imports neither Dask nor PyTorch.
"""
from __future__ import annotations

from rankwise.distributed.evaluate import evaluate
from rankwise.distributed.gbdt import fit_gbdt
from rankwise.distributed.partition import (
    check_whole_queries,
    from_dataset,
    from_pandas,
    read_parquet,
    read_svmlight,
    to_dataset,
    whole_queries,
)
from rankwise.distributed.predict import predict

__all__ = [
    "from_pandas", "from_dataset", "read_svmlight", "read_parquet", "whole_queries",
    "check_whole_queries", "to_dataset", "evaluate", "fit_gbdt", "fit_ddp", "fit_shard", "predict",
]

# The DDP functions are imported on first use, not here: ``python -m rankwise.distributed.ddp``
# (the torchrun script) would otherwise find its module already imported by this package and
# run a second copy of it (runpy's RuntimeWarning).
_LAZY = {"fit_ddp": "rankwise.distributed.ddp", "fit_shard": "rankwise.distributed.ddp"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rankwise.distributed' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
