"""TREC qrels (``qid iter docno rel``) and run files (``qid Q0 docno rank score tag``).

:class:`Qrels` and :class:`Run` hold a file's content as flat arrays (ids as byte spans with a
64-bit hash, values as numpy arrays): reading a run of millions of lines never builds a Python
string per line. Both read plain or gzipped files, and convert from and to the dict-of-dicts
form that pytrec_eval and ranx take (``{qid: {docno: value}}``) and pandas frames.
:func:`read_trec_qrels` / :func:`read_trec_run` return that dict form directly.

What the reader accepts is what trec_eval reads: fields separated by spaces or tabs, blank
lines and ``#`` comment lines skipped, run lines with extra trailing columns, negative
relevance (trec_eval: in the pool but not judged). What it rejects, with ``path:line``: wrong
field counts, numbers that are not plain ASCII decimals (``1_0``, ``١``, ``１``), integers out of
range, non-finite scores, control bytes (NUL...), invisible non-ASCII characters (a byte-order
mark anywhere, NBSP, zero-width spaces), CR-only or mixed line endings, invalid UTF-8, a
document listed twice for one query, and corrupt compression.
"""
from __future__ import annotations

import math
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rankwise._io import atomic_write
from rankwise.errors import InputError, ParseError

if TYPE_CHECKING:
    from rankwise.data.dataset import RankingDataset

__all__ = ["Qrels", "Run", "read_trec_qrels", "write_trec_qrels", "read_trec_run", "write_trec_run"]


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when it starts with the gzip magic; errors name the file."""
    import gzip
    import zlib

    if not path.exists():
        raise FileNotFoundError(2, "no such file", str(path))
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise ParseError(path, None, f"corrupt gzip data ({exc}); expected a complete .gz file") from None
    if raw.isascii():  # ASCII (the usual case) is valid UTF-8, control bytes are the kernel's: skip the decode
        return raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ParseError(path, line, "not valid UTF-8 text") from None
    if not text.startswith("\ufeff"):  # a leading BOM: the kernel's own message
        _check_printable(path, text)
    return raw


def _check_printable(path: Path, text: str) -> None:
    """Refuse invisible non-ASCII characters (a byte-order mark inside the file, NBSP, zero-width
    or line/paragraph separators, private-use or unassigned code points): fields are split on ASCII
    spaces and tabs only, so such a character would silently become part of an id."""
    body = text.replace("\n", "").replace("\r", "").replace("\t", "")
    if body.isprintable():
        return
    import unicodedata

    for pos, ch in enumerate(text):
        if ch not in "\n\r\t" and not ch.isprintable():
            break
    line = text.count("\n", 0, pos) + 1
    what = "a byte-order mark" if ch == "\ufeff" else unicodedata.name(ch, "an unnamed character")
    raise ParseError(path, line, f"invisible character U+{ord(ch):04X} ({what}) in the line; expected "
                                 "printable text with fields separated by spaces or tabs (it would "
                                 "become part of an id)")


class _Ids:
    """Ids as spans of a byte buffer, with their 64-bit hashes."""

    __slots__ = ("buf", "s", "e", "h", "all_str")

    def __init__(self, buf, s, e, h=None):
        from rankwise.data import _trec_kernel as TK

        self.buf, self.s, self.e = buf, s, e
        self.all_str = False
        self.h = TK.hashes(buf, s, e) if h is None else h

    @classmethod
    def from_strings(cls, items, n: int, what: str):
        from rankwise.data import _trec_kernel as TK

        # ``items``: a sequence, or a function returning a fresh iterator (an iterator that the
        # first join consumed part of could not be walked again for the str() fallback)
        all_str = True
        try:
            text = "\n".join(items() if callable(items) else items)
        except TypeError:
            all_str = False
            text = "\n".join(map(str, items() if callable(items) else items))
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"{what} must be valid Unicode text") from None
        buf = np.frombuffer(data, dtype=np.uint8)
        if n == 0:
            return cls(buf, np.zeros(0, np.int64), np.zeros(0, np.int64))
        s, e, h = TK.split_hash(buf, n)
        if len(s) != n or e[-1] != len(buf):
            raise InputError(f"a {what} contains a line break; ids must be single tokens")
        out = cls(buf, s, e, h)
        out.all_str = all_str
        return out

    @classmethod
    def from_keys(cls, dicts, n: int, what: str):
        """Ids of the keys of ``dicts`` (a sequence of dicts), in order: one join per dict, then
        one of the parts (faster than one join over all the keys); keys that are not all str
        take ``from_strings``' str() path."""
        try:
            parts = ["\n".join(d) for d in dicts if d]
        except TypeError:
            return cls.from_strings(lambda: chain.from_iterable(dicts), n, what)
        return cls.from_strings(parts, n, what)

    def take(self, rows):
        return _Ids(self.buf, self.s[rows], self.e[rows], self.h[rows])

    def string(self, r: int) -> str:
        return self.buf[self.s[r]:self.e[r]].tobytes().decode("utf-8")

    def strings(self, a: int = 0, b: int | None = None) -> list[str]:
        b = len(self.s) if b is None else b
        if b <= a:
            return []
        # one decode of the covering slice, split on the separator bytes between the spans
        lo, hi = int(self.s[a]), int(self.e[b - 1])
        chunk = self.buf[lo:hi].tobytes()
        if np.all(self.s[a + 1:b] == self.e[a:b - 1] + 1) and chunk.count(b"\n") == b - a - 1:
            return chunk.decode("utf-8").split("\n")
        return [self.string(r) for r in range(a, b)]


