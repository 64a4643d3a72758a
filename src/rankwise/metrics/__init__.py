"""Ranking metrics with every convention explicit, exact under tied scores (numpy and compiled kernels, no torch).

Every measure has one signature::

    ndcg(scores, labels, *, qid=None, where=None, k=None, gain="exp2", ties="average",
         empty=0.0, reduction="mean")

Flat arrays with ``qid`` or padded ``[n_queries, list]`` arrays with a boolean ``where``;
``reduction="none"`` gives one value per query in order of first appearance.
Strings like ``"ndcg@10"`` (or trec_eval's ``"ndcg_cut_10"``) resolve through :func:`get_metric`;
:func:`evaluate` computes several at once, optionally under a peer tool's *profile* (see
:data:`PROFILES`). :func:`evaluate_runs` evaluates TREC runs against qrels (:class:`Qrels`,
:class:`Run`, files or dicts) with trec_eval's semantics and measures. :func:`register` adds a
measure of one's own, read by name everywhere a built-in one is.
"""
from __future__ import annotations

from rankwise.metrics.binary import auc, average_precision, map, precision, recall
from rankwise.metrics.cascade import err, mrr, reciprocal_rank
from rankwise.metrics.correlation import kendall_tau, pairwise_accuracy, pairwise_cost, spearman
from rankwise.metrics.graded import dcg, ndcg
from rankwise.metrics.evaluate import EvaluationResult, evaluate
from rankwise.metrics.profiles import PROFILES, get_profile
from rankwise.metrics.registry import Metric, available_metrics, get_metric, register, unregister
from rankwise.metrics.trec import GROUPS, PreparedQrels, evaluate_runs, format_trec_eval
from rankwise.data.trec import Qrels, Run

__all__ = [
    "dcg", "ndcg", "err", "average_precision", "map", "precision", "recall", "reciprocal_rank", "mrr",
    "auc", "kendall_tau", "spearman", "pairwise_accuracy", "pairwise_cost",
    "evaluate", "EvaluationResult", "PROFILES", "get_profile", "get_metric", "available_metrics", "Metric",
    "register", "unregister",
    "evaluate_runs", "format_trec_eval", "GROUPS", "PreparedQrels", "Qrels", "Run",
]
