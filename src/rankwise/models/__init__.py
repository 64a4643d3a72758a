"""Rankers: scorers ``f: X -> scores`` with the scikit-learn estimator contract.

Heavy libraries (torch, lightgbm, xgboost) are imported inside the model modules' methods only.
"""
from rankwise.models.base import BaseRanker
from rankwise.models.persistence import load
from rankwise.models.linear import LinearRanker
from rankwise.models.neural import NeuralRanker
from rankwise.models.gbdt import GBDTRanker

from rankwise.models.reduction import PairwiseReductionRanker
from rankwise.models.structured import StructuredHingeRanker
from rankwise.models.baselines import FeatureRanker, ItemMeanRanker, PopularityRanker

__all__ = [
    "BaseRanker", "load",
    "LinearRanker", "NeuralRanker", "GBDTRanker", "PairwiseReductionRanker", "StructuredHingeRanker",
    "FeatureRanker", "ItemMeanRanker", "PopularityRanker",
]
