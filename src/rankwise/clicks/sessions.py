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
    out = RankingDataset(_gather_rows(features.X, rows), log.clicked.astype(np.float64), log.session_offsets,
                         np.arange(log.n_sessions, dtype=np.int64), feature_names=features.feature_names)
    # the vocabulary converted once (as narrow as its longest id: integer ids would be 21 characters wide), then
    # gathered; set after the constructor, which would copy it again
    vocab = np.asarray(log.docs).astype(str)
    vocab = vocab.astype(f"<U{max(1, int(np.char.str_len(vocab).max(initial=0)))}")
    out.doc_ids = _gather_rows(vocab, log.doc)
    return out


def _gather_rows(a, rows):
    """``a[rows]`` for a dense array (a row of X, a string) by a 1-d gather of each row's bytes as one item,
    several times faster than numpy's row-wise fancy indexing of a 2-d or string array; sparse rows as
    they are."""
    if not isinstance(a, np.ndarray) or a.dtype.hasobject or a.size == 0:
        return a[rows]
    a = np.ascontiguousarray(a)
    item = np.dtype((np.void, a.dtype.itemsize * (a.shape[1] if a.ndim == 2 else 1)))
    return a.view(item).reshape(-1)[rows].view(a.dtype).reshape((len(rows),) + a.shape[1:])