def _dict_columns(dicts: list, n: int):
    """``(ids, values)`` of the ``n`` items of ``dicts`` (``{docno: value}`` dicts, in order) in
    one compiled walk (``_trec_kernel.dict_rows``): the ids those of ``_Ids.from_keys``, the
    values float64 as ``np.fromiter`` makes them. None where an item is not of the plain kinds
    the walk reads (``str`` keys without a line break, ``float`` or ``int`` values): the caller
    takes its general path then, which reads or refuses them."""
    from rankwise.data import _trec_kernel as TK

    got = TK.dict_rows(dicts, n)
    if got is None:
        return None
    buf, s, e, h, values = got
    ids = _Ids(buf, s, e, h)
    ids.all_str = True
    return ids, values


def _dict_values(dicts: list, n: int, refused: str):
    """``(ids, values)`` of the ``n`` items of ``dicts``: :func:`_dict_columns`' walk, else the general path,
    which reads the other kinds of keys and values or refuses a value that is not a number
    (``InputError(refused)``)."""
    walked = _dict_columns(dicts, n)
    if walked is not None:
        return walked
    ids = _Ids.from_keys(dicts, n, "document id")
    try:
        return ids, np.fromiter(chain.from_iterable(d.values() for d in dicts), dtype=np.float64, count=n)
    except (TypeError, ValueError):
        raise InputError(refused) from None


def _check_final_newline(path: Path, raw: bytes) -> None:
    """A last line without a line break is a file cut short (a killed writer, a partial copy):
    refused, since its prefix would score as a whole run. trec_eval's formats have no comment or
    trailer to carry more; rankwise writes its files atomically, always ending in a newline."""
    if raw and not raw.endswith(b"\n"):
        raise ParseError(path, raw.count(b"\n") + 1, "the last line has no line break at its end: the file looks "
                                                     "truncated (a copy or a writer cut short); if it is complete "
                                                     "as it is, pass allow_truncated=True, "
                                                     "or end it with a newline")


