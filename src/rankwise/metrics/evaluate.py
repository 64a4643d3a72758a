"""Several metrics at once, under one set of conventions or a peer tool's profile."""
from __future__ import annotations

import warnings
import numpy as np

from rankwise.errors import InputError
from rankwise.metrics._prepare import TIES, check_choice, check_empty, check_k, flatten, prepare_flat, unrank
from rankwise.metrics._trec_measures import expand_groups
from rankwise.metrics.profiles import get_profile
from rankwise.metrics.registry import CONVENTIONS, get_metric

EVALUATE_CONVENTIONS = tuple(sorted(set(CONVENTIONS) - {"doc_ids"} | {"default_k", "score_precision"}))


class EvaluationResult:
    """Result of :func:`evaluate`.

    Attributes
    ----------
    mean : dict
        Metric spec -> mean over the (kept) queries.
    per_query : pandas.DataFrame
        One row per query (index: query id, order of first appearance), one column per metric;
        with ``empty="drop"`` the dropped queries hold ``<NA>``. Built on first access (pandas is
        imported then, not by an evaluation that only reads ``mean``).
    n_queries : int
        The number of rows ``per_query`` has, known without building it.
    conventions : dict
        The conventions in force (profile merged with explicit ones). When ERR was computed
        without ``max_grade``, it holds the value inferred from the labels (their maximum over
        the whole input).
    """

    __slots__ = ("mean", "conventions", "_per_query", "_build", "_n_queries")

    def __init__(self, mean: dict, per_query=None, conventions: dict | None = None, *, build=None,
                 n_queries: int | None = None):
        self.mean = mean
        self.conventions = {} if conventions is None else conventions
        self._per_query, self._build = per_query, build
        self._n_queries = len(per_query) if per_query is not None else n_queries

    @property
    def n_queries(self) -> int:
        """The number of queries evaluated, without building the per-query table (nor importing pandas)."""
        if self._n_queries is None:
            table = self.per_query
            return 0 if table is None else len(table)
        return self._n_queries

    @property
    def per_query(self):
        if self._per_query is None and self._build is not None:
            self._per_query, self._build = self._build(), None
        return self._per_query

    def __eq__(self, other):
        if not isinstance(other, EvaluationResult):
            return NotImplemented
        return (self.mean == other.mean and self.conventions == other.conventions
                and self.per_query.equals(other.per_query))

    __hash__ = None

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v:.4f}" for k, v in self.mean.items())
        return f"EvaluationResult({body}; {self._n_queries} queries)"


class _Unset:
    def __repr__(self):
        return "<qid not given>"


_NO_QID = _Unset()


