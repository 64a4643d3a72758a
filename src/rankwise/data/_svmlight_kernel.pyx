# cython: language_level=3
"""Compiled kernels of the SVMlight/LETOR parser and writer (imported lazily by ``svmlight.py``).

The parser is one pass over the raw bytes, without the GIL. Numbers are converted exactly by
``_decimal._parse_number_ws`` (Clinger's fast path, then Eisel-Lemire up to 18 significant digits);
anything else (more digits, subnormal or overflowing results, the rare undecided case,
``nan``/``inf`` spellings) is recorded as a *fallback* token and converted in Python with
``float()``, so results are always identical to ``float()`` / a correctly rounded ``strtod``.

On the first malformed token the kernel stops and returns an error code with the line number and
the byte offset of the token; the Python side turns that into a ``path:line:`` message.
"""
import numpy as np

cimport cython
from libc.math cimport NAN, rint
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memchr, memcpy

from rankwise.data._decimal cimport EL_MAX, EL_MIN, _is_ws, _parse_int, _parse_number_ws

# error codes (messages live in svmlight.py)
cpdef enum:
    OK = 0
    E_LABEL = 1
    E_QID = 2
    E_STRAY = 3
    E_INDEX = 4
    E_VALUE = 5
    E_ZERO_INDEX = 6
    E_DUP_INDEX = 7
    E_DEC_INDEX = 8
    E_QID_POS = 9
    E_INDEX_RANGE = 10
    E_NO_LABEL = 11
    E_FALLBACK_FULL = 12
    E_CONTROL = 13

_POW10 = np.array([10.0 ** i for i in range(23)], dtype=np.float64)  # exact doubles


def _pow10_table():
    """128-bit mantissas of 10**q, q in [EL_MIN, EL_MAX], normalised (top bit set) and rounded
    down (as Eisel-Lemire's error bound assumes): (high words, low words)."""
    hi = np.empty(EL_MAX - EL_MIN + 1, dtype=np.uint64)
    lo = np.empty_like(hi)
    for i, q in enumerate(range(EL_MIN, EL_MAX + 1)):
        if q >= 0:
            v = 10 ** q
            m = v << (128 - v.bit_length()) if v.bit_length() <= 128 else v >> (v.bit_length() - 128)
        else:
            d = 10 ** -q
            m = (1 << (d.bit_length() + 127)) // d  # 2**k / 10**-q, 128 bits
        assert m.bit_length() == 128
        hi[i], lo[i] = m >> 64, m & ((1 << 64) - 1)
    return hi, lo


_EL_HI, _EL_LO = _pow10_table()
# the tables as C arrays, for the nogil kernels
cdef uint64_t PHI[EL_MAX - EL_MIN + 1]
cdef uint64_t PLO[EL_MAX - EL_MIN + 1]
cdef double POW10[23]
cdef Py_ssize_t _k
for _k in range(EL_MAX - EL_MIN + 1):
    PHI[_k] = _EL_HI[_k]
    PLO[_k] = _EL_LO[_k]
for _k in range(23):
    POW10[_k] = _POW10[_k]


cdef inline int64_t _uint_digits(const unsigned char* buf, int64_t i, int64_t ce, int64_t* value,
                                 bint* ok) noexcept nogil:
    """The decimal digits from ``i`` as an int64 into ``value``; returns the first non-digit. ``ok``
    is False when the value is beyond int64 (refused, never wrapped)."""
    cdef int64_t v = 0
    cdef unsigned char c
    ok[0] = True
    while i < ce:
        c = buf[i]
        if c < 48 or c > 57:
            break
        if v > 922337203685477580LL or (v == 922337203685477580LL and c > 55):
            ok[0] = False
        else:
            v = v * 10 + (c - 48)
        i += 1
    value[0] = v
    return i


cdef inline bint _is_null(const unsigned char* buf, int64_t s, int64_t e) noexcept nogil:
    return e - s == 4 and buf[s] == 78 and buf[s + 1] == 85 and buf[s + 2] == 76 and buf[s + 3] == 76


