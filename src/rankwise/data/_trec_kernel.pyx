# cython: language_level=3
"""Compiled kernels of the TREC qrels/run reader (imported lazily by ``trec.py``).

One pass over the raw bytes finds, per line, the spans of the query id and the document id and
parses the value (relevance for qrels, score for runs); tokens are never turned into Python
strings. Query and document ids are identified by a 64-bit hash of their bytes, read 8 bytes at a
time (``_hash``; ``split_hash`` computes the same value while it looks for the separators), and
every hash match is confirmed on the bytes, so a collision can never join two different ids.
The byte-level helpers are inline in ``_trec_kernel.pxd`` (other kernels cimport them), the exact
decimal conversion in ``_decimal.pxd``.

On the first malformed line the scanner stops and returns an error code with the line number;
the Python side turns it into a ``path:line:`` message.
"""
import numpy as np

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcpy
from libcpp.algorithm cimport sort

from rankwise._native.sort cimport argsort_u64
from rankwise.data._decimal cimport EL_MAX, EL_MIN, _parse_int, _parse_number

# error codes (messages live in trec.py), for the kernels and for Python
cdef enum:
    _OK = 0
    _E_FIELDS = 1
    _E_REL = 2
    _E_RANK = 3
    _E_SCORE = 4
    _E_CONTROL = 5
    _E_CR = 6
    _E_MIXED_EOL = 7
    _E_BOM = 8
    _E_REL_RANGE = 9
    _E_FALLBACK_FULL = 10  # internal: the fallback list is full, ``scan`` grows it and goes on
    _REL_MAX = 1_000_000

OK = _OK
E_FIELDS = _E_FIELDS
E_REL = _E_REL
E_RANK = _E_RANK
E_SCORE = _E_SCORE
E_CONTROL = _E_CONTROL
E_CR = _E_CR
E_MIXED_EOL = _E_MIXED_EOL
E_BOM = _E_BOM
E_REL_RANGE = _E_REL_RANGE
E_FALLBACK_FULL = _E_FALLBACK_FULL

#: relevance grades must lie in [-REL_MAX, REL_MAX] (trec_eval allocates one counter per grade)
REL_MAX = _REL_MAX

#: how many rows ahead the join prefetches its table slot
PREFETCH = PREFETCH_ROWS

#: bits of a topic's filter per judgment (``join_filter``): 1 - exp(-1/16), about 6%, of the
#: documents absent from the qrels still probe the table
FILTER_BITS = 16

# the exact decimal conversion's tables (10**k for Clinger's fast path, 128-bit mantissas of 10**q for
# Eisel-Lemire), built once, by the SVMlight kernel
from rankwise.data._svmlight_kernel import _EL_HI, _EL_LO, _POW10  # noqa: E402
cdef const uint64_t[::1] _el_hi = _EL_HI
cdef const uint64_t[::1] _el_lo = _EL_LO


cdef inline const uint8_t* _ptr8(const uint8_t[::1] a) noexcept:
    return &a[0] if a.shape[0] else NULL


cdef inline const int64_t* _ptr64(const int64_t[::1] a) noexcept:
    return &a[0] if a.shape[0] else NULL


cdef inline bint _digit_led(const uint8_t* buf, int64_t s, int64_t e) noexcept nogil:
    """The token ``buf[s:e]`` starts, after an optional sign, with a digit, or with '.' and a
    digit: where ``_parse_number`` says 1 (not its exact paths), the token is then a well-formed
    decimal beyond them (``[+-]?(digits[.digits]|.digits)([eE][+-]?digits)?``, which Python's
    float() reads), and not a spelling such as ``nan`` or ``inf``."""
    cdef int64_t i = s
    if i < e and (buf[i] == 43 or buf[i] == 45):
        i += 1
    if i < e and 48 <= buf[i] <= 57:
        return True
    return i + 1 < e and buf[i] == 46 and 48 <= buf[i + 1] <= 57