def _scan(path, kind: int, allow_truncated: bool = False):
    from rankwise.data import _trec_kernel as TK

    path = Path(path)
    raw = _read_bytes(path)
    buf = np.frombuffer(raw, dtype=np.uint8)
    (err, line, n, lines, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e) = \
        TK.scan(buf, kind, -1, TK._POW10)
    if err:
        _raise_scan(path, raw, err, line, ival, kind)
    if not allow_truncated:
        _check_final_newline(path, raw)
    what = "qrels" if kind == 0 else "run"
    if n == 0:
        expected = "'qid iter docno rel'" if kind == 0 else "'qid Q0 docno rank score tag'"
        raise ParseError(path, None, f"empty {what} file; expected lines {expected}")
    lines, qs, qe, ds, de, qh, dh = lines[:n], qs[:n], qe[:n], ds[:n], de[:n], qh[:n], dh[:n]
    if kind == 1:
        fval = fval[:n]
        if n_fb:
            _convert_scores(path, raw, buf, fb[:n_fb], fval, lines)
        tag = raw[tag_s:tag_e].decode("utf-8")
        values = fval
    else:
        values = ival[:n]
        tag = None
    return path, buf, lines, _Ids(buf, qs, qe, qh), _Ids(buf, ds, de, dh), values, tag


def _convert_scores(path, raw, buf, fb, fval, lines):
    """Python's float() of the scores outside the kernel's exact fast path (``fb``: row, start,
    end; the kernel checked their syntax): the tokens gathered into one buffer, converted by one
    ``map(float, ...)``, so the work grows with the number of such scores and never with the
    file's size per score."""
    from rankwise.data import _trec_kernel as TK

    values = np.fromiter(map(float, TK.fallback_tokens(buf, fb).tobytes().split()), dtype=np.float64,
                         count=len(fb))
    bad = ~np.isfinite(values)
    if bad.any():  # beyond the range of a double (1e999)
        i = int(np.flatnonzero(bad)[0])
        tok = raw[fb[i, 1]:fb[i, 2]].decode("ascii")
        raise ParseError(path, int(lines[fb[i, 0]]), f"score {tok!r} is out of the range of a double")
    fval[fb[:, 0]] = values


def _token(raw, line: int, field: int) -> str:
    """Field ``field`` of line ``line`` (1-based) of the file's bytes, or of its lines already split."""
    text = (raw.split(b"\n") if isinstance(raw, bytes) else raw)[line - 1].decode("utf-8", "replace").split()
    return text[field] if field < len(text) else ""


def _raise_scan(path, raw, err, line, ival, kind):
    from rankwise.data import _trec_kernel as TK

    shape = "'qid iter docno rel'" if kind == 0 else "'qid Q0 docno rank score tag'"
    if err == TK.E_FIELDS:
        nf = len(raw.split(b"\n")[line - 1].split())
        if kind == 0:
            msg = f"{nf} fields; a qrels line has 4: {shape}"
        else:
            msg = f"{nf} fields; a run line has 6 (more are ignored): {shape}"
    elif err == TK.E_REL:
        msg = f"relevance {_token(raw, line, 3)!r} is not an integer (ASCII digits, within 64 bits); expected {shape}"
    elif err == TK.E_REL_RANGE:
        msg = f"relevance {_token(raw, line, 3)!r} is out of range (|rel| <= {TK.REL_MAX})"
    elif err == TK.E_RANK:
        msg = f"rank {_token(raw, line, 3)!r} is not an integer (ASCII digits, within 64 bits); expected {shape}"
    elif err == TK.E_SCORE:
        tok = _token(raw, line, 4)
        if tok.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            msg = f"score {tok!r} is not finite"
        else:
            msg = f"score {tok!r} is not a number; expected {shape}"
    elif err == TK.E_CONTROL:
        bad = next((c for c in raw.split(b"\n")[line - 1] if (c < 32 and c not in (9, 13)) or c == 127), 0)
        msg = f"control byte 0x{bad:02x} in the line (NUL or another non-printing character); expected text"
    elif err == TK.E_CR:
        msg = "a carriage return (CR) not followed by LF: CR-only line endings are not supported; " \
              "convert the file to LF (or CRLF) line endings"
    elif err == TK.E_MIXED_EOL:
        msg = "mixed line endings (CRLF and LF in one file); use one kind throughout"
    elif err == TK.E_BOM:
        msg = "the file starts with a UTF-8 byte-order mark; save it without one (it would become part of a query id)"
    else:  # pragma: no cover
        msg = f"malformed line (code {err})"
    raise ParseError(path, int(line), msg)