def _parse_number(const unsigned char[::1] buf, int64_t s, int64_t e, const double[::1] pow10):
    """Parse the whole token buf[s:e] as a decimal number (the token holds no whitespace).

    Returns (status, value): status 0 = exact fast path, 1 = needs the Python fallback
    (well formed but outside the fast path, or a spelling such as ``nan``), 2 = malformed.
    """
    cdef double v = 0.0  # the value of a token left to float() (status 1) or malformed (2)
    cdef int64_t end
    cdef int st = _parse_number_ws(&buf[0], s, e, &pow10[0], PHI, PLO, &v, &end)
    return st, v


def count_lines_and_colons(const unsigned char[::1] buf):
    cdef int64_t n_nl = 0, n_colon = 0, i
    cdef unsigned char c
    with nogil:
        for i in range(buf.shape[0]):  # branch-free: the compiler vectorises the two sums
            c = buf[i]
            n_nl += c == 10
            n_colon += c == 58
    return n_nl, n_colon


def line_end_faults(const unsigned char[::1] buf):
    """``(bare_cr, lone_lf)``: the offset of the first carriage return not followed by a line feed, and
    of the first line feed not preceded by a carriage return (-1: none); ``memchr`` from one CR (LF) to
    the next, without the GIL."""
    cdef int64_t n = buf.shape[0], i, bare_cr = -1, lone_lf = -1
    cdef const unsigned char* b = &buf[0]
    cdef const unsigned char* p
    with nogil:
        i = 0
        while i < n:
            p = <const unsigned char*>memchr(b + i, 13, n - i)
            if p == NULL:
                break
            i = p - b
            if i + 1 >= n or b[i + 1] != 10:
                bare_cr = i
                break
            i += 2
        i = 0
        while i < n:
            p = <const unsigned char*>memchr(b + i, 10, n - i)
            if p == NULL:
                break
            i = p - b
            if i == 0 or b[i - 1] != 13:
                lone_lf = i
                break
            i += 1
    return bare_cr, lone_lf


cdef struct Parsed:
    # outputs, sized by the caller
    double* labels
    int64_t* qids
    unsigned char* has_qid
    int64_t* line_no
    int64_t* docid_s
    int64_t* docid_e
    int64_t* indptr
    int64_t* indices
    float* values
    # fallback tokens: (kind 0=value 1=label, position, start, end)
    signed char* fb_kind
    int64_t* fb_pos
    int64_t* fb_s
    int64_t* fb_e
    int64_t fb_max
    # counts and the error position
    int64_t line
    int64_t err_off
    int64_t err_end
    int64_t n_rows
    int64_t nnz
    int64_t max_index
    int64_t n_fb


cdef inline int _stop(Parsed* o, int code, int64_t line, int64_t s, int64_t e, int64_t n_rows, int64_t nnz,
                      int64_t max_index) noexcept nogil:
    """The end of the pass: ``code`` (an error at buf[s:e] of ``line``, or OK) and the counts so far."""
    o.line = line
    o.err_off = s
    o.err_end = e
    o.n_rows = n_rows
    o.nnz = nnz
    o.max_index = max_index
    return code


cdef inline void _push_fallback(Parsed* o, signed char kind, int64_t pos, int64_t s, int64_t e) noexcept nogil:
    """Record token buf[s:e] (kind 0 = value at nnz ``pos``, 1 = label of row ``pos``) for the
    Python ``float()`` fallback."""
    o.fb_kind[o.n_fb] = kind
    o.fb_pos[o.n_fb] = pos
    o.fb_s[o.n_fb] = s
    o.fb_e[o.n_fb] = e
    o.n_fb += 1


