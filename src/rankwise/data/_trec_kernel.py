"""numba kernels of the TREC qrels/run reader (imported lazily by ``trec.py``).

One pass over the raw bytes finds, per line, the spans of the query id and the document id and
parses the value (relevance for qrels, score for runs); tokens are never turned into Python
strings. Query and document ids are identified by a 64-bit hash of their bytes, read 8 bytes at a
time (``_hash``; ``split_hash`` computes the same value while it looks for the separators), and
every hash match is confirmed on the bytes, so a collision can never join two different ids.

On the first malformed line the scanner stops and returns an error code with the line number;
the Python side turns it into a ``path:line:`` message.
"""
from __future__ import annotations

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

# the number parsers are shared with the SVMlight reader
from rankwise.data._svmlight_kernel import _POW10, _parse_int, _parse_number

# error codes (messages live in trec.py)
OK = 0
E_FIELDS = 1
E_REL = 2
E_RANK = 3
E_SCORE = 4
E_CONTROL = 5
E_CR = 6
E_MIXED_EOL = 7
E_BOM = 8
E_REL_RANGE = 9
E_FALLBACK_FULL = 10

#: relevance grades must lie in [-REL_MAX, REL_MAX] (trec_eval allocates one counter per grade)
REL_MAX = 1_000_000

_U = np.uint64
_K = np.uint64(0x9E3779B97F4A7C15)
_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_NEWLINES = np.uint64(0x0A0A0A0A0A0A0A0A)


@nb.njit(cache=True, inline="always")
def _is_sep(c):
    return c == 32 or c == 9


@nb.njit(cache=True, inline="always")
def _load8(buf, p, nbuf):
    """The 8 bytes ``buf[p:p+8]`` as a little-endian word (one unaligned load), the bytes past
    the end of the buffer read as 0."""
    if p + 8 <= nbuf:
        u = _U(p)
        return (_U(buf[u]) | (_U(buf[u + _U(1)]) << _U(8)) | (_U(buf[u + _U(2)]) << _U(16))
                | (_U(buf[u + _U(3)]) << _U(24)) | (_U(buf[u + _U(4)]) << _U(32)) | (_U(buf[u + _U(5)]) << _U(40))
                | (_U(buf[u + _U(6)]) << _U(48)) | (_U(buf[u + _U(7)]) << _U(56)))
    w = _U(0)
    for t in range(nbuf - p):
        w |= _U(buf[p + t]) << _U(8 * t)
    return w


@nb.njit(cache=True, inline="always")
def _low(k):
    """Mask of the low ``k`` bytes of a word (1 <= k <= 7)."""
    return (_U(1) << _U(8 * k)) - _U(1)


@nb.njit(cache=True, inline="always")
def _mix(h, w):
    h = (h ^ w) * _K
    return h ^ (h >> _U(29))


@nb.njit(cache=True, inline="always")
def _final(h, n):
    """murmur3's 64-bit finaliser of the state and the length: every output bit depends on every
    input bit (the join tables take their slot from the low bits)."""
    h ^= _U(n)
    h ^= h >> _U(33)
    h *= _U(0xFF51AFD7ED558CCD)
    h ^= h >> _U(33)
    h *= _U(0xC4CEB9FE1A85EC53)
    return h ^ (h >> _U(33))


@nb.njit(cache=True, inline="always")
def _hash(buf, s, e):
    """Hash of the bytes ``buf[s:e]``: its 8-byte words from ``s`` (the last one zero-padded)
    folded by ``_mix``, then ``_final`` with the length."""
    nbuf = buf.shape[0]
    h = _U(0)
    p = s
    while p + 8 <= e:
        h = _mix(h, _load8(buf, p, nbuf))
        p += 8
    if p < e:
        h = _mix(h, _load8(buf, p, nbuf) & _low(e - p))
    return _final(h, e - s)