def _group(qids: _Ids, lines=None):
    """Query order (first appearance), per-row query index and the row order that makes every
    query's rows contiguous (None when they already are)."""
    from rankwise.data import _trec_kernel as TK

    seg = TK.segments(qids.h)
    starts = seg[:-1]
    names = [qids.string(int(r)) for r in starts]
    index: dict[str, int] = {}
    seg_q = np.empty(len(starts), dtype=np.int64)
    for i, name in enumerate(names):
        seg_q[i] = index.setdefault(name, len(index))
    sizes = np.diff(seg)
    counts = np.bincount(seg_q, weights=sizes, minlength=len(index)).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    if len(index) == len(starts):
        return list(index), offsets, None
    row_q = np.repeat(seg_q, sizes)
    return list(index), offsets, np.argsort(row_q, kind="stable")


def _check_unique(what, path, offsets, qids, docs, lines, dup_message):
    """Sort each query's rows by document hash; raise on a document listed twice."""
    from rankwise.data import _trec_kernel as TK

    order, err, row = TK.sort_by_hash(offsets, docs.h, docs.buf, docs.s, docs.e)
    if err == 1:
        q = qids[int(np.searchsorted(offsets, row, side="right") - 1)]
        msg = dup_message.format(d=docs.string(int(row)), q=q)
        if lines is not None:
            raise ParseError(path, int(lines[row]), msg)
        raise InputError(msg)
    if err == 2:  # pragma: no cover - two different ids with one 64-bit hash
        raise InputError(f"{what}: two document ids share a 64-bit hash; please report this file")
    return order


def grade_levels(offsets, grades):
    """``(offsets, grades, counts)``: per group, its distinct grades >= 0 (ascending) and their counts."""
    from rankwise.data import _trec_kernel as TK

    return TK.grade_levels(np.ascontiguousarray(offsets, dtype=np.int64), np.ascontiguousarray(grades, dtype=np.int64))


