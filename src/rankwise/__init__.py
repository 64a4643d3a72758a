"""rankwise: learning to rank — surrogate losses, models, exact metrics and the theory linking them.

Heavy dependencies (torch, lightgbm, xgboost) are imported only when a model or loss is used:
``import rankwise``, ``rankwise.data`` and ``rankwise.metrics`` stay light.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# Public names resolved lazily: name -> module that defines it.
_LAZY = {
    "RankingDataset": "rankwise.data",
    "LinearRanker": "rankwise.models",
    "NeuralRanker": "rankwise.models",
    "GBDTRanker": "rankwise.models",
    "PairwiseReductionRanker": "rankwise.models",
    "StructuredHingeRanker": "rankwise.models",
    "load": "rankwise.models",
    "evaluate": "rankwise.metrics",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rankwise' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