@nb.njit(cache=True, inline="always")
def _words(buf, s, e):
    """The first 16 bytes of ``buf[s:e]`` as two little-endian words, zero-padded."""
    nbuf = buf.shape[0]
    n = e - s
    w0 = _U(0)
    w1 = _U(0)
    if n > 0:
        w0 = _load8(buf, s, nbuf)
        if n < 8:
            w0 &= _low(n)
    if n > 8:
        w1 = _load8(buf, s + 8, nbuf)
        if n < 16:
            w1 &= _low(n - 8)
    return w0, w1


@nb.njit(cache=True, inline="always")
def _digit_led(buf, s, e):
    """The token ``buf[s:e]`` starts, after an optional sign, with a digit, or with '.' and a
    digit: where ``_parse_number`` says 1 (not its fast path), the token is then a well-formed
    decimal beyond the fast path (``[+-]?(digits[.digits]|.digits)([eE][+-]?digits)?``, which
    Python's float() reads), and not a spelling such as ``nan`` or ``inf``."""
    i = s
    if i < e and (buf[i] == 43 or buf[i] == 45):
        i += 1
    if i < e and 48 <= buf[i] <= 57:
        return True
    return i + 1 < e and buf[i] == 46 and 48 <= buf[i + 1] <= 57


@nb.njit(cache=True, nogil=True)
def fallback_tokens(buf, fb):
    """The tokens ``buf[fb[i, 1]:fb[i, 2]]`` copied into one buffer, each followed by a space:
    one ``bytes.split()`` then gives them all to one ``map(float, ...)``, with no Python code
    per token (and no pass over the file per token)."""
    total = 0
    for i in range(fb.shape[0]):
        total += fb[i, 2] - fb[i, 1] + 1
    out = np.empty(total, dtype=np.uint8)
    p = 0
    for i in range(fb.shape[0]):
        for j in range(fb[i, 1], fb[i, 2]):
            out[p] = buf[j]
            p += 1
        out[p] = 32
        p += 1
    return out