def fallback_tokens(const uint8_t[::1] buf, const int64_t[:, ::1] fb):
    """The tokens ``buf[fb[i, 1]:fb[i, 2]]`` copied into one buffer, each followed by a space:
    one ``bytes.split()`` then gives them all to one ``map(float, ...)``, with no Python code
    per token (and no pass over the file per token)."""
    cdef int64_t total = 0, p = 0, i, j
    for i in range(fb.shape[0]):
        total += fb[i, 2] - fb[i, 1] + 1
    out_a = np.empty(total, dtype=np.uint8)
    cdef uint8_t[::1] out = out_a
    with nogil:
        for i in range(fb.shape[0]):
            for j in range(fb[i, 1], fb[i, 2]):
                out[p] = buf[j]
                p += 1
            out[p] = 32
            p += 1
    return out_a


# the bytes that end a field: space, tab, line feed, carriage return, the other control bytes and
# DEL (``_scan_lines`` refuses the last two kinds: where one ends a field, the line is refused)
cdef uint8_t _STOP[256]
cdef int _b
for _b in range(256):
    _STOP[_b] = _b <= 32 or _b == 127


cdef inline int64_t _field_end(const uint8_t* buf, int64_t j, int64_t n_buf) noexcept nogil:
    """The first position from ``j`` on whose byte is in ``_STOP`` (or ``n_buf``), 8 bytes at a
    time: in a word, the bytes below 0x21 are flagged by ``(w - 0x21..) & ~w`` and DEL by the
    zero-byte test on ``w ^ 0x7F..``; a borrow can flag a byte only above a flagged one, so the
    lowest flag is exact (bytes from 0x80 on, UTF-8's, are never flagged: they are a field's)."""
    cdef uint64_t w, d, t
    while j + 8 <= n_buf:
        w = _load8_word(buf + j)
        d = w ^ 0x7F7F7F7F7F7F7F7FULL
        t = (((w - 0x2121212121212121ULL) & ~w) | ((d - 0x0101010101010101ULL) & ~d)) & 0x8080808080808080ULL
        if t:
            return j + (_ctz64(t) >> 3)
        j += 8
    while j < n_buf and not _STOP[buf[j]]:
        j += 1
    return j


cdef struct _ScanState:
    int64_t pos, lineno, eol, n, n_fb, tag_s, tag_e


cdef int64_t _scan_lines(const uint8_t* buf, int64_t n_buf, int64_t kind, const double* pow10, const uint64_t* phi,
                         const uint64_t* plo, _ScanState* st, int64_t* line, int64_t* qs, int64_t* qe, int64_t* ds,
                         int64_t* de, uint64_t* qh, uint64_t* dh, int64_t* ival, double* fval, int64_t* fb,
                         int64_t fb_cap) noexcept nogil:
    """``scan``'s loop over the lines from ``st.pos``, its state in ``st``: returns an error code (the
    line in ``st.lineno``), ``OK`` at the end of the buffer, or ``E_FALLBACK_FULL`` before a line when
    the ``fb_cap`` rows of ``fb`` are taken (the caller grows ``fb`` and calls again)."""
    cdef int64_t starts[8]
    cdef int64_t ends[8]
    cdef int64_t pos = st.pos, n = st.n, n_fb = st.n_fb, lineno = st.lineno, eol = st.eol
    cdef int64_t end, nxt, nf, i, j, v
    cdef uint8_t c
    cdef int status
    cdef double x
    cdef int64_t err = 0
    while pos < n_buf:
        if n_fb == fb_cap:
            err = _E_FALLBACK_FULL
            break
        lineno += 1
        # one pass over the line: its fields (spans of bytes other than space and tab) and its end,
        # checking bytes on the way (a control byte, or a CR not followed by LF, stops the scan)
        nf = 0
        i = pos
        while True:
            while i < n_buf and (buf[i] == 32 or buf[i] == 9):
                i += 1
            if i >= n_buf:
                end = n_buf
                break
            c = buf[i]
            if _STOP[c]:  # not a field's byte, nor a separator: the line's end or a refused byte
                end = i
                if c == 10:
                    break
                if c == 13:
                    if i + 1 < n_buf and buf[i + 1] == 10:
                        break
                    err = _E_CR
                    break
                err = _E_CONTROL
                break
            j = _field_end(buf, i + 1, n_buf)
            if nf < 8:
                starts[nf] = i
                ends[nf] = j
            nf += 1
            i = j
        if err:
            break
        nxt = end + 1
        if end < n_buf and buf[end] == 13:  # CRLF
            if eol == 1:
                err = _E_MIXED_EOL
                break
            eol = 2
            nxt = end + 2
        elif end < n_buf:
            if eol == 2:
                err = _E_MIXED_EOL
                break
            eol = 1
        if nf == 0 or buf[starts[0]] == 35:  # blank line or '#' comment
            st.pos = pos = nxt
            st.lineno = lineno
            st.eol = eol
            continue
        if (kind == 0 and nf != 4) or (kind == 1 and nf < 6):
            err = _E_FIELDS
            break
        line[n] = lineno
        qs[n] = starts[0]
        qe[n] = ends[0]
        ds[n] = starts[2]
        de[n] = ends[2]
        qh[n] = _hash(buf, n_buf, starts[0], ends[0])
        dh[n] = _hash(buf, n_buf, starts[2], ends[2])
        if kind == 0:
            if not _parse_int(buf, starts[3], ends[3], &v):
                err = _E_REL
                break
            if v > _REL_MAX or v < -_REL_MAX:
                err = _E_REL_RANGE
                break
            ival[n] = v
        else:
            if not _parse_int(buf, starts[3], ends[3], &v):
                err = _E_RANK
                break
            x = 0.0
            status = _parse_number(buf, starts[4], ends[4], pow10, phi, plo, &x)
            if status == 2:
                err = _E_SCORE
                break
            if status == 1:
                if not _digit_led(buf, starts[4], ends[4]):  # nan, inf, a word: no decimal number
                    err = _E_SCORE
                    break
                fb[3 * n_fb] = n
                fb[3 * n_fb + 1] = starts[4]
                fb[3 * n_fb + 2] = ends[4]
                n_fb += 1
            fval[n] = x
            if st.tag_s < 0:
                st.tag_s = starts[5]
                st.tag_e = ends[5]
        n += 1
        # a line fully read: the state to resume from
        pos = nxt
        st.pos = pos
        st.n = n
        st.n_fb = n_fb
        st.lineno = lineno
        st.eol = eol
    if err and err != _E_FALLBACK_FULL:
        st.lineno = lineno
    return err