class Qrels:
    """Relevance judgments: per query, documents and integer grades.

    Build with :meth:`read` (a TREC qrels file, plain or ``.gz``), :meth:`from_dict`
    (``{qid: {docno: rel}}``, the form pytrec_eval and ranx use; a ``ranx.Qrels`` works too) or
    :meth:`from_pandas`. Grades are integers; a negative grade is trec_eval's "in the pool but
    not judged" (counted neither relevant nor judged non-relevant).

    Attributes
    ----------
    qids : list of str
        Query ids, in order of first appearance.
    offsets : numpy.ndarray
        int64, ``n_queries + 1``: query ``i`` holds rows ``offsets[i]:offsets[i+1]``.
    rel : numpy.ndarray
        int64 grade per row (rows of a query in the order read).
    """

    def __init__(self, qids, offsets, docs: _Ids, rel, *, path=None, lines=None):
        self.qids = list(qids)
        self.offsets = offsets
        self.docs = docs
        self.rel = rel
        self.path = path
        self._lines = lines
        self._index = {q: i for i, q in enumerate(self.qids)}

    # ------------------------------------------------------------------ building
    @classmethod
    def read(cls, path, *, allow_truncated: bool = False) -> "Qrels":
        """Read a TREC qrels file (``qid iter docno rel``; ``iter`` is ignored).

        A file whose last line has no line break looks truncated and is refused with ``path:line``
        unless ``allow_truncated=True``.
        """
        path, _, lines, qids, docs, rel, _ = _scan(path, 0, allow_truncated)
        return cls._build(qids, docs, rel, path=path, lines=lines)

    @classmethod
    def _build(cls, qid_ids, docs, rel, *, path=None, lines=None, names=None, offsets=None, unique=False):
        from rankwise.data import _trec_kernel as TK

        if names is None:
            names, offsets, order = _group(qid_ids)
            if order is not None:
                docs, rel = docs.take(order), rel[order]
                lines = None if lines is None else lines[order]
        # a document judged twice in a topic is an error (``unique``: the str keys of one dict cannot repeat)
        if not unique:
            row, collision = TK.first_duplicate(offsets, docs.h, docs.buf, docs.s, docs.e)
            if row >= 0 or collision:
                _check_unique("qrels", path, offsets, names, docs, lines,
                              "document {d!r} of query {q!r} is judged twice")
        return cls(names, offsets, docs, np.ascontiguousarray(rel, dtype=np.int64), path=path, lines=lines)

    @classmethod
    def from_dict(cls, qrels) -> "Qrels":
        """From ``{qid: {docno: rel}}`` (pytrec_eval / ranx form) or an object with ``to_dict()``."""
        if isinstance(qrels, Qrels):
            return qrels
        qrels = _as_nested_dict(qrels, "qrels")
        names = [str(q) for q in qrels]
        sizes = [len(d) for d in qrels.values()]
        n = int(sum(sizes))
        docs, rel = _dict_values(list(qrels.values()), n, "qrels grades must be integers: {qid: {docno: rel}}")
        if not np.all(np.isfinite(rel)) or np.any(rel != np.round(rel)) or np.any(np.abs(rel) > 1e6):
            raise InputError("qrels grades must be integers with |rel| <= 1,000,000")
        offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        return cls._build(None, docs, rel.astype(np.int64), names=names, offsets=offsets, unique=docs.all_str)

    @classmethod
    def from_pandas(cls, frame, *, qid="qid", docno="docno", rel="rel") -> "Qrels":
        """From a DataFrame with columns ``qid``, ``docno``, ``rel`` (names configurable;
        ranx's ``q_id``, ``doc_id``, ``score`` are recognised)."""
        qid, docno, rel = _columns(frame, (qid, docno, rel), ("q_id", "doc_id", "score"), "qrels")
        q = frame[qid].astype(str).to_numpy(dtype=object)
        d = frame[docno].astype(str).to_numpy(dtype=object)
        r = frame[rel].to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(r)) or np.any(r != np.round(r)):
            raise InputError(f"qrels column {rel!r} must hold integer grades")
        qi = _Ids.from_strings(q, len(q), "query id")
        di = _Ids.from_strings(d, len(d), "document id")
        return cls._build(qi, di, r.astype(np.int64))

    # ------------------------------------------------------------------ access
    @property
    def n_queries(self) -> int:
        return len(self.qids)

    def __len__(self) -> int:
        return len(self.rel)

    def __contains__(self, qid) -> bool:
        return qid in self._index

    def index(self, qid):
        return self._index.get(qid, -1)

    def levels(self):
        """Per query, the judged grades (>= 0) and how many documents hold each: ``(offsets,
        grades, counts)`` flat, grades ascending within a query."""
        return grade_levels(self.offsets, self.rel)

    def to_dict(self) -> dict:
        """``{qid: {docno: rel}}``."""
        return _nested_dict(self.qids, self.offsets, self.docs, self.rel)

    def __repr__(self) -> str:
        src = f", from {self.path}" if self.path else ""
        return f"Qrels({self.n_queries} queries, {len(self)} judgments{src})"


