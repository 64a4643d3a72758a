"""Distributed scoring: a fitted rankwise model applied partition by partition.

.. math::

    s_i = f(x_i) \\quad \\text{for every row } i \\text{ of every partition}

The model is shipped once to every worker (Dask serialises it with the task graph; the
cluster is trusted) and each partition is scored where it lives, with
``model.predict(X, qid=qid)`` (the one predict contract). Row-wise models (linear, GBDT, MLP,
structured) need no grouping; models whose score of a row depends on the other rows of its
query (``NeuralRanker`` with the attention architecture, ``PairwiseReductionRanker``) rely on
whole-query partitions, which :func:`rankwise.distributed.whole_queries` guarantees.
"""
from __future__ import annotations

import numpy as np

from rankwise.distributed._deps import require_dask
from rankwise.distributed.partition import _check_frame, feature_columns, whole_queries
from rankwise.errors import InputError

__all__ = ["predict"]


def _score_partition(part, model, feats, qid, listwise):
    X = part[feats].to_numpy(dtype=np.float32, na_value=np.nan)
    if len(X) == 0:
        return np.zeros(0, dtype=np.float64)
    if not hasattr(model, "_listwise_predict"):  # not a rankwise ranker: anything with predict(X)
        return np.asarray(model.predict(X), dtype=np.float64)
    q = part[qid].to_numpy() if qid in part.columns else None
    return np.asarray(model.predict(X, qid=q), dtype=np.float64)


def _assign_scores(part, model, feats, qid, listwise, column):
    return part.assign(**{column: _score_partition(part, model, feats, qid, listwise)})


def predict(model, frame, *, features=None, qid: str = "qid", label: str = "label", column: str = "score"):
    """Score every row of a Dask collection with a fitted rankwise model.

    Parameters
    ----------
    model : fitted rankwise ranker (anything with ``predict(X)``).
    frame : dask.dataframe.DataFrame
    features : list of str, optional
        Feature columns in the order the model was trained on (default: every numeric column
        except qid/label/doc_id/score, in frame order).
    qid, label : str
        Column names (``qid`` is needed by list-wise scorers).
    column : str
        Name of the new score column.

    Returns
    -------
    dask.dataframe.DataFrame
        ``frame`` with a float64 ``column`` added (lazy; ``.compute()`` or pass it on to
        :func:`rankwise.distributed.evaluate`).
    """
    require_dask()
    _check_frame(frame, [])
    if not hasattr(model, "predict"):
        raise InputError(f"model must be a fitted rankwise ranker with predict(); got {type(model).__name__}")
    if hasattr(model, "_check_is_fitted"):
        model._check_is_fitted()
    feats = feature_columns(frame, qid=qid, label=label, features=features)
    n_in = getattr(model, "n_features_in_", None)
    if n_in is not None and n_in != len(feats):
        raise InputError(f"the model was trained on {n_in} features but {len(feats)} feature columns were found "
                         f"({feats[:5]}...); pass features=[...] in training order")
    listwise = bool(getattr(model, "_listwise_predict", False))  # declared by each rankwise model
    if listwise:
        _check_frame(frame, [qid])
        frame = whole_queries(frame, qid=qid)
    meta = frame._meta.assign(**{column: np.zeros(0, dtype=np.float64)})
    return frame.map_partitions(_assign_scores, model, feats, qid, listwise, column, meta=meta)
