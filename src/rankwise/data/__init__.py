"""rankwise.data: query-grouped data sets, their file formats, real and synthetic data.

Free to import: each public name's module is imported on its first use (numpy, scipy and its compiled kernel with it);
pandas/pyarrow only inside the functions that use them; never torch, lightgbm or xgboost.
"""
from __future__ import annotations

import importlib

# Public name -> the module that defines it; each module is imported on first use (PEP 562), so that
# ``rankwise.metrics``, which needs only ``groups``, does not pay for the readers, scipy or the fetchers.
_LAZY = {
    **dict.fromkeys(("PaddedBatch", "Query", "RankingDataset", "concat"), "dataset"),
    **dict.fromkeys(("CLICK_LOG_FORMATS", "ClickCounts", "ClickLog", "read_click_log"), "clicklog"),
    "from_events": "events",
    **dict.fromkeys(("FEATURE_LOG_FORMATS", "FeatureLog", "JoinReport", "join_judgments", "read_feature_log",
                     "write_feature_log"), "feature_logs"),
    **dict.fromkeys(("DATASETS", "fetch"), "fetchers"),
    **dict.fromkeys(("from_pandas", "read_parquet", "to_pandas", "write_parquet"), "frames"),
    **dict.fromkeys(("fuse", "fuse_scores"), "fusion"),
    **dict.fromkeys(("Grouping", "group_by_qid", "offsets_from_sizes", "padded_index"), "groups"),
    "load_movielens_100k": "movielens",
    **dict.fromkeys(("read_group_file", "read_svmlight", "write_svmlight"), "svmlight"),
    **dict.fromkeys(("SyntheticTruth", "make_synthetic"), "synthetic"),
    **dict.fromkeys(("Qrels", "Run", "read_trec_qrels", "read_trec_run", "write_trec_qrels", "write_trec_run"), "trec"),
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rankwise.data' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rankwise.data.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "RankingDataset", "Query", "PaddedBatch", "concat",
    "read_svmlight", "write_svmlight", "read_group_file",
    "read_trec_qrels", "write_trec_qrels", "read_trec_run", "write_trec_run", "Qrels", "Run",
    "fuse", "fuse_scores",
    "from_pandas", "to_pandas", "read_parquet", "write_parquet",
    "fetch", "DATASETS", "load_movielens_100k", "from_events",
    "ClickLog", "ClickCounts", "read_click_log", "CLICK_LOG_FORMATS",
    "make_synthetic", "SyntheticTruth",
    "Grouping", "group_by_qid", "offsets_from_sizes", "padded_index",
    "read_feature_log", "join_judgments", "write_feature_log", "FeatureLog", "JoinReport", "FEATURE_LOG_FORMATS",
]