@nb.njit(cache=True, nogil=True)
def scan(buf, kind, max_rows, pow10):
    """Scan a qrels (``kind`` 0: ``qid iter docno rel``) or run (1: ``qid Q0 docno rank score tag
    [more]``) buffer.

    Returns ``(err, err_line, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e)``:
    per record its 1-based line, the spans of query id and document id and their hashes
    (computed here, while the bytes are in cache), the relevance (qrels)
    or score (runs), and the first run tag.
    Scores are converted exactly by ``_parse_number`` (full-precision ``repr`` scores, 17
    significant digits, included). One it leaves to Python (more than 18 significant digits,
    a subnormal or overflowing value, an undecided rounding) is well-formed decimal syntax here
    (``_digit_led``): ``fb[i] = (row, start, end)`` for ``i < n_fb``, the row's score being
    Python's float() of ``buf[start:end]``, all of them converted in one call after the scan
    (``fallback_tokens``). A score without digits (``nan``, ``inf``, a word) is ``E_SCORE``.
    Blank lines and lines starting with ``#`` are skipped.
    """
    n_buf = buf.shape[0]
    line = np.empty(max_rows, dtype=np.int64)
    qs = np.empty(max_rows, dtype=np.int64)
    qe = np.empty(max_rows, dtype=np.int64)
    ds = np.empty(max_rows, dtype=np.int64)
    de = np.empty(max_rows, dtype=np.int64)
    qh = np.empty(max_rows, dtype=np.uint64)
    dh = np.empty(max_rows, dtype=np.uint64)
    ival = np.zeros(max_rows if kind == 0 else 0, dtype=np.int64)
    fval = np.zeros(max_rows if kind == 1 else 0, dtype=np.float64)
    fb = np.empty((1024, 3), dtype=np.int64)
    n_fb = 0
    tag_s = -1
    tag_e = -1
    starts = np.empty(8, dtype=np.int64)
    ends = np.empty(8, dtype=np.int64)
    if n_buf >= 3 and buf[0] == 0xEF and buf[1] == 0xBB and buf[2] == 0xBF:
        return E_BOM, 1, 0, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e
    n = 0
    lineno = 0
    eol = 0  # 0 unknown, 1 LF, 2 CRLF
    pos = 0
    while pos < n_buf:
        lineno += 1
        # find the end of the line, checking bytes on the way
        end = pos
        while end < n_buf and buf[end] != 10:
            c = buf[end]
            if c == 13:
                if end + 1 < n_buf and buf[end + 1] == 10:
                    break
                return E_CR, lineno, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e
            if (c < 32 and c != 9) or c == 127:
                return E_CONTROL, lineno, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e
            end += 1
        nxt = end + 1
        if end < n_buf and buf[end] == 13:  # CRLF
            if eol == 1:
                return E_MIXED_EOL, lineno, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e
            eol = 2
            nxt = end + 2
        elif end < n_buf:
            if eol == 2:
                return E_MIXED_EOL, lineno, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e
            eol = 1
        # split into fields
        nf = 0
        i = pos
        while i < end:
            while i < end and _is_sep(buf[i]):
                i += 1
            if i >= end:
                break
            j = i
            while j < end and not _is_sep(buf[j]):
                j += 1
            if nf < 8:
                starts[nf] = i
                ends[nf] = j
            nf += 1
            i = j
        pos = nxt
        if nf == 0 or buf[starts[0]] == 35:  # blank line or '#' comment
            continue
        if (kind == 0 and nf != 4) or (kind == 1 and nf < 6):
            return E_FIELDS, lineno, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e
        line[n] = lineno
        qs[n] = starts[0]
        qe[n] = ends[0]
        ds[n] = starts[2]
        de[n] = ends[2]
        qh[n] = _hash(buf, starts[0], ends[0])
        dh[n] = _hash(buf, starts[2], ends[2])
        if kind == 0:
            ok, v = _parse_int(buf, starts[3], ends[3])
            if not ok:
                return E_REL, lineno, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e
            if v > REL_MAX or v < -REL_MAX:
                return E_REL_RANGE, lineno, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e
            ival[n] = v
        else:
            ok, v = _parse_int(buf, starts[3], ends[3])
            if not ok:
                return E_RANK, lineno, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e
            status, x = _parse_number(buf, starts[4], ends[4], pow10)
            if status == 2:
                return E_SCORE, lineno, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e
            if status == 1:
                if not _digit_led(buf, starts[4], ends[4]):  # nan, inf, a word: no decimal number
                    return E_SCORE, lineno, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e
                if n_fb == fb.shape[0]:
                    grown = np.empty((2 * n_fb, 3), dtype=np.int64)
                    grown[:n_fb] = fb
                    fb = grown
                fb[n_fb, 0] = n
                fb[n_fb, 1] = starts[4]
                fb[n_fb, 2] = ends[4]
                n_fb += 1
            fval[n] = x
            if tag_s < 0:
                tag_s = starts[5]
                tag_e = ends[5]
        n += 1
    return OK, 0, n, line, qs, qe, ds, de, qh, dh, ival, fval, fb, n_fb, tag_s, tag_e


@nb.njit(cache=True, nogil=True)
def hashes(buf, s, e):
    out = np.empty(s.shape[0], dtype=np.uint64)
    for r in range(s.shape[0]):
        out[r] = _hash(buf, s[r], e[r])
    return out


@nb.njit(cache=True, nogil=True)
def segments(qh):
    """Row indices where a run of equal query hashes starts (plus the end)."""
    n = qh.shape[0]
    cnt = 1 if n else 0
    for r in range(1, n):
        if qh[r] != qh[r - 1]:
            cnt += 1
    out = np.empty(cnt + 1, dtype=np.int64)
    k = 0
    for r in range(n):
        if r == 0 or qh[r] != qh[r - 1]:
            out[k] = r
            k += 1
    out[cnt] = n
    return out