def scan(const uint8_t[::1] buf, int64_t kind, int64_t max_rows, const double[::1] pow10):
    """Scan a qrels (``kind`` 0: ``qid iter docno rel``) or run (1: ``qid Q0 docno rank score tag
    [more]``) buffer of at most ``max_rows`` records (-1: counted here, ``count_lines``).

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
    cdef int64_t n_buf = buf.shape[0]
    if max_rows < 0:  # the caller leaves the count to the kernel: line breaks + 1
        max_rows = count_lines(buf)
    max_rows = max(max_rows, 1)  # the row pointers below need one (the caller's count is line breaks + 1)
    line_a = np.empty(max_rows, dtype=np.int64)
    qs_a = np.empty(max_rows, dtype=np.int64)
    qe_a = np.empty(max_rows, dtype=np.int64)
    ds_a = np.empty(max_rows, dtype=np.int64)
    de_a = np.empty(max_rows, dtype=np.int64)
    qh_a = np.empty(max_rows, dtype=np.uint64)
    dh_a = np.empty(max_rows, dtype=np.uint64)
    ival_a = np.zeros(max_rows if kind == 0 else 0, dtype=np.int64)
    fval_a = np.zeros(max_rows if kind == 1 else 0, dtype=np.float64)
    fb_a = np.empty((1024, 3), dtype=np.int64)
    cdef int64_t[::1] line = line_a, qs = qs_a, qe = qe_a, ds = ds_a, de = de_a, ival = ival_a
    cdef uint64_t[::1] qh = qh_a, dh = dh_a
    cdef double[::1] fval = fval_a
    cdef int64_t[:, ::1] fb = fb_a
    cdef _ScanState st
    st.pos = 0
    st.lineno = 0
    st.eol = 0  # 0 unknown, 1 LF, 2 CRLF
    st.n = 0
    st.n_fb = 0
    st.tag_s = -1
    st.tag_e = -1
    cdef int64_t err = 0, err_line = 0
    if n_buf >= 3 and buf[0] == 0xEF and buf[1] == 0xBB and buf[2] == 0xBF:
        return E_BOM, 1, 0, line_a, qs_a, qe_a, ds_a, de_a, qh_a, dh_a, ival_a, fval_a, fb_a, 0, -1, -1
    cdef const uint8_t* b = _ptr8(buf)
    cdef int64_t* iv = &ival[0] if kind == 0 else NULL
    cdef double* fv = &fval[0] if kind == 1 else NULL
    while True:
        with nogil:
            err = _scan_lines(b, n_buf, kind, &pow10[0], &_el_hi[0], &_el_lo[0], &st, &line[0], &qs[0], &qe[0],
                              &ds[0], &de[0], &qh[0], &dh[0], iv, fv, &fb[0, 0], fb.shape[0])
        if err != E_FALLBACK_FULL:
            break
        grown = np.empty((2 * fb.shape[0], 3), dtype=np.int64)
        grown[:fb.shape[0]] = fb_a
        fb_a = grown
        fb = fb_a
    if err:
        err_line = st.lineno
    return (err, err_line, st.n, line_a, qs_a, qe_a, ds_a, de_a, qh_a, dh_a, ival_a, fval_a, fb_a, st.n_fb,
            st.tag_s, st.tag_e)


def count_lines(const uint8_t[::1] buf):
    """The number of line breaks (LF bytes) in ``buf``, plus one: the most records it can hold."""
    cdef int64_t n = buf.shape[0], i, count = 1
    cdef const uint8_t* b = _ptr8(buf)
    with nogil:
        for i in range(n):
            count += b[i] == 10
    return count


def hashes(const uint8_t[::1] buf, const int64_t[::1] s, const int64_t[::1] e):
    """``_hash`` of every span ``buf[s[r]:e[r]]``."""
    out_a = np.empty(s.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] out = out_a
    cdef const uint8_t* b = _ptr8(buf)
    cdef int64_t nbuf = buf.shape[0], r
    with nogil:
        for r in range(s.shape[0]):
            out[r] = _hash(b, nbuf, s[r], e[r])
    return out_a


def segments(const uint64_t[::1] qh):
    """Row indices where a run of equal query hashes starts (plus the end)."""
    cdef int64_t n = qh.shape[0], r, k = 0
    cdef int64_t cnt = 1 if n else 0
    cdef const uint64_t* q = &qh[0] if n else NULL
    with nogil:
        for r in range(1, n):
            cnt += q[r] != q[r - 1]
    out_a = np.empty(cnt + 1, dtype=np.int64)
    cdef int64_t[::1] out = out_a
    with nogil:
        for r in range(n):
            if r == 0 or q[r] != q[r - 1]:
                out[k] = r
                k += 1
        out[cnt] = n
    return out_a


def split_hash(const uint8_t[::1] buf, int64_t n=-1):
    """Spans of the ``\\n``-separated items of ``buf`` (a join of ids) and their hashes (``_hash``'s
    value): a count of the separators (unless the caller knows it: ``n`` items expected; with
    more, the spans stop at the ``n``-th, short of the buffer's end; with fewer, fewer spans
    come back), then one pass 8 bytes at a time, each word folded into the item's
    hash until the word that holds its separator (found by the zero-byte test on the word xor
    ``\\n``, whose lowest flagged byte is exact)."""
    cdef int64_t nbuf = buf.shape[0], i
    cdef const uint8_t* b = _ptr8(buf)
    if n < 0:
        n = 1
        with nogil:
            for i in range(nbuf):
                n += b[i] == 10
    s_a = np.empty(n, dtype=np.int64)
    e_a = np.empty(n, dtype=np.int64)
    h_a = np.empty(n, dtype=np.uint64)
    if n == 0:
        return s_a, e_a, h_a
    cdef int64_t[::1] s = s_a, e = e_a
    cdef uint64_t[::1] h = h_a
    cdef uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL, newlines = 0x0A0A0A0A0A0A0A0AULL
    cdef int64_t k = 0, start = 0, p = 0, avail, j, end
    cdef uint64_t x = 0, w, v, t
    with nogil:
        while True:
            w = _load8(b, p, nbuf)
            v = w ^ newlines
            t = (v - ones) & ~v & highs
            avail = nbuf - p
            if t == 0:
                if avail > 8:
                    x = _mix(x, w)
                    p += 8
                    continue
                j = avail  # the last item ends with the buffer
            else:
                j = _ctz64(t) >> 3
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
            x = 0
    return s_a[:k], e_a[:k], h_a[:k]


def sort_by_hash(const int64_t[::1] offsets, const uint64_t[::1] h, const uint8_t[::1] buf, const int64_t[::1] s,
                 const int64_t[::1] e):
    """Per group, row order by hash; returns (order, err, row) with err 1 = duplicate id
    (``row`` the later one), 2 = hash collision."""
    order_a = np.empty(h.shape[0], dtype=np.int64)
    cdef int64_t[::1] order = order_a
    cdef int64_t ng = offsets.shape[0] - 1, g, a, b, t, r0, r1, longest = 0
    cdef int64_t err = 0, row = 0
    for g in range(ng):
        longest = max(longest, offsets[g + 1] - offsets[g])
    o_a = np.empty(longest, dtype=np.int64)
    cdef int64_t[::1] o = o_a
    cdef const uint8_t* bp = _ptr8(buf)
    with nogil:
        for g in range(ng):
            a = offsets[g]
            b = offsets[g + 1]
            if b > a:
                argsort_u64(&h[a], b - a, &o[0])  # stable, as np.argsort(kind="mergesort")
            for t in range(b - a):
                order[a + t] = a + o[t]
            for t in range(a + 1, b):
                r0 = order[t - 1]
                r1 = order[t]
                if h[r0] == h[r1]:
                    if _cmp(bp, s[r0], e[r0], bp, s[r1], e[r1]) == 0:
                        err = 1
                        row = max(r0, r1)
                    else:
                        err = 2
                        row = r1
                    break
            if err:
                break
    return order_a, err, row


cdef inline int64_t _slot(uint64_t h, int64_t g, uint64_t mask) noexcept nogil:
    """Table slot of (group, hash): splitmix64's finaliser, so that every bit of both counts."""
    cdef uint64_t x = h ^ (<uint64_t>(g + 1) * 0x9E3779B97F4A7C15ULL)
    x ^= x >> 30
    x *= 0xBF58476D1CE4E5B9ULL
    x ^= x >> 27
    x *= 0x94D049BB133111EBULL
    x ^= x >> 31
    return <int64_t>(x & mask)


