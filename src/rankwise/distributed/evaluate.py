"""Distributed evaluation: per-query metrics computed where the partitions live, combined exactly.

.. math::

    \\bar m = \\frac{1}{|Q'|} \\sum_{q \\in Q'} m(s_q, y_q), \\qquad
    m(s_q, y_q) \\text{ computed on the whole list of } q

Each partition holds whole queries (:func:`rankwise.distributed.whole_queries`), so every
per-query value is computed by :func:`rankwise.metrics.evaluate` on the complete list, with
the same conventions — bit-identical to the single-machine value. Only the per-query table
(one row per query, a few floats) travels to the client; it is put back in the order of first
appearance in the input and the mean is taken there the way the single-machine function takes
it, so the means are identical too (not merely close: no partial sums are added in a
different order).
"""
from __future__ import annotations

import numpy as np

from rankwise.distributed._deps import require_dask
from rankwise.distributed.partition import ROW, _check_frame, whole_queries, with_row_key
from rankwise.errors import InputError

__all__ = ["evaluate"]

_FIRST = "_rankwise_first_row"
_SIZE = "_rankwise_list_size"


def _evaluate_partition(part, *, qid, score, label, doc_id, metrics, profile, conventions):
    import pandas as pd

    from rankwise.metrics import evaluate as _evaluate

    if len(part) == 0:
        return None
    if not part[ROW].is_monotonic_increasing:  # after a reshuffle: back to input row order
        part = part.sort_values(ROW, kind="stable")
    docs = None if doc_id is None else part[doc_id].astype(str).to_numpy()
    res = _evaluate(part[score].to_numpy(), part[label].to_numpy(), part[qid].to_numpy(), metrics=metrics,
                    profile=profile, doc_ids=docs, **conventions)
    table = res.per_query
    first = part.groupby(qid, sort=False)[ROW].min()
    table[_FIRST] = first.reindex(table.index).to_numpy()
    table[_SIZE] = part.groupby(qid, sort=False)[ROW].size().reindex(table.index).to_numpy()
    table.attrs = {}
    return pd.DataFrame(table)


def evaluate(frame, metrics=("ndcg@10", "err@10", "map"), profile=None, *, qid: str = "qid", score: str = "score",
             label: str = "label", doc_id: str | None = None, **conventions):
    """Metrics of a Dask collection of scored rows, equal to :func:`rankwise.metrics.evaluate`.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
        Columns ``qid``, ``score``, ``label`` (names configurable), optionally ``doc_id``; rows
        in any order and partitions in any layout (queries split across partitions are
        reshuffled by qid first).
    metrics, profile, **conventions
        As for :func:`rankwise.metrics.evaluate` (``"ndcg@10"``, ``profile="trec_eval"``,
        ``gain=``, ``ties=``, ``empty=``...).
    qid, score, label, doc_id : str
        Column names; ``doc_id`` is needed for ``ties="docid"`` (the ``trec_eval`` profile).

    Returns
    -------
    rankwise.metrics.EvaluationResult
        ``.per_query`` indexed by qid in order of first appearance in ``frame`` and ``.mean``,
        both identical to ``rankwise.metrics.evaluate(frame.compute()...)``.

    Notes
    -----
    Cost: one pass over the four columns when the partitions already hold whole queries;
    otherwise a first pass finds the split queries, then the rows are reshuffled by qid and
    evaluated. The per-query table is gathered on the client (8 bytes per query and metric:
    80 MB for 10M queries and one metric).

    If a worker dies, Dask recomputes its tasks elsewhere; if that keeps failing the
    computation raises (``distributed.scheduler.KilledWorker``). A result is never assembled
    from a subset of the partitions: the number of rows evaluated is checked against the
    number of rows in the frame.

    References
    ----------
    K. Järvelin and J. Kekäläinen. Cumulated gain-based evaluation of IR techniques. ACM TOIS
    20(4), 2002 (NDCG). O. Chapelle, D. Metzler, Y. Zhang, P. Grinspan. Expected reciprocal rank
    for graded relevance. CIKM 2009 (ERR).
    """
    import pandas as pd

    from rankwise.metrics import EvaluationResult
    from rankwise.metrics import evaluate as _evaluate

    dask, _ = require_dask()
    _check_frame(frame, [qid, score, label, doc_id])
    if isinstance(metrics, str):
        metrics = [metrics]
    metrics = list(metrics)
    # Validate metrics and conventions on the client, before any distributed work, and learn the
    # column names and the conventions in force.
    probe = _evaluate(np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.array([0, 0]), metrics=metrics,
                      profile=profile, doc_ids=None if doc_id is None else np.array(["a", "b"]), **conventions)
    spec_columns = list(probe.per_query.columns)
    empty_drop = probe.conventions.get("empty", 0.0) == "drop"

    cols = [c for c in (qid, score, label, doc_id) if c is not None]
    keyed = with_row_key(frame[cols])
    kwargs = dict(qid=qid, score=score, label=label, doc_id=doc_id, metrics=metrics, profile=profile,
                  conventions=conventions)

    def run(collection):
        parts = collection.to_delayed()
        tasks = [dask.delayed(_evaluate_partition)(p, **kwargs) for p in parts]
        counts = [dask.delayed(len)(p) for p in parts]
        out = dask.compute(*tasks, *counts)
        return [t for t in out[:len(tasks)] if t is not None], int(sum(out[len(tasks):]))

    tables, n_rows = run(keyed)
    table = pd.concat(tables) if tables else None
    if table is not None and table.index.duplicated().any():
        # some query was split across partitions: reshuffle by qid and evaluate again
        aligned = whole_queries(frame[cols], qid=qid, check=False, keep_row_key=True)
        tables, n_rows2 = run(aligned)
        if n_rows2 != n_rows:
            raise RuntimeError(f"distributed evaluation lost rows in the reshuffle ({n_rows2} of {n_rows}); "
                               "no result is returned")
        table = pd.concat(tables)
        if table.index.duplicated().any():  # pragma: no cover - the shuffle guarantees this
            raise RuntimeError("a query is still split across partitions after the reshuffle")
    if table is None:
        raise InputError("frame has no rows; distributed evaluation needs at least one query")
    if int(table[_SIZE].sum()) != n_rows:
        raise RuntimeError(f"distributed evaluation covered {int(table[_SIZE].sum())} of {n_rows} rows; "
                           "no partial result is returned")
    table = table.sort_values(_FIRST, kind="stable").drop(columns=[_FIRST, _SIZE])
    table.index.name = probe.per_query.index.name
    means = {}
    for col in spec_columns:
        if empty_drop:
            values = table[col]
            kept = values[values.notna()].to_numpy(dtype=np.float64)
            means[col] = float(kept.mean()) if len(kept) else 0.0
        else:
            values = table[col].to_numpy(dtype=np.float64)
            table[col] = values
            means[col] = float(values.mean()) if len(values) else 0.0
    return EvaluationResult(means, table[spec_columns], probe.conventions)
