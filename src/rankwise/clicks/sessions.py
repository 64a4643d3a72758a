"""A click log as a ranking data set: one group per session (:func:`session_dataset`).

This is the data set the click rankers (:class:`~rankwise.clicks.UnbiasedLambdaMART`, DLA) take as ``X``
under the shared ``fit(X, y, *, qid=...)`` / ``predict(X, *, qid=...)`` contract of
:mod:`rankwise.models.base`: a group is one result page, its rows the displayed documents in rank order
(a row's rank is its 1-based position in its group), its labels the clicks.
"""
from __future__ import annotations

import numpy as np

from rankwise.clicks._joint_kernels import group_hashes as _group_hashes
from rankwise.clicks._joint_kernels import groups_equal_first as _groups_equal_first
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
    from rankwise.clicks.ips import feature_rows
    from rankwise.data import RankingDataset

    if not isinstance(log, ClickLog):
        raise InputError(f"log must be a rankwise.data.ClickLog (sessions; ClickCounts has lost them); "
                         f"got {type(log).__name__}")
    rows = feature_rows(log, features)[log.pair]
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


# ----------------------------------------------------------- result pages of a click data set


def _first_appearance_codes(keys):
    """``(code, first)``: a code per key, numbered in order of first appearance, and each code's first index."""
    import pandas as pd

    code, uniq = pd.factorize(keys, sort=False)
    first = np.full(len(uniq), -1, dtype=np.int64)
    first[code[::-1]] = np.arange(len(code) - 1, -1, -1)
    return code.astype(np.int64), first


def _codes_of_groups(X, off, *extra, _mask=None):
    """One code per group of ``off`` (first appearance order) and the first group of each code: groups whose
    rows -- of ``X`` and of the per-row ``extra`` arrays -- are equal, bit for bit and in the same order, get
    the same code. Fast path: a 64-bit hash of each group's bytes (:func:`~rankwise.clicks._joint_kernels.
    group_hashes`), then every group compared byte for byte with its code's first group; where the check
    finds a difference (a collision), the exact path hashes each group's bytes (BLAKE2, 128 bits).
    ``_mask`` (tests): keep only these bits of the fast hash, to force collisions."""
    X = np.ascontiguousarray(X)
    off = np.ascontiguousarray(off, dtype=np.int64)
    mats = [X.view(np.uint8)] + [np.ascontiguousarray(e, dtype=X.dtype).reshape(-1, 1).view(np.uint8) for e in extra]
    h = np.zeros(len(off) - 1, dtype=np.uint64)
    for k, m in enumerate(mats):
        _group_hashes(m, off, np.uint64(0x636C69636B73 + k), h)
    if _mask is not None:
        h &= np.uint64(_mask)
    code, first = _first_appearance_codes(h)
    if all(_groups_equal_first(m, off, code, first) for m in mats):
        return code, first
    import hashlib

    keys = [hashlib.blake2b(b"".join(m[a:b].tobytes() for m in mats), digest_size=16).digest()
            for a, b in zip(off[:-1], off[1:])]
    return _first_appearance_codes(np.array(keys, dtype=object))


def _rows_of(off, groups):
    """The rows of ``groups`` (in that order) and the offsets of the groups in them."""
    sizes = np.diff(off)[groups]
    new_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return np.repeat(off[groups], sizes) + np.arange(new_off[-1]) - np.repeat(new_off[:-1], sizes), new_off