def first_duplicate(const int64_t[::1] offsets, const uint64_t[::1] h, const uint8_t[::1] buf, const int64_t[::1] s,
                    const int64_t[::1] e):
    """Per group, a hash set of the ids; returns (row of the first repeated id or -1, collision)."""
    cdef int64_t ng = offsets.shape[0] - 1, g, r, i, o, longest = 0, size = 1
    for g in range(ng):
        longest = max(longest, offsets[g + 1] - offsets[g])
    while size < 2 * longest + 2:
        size *= 2
    table_a = np.full(size, -1, dtype=np.int64)
    stamp_a = np.full(size, -1, dtype=np.int64)
    cdef int64_t[::1] table = table_a, stamp = stamp_a
    cdef uint64_t mask = <uint64_t>(size - 1)
    cdef const uint8_t* bp = _ptr8(buf)
    cdef int64_t found = -1
    cdef bint collision = False
    with nogil:
        for g in range(ng):
            for r in range(offsets[g], offsets[g + 1]):
                i = _slot(h[r], 0, mask)
                while stamp[i] == g:
                    o = table[i]
                    if h[o] == h[r]:
                        found = r
                        collision = _cmp(bp, s[o], e[o], bp, s[r], e[r]) != 0
                        break
                    i = (i + 1) & (size - 1)
                if found >= 0:
                    break
                stamp[i] = g
                table[i] = r
            if found >= 0:
                break
    return found, collision


