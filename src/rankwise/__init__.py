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


#: Saveable classes defined above the models layer, by class name -> the module that defines (and registers) them:
#: :func:`rankwise.models.load` imports it the first time a file names the class (a fixed table here, in the
#: package root that may name every subpackage; the file never names the module to import).
SAVED_ELSEWHERE = {
    **dict.fromkeys(("RandTop", "RandPair", "RegressionEM", "InterventionHarvesting"), "rankwise.clicks.propensity"),
    **dict.fromkeys(("GCTR", "RCTR", "DCTR", "PBM", "CM", "UBM", "DCM", "CCM", "DBN", "SDBN"),
                    "rankwise.clicks.models"),
    "UnbiasedLambdaMART": "rankwise.clicks.joint", "DLA": "rankwise.clicks.dla",
}


# Subpackages reachable as attributes (``rankwise.models``) without importing them first; each
# is imported on first access only, so ``import rankwise`` stays light.
_SUBPACKAGES = ("cli", "clicks", "data", "distributed", "export", "losses", "metrics", "models", "report",
                "theory", "train")

#: the public names: the lazy API names and the subpackages (``from rankwise import *`` imports them all)
__all__ = [*_LAZY, *_SUBPACKAGES]


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"rankwise.{name}")  # the import binds it in this namespace
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rankwise' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))
