"""TREC qrels (``qid 0 docno rel``) and run files (``qid Q0 docno rank score tag``).

Both are read into the dict-of-dicts form that pytrec_eval and ranx take:
``{qid: {docno: value}}`` (insertion order = file order).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from rankwise.data.dataset import RankingDataset
from rankwise.errors import InputError, ParseError

__all__ = ["read_trec_qrels", "write_trec_qrels", "read_trec_run", "write_trec_run"]


def _lines(path: Path):
    import gzip

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ParseError(path, line, "not valid UTF-8 text") from None
    return text.splitlines()


def read_trec_qrels(path) -> dict[str, dict[str, int]]:
    """Read a TREC qrels file: lines ``qid iter docno rel`` (``iter`` is ignored, usually 0).

    Returns ``{qid: {docno: rel}}`` with integer relevance. A repeated ``(qid, docno)`` is an error.
    """
    path = Path(path)
    out: dict[str, dict[str, int]] = {}
    n = 0
    for k, line in enumerate(_lines(path), start=1):
        f = line.split()
        if not f:
            continue
        if len(f) != 4:
            raise ParseError(path, k, f"{len(f)} fields; a qrels line has 4: 'qid iter docno rel'")
        q, _, d, r = f
        try:
            rel = int(r)
        except ValueError:
            raise ParseError(path, k, f"relevance {r!r} is not an integer; expected 'qid iter docno rel'") from None
        docs = out.setdefault(q, {})
        if d in docs:
            raise ParseError(path, k, f"document {d!r} of query {q!r} is judged twice")
        docs[d] = rel
        n += 1
    if n == 0:
        raise ParseError(path, None, "empty qrels file; expected lines 'qid iter docno rel'")
    return out


def read_trec_run(path) -> dict[str, dict[str, float]]:
    """Read a TREC run file: lines ``qid Q0 docno rank score tag``.

    Returns ``{qid: {docno: score}}``. The ``rank`` column is checked to be an integer but,
    as in trec_eval, ordering comes from the scores.
    """
    path = Path(path)
    out: dict[str, dict[str, float]] = {}
    n = 0
    for k, line in enumerate(_lines(path), start=1):
        f = line.split()
        if not f:
            continue
        if len(f) != 6:
            raise ParseError(path, k, f"{len(f)} fields; a run line has 6: 'qid Q0 docno rank score tag'")
        q, _, d, rank, score, _tag = f
        try:
            int(rank)
        except ValueError:
            raise ParseError(path, k, f"rank {rank!r} is not an integer; expected 'qid Q0 docno rank score tag'") from None
        try:
            s = float(score)
        except ValueError:
            raise ParseError(path, k, f"score {score!r} is not a number; expected 'qid Q0 docno rank score tag'") from None
        if not math.isfinite(s):
            raise ParseError(path, k, f"score {score!r} is not finite")
        docs = out.setdefault(q, {})
        if d in docs:
            raise ParseError(path, k, f"document {d!r} appears twice for query {q!r}")
        docs[d] = s
        n += 1
    if n == 0:
        raise ParseError(path, None, "empty run file; expected lines 'qid Q0 docno rank score tag'")
    return out


def _doc_names(ds: RankingDataset) -> np.ndarray:
    if ds.doc_ids is not None:
        return ds.doc_ids
    sizes = ds.query_sizes
    within = np.arange(len(ds)) - np.repeat(ds.query_offsets[:-1], sizes)
    return np.array([f"d{k}" for k in within.tolist()])


def _check_token(value: str, what: str):
    if not value or any(c.isspace() for c in value):
        raise InputError(f"{what} {value!r} cannot be written to a TREC file: it must be non-empty without whitespace")


def write_trec_qrels(qrels, path) -> None:
    """Write ``{qid: {docno: rel}}`` or a RankingDataset (labels as integer relevance) as qrels.

    A data set without ``doc_ids`` names documents ``d0, d1, ...`` within each query.
    """
    if isinstance(qrels, RankingDataset):
        ds = qrels
        if np.any(ds.labels != np.round(ds.labels)):
            raise InputError("qrels need integer relevance labels; this data set has fractional labels")
        names = _doc_names(ds)
        items = zip(ds.qid.tolist(), names.tolist(), ds.labels.astype(np.int64).tolist())
    elif isinstance(qrels, dict):
        items = ((q, d, r) for q, docs in qrels.items() for d, r in docs.items())
    else:
        raise InputError(f"qrels must be a dict {{qid: {{docno: rel}}}} or a RankingDataset; got {type(qrels).__name__}")
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for q, d, r in items:
            _check_token(str(q), "query id")
            _check_token(str(d), "doc id")
            if int(r) != r:
                raise InputError(f"relevance {r!r} of ({q}, {d}) is not an integer")
            fh.write(f"{q} 0 {d} {int(r)}\n")


def write_trec_run(run, path, *, scores=None, tag: str = "rankwise") -> None:
    """Write a TREC run: ``{qid: {docno: score}}``, or a RankingDataset with per-row ``scores``.

    Documents are written in trec_eval's order (score descending, then docno descending) with
    ``rank`` 1, 2, ... in that order; scores are written with ``repr`` so they read back exactly.
    """
    _check_token(tag, "tag")
    if isinstance(run, RankingDataset):
        ds = run
        if scores is None:
            raise InputError("scores is required when run is a RankingDataset: one score per row")
        s = np.asarray(scores, dtype=np.float64)
        if s.shape != (len(ds),):
            raise InputError(f"scores must have one entry per row ({len(ds)}); got shape {s.shape}")
        if not np.all(np.isfinite(s)):
            raise InputError("scores contain NaN or inf")
        names = _doc_names(ds)
        run = {}
        for qi, q in enumerate(ds.query_ids.tolist()):
            a, b = ds.query_offsets[qi], ds.query_offsets[qi + 1]
            run[q] = dict(zip(names[a:b].tolist(), s[a:b].tolist()))
    elif not isinstance(run, dict):
        raise InputError(f"run must be a dict {{qid: {{docno: score}}}} or a RankingDataset; got {type(run).__name__}")
    elif scores is not None:
        raise InputError("scores must be None when run is a dict (the dict holds the scores)")
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for q, docs in run.items():
            _check_token(str(q), "query id")
            order = sorted(docs.items(), key=lambda kv: (-float(kv[1]), _Desc(str(kv[0]))))
            for rank, (d, sc) in enumerate(order, start=1):
                _check_token(str(d), "doc id")
                if not math.isfinite(float(sc)):
                    raise InputError(f"score of ({q}, {d}) is not finite")
                fh.write(f"{q} Q0 {d} {rank} {float(sc)!r} {tag}\n")


class _Desc:
    """Sort key wrapper: reverses string order (docno descending among tied scores)."""

    __slots__ = ("s",)

    def __init__(self, s):
        self.s = s

    def __lt__(self, other):
        return self.s > other.s

    def __eq__(self, other):
        return self.s == other.s
