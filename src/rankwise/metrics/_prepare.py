"""Input handling shared by every metric: validation, grouping, tie rules, the per-query sort.

A metric call turns its arrays into :class:`Prepared`: flat rows grouped by query
(``offsets``), each query sorted by descending score under the requested tie rule, and
``gstart`` marking where a group of tied items begins in that order. For every rule except
``"average"`` each item is its own group, so the kernels use one code path for all rules: the
exact expectation over uniformly random tie-breaking reduces to the plain value when every
group has size 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rankwise._validation import check_k  # noqa: F401 (the metrics modules import it from here)
from rankwise.data.groups import group_by_qid
from rankwise.errors import InputError

from rankwise.metrics import _kernels as K
from rankwise.metrics._kernels import sort_gather, sort_queries

TIES = ("average", "pessimistic", "optimistic", "input", "docid", "ranx")
REDUCTIONS = ("mean", "none", "sum")


@dataclass
class Prepared:
    """Rows grouped by query and sorted by descending score within each query."""

    offsets: np.ndarray  # int64 (n_queries + 1)
    labels: np.ndarray  # float64, sorted within query
    scores: np.ndarray  # float64, sorted within query
    gstart: np.ndarray  # bool: True where a tie group starts (sorted order)
    qids: np.ndarray | None  # query id per query (None for padded / single input)
    #: bool per sorted row, or None when every row is ranked. Unretrieved rows (trec_eval's
    #: judged documents the run did not return) sit after every retrieved row of their query:
    #: they count in the ideal ranking and in the number of relevant items, never at a rank.
    retrieved: np.ndarray | None = None
    #: True when every tie group has one item (any rule but "average", or no tied scores):
    #: kernels may then take their loop without group bookkeeping.
    singletons: bool = False
    _label_range: tuple | None = field(default=None, repr=False)

    @property
    def n_queries(self) -> int:
        return len(self.offsets) - 1

    @property
    def label_range(self) -> tuple:
        """``(min, max)`` of all labels (0, 0 when there are none), computed once per call."""
        if self._label_range is None:
            y = self.labels
            self._label_range = (float(y.min()), float(y.max())) if y.size else (0.0, 0.0)
        return self._label_range

    def kernel_input(self, tf: int, thr: float = 0.0):
        """``(values, tf, thr)`` for a kernel that ranks: the labels, the kernel applying gain ``tf``
        itself; or, when some rows are unretrieved, their gains with those rows set to 0."""
        if self.retrieved is None:
            return self.labels, tf, float(thr)
        return self.ranked(K.apply_gain(self.labels, tf, thr)), K.G_VALUE, 0.0

    def ranked(self, values: np.ndarray) -> np.ndarray:
        """``values`` (per sorted row) with unretrieved rows set to 0: what the ranking earns."""
        return values if self.retrieved is None else np.where(self.retrieved, values, 0.0)

    def n_ranked(self) -> np.ndarray:
        """Number of ranked (retrieved) rows per query."""
        if self.retrieved is None:
            return np.diff(self.offsets)
        c = np.concatenate(([0], np.cumsum(self.retrieved, dtype=np.int64)))
        return c[self.offsets[1:]] - c[self.offsets[:-1]]

    def ranked_only(self) -> "Prepared":
        """The retrieved rows alone (for measures defined on the ranking only: AUC, correlations)."""
        if self.retrieved is None:
            return self
        keep = self.retrieved
        offsets = np.concatenate(([0], np.cumsum(self.n_ranked()))).astype(np.int64)
        gstart = self.gstart[keep].copy()
        gstart[offsets[:-1][offsets[:-1] < len(gstart)]] = True
        return Prepared(offsets, self.labels[keep], self.scores[keep], gstart, self.qids,
                        singletons=self.singletons)


def _as_float(x, name: str) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be numeric; {exc}") from None
    return arr


def check_choice(value, name: str, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")
    return value


def check_empty(empty):
    if isinstance(empty, str):
        if empty != "drop":
            raise InputError(f"empty must be a number or 'drop'; got {empty!r}")
        return empty
    if isinstance(empty, (bool, np.bool_)) or not isinstance(empty, (int, float, np.integer, np.floating)):
        raise InputError(f"empty must be a number or 'drop'; got {empty!r}")
    if not np.isfinite(empty):
        raise InputError(f"empty must be finite (or 'drop'); got {empty!r}")
    return float(empty)


def flatten(scores, labels, *, qid=None, where=None, doc_ids=None):
    """Return flat ``(scores, labels, offsets, qids, doc_ids)``, validated, queries contiguous.

    Accepts flat 1-d arrays with ``qid`` (``qid=None``: one query), or padded
    ``[n_queries, list]`` arrays with an optional boolean ``where`` (True = real item).
    """
    s = _as_float(scores, "scores")
    y = _as_float(labels, "labels")
    if s.shape != y.shape:
        raise InputError(f"scores and labels must have the same shape; got scores {s.shape} and labels {y.shape}")
    docs = None if doc_ids is None else np.asarray(doc_ids)
    if docs is not None and docs.shape != s.shape:
        raise InputError(f"doc_ids must have the same shape as scores {s.shape}; got {docs.shape}")
    qids = None
    if s.ndim == 2:
        if qid is not None:
            raise InputError("qid must be None for padded 2-d input [n_queries, list]; use where= to mask padding")
        if where is None:
            mask = np.ones(s.shape, dtype=bool)
        else:
            mask = np.asarray(where)
            if mask.dtype != np.bool_:
                raise InputError(f"where must be a boolean mask (True = real item); got dtype {mask.dtype}")
            if mask.shape != s.shape:
                raise InputError(f"where must have the shape of scores {s.shape}; got {mask.shape}")
        sizes = mask.sum(axis=1)
        offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        s, y = s[mask], y[mask]
        docs = None if docs is None else docs[mask]
    elif s.ndim == 1:
        if where is not None:
            mask = np.asarray(where)
            if mask.dtype != np.bool_ or mask.shape != s.shape:
                raise InputError(f"where must be a boolean array of shape {s.shape}; got {mask.dtype} {mask.shape}")
        else:
            mask = None
        if qid is None:
            offsets = np.array([0, len(s)], dtype=np.int64)
            if mask is not None:
                s, y = s[mask], y[mask]
                docs = None if docs is None else docs[mask]
                offsets = np.array([0, len(s)], dtype=np.int64)
        else:
            # a list such as [1, "1"] would silently become strings: group_by_qid checks its items
            q = np.asarray(qid, dtype=object) if isinstance(qid, (list, tuple)) else np.asarray(qid)
            if q.shape != s.shape:
                raise InputError(f"qid must have one entry per score: scores {s.shape}, qid {q.shape}")
            grouping = group_by_qid(q, name="qid")
            qids = grouping.qids
            if grouping.order is not None:
                o = grouping.order
                s, y = s[o], y[o]
                docs = None if docs is None else docs[o]
                mask = None if mask is None else mask[o]
            offsets = grouping.offsets
            if mask is not None:  # masked rows drop out; queries keep their place
                qidx = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))[mask]
                offsets = np.concatenate(([0], np.cumsum(np.bincount(qidx, minlength=len(offsets) - 1)))).astype(np.int64)
                s, y = s[mask], y[mask]
                docs = None if docs is None else docs[mask]
    else:
        raise InputError(f"scores must be 1-d (flat, with qid) or 2-d (padded, with where); got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        kind = "NaN" if np.isnan(s).any() else "inf"
        raise InputError(f"scores contains {kind} values ({int((~np.isfinite(s)).sum())} entries); every score must be finite")
    if not np.all(np.isfinite(y)):
        raise InputError(f"labels contains NaN or inf ({int((~np.isfinite(y)).sum())} entries)")
    return s, y, offsets, qids, docs


def prepare(scores, labels, *, qid=None, where=None, ties="average", doc_ids=None) -> Prepared:
    """Validate, group by query and sort each query by descending score under ``ties``."""
    check_choice(ties, "ties", TIES)
    s, y, offsets, qids, docs = flatten(scores, labels, qid=qid, where=where, doc_ids=doc_ids)
    return prepare_flat(s, y, offsets, qids, ties=ties, doc_ids=docs)


def unrank(scores, retrieved):
    """Scores with the unretrieved rows moved strictly below every retrieved score.

    Returns ``(scores, floor)``: after sorting, a row is retrieved iff its score is ``> floor``.
    """
    s = _as_float(scores, "scores")
    r = np.asarray(retrieved)
    if r.dtype != np.bool_ or r.shape != s.shape:
        raise InputError(f"retrieved must be a boolean array of the shape of scores {s.shape} "
                         f"(True = the run returned the document); got {r.dtype} {r.shape}")
    if not np.all(np.isfinite(s[r])):
        raise InputError("scores contains NaN or inf values on retrieved rows; every score must be finite")
    low = float(s[r].min()) if r.any() else 0.0
    floor = float(np.nextafter(low, -np.inf))
    if not np.isfinite(floor):
        raise InputError(f"scores reach {low:g}: no finite value is left below them for unretrieved rows")
    s = s.copy()
    s[~r] = floor
    return s, floor


SCORE_PRECISIONS = ("float32", "float64")


def prepare_flat(s, y, offsets, qids, *, ties, doc_ids=None, floor=None, score_precision="float32") -> Prepared:
    """Sort each query by descending score under ``ties``; rows at ``floor`` are unretrieved.

    ``score_precision`` applies to ``ties="docid"``: scores compared as float32 (trec_eval <= 9,
    pytrec_eval) or as doubles (trec_eval 10)."""
    average = ties == "average"
    if ties == "docid":
        if doc_ids is None:
            raise InputError("ties='docid' needs doc_ids= (one document id per row), as trec_eval "
                             "breaks score ties by document id")
        check_choice(score_precision, "score_precision", SCORE_PRECISIONS)
        perm = _sort_docid(s, offsets, np.asarray(doc_ids), floor, single=score_precision == "float32")
        ss, ys, gstart = s[perm], y[perm], None
    else:
        if ties == "pessimistic":  # lower labels first among ties
            key, mode = y, 1
        elif ties == "optimistic":
            key, mode = -y, 1
        elif ties == "ranx":  # ranx sorts each run with numba's quicksort: reproduce its tie order
            key, mode = y, 2
        else:  # "input" (stable) and "average" (order within a tie group is irrelevant)
            key, mode = y, 0
        _, ss, ys, gstart = sort_gather(offsets, s, y, key, mode, groups=average, want_perm=False)
    if average:  # tie groups: runs of equal scores
        singletons = bool(gstart.all())
    else:  # every other rule orders the ties: each item is its own group
        gstart = np.ones(len(ss), dtype=np.bool_)
        singletons = True
    retrieved = None if floor is None else ss > floor
    return Prepared(offsets, ys, ss, gstart, qids, retrieved, singletons=singletons)


def _sort_docid(s, offsets, doc_ids, floor=None, single=True):
    """Per-query order by descending score, ties by document id descending (trec_eval).

    trec_eval keeps a run's scores as C ``float`` (float32), so scores equal in float32 tie
    there even when they differ as float64; it compares docnos with strcmp and puts the larger
    one first among ties. Both are reproduced: the order is taken on the scores rounded to
    float32 (unretrieved rows, at ``floor``, kept strictly below every retrieved one). Only
    rows in runs of tied scores need the docno comparison, so the ids are turned into strings
    and ranked for those rows alone (ranks taken over a subset keep the order inside every
    run): with distinct scores no string is built at all.
    """
    if single:
        with np.errstate(over="ignore"):  # beyond the float32 range: +-inf, still in order
            s32 = s.astype(np.float32)
        if floor is not None:
            below = s <= floor
            if below.any() and (~below).any():
                s32[below] = np.nextafter(s32[~below].min(), np.float32(-np.inf))
        s32 = s32.astype(np.float64)
    else:
        s32 = s
    perm, ss, _, _ = sort_gather(offsets, s32, s, s, 0)  # stable by score
    n = len(ss)
    tie = np.zeros(n, dtype=bool)
    if n > 1:
        tie[1:] = ss[1:] == ss[:-1]
    tie[offsets[:-1][offsets[:-1] < n]] = False  # a query's first row never ties with the previous query
    if not tie.any():
        return perm
    in_run = tie.copy()
    in_run[:-1] |= tie[1:]
    rows = np.flatnonzero(in_run)
    _, rank = np.unique(doc_ids[perm[rows]].astype(str), return_inverse=True)
    key = np.zeros(n)
    key[rows] = -rank.astype(np.float64)
    # re-sort the queries holding ties (only those) by score, then key: equal scores keep their
    # (input) order unless the key differs
    qs = np.unique(np.searchsorted(offsets, rows, side="right") - 1)
    sizes = offsets[qs + 1] - offsets[qs]
    sub_off = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    sub = np.repeat(offsets[qs] - sub_off[:-1], sizes) + np.arange(sub_off[-1])  # their rows
    perm[sub] = perm[sub][sort_queries(sub_off, -ss[sub], key[sub], 1)]
    return perm


def reduce(values: np.ndarray, empty_mask: np.ndarray, *, empty, reduction: str):
    """Apply the empty-query rule and the reduction."""
    if empty == "drop":
        values = values[~empty_mask]
    else:
        values = np.where(empty_mask, empty, values)
    if reduction == "none":
        return values
    if reduction == "sum":
        return float(values.sum())
    return float(values.mean()) if len(values) else 0.0
