"""rankwise.data: query-grouped data sets, their file formats, real and synthetic data.

Light to import: numpy, scipy and (lazily, when parsing) numba; pandas/pyarrow only inside
the functions that use them; never torch, lightgbm or xgboost.
"""
from __future__ import annotations

from rankwise.data.dataset import PaddedBatch, Query, RankingDataset, concat
from rankwise.data.events import from_events
from rankwise.data.feature_logs import (FEATURE_LOG_FORMATS, FeatureLog, JoinReport, join_judgments,
                                         read_feature_log, write_feature_log)
from rankwise.data.fetchers import DATASETS, fetch
from rankwise.data.frames import from_pandas, read_parquet, to_pandas, write_parquet
from rankwise.data.fusion import fuse, fuse_scores
from rankwise.data.groups import Grouping, group_by_qid, offsets_from_sizes, padded_index
from rankwise.data.movielens import load_movielens_100k
from rankwise.data.svmlight import read_group_file, read_svmlight, write_svmlight
from rankwise.data.synthetic import SyntheticTruth, make_synthetic
from rankwise.data.trec import Qrels, Run, read_trec_qrels, read_trec_run, write_trec_qrels, write_trec_run

__all__ = [
    "RankingDataset", "Query", "PaddedBatch", "concat",
    "read_svmlight", "write_svmlight", "read_group_file",
    "read_trec_qrels", "write_trec_qrels", "read_trec_run", "write_trec_run", "Qrels", "Run",
    "fuse", "fuse_scores",
    "from_pandas", "to_pandas", "read_parquet", "write_parquet",
    "fetch", "DATASETS", "load_movielens_100k", "from_events",
    "make_synthetic", "SyntheticTruth",
    "Grouping", "group_by_qid", "offsets_from_sizes", "padded_index",
    "read_feature_log", "join_judgments", "write_feature_log", "FeatureLog", "JoinReport", "FEATURE_LOG_FORMATS",
]