def evaluate(scores, labels, qid=_NO_QID, metrics=("ndcg@10", "err@10", "map"), profile=None, doc_ids=None,
             *, where=None, retrieved=None, **conventions) -> EvaluationResult:
    """Compute several metrics, each query once sorted, under shared conventions.

    Parameters
    ----------
    scores, labels, where
        As for :func:`rankwise.metrics.ndcg` (flat with ``qid`` or padded with ``where``).
    qid : array-like or None
        Query id per row of flat input. Leaving it out of a call on flat input with more than one
        row warns: every row would be one query, which is almost always a mistake (NDCG@10 of a
        whole test set as one list). Pass ``qid=None`` to say that the rows are one query on purpose.
    metrics : sequence of str
        Metric strings resolved by :func:`rankwise.metrics.get_metric` (``"ndcg@10"``, ``"map"``,
        ``"P@5"``, ``"err@10"``, ``"mrr"``, ``"auc"``, trec_eval names such as ``"P_5"``,
        ``"bpref"``, and the groups ``"all_trec"`` / ``"official"``). Results are keyed by the
        string as given (``"P@5"`` stays ``"P@5"``), or by ``name@k`` where ``default_k`` added the cutoff.
    profile : str, optional
        ``"trec_eval"``, ``"lightgbm"``, ``"xgboost"``, ``"sklearn"``, ``"ranx"`` or
        ``"letor"``: sets every convention to reproduce that tool (table in docs/metrics.md).
    doc_ids : array-like, optional
        Document id per row, for ``ties="docid"`` (the ``trec_eval`` profile needs them).
    retrieved : array-like of bool, optional
        False on judged documents that the run did not return (as trec_eval sees a run against
        its qrels): they never occupy a rank, but count in the ideal DCG of NDCG and in the
        number of relevant documents of recall and AP. AUC and the rank correlations are
        computed on the retrieved documents alone. None: every row is ranked.
    **conventions
        ``gain``, ``discount``, ``ties``, ``empty``, ``threshold``, ``ap_denominator``,
        ``short_list``, ``max_grade``, ``omega``, ``score_precision`` (``"float32"`` or
        ``"float64"``: how ``ties="docid"`` compares scores), ``default_k`` (cutoff for metrics given
        without ``@k``); each metric takes the ones that apply to it. Explicit values override
        the profile.

    Returns
    -------
    EvaluationResult
        ``.mean`` (dict) and ``.per_query`` (pandas DataFrame).
    """
    if qid is _NO_QID:
        qid = None
        if np.ndim(scores) == 1 and np.size(scores) > 1:
            warnings.warn(f"evaluate() got no qid: all {np.size(scores)} rows are scored as ONE query. Pass qid= "
                          "(one query id per row), or qid=None to say that they are one query on purpose",
                          UserWarning, stacklevel=2)
    conv = get_profile(profile) if profile is not None else {}
    for key in conventions:
        if key not in EVALUATE_CONVENTIONS:
            raise InputError(f"evaluate() got an unknown convention {key!r}; valid: {', '.join(EVALUATE_CONVENTIONS)}")
    conv.update(conventions)
    metrics = expand_groups(metrics)
    resolved = [get_metric(m) for m in metrics]
    # results are keyed by the spec as the user wrote it ("P@5" stays "P@5")
    keys = [m.strip() if isinstance(m, str) else get_metric(m).spec for m in metrics]
    if not resolved:
        raise InputError("metrics must name at least one metric, e.g. ['ndcg@10', 'map']")
    ties = check_choice(conv.get("ties", "average"), "ties", TIES)
    empty = check_empty(conv.get("empty", 0.0))
    default_k = conv.get("default_k")
    if default_k is not None:
        default_k = check_k(default_k, "default_k")
    floor = None
    if retrieved is not None:
        scores, floor = unrank(scores, retrieved)
    s, y, offsets, qids, docs = flatten(scores, labels, qid=qid, where=where, doc_ids=doc_ids)
    prep = prepare_flat(s, y, offsets, qids, ties=ties, doc_ids=docs, floor=floor,
                        score_precision=conv.get("score_precision", "float32"))
    columns, means, dropped = {}, {}, {}
    for key, metric in zip(keys, resolved):
        if default_k is not None and metric.k is None and metric.entry.takes_k:
            metric = get_metric(f"{metric.name}@{int(default_k)}")
            key = metric.spec
        if key in columns:
            raise InputError(f"metrics name {key!r} twice; give each metric once")
        values, empty_mask = metric.values(prep, conv)
        if empty == "drop":
            col, dropped[key] = values, empty_mask
            kept = values[~empty_mask]
            means[key] = float(kept.mean()) if len(kept) else 0.0
        else:
            col = np.where(empty_mask, empty, values)
            means[key] = float(col.mean()) if len(col) else 0.0
        columns[key] = col

    n_queries = prep.n_queries

    def frame():  # the per-query table, built on first access (holds the columns, not the sorted input)
        import pandas as pd

        index = pd.Index(qids, name="qid") if qids is not None else pd.RangeIndex(n_queries, name="query")
        cols = {}
        for key, col in columns.items():
            if key in dropped:
                col = pd.array(col, dtype="Float64")
                col[dropped[key]] = pd.NA
            cols[key] = col
        return pd.DataFrame(cols, index=index)
    conv = dict(conv)
    if conv.get("max_grade") is None and any(m.name == "err" for m in resolved):
        # ERR's y_max was inferred: the largest label of the whole input (not per query); say so
        conv["max_grade"] = prep.label_range[1]
    return EvaluationResult(means, None, conv, build=frame, n_queries=n_queries)
