"""LETOR / SVMlight text files: ``label qid:Q i:v ... #docid = X``.

Reading is one compiled pass over the raw bytes (the Cython kernel ``_svmlight_kernel``, built at
install, runs without the GIL); a malformed token stops the pass and is reported as
``path:line: what is wrong, what was expected``. Writing gives back
the same data set exactly (``write`` then ``read`` is the identity on labels, qids, doc ids and
float32 feature values).
"""
from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import lzma
import os
import re
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from rankwise._io import atomic_write
from rankwise.data.dataset import RankingDataset
from rankwise.data.groups import offsets_from_sizes
from rankwise.errors import InputError, ParseError

__all__ = ["read_svmlight", "write_svmlight", "read_group_file"]

_MESSAGES = {
    1: "label {tok!r} is not a number; each line must start with a numeric relevance label",
    2: "query id {tok!r} is not an integer; expected 'qid:<integer>' right after the label",
    3: "stray token {tok!r}; expected 'index:value' pairs after the label and qid",
    4: "feature index in {tok!r} is not a non-negative integer; expected 'index:value'",
    5: "value in {tok!r} is not a number; expected 'index:value' with a decimal value or NULL",
    6: "feature index 0 in {tok!r}, but the file is read as one-based (LETOR convention); "
       "pass zero_based=True for zero-based indices",
    7: "duplicate feature index in {tok!r}; each index may appear once per line",
    8: "feature index in {tok!r} is smaller than the previous one; indices must increase along a line",
    9: "{tok!r} is misplaced; 'qid:<integer>' must appear once, right after the label",
    10: "feature index in {tok!r} is out of range; n_features={n_features} allows indices up to {max_index}",
    11: "line starts with {tok!r}; expected a numeric label first (e.g. '2 qid:7 1:0.5 ...')",
    13: "control character {tok!r} in the line (binary or corrupt file?); expected printable text",
}

# ASCII digits only: Python's float() also takes '١', '１' and '1_0', which no LETOR file holds
_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)",
                        re.IGNORECASE | re.ASCII)
#: largest |relevance label| a reader accepts: exponential gains 2**label - 1 stay finite in float64
MAX_ABS_LABEL = 1023.0


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed (gzip, bzip2, xz by their magic bytes) and checked by
    :func:`check_text_bytes`. A truncated or corrupt archive is a ``ParseError``."""
    return _decode(path, _read_raw(path))


def _read_raw(path: Path) -> bytes:
    """The file's bytes as stored (what the cache's content digest covers)."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory; expected a data file") from None


def _decode(path: Path, raw: bytes) -> bytes:
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        elif raw[:3] == b"BZh":
            raw = bz2.decompress(raw)
        elif raw[:6] == b"\xfd7zXZ\x00":
            raw = lzma.decompress(raw)
    except (OSError, EOFError, lzma.LZMAError, ValueError, zlib.error) as exc:
        kind = "zlib.error" if isinstance(exc, zlib.error) else type(exc).__name__
        raise ParseError(path, None, f"cannot decompress ({kind}: {exc}); the file is truncated or corrupt") from None
    check_text_bytes(path, raw)
    return raw


#: first and last lines of a file written by :func:`write_svmlight` (comment lines to other readers)
_HEAD = b"# rankwise-svmlight 1: complete only when the last line is '# rankwise-svmlight end rows=N sha256=...'\n"
_END = b"# rankwise-svmlight end "
_END_RE = re.compile(rb"# rankwise-svmlight end rows=([0-9]+) sha256=([0-9a-f]{64})\r?\n\Z")