def join_table(const int64_t[::1] j_off, const uint64_t[::1] j_h, const uint8_t[::1] j_buf, const int64_t[::1] j_s,
               const int64_t[::1] j_e, const int64_t[::1] j_rel):
    """Per topic, an open-addressing table of its judgments (linear probing from the hash's low
    bits, load < 2/3), the topics' tables laid end to end: built once per qrels, then every run
    row is joined by probing its topic's table (``_probe``). A slot is 4 words, key and value
    inline so that a probe touches one cache line: the grade (int64 bits), the document's first
    16 bytes (two zero-padded words), and (length << 32) | (row within the topic + 1), 0 when
    empty.
    Returns (t_off, table): topic ``g``'s table is ``table[t_off[g]:t_off[g+1]]`` (a power of two)."""
    cdef int64_t nq = j_off.shape[0] - 1, g, size, base, i, r
    t_off_a = np.zeros(nq + 1, dtype=np.int64)
    cdef int64_t[::1] t_off = t_off_a
    for g in range(nq):
        size = 4
        while 2 * size < 3 * (j_off[g + 1] - j_off[g]) + 2:
            size *= 2
        t_off[g + 1] = t_off[g] + size
    table_a = np.empty((t_off[nq], SLOT_WORDS), dtype=np.uint64)
    cdef uint64_t[:, ::1] table = table_a
    cdef uint64_t* slot
    cdef uint64_t* tab = &table[0, 0] if t_off[nq] else NULL
    cdef const uint8_t* jb = _ptr8(j_buf)
    cdef int64_t nbuf = j_buf.shape[0]
    with nogil:
        for g in range(nq):
            base = t_off[g]
            size = t_off[g + 1] - base
            for i in range(base, base + size):  # empty slots: only their last word is read (the rest zeroed too)
                slot = tab + SLOT_WORDS * i
                slot[0] = 0
                slot[1] = 0
                slot[2] = 0
                slot[3] = 0
            for r in range(j_off[g], j_off[g + 1]):
                i = <int64_t>(j_h[r] & <uint64_t>(size - 1))
                while tab[SLOT_WORDS * (base + i) + 3] != 0:
                    i = (i + 1) & (size - 1)
                slot = tab + SLOT_WORDS * (base + i)
                _words(jb, nbuf, j_s[r], j_e[r], &slot[1], &slot[2])
                slot[0] = <uint64_t>j_rel[r]
                slot[3] = ((<uint64_t>(j_e[r] - j_s[r])) << 32) | <uint64_t>(r - j_off[g] + 1)
    return t_off_a, table_a