class Run:
    """A ranked run: per query, documents and their scores.

    Build with :meth:`read` (a TREC run file, plain or ``.gz``), :meth:`from_dict`
    (``{qid: {docno: score}}``; a ``ranx.Run`` works too) or :meth:`from_pandas`. Ranks in the
    file are checked to be integers and, as in trec_eval, otherwise ignored: the order comes
    from the scores (ties: larger docno first).

    Attributes
    ----------
    name : str
        The run's name (file name, or given).
    tag : str or None
        The run tag of the file's first line (trec_eval's ``runid``).
    qids, offsets, scores
        As for :class:`Qrels` (rows of a query in file order).
    """

    def __init__(self, qids, offsets, docs: _Ids, scores, *, name=None, tag=None, path=None, lines=None):
        self.qids = list(qids)
        self.offsets = offsets
        self.docs = docs
        self.scores = scores
        self.name = name
        self.tag = tag
        self.path = path
        self._lines = lines
        self._checked = False

    @classmethod
    def read(cls, path, name: str | None = None, *, allow_truncated: bool = False) -> "Run":
        """Read a TREC run file (``qid Q0 docno rank score tag``, extra columns ignored).

        A file whose last line has no line break looks truncated and is refused with ``path:line``
        unless ``allow_truncated=True``.
        """
        path, _, lines, qid_ids, docs, scores, tag = _scan(path, 1, allow_truncated)
        names, offsets, order = _group(qid_ids)
        if order is not None:
            docs, scores, lines = docs.take(order), scores[order], lines[order]
        run = cls(names, offsets, docs, scores, name=name or path.name, tag=tag, path=path, lines=lines)
        run.hash_order()  # duplicate documents are a file error: find them while the lines are known
        return run

    @classmethod
    def from_dict(cls, run, name: str | None = None) -> "Run":
        """From ``{qid: {docno: score}}`` (pytrec_eval / ranx form) or an object with ``to_dict()``."""
        if isinstance(run, Run):
            return run
        if name is None:
            name = getattr(run, "name", None) if not isinstance(run, dict) else None
        run = _as_nested_dict(run, "run")
        names = [str(q) for q in run]
        sizes = [len(d) for d in run.values()]
        n = int(sum(sizes))
        docs, scores = _dict_values(list(run.values()), n, "run scores must be numbers: {qid: {docno: score}}")
        if not np.all(np.isfinite(scores)):
            raise InputError(f"run scores must be finite; {int((~np.isfinite(scores)).sum())} are NaN or inf")
        offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        out = cls(names, offsets, docs, scores, name=name or "run")
        # the keys of one dict are distinct: with str keys (no str() conversion that could merge
        # two of them) no document can appear twice in a topic
        out._checked = docs.all_str
        return out

    @classmethod
    def from_pandas(cls, frame, *, qid="qid", docno="docno", score="score", name: str | None = None) -> "Run":
        """From a DataFrame with columns ``qid``, ``docno``, ``score`` (ranx's ``q_id``,
        ``doc_id``, ``score`` are recognised)."""
        qid, docno, score = _columns(frame, (qid, docno, score), ("q_id", "doc_id", "score"), "run")
        q = frame[qid].astype(str).to_numpy(dtype=object)
        d = frame[docno].astype(str).to_numpy(dtype=object)
        s = frame[score].to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(s)):
            raise InputError(f"run column {score!r} must hold finite scores")
        qi = _Ids.from_strings(q, len(q), "query id")
        docs = _Ids.from_strings(d, len(d), "document id")
        names, offsets, order = _group(qi)
        if order is not None:
            docs, s = docs.take(order), s[order]
        out = cls(names, offsets, docs, s, name=name or "run")
        out.hash_order()
        return out

    @property
    def n_queries(self) -> int:
        return len(self.qids)

    def __len__(self) -> int:
        return len(self.scores)

    def hash_order(self):
        """Check that no document is listed twice for one query (a ParseError naming the line)."""
        from rankwise.data import _trec_kernel as TK

        if not self._checked:
            row, collision = TK.first_duplicate(self.offsets, self.docs.h, self.docs.buf, self.docs.s, self.docs.e)
            if row >= 0 and not collision:
                q = self.qids[int(np.searchsorted(self.offsets, row, side="right") - 1)]
                msg = f"document {self.docs.string(int(row))!r} appears twice for query {q!r}"
                if self._lines is not None:
                    raise ParseError(self.path, int(self._lines[row]), msg)
                raise InputError(f"run {self.name}: {msg}")
            if collision:  # pragma: no cover - two different ids with one 64-bit hash: exact check
                _check_unique(self.name, self.path, self.offsets, self.qids, self.docs, self._lines,
                              "document {d!r} appears twice for query {q!r}")
            self._checked = True

    def to_dict(self) -> dict:
        """``{qid: {docno: score}}``."""
        return _nested_dict(self.qids, self.offsets, self.docs, self.scores)

    def __repr__(self) -> str:
        return f"Run({self.name!r}: {self.n_queries} queries, {len(self)} documents)"