@nb.njit(cache=True, nogil=True)
def split_hash(buf, n=-1):
    """Spans of the ``\\n``-separated items of ``buf`` (a join of ids) and their hashes (``_hash``'s
    value): a count of the separators (unless the caller knows it: ``n`` items expected; with
    more, the spans stop at the ``n``-th, short of the buffer's end; with fewer, fewer spans
    come back), then one pass 8 bytes at a time, each word folded into the item's
    hash until the word that holds its separator (found by the zero-byte test on the word xor
    ``\\n``, whose lowest flagged byte is exact)."""
    nbuf = buf.shape[0]
    if n < 0:
        n = 1
        for i in range(nbuf):
            n += buf[i] == 10
    s = np.empty(n, dtype=np.int64)
    e = np.empty(n, dtype=np.int64)
    h = np.empty(n, dtype=np.uint64)
    k = 0
    start = 0
    p = 0
    x = _U(0)
    while True:
        w = _load8(buf, p, nbuf)
        v = w ^ _NEWLINES
        t = (v - _ONES) & ~v & _HIGHS
        avail = nbuf - p
        if t == 0:
            if avail > 8:
                x = _mix(x, w)
                p += 8
                continue
            j = avail  # the last item ends with the buffer
        else:
            j = np.int64(trailing_zeros(t)) >> 3
        if j >= 8:
            x = _mix(x, w)
        elif j > 0:
            x = _mix(x, w & _low(j))
        end = p + j
        s[k] = start
        e[k] = end
        h[k] = _final(x, end - start)
        k += 1
        if end >= nbuf or k == n:
            break
        start = end + 1
        p = start
        x = _U(0)
    return s[:k], e[:k], h[:k]


@nb.njit(cache=True, inline="always")
def _cmp(buf1, s1, e1, buf2, s2, e2):
    """strcmp of two byte spans: <0, 0, >0."""
    n1 = e1 - s1
    n2 = e2 - s2
    m = n1 if n1 < n2 else n2
    for t in range(m):
        a = buf1[s1 + t]
        b = buf2[s2 + t]
        if a != b:
            return -1 if a < b else 1
    if n1 == n2:
        return 0
    return -1 if n1 < n2 else 1


@nb.njit(cache=True, nogil=True)
def sort_by_hash(offsets, h, buf, s, e):
    """Per group, row order by hash; returns (order, err, row) with err 1 = duplicate id
    (``row`` the later one), 2 = hash collision."""
    order = np.empty(h.shape[0], dtype=np.int64)
    for g in range(offsets.shape[0] - 1):
        a = offsets[g]
        b = offsets[g + 1]
        o = np.argsort(h[a:b], kind="mergesort")
        for t in range(b - a):
            order[a + t] = a + o[t]
        for t in range(a + 1, b):
            r0 = order[t - 1]
            r1 = order[t]
            if h[r0] == h[r1]:
                if _cmp(buf, s[r0], e[r0], buf, s[r1], e[r1]) == 0:
                    return order, 1, max(r0, r1)
                return order, 2, r1
    return order, 0, 0


_MIX = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(cache=True, inline="always")
def _slot(h, g, mask):
    """Table slot of (group, hash): splitmix64's finaliser, so that every bit of both counts."""
    x = h ^ (np.uint64(g + 1) * _MIX)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return np.int64(x & mask)


@nb.njit(cache=True, nogil=True)
def first_duplicate(offsets, h, buf, s, e):
    """Per group, a hash set of the ids; returns (row of the first repeated id or -1, collision)."""
    longest = 0
    for g in range(offsets.shape[0] - 1):
        longest = max(longest, offsets[g + 1] - offsets[g])
    size = 1
    while size < 2 * longest + 2:
        size *= 2
    table = np.full(size, -1, dtype=np.int64)
    stamp = np.full(size, -1, dtype=np.int64)
    mask = np.uint64(size - 1)
    for g in range(offsets.shape[0] - 1):
        for r in range(offsets[g], offsets[g + 1]):
            i = _slot(h[r], 0, mask)
            while stamp[i] == g:
                o = table[i]
                if h[o] == h[r]:
                    if _cmp(buf, s[o], e[o], buf, s[r], e[r]) == 0:
                        return r, False
                    return r, True
                i = (i + 1) & (size - 1)
            stamp[i] = g
            table[i] = r
    return -1, False