def join_filter(const int64_t[::1] j_off, const uint64_t[::1] j_h):
    """Per topic, a bit set of its judgments' hashes (one bit each, from the hash's top bits, at
    least ``FILTER_BITS`` bits per judgment), the topics' sets laid end to end as 64-bit words:
    a run document whose bit is clear is not judged, and skips the table (most of a run's
    documents are unjudged, and an unsuccessful probe walks the longest). Returns (b_off, bits):
    topic ``g``'s words are ``bits[b_off[g]:b_off[g+1]]`` (a power of two)."""
    cdef int64_t nq = j_off.shape[0] - 1, g, n_bits, base, r
    b_off_a = np.zeros(nq + 1, dtype=np.int64)
    cdef int64_t[::1] b_off = b_off_a
    for g in range(nq):
        n_bits = 64
        while n_bits < FILTER_BITS * (j_off[g + 1] - j_off[g]):
            n_bits *= 2
        b_off[g + 1] = b_off[g] + n_bits // 64
    bits_a = np.zeros(b_off[nq], dtype=np.uint64)
    cdef uint64_t[::1] bits = bits_a
    cdef uint64_t mask, y
    with nogil:
        for g in range(nq):
            base = b_off[g]
            mask = <uint64_t>((b_off[g + 1] - base) * 64 - 1)
            for r in range(j_off[g], j_off[g + 1]):
                y = (j_h[r] >> 40) & mask
                bits[base + <int64_t>(y >> 6)] |= (<uint64_t>1) << (y & 63)
    return b_off_a, bits_a