def _nested_dict(qids, offsets, docs: _Ids, values) -> dict:
    """``{qid: {docno: value}}`` of a Qrels or Run's flat arrays."""
    out = {}
    v = values.tolist()
    for i, q in enumerate(qids):
        a, b = int(offsets[i]), int(offsets[i + 1])
        out[q] = dict(zip(docs.strings(a, b), v[a:b]))
    return out


def _as_nested_dict(obj, what: str) -> dict:
    if not isinstance(obj, dict) and hasattr(obj, "to_dict"):
        obj = obj.to_dict()
    if not isinstance(obj, dict) or not all(isinstance(v, dict) for v in obj.values()):
        raise InputError(f"{what} must be a dict {{qid: {{docno: value}}}} (pytrec_eval / ranx form); "
                         f"got {type(obj).__name__}")
    return obj


def _columns(frame, wanted, ranx_names, what):
    cols = set(frame.columns)
    if all(c in cols for c in wanted):
        return wanted
    if all(c in cols for c in ranx_names):
        return ranx_names
    raise InputError(f"{what} frame needs columns {list(wanted)} (or ranx's {list(ranx_names)}); "
                     f"got {list(frame.columns)}")


def read_trec_qrels(path, *, allow_truncated: bool = False) -> dict[str, dict[str, int]]:
    """Read a TREC qrels file (``qid iter docno rel``) as ``{qid: {docno: rel}}``.

    Same rules as :meth:`Qrels.read`; a repeated ``(qid, docno)`` is an error.
    """
    q = Qrels.read(path, allow_truncated=allow_truncated)
    # keep the file order of the documents in each query
    out = {}
    order = np.argsort(q._lines, kind="stable")
    qi = np.repeat(np.arange(q.n_queries), np.diff(q.offsets))[order]
    rel = q.rel[order].tolist()
    names = q.qids
    for r, qq, rv in zip(order.tolist(), qi.tolist(), rel):
        out.setdefault(names[qq], {})[q.docs.string(r)] = rv
    return out


def read_trec_run(path, *, allow_truncated: bool = False) -> dict[str, dict[str, float]]:
    """Read a TREC run file (``qid Q0 docno rank score tag``) as ``{qid: {docno: score}}``.

    The ``rank`` column is checked to be an integer but, as in trec_eval, ordering comes from
    the scores. Same rules as :meth:`Run.read`.
    """
    return Run.read(path, allow_truncated=allow_truncated).to_dict()


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
    from rankwise.data.dataset import RankingDataset  # here: the readers need neither it nor scipy

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
    with atomic_write(path, "w", newline="\n") as fh:  # the old file or the whole new one, never a prefix
        for q, d, r in items:
            _check_token(str(q), "query id")
            _check_token(str(d), "doc id")
            if int(r) != r:
                raise InputError(f"relevance {r!r} of ({q}, {d}) is not an integer")
            fh.write(f"{q} 0 {d} {int(r)}\n")


def write_trec_run(run, path, *, scores=None, tag: str = "rankwise", depth: int | None = None) -> None:
    """Write a TREC run: a :class:`Run`, ``{qid: {docno: score}}``, or a RankingDataset with per-row ``scores``.

    Documents are written in trec_eval's order (score descending, then docno descending) with
    ``rank`` 1, 2, ... in that order; scores are written with ``repr`` so they read back exactly.
    ``depth``: write only the first ``depth`` documents of each query in that order (a top-k list).
    """
    _check_token(tag, "tag")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1):
        raise InputError(f"depth must be a positive integer or None; got {depth!r}")
    from rankwise.data.dataset import RankingDataset

    if isinstance(run, Run) and scores is None:
        run = run.to_dict()
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
    with atomic_write(path, "w", newline="\n") as fh:  # the old file or the whole new one, never a prefix
        for q, docs in run.items():
            _check_token(str(q), "query id")
            order = sorted(docs.items(), key=lambda kv: (-float(kv[1]), _Desc(str(kv[0]))))
            for rank, (d, sc) in enumerate(order[:depth], start=1):
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