_LOW32 = np.uint64(0xFFFFFFFF)


@intrinsic
def _prefetch(typingctx, table, row):
    """Ask the CPU to fetch ``table[row, 0]``'s cache line (LLVM's ``prefetch``; no effect on
    results): the join prefetches the slot of the row it will probe a few rows later, so that
    the probe of a table too large for the L1 cache does not wait for memory."""
    sig = types.void(table, row)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1], context.get_constant(types.intp, 0)],
                                       wraparound=False)
        i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        builder.call(fn, [i8p, i32(0), i32(3), i32(1)])  # read, keep in all cache levels, data
        return context.get_dummy_value()

    return sig, codegen


#: how many rows ahead the join prefetches its table slot
PREFETCH = 8


@nb.njit(cache=True, nogil=True)
def join_table(j_off, j_h, j_buf, j_s, j_e, j_rel):
    """Per topic, an open-addressing table of its judgments (linear probing from the hash's low
    bits, load < 2/3), the topics' tables laid end to end: built once per qrels, then every run
    row is joined by probing its topic's table (``_probe``). A slot is 4 words, key and value
    inline so that a probe touches one cache line: the grade (int64 bits), the document's first
    16 bytes (two zero-padded words), and (length << 32) | (row within the topic + 1), 0 when
    empty.
    Returns (t_off, table): topic ``g``'s table is ``table[t_off[g]:t_off[g+1]]`` (a power of two)."""
    nq = j_off.shape[0] - 1
    t_off = np.zeros(nq + 1, dtype=np.int64)
    for g in range(nq):
        size = 4
        while 2 * size < 3 * (j_off[g + 1] - j_off[g]) + 2:
            size *= 2
        t_off[g + 1] = t_off[g] + size
    table = np.empty((t_off[nq], 4), dtype=np.uint64)
    for g in range(nq):
        base = t_off[g]
        size = t_off[g + 1] - base
        mask = np.uint64(size - 1)
        for i in range(base, base + size):  # empty slots: only their last word is read
            table[i, 3] = 0
        for r in range(j_off[g], j_off[g + 1]):
            i = np.int64(j_h[r] & mask)
            while table[base + i, 3] != 0:
                i = (i + 1) & (size - 1)
            w0, w1 = _words(j_buf, j_s[r], j_e[r])
            table[base + i, 0] = _U(j_rel[r])
            table[base + i, 1] = w0
            table[base + i, 2] = w1
            table[base + i, 3] = (_U(j_e[r] - j_s[r]) << _U(32)) | _U(r - j_off[g] + 1)
    return t_off, table


@nb.njit(cache=True, inline="always")
def _same_tail(b1, s1, e1, b2, s2):
    """Bytes ``b1[s1:e1]`` equal ``b2[s2:s2 + e1 - s1]``."""
    for t in range(e1 - s1):
        if b1[s1 + t] != b2[s2 + t]:
            return False
    return True


@nb.njit(cache=True, inline="always")
def _probe(table, base, size, first, x, buf, s, e, j_buf, j_s):
    """Slot (row of ``table``; its grade is ``table[slot, 0]``) of the document ``buf[s:e]`` with
    hash ``x`` in the topic table ``table[base:base+size]``, or -1. The hash only picks the
    first slot: a slot matches when length and first 16 bytes are equal, and the bytes beyond
    16 too (judgment row ``first`` + the slot's row): equal bytes, never the hash alone."""
    w0, w1 = _words(buf, s, e)
    meta_len = _U(e - s) << _U(32)
    p = np.int64(x & _U(size - 1))
    while True:
        meta = table[base + p, 3]
        if meta == 0:
            return -1
        if table[base + p, 1] == w0 and table[base + p, 2] == w1 and (meta & ~_LOW32) == meta_len:
            if e - s <= 16 or _same_tail(buf, s + 16, e, j_buf, j_s[first + np.int64(meta & _LOW32)] + 16):
                return base + p
        p = (p + 1) & (size - 1)