def join(const int64_t[::1] r_off, const uint64_t[::1] r_h, const uint8_t[::1] r_buf, const int64_t[::1] r_s,
         const int64_t[::1] r_e, const int64_t[::1] qmap, const int64_t[::1] j_off, const int64_t[::1] t_off,
         const uint64_t[:, ::1] table, const int64_t[::1] b_off, const uint64_t[::1] bits, const uint8_t[::1] j_buf,
         const int64_t[::1] j_s, int64_t nonpool, int64_t unjudged):
    """Relevance of every run row: a probe of its topic's filter and table (``join_filter``,
    ``join_table``). Run query
    ``g`` is qrels query ``qmap[g]`` (-1: none). The hash only picks candidates: a document
    joins a judgment when their bytes are equal, so no hash collision can join two different ids."""
    rel_a = np.full(r_h.shape[0], nonpool, dtype=np.int64)
    cdef int64_t[::1] rel = rel_a
    cdef const uint64_t* tab = &table[0, 0] if table.shape[0] else NULL
    cdef const uint64_t* bp = &bits[0] if bits.shape[0] else NULL
    cdef const uint8_t* rb = _ptr8(r_buf)
    cdef const uint8_t* jb = _ptr8(j_buf)
    cdef const int64_t* js = _ptr64(j_s)
    cdef int64_t nbuf = r_buf.shape[0]
    cdef int64_t g, j, base, size, first, b_base, lo, hi, r, slot, v
    cdef uint64_t b_mask, mask
    with nogil:
        for g in range(r_off.shape[0] - 1):
            j = qmap[g]
            if j < 0:
                continue
            base = t_off[j]
            size = t_off[j + 1] - base
            first = j_off[j] - 1
            b_base = b_off[j]
            b_mask = <uint64_t>((b_off[j + 1] - b_base) * 64 - 1)
            lo = r_off[g]
            hi = r_off[g + 1]
            mask = <uint64_t>(size - 1)
            for r in range(lo, min(lo + PREFETCH_ROWS, hi)):
                _prefetch(tab, base + <int64_t>(r_h[r] & mask))
            for r in range(lo, hi):
                if r + PREFETCH_ROWS < hi:
                    _prefetch(tab, base + <int64_t>(r_h[r + PREFETCH_ROWS] & mask))
                slot = _lookup(tab, base, size, first, bp, b_base, b_mask, r_h[r], rb, nbuf, r_s[r], r_e[r], jb, js)
                if slot >= 0:
                    v = <int64_t>tab[SLOT_WORDS * slot]
                    rel[r] = v if v >= 0 else unjudged
    return rel_a


# ---------------------------------------------------------------------------- dicts to ids

# numpy.float64: a subclass of float that keeps its value where a float does (numpy converts it
# as it is; other float subclasses may convert through their own __float__: the general path)
cdef PyObject* _NP_FLOAT64 = <PyObject*>np.float64


def dict_rows(list dicts, int64_t n):
    """The keys and values of ``dicts`` (``{docno: value}`` dicts, in order) in one walk of the
    dicts: the keys as ``"\\n".join`` of them all, UTF-8 (what ``_Ids.from_keys`` builds), their
    spans and hashes (``_hash``, the value ``split_hash`` gives), and the values as doubles (the
    value ``float()`` gives). Returns ``(buf, s, e, h, values)``, or None where a dict, key or
    value is not of the plain kinds this walk reads (a ``dict``, a ``str`` without a line break,
    a ``float`` or ``numpy.float64``, an ``int`` within 64 bits), or the dicts hold other than ``n`` items: the caller
    then takes its general path, which reads or refuses them (with the same result as here where
    both apply). Each key is hashed as it is copied (its bytes in cache); ``buf`` is a view of
    a buffer with room to spare (no second copy)."""
    cdef int64_t n_dicts = len(dicts), i, r = 0, cap = 16 * n + 64, used = 0, ln
    cdef Py_ssize_t pos
    cdef PyObject* d
    cdef PyObject* k
    cdef PyObject* v
    cdef const uint8_t* src
    cdef bytes encoded
    cdef int overflow = 0
    cdef long long iv
    cdef bint line_break = False
    for i in range(n_dicts):
        d = <PyObject*>dicts[i]
        if not _is_dict(d):
            return None
        r += _dict_len(d)
    if r != n or n == 0:
        return None
    # one block for the five arrays (views of it): one allocation, which numpy asks the system to
    # back with huge pages when it is large enough, instead of five faulted in page by page
    block = np.empty(32 * n + cap, dtype=np.uint8)
    s_a = block[:8 * n].view(np.int64)
    e_a = block[8 * n:16 * n].view(np.int64)
    h_a = block[16 * n:24 * n].view(np.uint64)
    val_a = block[24 * n:32 * n].view(np.float64)
    buf_a = block[32 * n:]
    cdef uint8_t[::1] bv = buf_a
    cdef int64_t[::1] s = s_a, e = e_a
    cdef uint64_t[::1] h = h_a
    cdef double[::1] val = val_a
    cdef uint8_t* buf = &bv[0]
    r = 0
    for i in range(n_dicts):
        d = <PyObject*>dicts[i]
        pos = 0
        # borrowed references: the dict holds them, and no Python code runs until the walk's end
        while _dict_next(d, &pos, &k, &v):
            if r == n:
                return None
            if _is_float(v) or _type_of(v) == _NP_FLOAT64:  # a float, or numpy's float64 (a float's layout)
                val[r] = _float_value(v)
            elif _is_int(v):
                iv = _int_value(v, &overflow)
                if overflow:
                    return None
                val[r] = <double>iv
            else:
                return None
            if not _is_str(k):
                return None
            if _is_ascii(k):
                src = <const uint8_t*>_str_data(k)
                ln = _str_len(k)
            else:
                try:
                    encoded = (<object>k).encode("utf-8")
                except UnicodeEncodeError:
                    return None
                src = <const uint8_t*><const char*>encoded
                ln = len(encoded)
            if used + ln + 9 > cap:  # the key, its separator, and the 8 bytes a word load may read past it
                while used + ln + 9 > cap:
                    cap *= 2
                grown = np.empty(cap, dtype=np.uint8)
                grown[:used] = buf_a[:used]
                buf_a = grown
                bv = buf_a
                buf = &bv[0]
            if r > 0:
                buf[used] = 10
                used += 1
            memcpy(buf + used, src, ln)
            s[r] = used
            e[r] = used + ln
            h[r] = _hash_lf(buf, used, used + ln, &line_break)
            used += ln
            r += 1
    if r != n or line_break:
        return None
    return buf_a[:used], s_a, e_a, h_a, val_a


