"""Run fusion: CombSUM, CombMNZ, CombMAX, CombMIN, CombMED, CombANZ and reciprocal rank fusion.

Several runs (or several systems' scores over the same rows) are combined document by document
after each run's scores are normalised per query. :func:`fuse` takes TREC runs and returns a
:class:`~rankwise.data.trec.Run` (write it with :func:`~rankwise.data.trec.write_trec_run`);
:func:`fuse_scores` takes a ``(n_runs, n_rows)`` score matrix with a per-row ``qid``.

Definitions
-----------
For a query, let :math:`s_r(d)` be run :math:`r`'s normalised score of document :math:`d`,
:math:`R(d)` the runs that retrieved :math:`d` and :math:`\\mathrm{rank}_r(d) = 1, 2, \\ldots`
its position in run :math:`r` (trec_eval's order: score descending, then docno descending):

* CombSUM :math:`\\sum_{r \\in R(d)} s_r(d)`; CombMNZ :math:`|R(d)| \\cdot` CombSUM; CombANZ
  CombSUM :math:`/ |R(d)|`; CombMAX, CombMIN, CombMED the maximum, minimum, median over
  :math:`R(d)` (Fox & Shaw, 1994);
* RRF :math:`\\sum_{r \\in R(d)} 1 / (k + \\mathrm{rank}_r(d))` (Cormack et al., 2009), on ranks,
  so a score normalisation does not change it (``"borda"``, which adds documents, is refused).

Normalisations (per run and query, over the documents the run retrieved; :math:`n` of them,
:math:`\\epsilon = 10^{-9}` keeps a constant list finite, as in ranx):

* ``"min-max"`` :math:`(s - \\min) / \\max(\\max - \\min, \\epsilon)`;
* ``"max"`` :math:`s / \\max(\\max s, \\epsilon)` (meant for non-negative scores: a list whose
  largest score is not positive is divided by :math:`\\epsilon`, with a warning);
* ``"sum"`` :math:`(s - \\min) / \\max(\\sum s - n \\min, \\epsilon)`;
* ``"zmuv"`` (z-score) :math:`(s - \\bar s) / \\max(\\sigma, \\epsilon)`, :math:`\\sigma` the
  population standard deviation;
* ``"rank"`` :math:`1 - (\\mathrm{rank} - 1) / n`;
* ``"borda"`` over the :math:`N` documents any run retrieved for the query:
  :math:`1 - (\\mathrm{rank} - 1) / N`, and a document the run did not retrieve gets the mean of
  the points left, :math:`\\frac12 - (n - 1) / (2N)` (Aslam & Montague, 2001) — so under Borda
  every run scores every candidate;
* ``None`` the raw scores.

These are ranx's definitions (``ranx.fuse``); the results equal ranx's to 1e-12 (tests). Where
the two differ, it is a convention, said here and chosen by a parameter:

* ties: rankwise ranks tied scores as trec_eval does (docno descending), for the rank-based
  normalisations and RRF and for the order and ``depth`` cut of the fused run; ranx leaves them
  in the order of numba's (unstable) quicksort;
* ``missing="skip"`` (ranx): a run that did not retrieve a document takes no part in its
  combination; ``missing="zero"`` counts it as a normalised score of 0 (CombMIN, CombMED and
  CombANZ change; CombSUM and CombMNZ do not; CombMAX only where scores are negative);
* queries: the fused run covers every query of any run (a run without a query is an empty
  ranking there); ranx requires the same queries in every run;
* ``depth``: at most this many documents per query in the fused run (ranx keeps them all).

References
----------
Fox, E. A., & Shaw, J. A. (1994). Combination of multiple searches. TREC-2, NIST SP 500-215.
Lee, J. H. (1997). Analyses of multiple evidence combination. SIGIR.
Aslam, J. A., & Montague, M. (2001). Models for metasearch. SIGIR.
Cormack, G. V., Clarke, C. L. A., & Büttcher, S. (2009). Reciprocal rank fusion outperforms
Condorcet and individual rank learning methods. SIGIR.
Bassani, E., & Romelli, L. (2022). ranx.fuse: A Python library for metasearch. CIKM.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rankwise._validation import warn_user
from rankwise.data.trec import Run, _Ids
from rankwise.errors import InputError

__all__ = ["fuse", "fuse_scores", "FUSION_METHODS", "NORMALIZATIONS"]

_EPS = 1e-9


def _combsum(v, present, fill, n_runs, missing):
    return np.where(present, v, fill).sum(axis=0)


def _combmnz(v, present, fill, n_runs, missing):
    return _combsum(v, present, fill, n_runs, missing) * present.sum(axis=0)


def _combanz(v, present, fill, n_runs, missing):
    n = present.sum(axis=0) if missing == "skip" else n_runs
    return _combsum(v, present, fill, n_runs, missing) / n


def _extreme(reduce, neutral):
    def combine(v, present, fill, n_runs, missing):
        return reduce(np.where(present, v, neutral if missing == "skip" else fill), axis=0)
    return combine


def _combmed(v, present, fill, n_runs, missing):
    if missing == "skip" and not present.all():
        return np.nanmedian(np.where(present, v, np.nan), axis=0)
    return np.median(np.where(present, v, fill), axis=0)


#: method name -> combination of a (runs x documents) matrix of normalised scores
_COMBINE = {
    "combsum": _combsum,
    "combmnz": _combmnz,
    "combmax": _extreme(np.max, -np.inf),
    "combmin": _extreme(np.min, np.inf),
    "combmed": _combmed,
    "combanz": _combanz,
    "rrf": _combsum,  # of 1 / (k + rank)
}
FUSION_METHODS = tuple(_COMBINE)


def _seg_stats(score, starts, counts):
    return (np.minimum.reduceat(score, starts), np.maximum.reduceat(score, starts),
            np.add.reduceat(score, starts), counts)


def _minmax(score, seg, starts, counts, rank, n_cand):
    lo, hi, _, _ = _seg_stats(score, starts, counts)
    return (score - lo[seg]) / np.maximum(hi - lo, _EPS)[seg]


def _max(score, seg, starts, counts, rank, n_cand):
    hi = np.maximum.reduceat(score, starts)
    if np.any(hi <= 0):
        warn_user(f"norm='max': in {int(np.count_nonzero(hi <= 0))} of {len(hi)} (run, query) lists the largest "
                  f"score is <= 0, so their scores are divided by {_EPS:g} (as ranx does) and outweigh the others; "
                  "use 'min-max', 'sum' or 'zmuv' for runs with negative scores")
    return score / np.maximum(hi, _EPS)[seg]


def _sum(score, seg, starts, counts, rank, n_cand):
    lo, _, total, n = _seg_stats(score, starts, counts)
    return (score - lo[seg]) / np.maximum(total - lo * n, _EPS)[seg]


def _zmuv(score, seg, starts, counts, rank, n_cand):
    mean = np.add.reduceat(score, starts) / counts
    dev = score - mean[seg]
    sd = np.sqrt(np.add.reduceat(dev * dev, starts) / counts)
    return dev / np.maximum(sd, _EPS)[seg]


def _rank(score, seg, starts, counts, rank, n_cand):
    return 1.0 - rank / counts[seg]


def _borda(score, seg, starts, counts, rank, n_cand):
    return 1.0 - rank / n_cand


#: normalisation name -> per-entry normalised score (entries sorted by run, query, rank)
_NORMALIZE = {
    "min-max": _minmax,
    "max": _max,
    "sum": _sum,
    "zmuv": _zmuv,
    "rank": _rank,
    "borda": _borda,
}
NORMALIZATIONS = (None, *_NORMALIZE)
_NORM_ALIASES = {"minmax": "min-max", "min_max": "min-max", "z-score": "zmuv", "zscore": "zmuv", "none": None}


def _method(method: str) -> str:
    key = str(method).lower().replace("_", "").replace("-", "")
    if key not in _COMBINE:
        raise InputError(f"method must be one of {', '.join(FUSION_METHODS)}; got {method!r}")
    return key


def _norm(norm, method: str):
    if norm is not None:
        key = str(norm).lower()
        key = _NORM_ALIASES.get(key, key)
        if key is not None and key not in _NORMALIZE:
            names = ", ".join(n for n in _NORMALIZE)
            raise InputError(f"norm must be None or one of {names} (aliases: min_max, z-score); got {norm!r}")
        norm = key
    if method == "rrf":
        if norm == "borda":
            raise InputError("norm='borda' does not apply to method 'rrf': RRF works on each run's ranks")
        return None  # every other normalisation keeps each run's ranking, so RRF is the same
    return norm


def _ranking(seg, score, tie_key):
    """Order of the entries: by segment, score descending, then ``tie_key(rows)`` descending
    (asked only for the rows whose score is tied within their segment)."""
    order = _sort_by(seg, -score)
    ss, sg = score[order], seg[order]
    tied = (sg[1:] == sg[:-1]) & (ss[1:] == ss[:-1])
    if tied.any():
        mask = np.zeros(len(order), dtype=bool)
        mask[1:] |= tied
        mask[:-1] |= tied
        key = np.zeros(len(order), dtype=np.int64)
        rows = order[mask]
        key[rows] = tie_key(rows)
        order = _sort_by(seg, -score, -key)
    return order


def _sort_by(*keys):
    """Stable order by the keys, the first the most significant (stable argsorts, last key first:
    faster than ``np.lexsort`` on mixed keys)."""
    order = np.argsort(keys[-1], kind="stable")
    for key in keys[-2::-1]:
        order = order[np.argsort(key[order], kind="stable")]
    return order


def _id_bytes(ids: _Ids, rows) -> np.ndarray:
    """The ids of ``rows`` as a fixed-width bytes array (compares as ``strcmp``: ids hold no NUL)."""
    s, e = ids.s[rows], ids.e[rows]
    width = max(int((e - s).max()), 1)
    col = np.arange(width)
    inside = col < (e - s)[:, None]
    out = np.where(inside, ids.buf[np.where(inside, s[:, None] + col, 0)], 0).astype(np.uint8)
    return np.ascontiguousarray(out).view(f"S{width}").ravel()


def _fused_values(run, q, group, score, tie_key, *, n_runs, n_queries, group_query, method, norm, k, missing):
    """Fused score of each group (document of a query).

    Entries (one per run and retrieved document) carry their run ``run``, query ``q``, group
    ``group`` (groups numbered query by query: ``group_query`` is non-decreasing) and raw
    ``score``; ``tie_key(rows)`` orders tied entries (larger first).
    """
    n_groups = len(group_query)
    seg = run * n_queries + q
    order = _ranking(seg, score, tie_key)
    run, q, group, score, seg = run[order], q[order], group[order], score[order], seg[order]
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    counts = np.diff(np.r_[starts, len(seg)])
    seg_id = np.repeat(np.arange(len(starts)), counts)
    rank = np.arange(len(seg)) - starts[seg_id]  # 0-based position in the run's ranking
    n_cand = np.bincount(group_query, minlength=n_queries)
    fill = np.zeros((n_runs, n_queries))
    if method == "rrf":
        value = 1.0 / (k + rank + 1.0)
    elif norm is None:
        value = score
    else:
        value = _NORMALIZE[norm](score, seg_id, starts, counts, rank, n_cand[q])
        if norm == "borda":  # the mean of the points a run left, for the candidates it did not retrieve
            n_rq = np.zeros((n_runs, n_queries))
            n_rq[run[starts], q[starts]] = counts
            fill = 0.5 - (n_rq - 1.0) / (2.0 * np.maximum(n_cand, 1))
    combine = _COMBINE[method]
    # one query at a time: a (runs x candidates) matrix, never all queries' at once
    by_query = np.argsort(q, kind="stable")
    q_starts = np.searchsorted(q[by_query], np.arange(n_queries + 1))
    g_starts = np.searchsorted(group_query, np.arange(n_queries + 1))
    out = np.empty(n_groups)
    for j in range(n_queries):
        rows = by_query[q_starts[j]:q_starts[j + 1]]
        g0, g1 = g_starts[j], g_starts[j + 1]
        v = np.zeros((n_runs, g1 - g0))
        present = np.zeros((n_runs, g1 - g0), dtype=bool)
        v[run[rows], group[rows] - g0] = value[rows]
        present[run[rows], group[rows] - g0] = True
        if norm == "borda":
            v = np.where(present, v, fill[:, j:j + 1])
            present[:] = True
        out[g0:g1] = combine(v, present, fill[:, j:j + 1], n_runs, missing)
    return out


def _check_options(method, norm, k, missing, depth):
    method = _method(method)
    norm = _norm(norm, method)
    if missing not in ("skip", "zero"):
        raise InputError(f"missing must be 'skip' (a run that did not retrieve a document takes no part) or "
                         f"'zero' (it counts as a normalised score of 0); got {missing!r}")
    if isinstance(k, bool) or not isinstance(k, (int, float, np.integer, np.floating)) or not np.isfinite(k) \
            or k < 0:
        raise InputError(f"k (RRF) must be a finite number >= 0; got {k!r}")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1):
        raise InputError(f"depth must be None (keep every document) or an integer >= 1; got {depth!r}")
    return method, norm


def _as_run(run, i) -> Run:
    if isinstance(run, (str, Path)):
        return Run.read(run)
    try:
        out = Run.from_dict(run, name=f"run{i}")
    except InputError as exc:
        raise InputError(f"runs[{i}]: {exc}") from None
    out.hash_order()
    return out


def _is_one_run(d: dict) -> bool:
    """``{qid: {docno: score}}`` rather than ``{name: run}``."""
    return all(isinstance(v, dict) and not any(isinstance(x, dict) for x in v.values()) for v in d.values())


def fuse(runs, *, method: str = "combsum", norm: str | None = "min-max", k: float = 60, missing: str = "skip",
         depth: int | None = None, name: str | None = None) -> Run:
    """Fuse TREC runs into one (see the module's definitions).

    Parameters
    ----------
    runs : sequence or dict
        At least two runs: :class:`~rankwise.data.trec.Run` objects, paths of TREC run files,
        ``{qid: {docno: score}}`` dicts or ranx ``Run`` objects (a dict ``{name: run}`` works too).
    method : str
        ``"combsum"`` (default), ``"combmnz"``, ``"combmax"``, ``"combmin"``, ``"combmed"``,
        ``"combanz"`` or ``"rrf"`` (``comb_sum`` and ``CombSUM`` spellings are accepted).
    norm : str or None
        ``"min-max"`` (default, as ranx), ``"max"``, ``"sum"``, ``"zmuv"`` (``"z-score"``),
        ``"rank"``, ``"borda"`` or None; no effect on RRF.
    k : float
        RRF's constant (60, as Cormack et al. and ranx).
    missing : {"skip", "zero"}
        What a run that did not retrieve a document contributes (see the module's notes).
    depth : int, optional
        Keep the best ``depth`` documents of each query (e.g. 1000 for a TREC submission).
    name : str, optional
        The fused run's name (default: the method).

    Returns
    -------
    Run
        Queries in the order they first appear in ``runs``; per query, documents in trec_eval's
        order (fused score descending, docno descending).
    """
    method, norm = _check_options(method, norm, k, missing, depth)
    if isinstance(runs, dict) and not _is_one_run(runs):
        runs = list(runs.values())  # {name: run}
    elif isinstance(runs, (dict, str, Path, Run)):
        raise InputError("runs must be a sequence of at least 2 runs; got one run")
    runs = [_as_run(r, i) for i, r in enumerate(runs)]
    if len(runs) < 2:
        raise InputError(f"fusion needs at least 2 runs; got {len(runs)}")
    qindex: dict = {}
    parts = []
    base = 0
    for r, run in enumerate(runs):
        qi = np.array([qindex.setdefault(x, len(qindex)) for x in run.qids], dtype=np.int64)
        parts.append((np.full(len(run), r), np.repeat(qi, np.diff(run.offsets)), run.scores, run.docs.h,
                      run.docs.s + base, run.docs.e + base, run.docs.buf))
        base += len(run.docs.buf)
    r_, q_, score, h, s, e = (np.concatenate([p[i] for p in parts]) for i in range(6))
    buf = np.concatenate([p[6] for p in parts])
    ids = _Ids(buf, s, e, h)
    # documents: one group per (query, id); a hash match is confirmed on the bytes
    by_doc = _sort_by(q_, h)
    new = np.r_[True, (q_[by_doc][1:] != q_[by_doc][:-1]) | (h[by_doc][1:] != h[by_doc][:-1])]
    from rankwise.data import _fusion_kernel as FK

    if not FK.same_ids(by_doc, np.flatnonzero(new), buf, s, e):  # pragma: no cover - a 64-bit hash collision
        names = np.array(ids.strings(), dtype=object)
        by_doc = np.lexsort((names, q_))
        new = np.r_[True, (q_[by_doc][1:] != q_[by_doc][:-1]) | (names[by_doc][1:] != names[by_doc][:-1])]
    group = np.empty(len(by_doc), dtype=np.int64)
    group[by_doc] = np.cumsum(new) - 1
    first = by_doc[new]  # one entry per group: its id
    group_query = q_[first]

    def docno_key(rows):  # larger docno first, as trec_eval
        return np.unique(_id_bytes(ids, rows), return_inverse=True)[1]

    fused = _fused_values(r_, q_, group, score, docno_key, n_runs=len(runs), n_queries=len(qindex),
                          group_query=group_query, method=method, norm=norm, k=k, missing=missing)
    order = _ranking(group_query, fused, lambda rows: docno_key(first[rows]))
    if depth is not None:
        starts = np.searchsorted(group_query[order], np.arange(len(qindex)))
        keep = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)])) < depth
        order = order[keep]
    sizes = np.bincount(group_query[order], minlength=len(qindex))
    out = Run(list(qindex), np.r_[0, np.cumsum(sizes)].astype(np.int64), ids.take(first[order]), fused[order],
              name=name or method)
    out._checked = True  # one row per group
    return out


def fuse_scores(scores, qid, *, present=None, method: str = "combsum", norm: str | None = "min-max",
                k: float = 60, missing: str = "skip") -> np.ndarray:
    """Fuse several systems' scores of the same rows (see the module's definitions).

    Parameters
    ----------
    scores : array of shape (n_runs, n_rows)
        One row of scores per system; finite.
    qid : array of shape (n_rows,)
        The query of each row (the documents of a query need not be contiguous).
    present : bool array of shape (n_runs, n_rows), optional
        Which rows each system retrieved (default: all); every row must be retrieved by one.
    method, norm, k, missing
        As for :func:`fuse`. Tied scores rank in row order (the earlier row first).

    Returns
    -------
    ndarray of shape (n_rows,)
        The fused score of each row.
    """
    method, norm = _check_options(method, norm, k, missing, None)
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] < 2 or s.shape[1] < 1:
        raise InputError(f"scores must be a 2-d array (n_runs >= 2, n_rows >= 1); got shape {s.shape}")
    qid = np.asarray(qid)
    if qid.shape != (s.shape[1],):
        raise InputError(f"qid must have one entry per row ({s.shape[1]}); got shape {qid.shape}")
    p = np.ones(s.shape, dtype=bool) if present is None else np.asarray(present)
    if p.shape != s.shape or p.dtype != bool:
        raise InputError(f"present must be a bool array of the scores' shape {s.shape}; got {p.dtype} {p.shape}")
    if not np.all(np.isfinite(s[p])):
        raise InputError("scores must be finite where present (no NaN or inf)")
    if not p.any(axis=0).all():
        raise InputError(f"every row must be retrieved by at least one run; row {int(np.argmin(p.any(axis=0)))} "
                         "is by none")
    _, q_of_row = np.unique(qid, return_inverse=True)
    rows_by_q = np.argsort(q_of_row, kind="stable")
    group_of_row = np.empty(len(qid), dtype=np.int64)
    group_of_row[rows_by_q] = np.arange(len(qid))
    r_, row = np.nonzero(p)
    fused = _fused_values(r_.astype(np.int64), q_of_row[row].astype(np.int64), group_of_row[row], s[r_, row],
                          lambda entries: -row[entries], n_runs=s.shape[0], n_queries=int(q_of_row.max()) + 1,
                          group_query=q_of_row[rows_by_q], method=method, norm=norm, k=k, missing=missing)
    return fused[group_of_row]
