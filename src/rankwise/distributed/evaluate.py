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
from rankwise.distributed.partition import ROW, _check_frame, _regroup_partition, whole_queries, with_row_key
from rankwise.errors import InputError, WorkerLostError

__all__ = ["evaluate"]

_FIRST = "_rankwise_first_row"
_SIZE = "_rankwise_list_size"
_MAXL = "_rankwise_max_label"


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
    table[_MAXL] = float(part[label].max())  # the partition's largest label (ERR's inferred max_grade)
    table.attrs = {}
    return pd.DataFrame(table)


def _select_queries(part, qid, qids):
    """The rows of ``part`` whose query id is in ``qids``."""
    return part[part[qid].isin(qids)]


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
    ERR's ``max_grade``, when not given, is the largest label of the whole frame, as on one
    machine: partitions that lack it are evaluated again with it.

    Cost: one pass over the four columns when the partitions already hold whole queries (the
    frames of :func:`rankwise.distributed.read_parquet` / ``read_svmlight`` / ``from_pandas``,
    and their scored versions). A query split across partitions is found in that same pass (its
    id comes back from two partitions); then, when the split queries hold at most half of the
    rows, only their rows are reshuffled by qid and evaluated again (a second pass over the input,
    which moves and re-evaluates only those rows), otherwise every row is reshuffled and evaluated
    again. There is no separate qid-only check first: on a scored frame it would compute the
    scores twice in the usual, already whole-query case. The per-query table is gathered on the
    client (8 bytes per query and metric: 80 MB for 10M queries and one metric).

    If a worker dies, Dask recomputes its tasks elsewhere and the result is the same; if that
    keeps failing (the task killed a worker ``distributed.scheduler.allowed-failures`` times) it
    raises :class:`rankwise.errors.WorkerLostError`. A result is never assembled
    from a subset of the partitions: the number of rows evaluated is checked against the
    number of rows in the frame.

    References
    ----------
    K. Järvelin and J. Kekäläinen. Cumulated gain-based evaluation of IR techniques. ACM TOIS
    20(4), 2002 (NDCG). O. Chapelle, D. Metzler, Y. Zhang, P. Grinspan. Expected reciprocal rank
    for graded relevance. CIKM 2009 (ERR).
    """
    import pandas as pd

    from rankwise.metrics import EvaluationResult, get_profile
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
    # ERR without max_grade takes the largest label of the *whole input* as the scale's maximum
    # (not per query): a partition must not infer it from its own rows alone.
    given = dict(get_profile(profile)) if profile is not None else {}
    given.update(conventions)
    infer_grade = "max_grade" in probe.conventions and given.get("max_grade") is None

    cols = [c for c in (qid, score, label, doc_id) if c is not None]
    keyed = with_row_key(frame[cols])
    kwargs = dict(qid=qid, score=score, label=label, doc_id=doc_id, metrics=metrics, profile=profile,
                  conventions=conventions)

    def run(collection, only=None, max_grade=None):
        """Per-query tables of the partitions (None for an empty one) and the number of rows."""
        parts = collection.to_delayed()
        if only is not None:
            parts = [parts[i] for i in only]
        kw = kwargs if max_grade is None else dict(kwargs, conventions={**conventions, "max_grade": max_grade})
        tasks = [dask.delayed(_evaluate_partition)(p, **kw) for p in parts]
        counts = [dask.delayed(len)(p) for p in parts]
        try:
            out = dask.compute(*tasks, *counts)
        except Exception as exc:
            if type(exc).__name__ == "KilledWorker":  # distributed.scheduler.KilledWorker
                raise WorkerLostError(f"distributed evaluate: Dask workers kept dying while evaluating a partition "
                                      f"({exc}); no partial result is returned") from exc
            raise
        return list(out[:len(tasks)]), int(sum(out[len(tasks):]))

    # One pass over the partitions as they are: enough when they hold whole queries (the usual
    # case: frames from the rankwise readers). A query split across partitions shows up as a
    # repeated index in the per-query tables.
    tables, n_rows = run(keyed)
    present = [t for t in tables if t is not None]
    if not present:
        raise InputError("frame has no rows; distributed evaluation needs at least one query")
    top = None
    if infer_grade:
        top = max(float(t[_MAXL].iloc[0]) for t in present)
        redo = [i for i, t in enumerate(tables) if t is not None and float(t[_MAXL].iloc[0]) != top]
        if redo:  # partitions without the top grade: ERR again with the input's max_grade
            again, _ = run(keyed, only=redo, max_grade=top)
            for i, t in zip(redo, again):
                tables[i] = t
    table = pd.concat([t for t in tables if t is not None])
    split_mask = table.index.duplicated(keep=False)
    if split_mask.any():
        n_split_rows = int(table.loc[split_mask, _SIZE].sum())
        if 2 * n_split_rows <= n_rows:
            # few split queries (e.g. queries cut at block edges): reshuffle and re-evaluate only
            # their rows; the values of the whole queries from the first pass are final
            split = np.unique(table.index[split_mask].to_numpy())
            sub = keyed.map_partitions(_select_queries, qid, dask.delayed(split, pure=True), meta=keyed._meta)
            sub = sub.shuffle(on=qid, npartitions=max(1, min(frame.npartitions, len(split))))
            sub = sub.map_partitions(_regroup_partition, qid, meta=sub._meta)
            again, n_again = run(sub, max_grade=top)
            if n_again != n_split_rows:
                raise RuntimeError(f"distributed evaluation lost rows in the reshuffle ({n_again} of {n_split_rows}); "
                                   "no result is returned")
            table = pd.concat([table[~split_mask]] + [t for t in again if t is not None])
        else:  # most rows are in split queries: reshuffle everything by qid and evaluate again
            aligned = whole_queries(frame[cols], qid=qid, check=False, keep_row_key=True)
            again, n_rows2 = run(aligned, max_grade=top)
            if n_rows2 != n_rows:
                raise RuntimeError(f"distributed evaluation lost rows in the reshuffle ({n_rows2} of {n_rows}); "
                                   "no result is returned")
            table = pd.concat([t for t in again if t is not None])
        if table.index.duplicated().any():  # pragma: no cover - the shuffle guarantees this
            raise RuntimeError("a query is still split across partitions after the reshuffle")
    if int(table[_SIZE].sum()) != n_rows:
        raise RuntimeError(f"distributed evaluation covered {int(table[_SIZE].sum())} of {n_rows} rows; "
                           "no partial result is returned")
    table = table.sort_values(_FIRST, kind="stable").drop(columns=[_FIRST, _SIZE, _MAXL])
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
    conv = dict(probe.conventions)
    if infer_grade:
        conv["max_grade"] = top  # as the single-machine result reports the inferred value
    return EvaluationResult(means, table[spec_columns], conv)