# ---------------------------------------------------------------------------- judged grades

cdef enum:
    _FEW_GRADES = 32  # distinct grades of a group kept in a sorted list; beyond, the group is sorted


def grade_levels(const int64_t[::1] offsets, const int64_t[::1] grades):
    """Per group (rows ``offsets[g]:offsets[g+1]``), its distinct grades >= 0, ascending, and how
    many rows hold each: ``(off, levels, counts)`` flat, group ``g``'s in ``off[g]:off[g+1]``.

    A group's grades go into a short sorted list (a qrels topic has a handful of distinct grades);
    a group with more than ``_FEW_GRADES`` of them is sorted instead (``std::sort``), then counted."""
    cdef int64_t ng = offsets.shape[0] - 1, g, r, k = 0, m, i, j, x, longest = 0
    for g in range(ng):
        longest = max(longest, offsets[g + 1] - offsets[g])
    off_a = np.zeros(ng + 1, dtype=np.int64)
    lv_a = np.empty(grades.shape[0], dtype=np.int64)
    cnt_a = np.empty(grades.shape[0], dtype=np.int64)
    tmp_a = np.empty(longest, dtype=np.int64)
    cdef int64_t[::1] off = off_a, lv = lv_a, cnt = cnt_a, tmp = tmp_a
    cdef bint many
    with nogil:
        for g in range(ng):
            m = 0  # distinct grades so far, sorted, in lv[k:k+m] / cnt[k:k+m]
            many = False
            for r in range(offsets[g], offsets[g + 1]):
                x = grades[r]
                if x < 0:
                    continue
                i = k
                while i < k + m and lv[i] < x:
                    i += 1
                if i < k + m and lv[i] == x:
                    cnt[i] += 1
                    continue
                if m == _FEW_GRADES:
                    many = True
                    break
                j = k + m
                while j > i:
                    lv[j] = lv[j - 1]
                    cnt[j] = cnt[j - 1]
                    j -= 1
                lv[i] = x
                cnt[i] = 1
                m += 1
            if many:
                j = 0
                for r in range(offsets[g], offsets[g + 1]):
                    if grades[r] >= 0:
                        tmp[j] = grades[r]
                        j += 1
                sort(&tmp[0], &tmp[0] + j)
                m = 0
                for i in range(j):
                    if i > 0 and tmp[i] == tmp[i - 1]:
                        cnt[k + m - 1] += 1
                    else:
                        lv[k + m] = tmp[i]
                        cnt[k + m] = 1
                        m += 1
            k += m
            off[g + 1] = k
    return off_a, lv_a[:k].copy(), cnt_a[:k].copy()