def _check_whole(path, data: bytes) -> int | None:
    """Refuse a file that looks cut short; the row count its trailer promises (None: no trailer).

    A last line without a line break is a truncated file (or a hand-written one: the message
    names ``allow_truncated=True``). A file :func:`write_svmlight` wrote starts with ``_HEAD``
    and must end with its trailer, whose SHA-256 covers every byte before it.
    """
    hint = "if the file is complete as it is, pass allow_truncated=True"
    if data and not data.endswith(b"\n"):
        raise ParseError(path, data.count(b"\n") + 1, "the last line has no line break at its end: the file looks "
                                                      f"truncated (a copy or a writer cut short); {hint}, or end it "
                                                      "with a newline")
    if not data.startswith(_HEAD[:20]):
        return None
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    m = _END_RE.match(data, start)
    n_lines = data.count(b"\n")
    if m is None:
        raise ParseError(path, n_lines, "rankwise wrote this file with a closing '# rankwise-svmlight end "
                                        f"rows=N sha256=...' line, and it is missing: the file is truncated; {hint}")
    digest = hashlib.sha256(memoryview(data)[:start]).hexdigest()
    if digest != m.group(2).decode():
        raise ParseError(path, n_lines, f"the file's SHA-256 ({digest[:16]}...) is not the one rankwise wrote in "
                                        f"its last line ({m.group(2).decode()[:16]}...): the file was changed or "
                                        "damaged after writing; if it was edited on purpose, delete its first and "
                                        f"last '# rankwise-svmlight' lines (or pass allow_truncated=True)")
    return int(m.group(1))


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def check_text_bytes(path, data: bytes) -> None:
    """Refuse what a line-based text format must not hold, with ``path:line``.

    - byte-order marks (UTF-8, UTF-16, UTF-32): the first token would silently carry them;
    - NUL bytes (binary or corrupt files);
    - a carriage return not followed by a line feed (classic Mac "CR" line endings, under which a
      whole file reads as one line, or a stray CR inside a line);
    - mixed line endings (some lines CRLF, others LF alone).
    """
    for bom, name in ((b"\xef\xbb\xbf", "UTF-8"), (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")):
        if data.startswith(bom):
            raise ParseError(path, 1, f"the file starts with a {name} byte-order mark; expected plain ASCII/UTF-8 text "
                                      "without a BOM (re-save it without the BOM)")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ParseError(path, _line_of(data, nul), "NUL byte in the text (a binary or corrupt file?); expected "
                                                   "plain text lines")
    if b"\r" in data:
        from rankwise.data import _svmlight_kernel as K

        bare_cr, lone_lf = K.line_end_faults(np.frombuffer(data, dtype=np.uint8))
        if bare_cr >= 0:
            raise ParseError(path, _line_of(data, bare_cr),
                             "carriage return not followed by a line feed (old Mac 'CR' line endings or a stray CR); "
                             "expected LF or CRLF line endings")
        if lone_lf >= 0:
            first_crlf = _line_of(data, data.index(b"\r\n"))
            raise ParseError(path, _line_of(data, lone_lf),
                             f"mixed line endings: line {first_crlf} ends with CRLF but this line with LF alone; "
                             "expected one style throughout the file")


def _line_text(buf: bytes, line: int) -> str:
    lines = buf.split(b"\n", line)
    return lines[line - 1].decode("utf-8", "replace").rstrip("\r") if len(lines) >= line else ""


_GROUP_SIZE_RE = re.compile(rb"[0-9]+")
#: more rows than any file can hold (and below int64's limit, so offsets never wrap)
_MAX_ROWS = 2**53


def read_group_file(path, *, n_rows: int | None = None) -> np.ndarray:
    """Read a LightGBM ``.query`` / XGBoost ``.group`` file (one group size per line).

    Returns ``query_offsets`` (int64). With ``n_rows``, the sizes must add up to it.
    """
    path = Path(path)
    return _group_offsets(path, _read_bytes(path), n_rows)


def _group_offsets(path: Path, data: bytes, n_rows: int | None) -> np.ndarray:
    sizes = []
    total = 0
    for k, line in enumerate(data.split(b"\n"), start=1):
        s = line.strip(b" \t\r")
        if not s:
            continue
        if not _GROUP_SIZE_RE.fullmatch(s):
            raise ParseError(path, k, f"group size {s.decode('utf-8', 'replace')[:40]!r} is not a non-negative "
                                      "integer; expected one integer (ASCII digits) per line (the size of each "
                                      "consecutive query)")
        v = int(s) if len(s) <= 20 else _MAX_ROWS + 1
        if v == 0:
            raise ParseError(path, k, "group size 0; every query must have at least one row")
        if v > _MAX_ROWS:
            raise ParseError(path, k, f"group size {s.decode()[:30]} is out of range; expected the number of rows of "
                                      f"one query (at most {_MAX_ROWS})")
        total += v
        if total > _MAX_ROWS:
            raise ParseError(path, k, f"group size {v} makes the group sizes add up to {total} rows, beyond "
                                      f"{_MAX_ROWS}; expected the number of rows of each query")
        sizes.append(v)
    if not sizes:
        raise ParseError(path, None, "empty group file; expected one group size per line")
    offsets = offsets_from_sizes(np.asarray(sizes, dtype=np.int64))
    if n_rows is not None and offsets[-1] != n_rows:
        raise ParseError(path, None, f"group sizes add up to {int(offsets[-1])} rows but the data file has "
                                     f"{n_rows} rows; they must be equal")
    return offsets


def _convert_fallbacks(path, buf_bytes, out, labels, values, line_no, indptr):
    kinds, pos, starts, ends = out
    for kind, p, s, e in zip(kinds.tolist(), pos.tolist(), starts.tolist(), ends.tolist()):
        tok = buf_bytes[s:e].decode("utf-8", "replace")
        if not _NUMBER_RE.fullmatch(tok):
            row = p if kind == 1 else int(np.searchsorted(indptr, p, side="right") - 1)
            if kind == 1:
                raise ParseError(path, int(line_no[row]), _MESSAGES[1].format(tok=tok))
            raise ParseError(path, int(line_no[row]), f"value {tok!r} is not a number; "
                                                       "expected 'index:value' with a decimal value or NULL")
        v = float(tok)
        if kind == 1:
            labels[p] = v
        else:
            with np.errstate(over="ignore"):  # beyond float32 becomes inf, reported with its line below
                values[p] = v


def _parse_bytes(path, data: bytes, *, zero_based: bool, n_features: int | None):
    from rankwise.data import _svmlight_kernel as K

    buf = np.frombuffer(data, dtype=np.uint8)
    n_nl, n_colon = K.count_lines_and_colons(buf)
    n_rows_max = int(n_nl) + 1
    nnz_max = int(n_colon) + 1
    fb_max = 1024
    nf = -1 if n_features is None else int(n_features)
    while True:
        res = K.parse(buf, n_rows_max, nnz_max, bool(zero_based), nf, fb_max)
        if res[0] == K.E_FALLBACK_FULL:
            fb_max = n_rows_max + nnz_max
            continue
        break
    (code, line, off, end, labels, qids, has_qid, line_no, docid_s, docid_e,
     indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb) = res
    if code != K.OK:
        tok = data[off:end].decode("utf-8", "replace")
        msg = _MESSAGES[code].format(tok=tok, n_features=n_features,
                                     max_index=(n_features - 1 if zero_based else n_features)
                                     if n_features is not None else None)
        raise ParseError(path, int(line), msg)
    n_rows = int(n_rows)
    nnz = int(nnz)
    labels = labels[:n_rows]
    values = values[:nnz]
    indptr = indptr[: n_rows + 1]
    line_no = line_no[:n_rows]
    if n_fb:
        _convert_fallbacks(path, data, (fb_kind[:n_fb], fb_pos[:n_fb], fb_s[:n_fb], fb_e[:n_fb]),
                           labels, values, line_no, indptr)
    bad = ~np.isfinite(labels)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        tok = _line_text(data, int(line_no[r])).split()[0]
        raise ParseError(path, int(line_no[r]), f"label {tok!r} is not finite; labels must be finite numbers")
    bad = np.abs(labels) > MAX_ABS_LABEL
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        tok = _line_text(data, int(line_no[r])).split()[0]
        raise ParseError(path, int(line_no[r]), f"label {tok!r} is out of range; relevance labels must lie in "
                                                f"[-{MAX_ABS_LABEL:g}, {MAX_ABS_LABEL:g}] (2**label - 1 must be finite)")
    bad = np.isinf(values)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        r = int(np.searchsorted(indptr, k, side="right") - 1)
        col = int(indices[k]) + (0 if zero_based else 1)
        toks = [t for t in _line_text(data, int(line_no[r])).partition("#")[0].split() if t.startswith(f"{col}:")]
        raise ParseError(path, int(line_no[r]), f"infinite value in {toks[0] if toks else col!r} (beyond the float32 "
                                                "range or 'inf'); values must be finite, NULL or nan for missing")
    return dict(n_rows=n_rows, labels=labels, qids=qids[:n_rows], has_qid=has_qid[:n_rows],
                line_no=line_no, docid_s=docid_s[:n_rows], docid_e=docid_e[:n_rows], indptr=indptr,
                indices=indices[:nnz], values=values, max_index=int(max_index), buf=buf)


def _group_file_for(path: Path, query_file) -> Path | None:
    """The group file a read would use: ``query_file``, else ``<path>.query`` or ``<path>.group``."""
    if query_file is not None:
        return Path(query_file)
    for suffix in (".query", ".group"):
        cand = Path(str(path) + suffix)
        if cand.exists():
            return cand
    return None


def _default_cache_root() -> Path:
    env = os.environ.get("RANKWISE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "rankwise" / "svmlight"


def read_svmlight(path, *, query_file=None, strict: bool = False, zero_based: bool = False,
                  n_features: int | None = None, dense: bool | None = None,
                  cache: bool | str | os.PathLike = False, allow_truncated: bool = False) -> RankingDataset:
    """Read a LETOR / SVMlight ranking file into a :class:`RankingDataset`.

    Each non-blank line is ``label [qid:Q] i:v i:v ... [#comment]``; a ``#docid = X`` comment
    gives the row's doc id. ``.gz``, ``.bz2`` and ``.xz`` files are decompressed (recognised by
    their magic bytes); CRLF line endings are accepted; ``i:NULL`` (LETOR 3.0 "Feature-null"
    files) is read as NaN. Absent indices are 0, as in SVMlight.

    Parameters
    ----------
    path : str or Path
        The data file.
    query_file : str or Path, optional
        Group sizes, one integer per line (LightGBM ``.query``, XGBoost ``.group``), for files
        without ``qid:``. When the file has no ``qid:`` and no ``query_file`` is given,
        ``<path>.query`` and ``<path>.group`` are tried.
    strict : bool
        Reject (instead of stably regrouping) queries whose rows are not contiguous.
    zero_based : bool
        Feature index ``i`` goes to column ``i`` (True) or ``i - 1`` (False, the LETOR convention).
    n_features : int, optional
        Number of columns; by default the largest index in the file. An index beyond it is an error.
    dense : bool, optional
        Return ``X`` as a dense array (True) or CSR (False). By default dense when at least half
        of the ``n_rows * n_features`` entries are written in the file (LETOR, MSLR), CSR otherwise.
    cache : bool or path
        Keep a binary copy (``.npy`` + JSON, no pickle) per file path and options; later calls
        load it instead of parsing when the content digests of the file and of its group file
        (``query_file`` or the ``.query`` / ``.group`` found next to it) and of every cached array
        match those recorded. A damaged or foreign entry is rebuilt with a warning; an unwritable
        cache folder means no cache, with a warning. ``True`` uses ``$RANKWISE_CACHE`` or
        ``~/.cache/rankwise/svmlight``; a path names the cache root.
    allow_truncated : bool
        Read a file that looks cut short: one whose last line has no line break (hand-written
        files sometimes lack it), or one :func:`write_svmlight` wrote whose closing
        ``# rankwise-svmlight end rows=N sha256=...`` line is missing or does not match. By
        default such a file is refused with ``path:line``: a truncated file must not load as if
        it were whole.

    Returns
    -------
    RankingDataset
        ``regrouped_rows`` tells how many rows were moved to make queries contiguous.

    Raises
    ------
    ParseError
        ``path:line: what is wrong, what was expected`` on the first malformed token.
    """
    path = Path(path)
    options = dict(query_file=None if query_file is None else str(Path(query_file).resolve()),
                   strict=strict, zero_based=zero_based, n_features=n_features, dense=dense,
                   **({"allow_truncated": True} if allow_truncated else {}))
    entry = None
    if cache:
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file")
        from rankwise.data._cache import Entry

        entry = Entry(_default_cache_root() if cache is True else Path(cache), path, options)
        ds = entry.load(_group_file_for(path, query_file))
        if ds is not None:
            return ds
    if n_features is not None and (not isinstance(n_features, (int, np.integer)) or n_features < 1):
        raise InputError(f"n_features must be a positive integer or None; got {n_features!r}")
    raw = _read_raw(path)
    # the cache records the digest of the very bytes parsed (not of a later state of the file)
    data_stat, data_digest = (None, None) if entry is None else (_stat(path), _bytes_digest(raw))
    data = _decode(path, raw)
    del raw
    promised = None if allow_truncated else _check_whole(path, data)
    p = _parse_bytes(path, data, zero_based=zero_based, n_features=n_features)
    n_rows = p["n_rows"]
    if promised is not None and promised != n_rows:
        raise ParseError(path, data.count(b"\n"), f"{n_rows} data rows, but the closing line rankwise wrote says "
                                                  f"rows={promised}; the file was changed after writing")
    if n_rows == 0:
        raise ParseError(path, None, "empty file: no data lines; expected lines like "
                                     "'label qid:Q 1:v1 2:v2 ...'")
    has_qid = p["has_qid"]
    n_with = int(has_qid.sum())
    if 0 < n_with < n_rows:
        first_missing = int(np.flatnonzero(~has_qid)[0])
        first_with = int(np.flatnonzero(has_qid)[0])
        raise ParseError(path, int(p["line_no"][first_missing]),
                         f"no 'qid:' on this line, but line {int(p['line_no'][first_with])} has one; "
                         "either every line has 'qid:<integer>' after the label or none does")
    group_used = (None, None, None)
    if n_with and query_file is not None:
        raise InputError(f"{path} has 'qid:' on every line and query_file={str(query_file)!r} was given; "
                         "pass only one of them")
    if not n_with:
        query_file = _group_file_for(path, query_file)
        if query_file is None:
            raise ParseError(path, int(p["line_no"][0]),
                             "no 'qid:' in the file and no group file; add 'qid:<integer>' after each "
                             f"label, or pass query_file= (sizes of consecutive queries), or put {path.name}.query "
                             "next to the file")
        query_file = Path(query_file)
        graw = _read_raw(query_file)
        group_used = (query_file, None, None) if entry is None else \
            (query_file, _bytes_digest(graw), _stat(query_file))
        offsets = _group_offsets(query_file, _decode(query_file, graw), n_rows)
        qid = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    else:
        qid = p["qids"]
    ncol = (p["max_index"] + 1) if n_features is None else int(n_features)
    ncol = max(ncol, 0)
    from rankwise.data import _svmlight_kernel as K

    doc_ids = None
    ds_, de_ = p["docid_s"], p["docid_e"]
    has_doc = de_ > ds_
    if has_doc.any() and not has_doc.all():
        first_missing = int(np.flatnonzero(~has_doc)[0])
        first_with = int(np.flatnonzero(has_doc)[0])
        raise ParseError(path, int(p["line_no"][first_missing]),
                         f"no '#docid = X' comment on this line, but line {int(p['line_no'][first_with])} has one; "
                         "either every line names its doc id or none does")
    if has_doc.any():
        width = int((de_ - ds_).max())
        mat = K.gather_strings(p["buf"], ds_, de_, width)
        raw = mat.view(f"S{mat.shape[1]}").ravel()
        try:
            doc_ids = raw.astype(str)
        except UnicodeDecodeError:
            doc_ids = np.array([b.decode("utf-8", "replace") for b in raw.tolist()])
        del mat, raw
    del data  # the raw text is no longer needed: free it before building X (lower peak memory)
    p.pop("buf")
    nnz = len(p["values"])
    if dense is None:
        dense = ncol > 0 and nnz >= 0.5 * n_rows * ncol
    if dense:
        X = K.scatter_dense(p["indptr"], p["indices"], p["values"], n_rows, ncol)
    else:
        idx_dtype = np.int32 if ncol < 2**31 - 1 and nnz < 2**31 - 1 else np.int64
        X = sp.csr_matrix((p["values"].copy(), p["indices"].astype(idx_dtype),
                           p["indptr"].astype(idx_dtype)), shape=(n_rows, ncol))
    for key in ("indices", "values", "indptr"):
        p.pop(key)
    ds = RankingDataset.from_arrays(X, p["labels"], qid, strict=strict, doc_ids=doc_ids,
                                    allow_nan=True, _line_numbers=p["line_no"], _source=str(path), _stacklevel=3)
    if entry is not None:
        entry.store(ds, data_digest, group_used[0], group_used[1], data_stat, group_used[2])
    return ds


def _stat(path: Path) -> dict:
    from rankwise.data._cache import stat_identity

    return stat_identity(path)


def _bytes_digest(raw: bytes) -> str:
    from rankwise.data._digest import bytes_digest

    return bytes_digest(raw)


def _format_float32(v: np.ndarray) -> list[str]:
    """Shortest decimal strings that read back to the same float32 (NaN written as ``NULL``)."""
    out = []
    for x in np.asarray(v, dtype=np.float32).tolist():
        f = np.float32(x)
        if x != x:
            out.append("NULL")
        elif x == 0:
            out.append("0")
        elif 1e-4 <= abs(x) < 1e16:
            out.append(np.format_float_positional(f, unique=True, trim="-"))
        else:
            out.append(np.format_float_scientific(f, unique=True, trim="-"))
    return out


def _format_label(x: float) -> str:
    if x == int(x) and abs(x) < 2**53:
        return str(int(x))
    return repr(float(x))


def write_svmlight(dataset: RankingDataset, path, *, zero_based: bool = False, decimals: int | None = None,
                   write_zeros: bool | None = None, trailer: bool = True) -> None:
    """Write a :class:`RankingDataset` as LETOR / SVMlight text (``.gz`` when the name ends in ``.gz``).

    Lines are ``label qid:Q i:v ... #docid = X``. Labels are written exactly (``repr``),
    values as the shortest decimal that reads back to the same float32, so
    ``read_svmlight(write_svmlight(ds))`` reproduces ``ds`` exactly (labels, integer query ids,
    doc ids, ``X``'s values and shape; not ``feature_names``); NaN is written as ``NULL``. When
    no line would write the last column (it holds only zeros, which are not written), the first
    line ends with an explicit ``n:0`` so that the reader finds ``n`` columns without being told
    ``n_features``.
    With ``decimals=k`` values are written fixed-point with ``k`` decimals (as the LETOR files
    are, with 6) by a fast compiled writer; that rounds, so it is not an exact round trip.

    Parameters
    ----------
    write_zeros : bool, optional
        Write explicit ``i:0`` entries. Default: True for dense ``X`` (every index on every line,
        as LETOR does), False for CSR (stored entries only).
    trailer : bool
        Start the file with a ``# rankwise-svmlight 1`` comment line and end it with
        ``# rankwise-svmlight end rows=N sha256=...`` (the SHA-256 of every byte before it), so
        that :func:`read_svmlight` refuses a copy that was cut short or damaged. scikit-learn reads
        comment lines; XGBoost's and LightGBM's text loaders do not: pass ``trailer=False`` for them.

    The file is written atomically (:func:`rankwise._io.atomic_write`): the previous file or the
    whole new one, never a prefix; a full disk raises :class:`~rankwise.errors.WriteError`.
    """
    if not isinstance(dataset, RankingDataset):
        raise InputError(f"dataset must be a RankingDataset; got {type(dataset).__name__}")
    path = Path(path)
    base = 0 if zero_based else 1
    X = dataset.X
    qid = dataset.qid
    if qid.dtype.kind not in "iu":
        try:
            qid = qid.astype(np.int64)
        except ValueError:
            raise InputError("SVMlight files need integer query ids; this data set has string ids "
                             f"(e.g. {qid[0]!r}); map them to integers first") from None
    if dataset.doc_ids is not None:
        bad = [d for d in dataset.doc_ids[:100000] if (not d) or any(c.isspace() for c in d) or "#" in d]
        if bad:
            raise InputError(f"doc id {bad[0]!r} cannot be written in a '#docid = X' comment; "
                             "doc ids must be non-empty and contain no whitespace or '#'")
    labels = dataset.labels
    if decimals is not None:
        if sp.issparse(X) or dataset.doc_ids is not None or np.any(labels != np.round(labels)) \
                or (not isinstance(decimals, (int, np.integer))) or not 0 <= decimals <= 9:
            raise InputError("decimals= (fast fixed-point writer) needs dense X, integer labels, no doc ids "
                             f"and 0 <= decimals <= 9; got decimals={decimals!r}")
        from rankwise.data import _svmlight_kernel as K

        if np.isnan(X).any():
            raise InputError("decimals= cannot write NaN values; use decimals=None (writes NULL)")
        out = K.format_fixed(labels.astype(np.int64), qid.astype(np.int64), np.ascontiguousarray(X),
                             int(decimals), base)
        with _writer(path, trailer, len(labels)) as write:
            write(out.tobytes())
        return
    if write_zeros is None:
        write_zeros = not sp.issparse(X)
    Xc = X.tocsr() if sp.issparse(X) else X
    # The reader takes the number of columns from the largest index written. When no line
    # would write the last column (all zeros, and zeros not written; or, for CSR, no stored
    # entry), the first line carries an explicit 'n:0' for it, so the shape comes back too
    # (SVMlight readers take 'i:0' as 0).
    last = X.shape[1] - 1
    pad_last = False
    if last >= 0:
        if sp.issparse(Xc):
            in_last = Xc.indices == last
            pad_last = not (np.any(in_last) if write_zeros else np.any(Xc.data[in_last] != 0))
        else:
            pad_last = not write_zeros and not np.any(Xc[:, last] != 0)
    with _writer(path, trailer, X.shape[0]) as write:
        for r in range(X.shape[0]):
            if sp.issparse(Xc):
                lo, hi = Xc.indptr[r], Xc.indptr[r + 1]
                cols = Xc.indices[lo:hi]
                vals = Xc.data[lo:hi]
                if not write_zeros:
                    keep = vals != 0
                    cols, vals = cols[keep], vals[keep]
                order = np.argsort(cols, kind="stable")
                cols, vals = cols[order], vals[order]
            else:
                row = Xc[r]
                if write_zeros:
                    cols = np.arange(len(row))
                    vals = row
                else:
                    cols = np.flatnonzero(row != 0)
                    vals = row[cols]
            parts = [_format_label(labels[r]), f"qid:{int(qid[r])}"]
            parts += [f"{c + base}:{s}" for c, s in zip(cols.tolist(), _format_float32(vals))]
            if pad_last and r == 0:
                parts.append(f"{last + base}:0")
            if dataset.doc_ids is not None:
                parts.append(f"#docid = {dataset.doc_ids[r]}")
            write((" ".join(parts) + "\n").encode("utf-8"))



@contextlib.contextmanager
def _writer(path: Path, trailer: bool, n_rows: int):
    """``write(bytes)`` into an atomic write of ``path`` (gzipped for ``.gz``), framed by the
    ``# rankwise-svmlight`` header and trailer when ``trailer``."""
    sha = hashlib.sha256()
    with atomic_write(path) as raw:
        out = gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) if path.suffix == ".gz" else raw

        def write(data: bytes) -> None:
            out.write(data)
            if trailer:
                sha.update(data)

        if trailer:
            write(_HEAD)
        yield write
        if trailer:
            out.write(_END + f"rows={n_rows} sha256={sha.hexdigest()}\n".encode())
        if out is not raw:
            out.close()