cdef int _parse(const unsigned char* buf, int64_t n, bint zero_based, int64_t n_features_max,
                Parsed* o) noexcept nogil:
    cdef double v
    cdef uint64_t w
    cdef int64_t k, i, j, ts, te, ls, ce, le, bad, vs, ds, colon, idx, q, prev_index
    cdef int64_t pos = 0, line = 0, n_rows = 0, nnz = 0, max_index = -1
    cdef unsigned char c
    cdef bint has_colon, first, okidx
    cdef int st, code
    o.n_fb = 0
    while pos < n:
        line += 1
        # one pass: end of the data part ('#' or end of line), control characters, end of line
        ls = pos
        k = pos
        bad = -1
        while k + 8 <= n:  # skip 8 bytes at a time while none is a control byte (LF included) or '#'
            memcpy(&w, buf + k, 8)
            if (w - 0x2020202020202020ULL) & ~w & 0x8080808080808080ULL:  # a byte below 32
                break
            w ^= 0x2323232323232323ULL
            if (w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL:  # a '#'
                break
            k += 8
        while k < n:  # the bytes from there on, one by one
            c = buf[k]
            if c == 10 or c == 35:
                break
            if c < 32 and c != 9 and c != 13 and c != 11 and c != 12 and bad < 0:
                bad = k
            k += 1
        ce = k  # content end (before '#')
        if bad >= 0:
            return _stop(o, E_CONTROL, line, bad, bad + 1, n_rows, nnz, max_index)
        le = ce
        if le < n and buf[le] == 35:
            while le < n and buf[le] != 10:
                c = buf[le]
                if c < 32 and c != 9 and c != 13:  # NUL and other control bytes in a comment / doc id
                    return _stop(o, E_CONTROL, line, le, le + 1, n_rows, nnz, max_index)
                le += 1
        pos = le + 1
        # tokenise
        i = ls
        while i < ce and _is_ws(buf[i]):
            i += 1
        if i >= ce:
            continue  # blank or comment-only line
        # label
        ts = i
        while i < ce and not _is_ws(buf[i]):
            i += 1
        te = i
        has_colon = False
        for k in range(ts, te):
            if buf[k] == 58:
                has_colon = True
        if has_colon:
            return _stop(o, E_NO_LABEL, line, ts, te, n_rows, nnz, max_index)
        v = 0.0  # stays for a token left to float()
        st = _parse_number_ws(buf, ts, te, POW10, PHI, PLO, &v, &j)
        if st == 2:
            return _stop(o, E_LABEL, line, ts, te, n_rows, nnz, max_index)
        if st == 1:
            if o.n_fb >= o.fb_max:
                return _stop(o, E_FALLBACK_FULL, line, ts, te, n_rows, nnz, max_index)
            _push_fallback(o, 1, n_rows, ts, te)
        o.labels[n_rows] = v
        o.line_no[n_rows] = line
        o.has_qid[n_rows] = False
        o.qids[n_rows] = 0
        prev_index = -1
        first = True
        while True:
            while i < ce and _is_ws(buf[i]):
                i += 1
            if i >= ce:
                break
            ts = i
            # qid:<int>
            if i + 3 < ce and buf[i] == 113 and buf[i + 1] == 105 and buf[i + 2] == 100 and buf[i + 3] == 58:
                te = i + 4
                while te < ce and not _is_ws(buf[te]):
                    te += 1
                i = te
                if not first:
                    return _stop(o, E_QID_POS, line, ts, te, n_rows, nnz, max_index)
                if not _parse_int(buf, ts + 4, te, &q):
                    return _stop(o, E_QID, line, ts, te, n_rows, nnz, max_index)
                o.qids[n_rows] = q
                o.has_qid[n_rows] = True
                first = False
                continue
            first = False
            # index digits, parsed while scanning for ':'
            j = _uint_digits(buf, i, ce, &idx, &okidx)
            if j >= ce or buf[j] != 58 or j == ts or not okidx:
                te = j
                colon = -1
                while te < ce and not _is_ws(buf[te]):
                    if buf[te] == 58 and colon < 0:
                        colon = te
                    te += 1
                if colon < 0 and (j >= ce or buf[j] != 58):
                    return _stop(o, E_STRAY, line, ts, te, n_rows, nnz, max_index)
                return _stop(o, E_INDEX, line, ts, te, n_rows, nnz, max_index)
            colon = j
            if not zero_based:
                if idx == 0:
                    te = colon
                    while te < ce and not _is_ws(buf[te]):
                        te += 1
                    return _stop(o, E_ZERO_INDEX, line, ts, te, n_rows, nnz, max_index)
                idx -= 1
            if idx <= prev_index or (n_features_max >= 0 and idx >= n_features_max):
                te = colon
                while te < ce and not _is_ws(buf[te]):
                    te += 1
                code = E_DUP_INDEX if idx == prev_index else (E_DEC_INDEX if idx < prev_index else E_INDEX_RANGE)
                return _stop(o, code, line, ts, te, n_rows, nnz, max_index)
            prev_index = idx
            if idx > max_index:
                max_index = idx
            # value, parsed in the same pass that finds the token end
            vs = colon + 1
            if vs >= ce or _is_ws(buf[vs]):
                return _stop(o, E_VALUE, line, ts, vs, n_rows, nnz, max_index)
            v = 0.0
            st = _parse_number_ws(buf, vs, ce, POW10, PHI, PLO, &v, &te)
            i = te
            if st == 1 and _is_null(buf, vs, te):
                o.values[nnz] = NAN
            else:
                if st == 2:
                    return _stop(o, E_VALUE, line, ts, te, n_rows, nnz, max_index)
                if st == 1:
                    if o.n_fb >= o.fb_max:
                        return _stop(o, E_FALLBACK_FULL, line, ts, te, n_rows, nnz, max_index)
                    _push_fallback(o, 0, nnz, vs, te)
                o.values[nnz] = <float>v
            o.indices[nnz] = idx
            nnz += 1
        # '#docid = X' in the comment
        if ce < le:
            k = ce + 1
            while k + 5 <= le:
                if buf[k] == 100 and buf[k + 1] == 111 and buf[k + 2] == 99 and buf[k + 3] == 105 and buf[k + 4] == 100:
                    j = k + 5
                    while j < le and _is_ws(buf[j]):
                        j += 1
                    if j < le and buf[j] == 61:
                        j += 1
                        while j < le and _is_ws(buf[j]):
                            j += 1
                        ds = j
                        while j < le and not _is_ws(buf[j]):
                            j += 1
                        o.docid_s[n_rows] = ds
                        o.docid_e[n_rows] = j
                    break
                k += 1
        n_rows += 1
        o.indptr[n_rows] = nnz
    return _stop(o, OK, line, 0, 0, n_rows, nnz, max_index)


def parse(const unsigned char[::1] buf, int64_t n_rows_max, int64_t nnz_max, bint zero_based, int64_t n_features_max,
          int64_t fb_max):
    """Parse SVMlight/LETOR bytes.

    Returns a tuple of arrays/scalars; see ``svmlight._parse_bytes`` for the unpacking.
    """
    labels = np.empty(n_rows_max, dtype=np.float64)
    qids = np.empty(n_rows_max, dtype=np.int64)
    has_qid = np.zeros(n_rows_max, dtype=np.bool_)
    line_no = np.empty(n_rows_max, dtype=np.int64)
    docid_s = np.zeros(n_rows_max, dtype=np.int64)
    docid_e = np.zeros(n_rows_max, dtype=np.int64)
    indptr = np.zeros(n_rows_max + 1, dtype=np.int64)
    indices = np.empty(nnz_max, dtype=np.int64)
    values = np.empty(nnz_max, dtype=np.float32)
    fb_kind = np.empty(fb_max, dtype=np.int8)
    fb_pos = np.empty(fb_max, dtype=np.int64)
    fb_s = np.empty(fb_max, dtype=np.int64)
    fb_e = np.empty(fb_max, dtype=np.int64)
    cdef double[::1] labels_v = labels
    cdef int64_t[::1] qids_v = qids, line_no_v = line_no, docid_s_v = docid_s, docid_e_v = docid_e
    cdef int64_t[::1] indptr_v = indptr, indices_v = indices, fb_pos_v = fb_pos, fb_s_v = fb_s, fb_e_v = fb_e
    cdef unsigned char[::1] has_qid_v = has_qid.view(np.uint8)
    cdef float[::1] values_v = values
    cdef signed char[::1] fb_kind_v = fb_kind
    cdef Parsed o
    o.labels = &labels_v[0]
    o.qids = &qids_v[0]
    o.has_qid = &has_qid_v[0]
    o.line_no = &line_no_v[0]
    o.docid_s = &docid_s_v[0]
    o.docid_e = &docid_e_v[0]
    o.indptr = &indptr_v[0]
    o.indices = &indices_v[0]
    o.values = &values_v[0]
    o.fb_kind = &fb_kind_v[0]
    o.fb_pos = &fb_pos_v[0]
    o.fb_s = &fb_s_v[0]
    o.fb_e = &fb_e_v[0]
    o.fb_max = fb_max
    cdef int code
    with nogil:
        code = _parse(&buf[0], buf.shape[0], zero_based, n_features_max, &o)
    return (code, o.line, o.err_off, o.err_end, labels, qids, has_qid, line_no, docid_s, docid_e,
            indptr, indices, values, o.n_rows, o.nnz, o.max_index, fb_kind, fb_pos, fb_s, fb_e, o.n_fb)


def gather_strings(const unsigned char[::1] buf, const int64_t[::1] starts, const int64_t[::1] ends, int64_t width):
    cdef Py_ssize_t n = starts.shape[0], r
    cdef int64_t w = max(width, 1)
    out = np.zeros((n, w), dtype=np.uint8)
    cdef unsigned char[:, ::1] o = out
    with nogil:
        for r in range(n):
            if ends[r] > starts[r]:
                memcpy(&o[r, 0], &buf[starts[r]], ends[r] - starts[r])
    return out


def scatter_dense(const int64_t[::1] indptr, const int64_t[::1] indices, const float[::1] values, int64_t n_rows,
                  int64_t n_cols):
    X = np.zeros((n_rows, n_cols), dtype=np.float32)
    cdef float[:, ::1] Xv = X
    cdef int64_t r, k
    with nogil:
        for r in range(n_rows):
            for k in range(indptr[r], indptr[r + 1]):
                Xv[r, indices[k]] = values[k]
    return X


cdef inline int64_t _write_uint(unsigned char* out, int64_t pos, int64_t v) noexcept nogil:
    cdef unsigned char tmp[20]
    cdef int64_t k = 0, j
    if v == 0:
        out[pos] = 48
        return pos + 1
    while v > 0:
        tmp[k] = 48 + v % 10
        v //= 10
        k += 1
    for j in range(k):
        out[pos + j] = tmp[k - 1 - j]
    return pos + k


def format_fixed(const int64_t[::1] labels_i, const int64_t[::1] qids, const cython.floating[:, ::1] X,
                 int64_t decimals, int64_t one_based):
    """Fixed-point LETOR lines ``label qid:q i:v ...`` (values rounded to ``decimals``)."""
    cdef int64_t n = X.shape[0], d = X.shape[1]
    cdef int64_t per_row = 40 + d * (24 + decimals)
    out = np.empty(n * per_row, dtype=np.uint8)
    cdef unsigned char[::1] out_v = out
    cdef unsigned char* o = &out_v[0]
    cdef int64_t scale = 1, pos = 0, r, j, t, lab, q, m, ip, fp, div
    cdef cython.floating x
    for t in range(decimals):
        scale *= 10
    with nogil:
        for r in range(n):
            lab = labels_i[r]
            if lab < 0:
                o[pos] = 45
                pos += 1
                lab = -lab
            pos = _write_uint(o, pos, lab)
            o[pos] = 32
            o[pos + 1] = 113
            o[pos + 2] = 105
            o[pos + 3] = 100
            o[pos + 4] = 58
            pos += 5
            q = qids[r]
            if q < 0:
                o[pos] = 45
                pos += 1
                q = -q
            pos = _write_uint(o, pos, q)
            for j in range(d):
                o[pos] = 32
                pos += 1
                pos = _write_uint(o, pos, j + one_based)
                o[pos] = 58
                pos += 1
                x = X[r, j]
                if x < 0:
                    o[pos] = 45
                    pos += 1
                    x = -x
                m = <int64_t>rint(<double>x * scale)  # round half to even, as np.round
                ip = m // scale
                fp = m - ip * scale
                pos = _write_uint(o, pos, ip)
                if decimals > 0:
                    o[pos] = 46
                    pos += 1
                    div = scale // 10
                    for t in range(decimals):
                        o[pos] = 48 + (fp // div) % 10
                        pos += 1
                        div //= 10
            o[pos] = 10
            pos += 1
    return out[:pos]