#: bits of a topic's filter per judgment (``join_filter``): 1 - exp(-1/16), about 6%, of the
#: documents absent from the qrels still probe the table
FILTER_BITS = 16


@nb.njit(cache=True, nogil=True)
def join_filter(j_off, j_h):
    """Per topic, a bit set of its judgments' hashes (one bit each, from the hash's top bits, at
    least ``FILTER_BITS`` bits per judgment), the topics' sets laid end to end as 64-bit words:
    a run document whose bit is clear is not judged, and skips the table (most of a run's
    documents are unjudged, and an unsuccessful probe walks the longest). Returns (b_off, bits):
    topic ``g``'s words are ``bits[b_off[g]:b_off[g+1]]`` (a power of two)."""
    nq = j_off.shape[0] - 1
    b_off = np.zeros(nq + 1, dtype=np.int64)
    for g in range(nq):
        n_bits = 64
        while n_bits < FILTER_BITS * (j_off[g + 1] - j_off[g]):
            n_bits *= 2
        b_off[g + 1] = b_off[g] + n_bits // 64
    bits = np.zeros(b_off[nq], dtype=np.uint64)
    for g in range(nq):
        base = b_off[g]
        mask = _U((b_off[g + 1] - base) * 64 - 1)
        for r in range(j_off[g], j_off[g + 1]):
            y = (j_h[r] >> _U(40)) & mask
            bits[base + np.int64(y >> _U(6))] |= _U(1) << (y & _U(63))
    return b_off, bits


@nb.njit(cache=True, inline="always")
def _lookup(table, base, size, first, bits, b_base, b_mask, x, buf, s, e, j_buf, j_s):
    """``_probe`` behind the topic's filter (``join_filter``; ``b_mask`` = its bit count - 1)."""
    y = (x >> _U(40)) & b_mask
    if (bits[b_base + np.int64(y >> _U(6))] >> (y & _U(63))) & _U(1) == 0:
        return -1
    return _probe(table, base, size, first, x, buf, s, e, j_buf, j_s)


@nb.njit(cache=True, nogil=True)
def join(r_off, r_h, r_buf, r_s, r_e, qmap, j_off, t_off, table, b_off, bits, j_buf, j_s, nonpool, unjudged):
    """Relevance of every run row: a probe of its topic's filter and table (``join_filter``,
    ``join_table``). Run query
    ``g`` is qrels query ``qmap[g]`` (-1: none). The hash only picks candidates: a document
    joins a judgment when their bytes are equal, so no hash collision can join two different ids."""
    rel = np.full(r_h.shape[0], nonpool, dtype=np.int64)
    for g in range(r_off.shape[0] - 1):
        j = qmap[g]
        if j < 0:
            continue
        base = t_off[j]
        size = t_off[j + 1] - base
        first = j_off[j] - 1
        b_base = b_off[j]
        b_mask = _U((b_off[j + 1] - b_base) * 64 - 1)
        lo = r_off[g]
        hi = r_off[g + 1]
        mask = _U(size - 1)
        for r in range(lo, min(lo + PREFETCH, hi)):
            _prefetch(table, base + np.int64(r_h[r] & mask))
        for r in range(lo, hi):
            if r + PREFETCH < hi:
                _prefetch(table, base + np.int64(r_h[r + PREFETCH] & mask))
            slot = _lookup(table, base, size, first, bits, b_base, b_mask, r_h[r], r_buf, r_s[r], r_e[r], j_buf, j_s)
            if slot >= 0:
                v = np.int64(table[slot, 0])
                rel[r] = v if v >= 0 else unjudged
    return rel
