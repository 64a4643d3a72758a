"""A click log as a ranking data set: one group per session (:func:`session_dataset`).

This is the data set the click rankers (:class:`~rankwise.clicks.UnbiasedLambdaMART`, DLA) take as ``X``
under the shared ``fit(X, y, *, qid=...)`` / ``predict(X, *, qid=...)`` contract of
:mod:`rankwise.models.base`: a group is one result page, its rows the displayed documents in rank order
(a row's rank is its 1-based position in its group), its labels the clicks.
"""
from __future__ import annotations

import numpy as np

from rankwise.data.clicklog import ClickLog
from rankwise.errors import InputError

__all__ = ["session_dataset"]


def session_dataset(log: ClickLog, features):
    """The sessions of ``log`` as a :class:`~rankwise.data.RankingDataset`, one group per session.

    Parameters
    ----------
    log : ClickLog
        Sessions (result pages) with their clicks.
    features : RankingDataset
        Features of the documents: the log's documents are its ``doc_ids`` within each query, or its row
        numbers when it has none (as for :func:`rankwise.clicks.click_dataset`).

    Returns
    -------
    RankingDataset
        Group ``s`` is session ``s`` of the log (``query_ids`` = 0..n_sessions−1, so the log's session
        index; its query is ``log.queries[log.query[s]]``); its rows the displayed documents in rank order,
        ``labels`` the clicks (0/1), ``doc_ids`` the log's document ids, ``X`` the documents' rows of
        ``features`` (a document shown in several sessions is repeated), ``feature_names`` those of
        ``features``.

    Raises
    ------
    InputError
        ``log`` is not a ClickLog, ``features`` not a RankingDataset, or a (query, doc) of the log has no
        row in ``features`` (the message names it).
    """
    from rankwise.clicks.ips import _feature_rows
    from rankwise.data import RankingDataset

    if not isinstance(log, ClickLog):
        raise InputError(f"log must be a rankwise.data.ClickLog (sessions; ClickCounts has lost them); "
                         f"got {type(log).__name__}")
    rows = _feature_rows(log, features)[log.pair]
    doc_ids = np.asarray(log.docs).astype(str)[log.doc]  # the vocabulary converted once, then gathered
    return RankingDataset(features.X[rows], log.clicked.astype(np.float64), log.session_offsets,
                          np.arange(log.n_sessions, dtype=np.int64), doc_ids=doc_ids,
                          feature_names=features.feature_names)
