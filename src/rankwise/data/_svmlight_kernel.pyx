"""numba kernels of the SVMlight/LETOR parser and writer (imported lazily by ``svmlight.py``).

The parser is one pass over the raw bytes. Numbers in the common form ``[+-]digits[.digits][e[+-]dd]``
with a mantissa below 2**53 and a decimal exponent within ±22 are converted exactly (Clinger's
fast path: one correctly rounded multiplication or division of two exact doubles, the same
double that ``strtod`` returns); up to 18 significant digits (every full-precision ``repr``
score has 17) and any exponent of a normal double, by the Eisel-Lemire algorithm (a 128-bit
product with a truncated power of ten; it says when it cannot decide, and the token then falls
back). Anything else (more digits, subnormal or overflowing results, the rare undecided case,
``nan``/``inf`` spellings) is recorded as a *fallback* token and converted in Python with
``float()``, so results are always identical to ``float()`` / a correctly rounded ``strtod``.

References: W. D. Clinger, "How to read floating point numbers accurately", PLDI 1990;
D. Lemire, "Number parsing at a gigabyte per second", Software: Practice and Experience 51(8),
2021 (the variant of N. Tao, with its fallback condition, as in Go's ``strconv``).

On the first malformed token the kernel stops and returns an error code with the line number and
the byte offset of the token; the Python side turns that into a ``path:line:`` message.
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

# error codes (messages live in svmlight.py)
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

_POW10 = np.array([10.0 ** i for i in range(23)], dtype=np.float64)
_TWO53 = 9007199254740992

#: decimal exponents of the Eisel-Lemire table
EL_MIN, EL_MAX = -348, 347


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
_U = np.uint64
_M32 = np.uint64(0xFFFFFFFF)
_M9 = np.uint64(0x1FF)


@nb.njit(cache=True, inline="always")
def _mul128(a, b):
    """The 128-bit product of two uint64 as (high, low) words."""
    a0, a1, b0, b1 = a & _M32, a >> _U(32), b & _M32, b >> _U(32)
    p0, p1, p2, p3 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p0 >> _U(32)) + (p1 & _M32) + (p2 & _M32)
    return p3 + (p1 >> _U(32)) + (p2 >> _U(32)) + (mid >> _U(32)), (p0 & _M32) | (mid << _U(32))


@nb.njit(cache=True)
def _eisel_lemire(man, exp10, phi, plo):
    """``(ok, value)``: ``man * 10**exp10`` (``man`` > 0, at most 18 digits) rounded to the
    nearest double, ties to even; ``ok`` False where the 128-bit product cannot decide (then,
    and for subnormal or overflowing results, the caller falls back to ``float()``)."""
    if exp10 < EL_MIN or exp10 > EL_MAX:
        return False, 0.0
    man = _U(man)
    clz = np.int64(leading_zeros(man))
    man = man << _U(clz)
    exp2 = ((217706 * exp10) >> 16) + 64 + 1023 - clz
    i = exp10 - EL_MIN
    x_hi, x_lo = _mul128(man, phi[i])
    if (x_hi & _M9) == _M9 and x_lo + man < man:  # the truncated table may matter: a wider product
        y_hi, y_lo = _mul128(man, plo[i])
        m_hi, m_lo = x_hi, x_lo + y_hi
        if m_lo < x_lo:
            m_hi += _U(1)
        if (m_hi & _M9) == _M9 and m_lo + _U(1) == _U(0) and y_lo + man < man:
            return False, 0.0
        x_hi, x_lo = m_hi, m_lo
    msb = np.int64(x_hi >> _U(63))
    mant = x_hi >> _U(msb + 9)
    exp2 -= 1 ^ msb
    if x_lo == _U(0) and (x_hi & _M9) == _U(0) and (mant & _U(3)) == _U(1):  # halfway: undecided
        return False, 0.0
    mant = (mant + (mant & _U(1))) >> _U(1)
    if (mant >> _U(53)) > _U(0):
        mant >>= _U(1)
        exp2 += 1
    if exp2 <= 0 or exp2 >= 0x7FF:  # subnormal, or beyond the doubles
        return False, 0.0
    return True, math.ldexp(float(mant), exp2 - 1075)


@nb.njit(cache=True, nogil=True)
def count_lines_and_colons(buf):
    n_nl = 0
    n_colon = 0
    for i in range(buf.shape[0]):
        c = buf[i]
        if c == 10:
            n_nl += 1
        elif c == 58:
            n_colon += 1
    return n_nl, n_colon


@nb.njit(cache=True, inline="always")
def _is_ws(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@nb.njit(cache=True, inline="always")
def _uint_digits(buf, i, ce):
    """The decimal digits from ``i`` as an int64. Returns (value, ok, end): ``end`` is the first
    non-digit; ``ok`` is False when the value is beyond int64 (refused, never wrapped)."""
    v = 0
    ok = True
    while i < ce:
        c = buf[i]
        if c < 48 or c > 57:
            break
        if v > 922337203685477580 or (v == 922337203685477580 and c > 55):
            ok = False
        else:
            v = v * 10 + (c - 48)
        i += 1
    return v, ok, i


@nb.njit(cache=True, inline="always")
def _push_fallback(fb_kind, fb_pos, fb_s, fb_e, n_fb, kind, pos, s, e):
    """Record token buf[s:e] (kind 0 = value at nnz ``pos``, 1 = label of row ``pos``) for the
    Python ``float()`` fallback; returns the new count."""
    fb_kind[n_fb] = kind
    fb_pos[n_fb] = pos
    fb_s[n_fb] = s
    fb_e[n_fb] = e
    return n_fb + 1


@nb.njit(cache=True)
def _parse_number_ws(buf, s, ce, pow10):
    """Parse the number starting at ``s`` and ending at whitespace or ``ce``, in one pass.

    Returns (status, value, end) with status as in ``_parse_number``.
    """
    i = s
    neg = False
    if i < ce and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    mant = 0
    exp10 = 0
    seen_digit = False
    overflow = False
    frac = False
    while i < ce:  # digits, at most one '.' among them; beyond 10**17 digits are dropped
        c = buf[i]
        if 48 <= c <= 57:
            seen_digit = True
            if mant < 100000000000000000:
                mant = mant * 10 + (c - 48)
                if frac:
                    exp10 -= 1
            else:
                overflow = True
                if not frac:
                    exp10 += 1
        elif c == 46 and not frac:
            frac = True
        else:
            break
        i += 1
    status = 0
    if seen_digit and i < ce and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < ce and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        if i >= ce or not (48 <= buf[i] <= 57):
            status = 2
        ev = 0
        while i < ce and 48 <= buf[i] <= 57:
            if ev < 100000:
                ev = ev * 10 + (buf[i] - 48)
            i += 1
        exp10 += -ev if eneg else ev
    if i < ce and not _is_ws(buf[i]):
        # junk after the number (or not a number at all): find the token end
        while i < ce and not _is_ws(buf[i]):
            i += 1
        return (2 if seen_digit else 1), 0.0, i
    if status == 2:
        return 2, 0.0, i
    if not seen_digit:
        return 1, 0.0, i
    if overflow:
        return 1, 0.0, i
    if mant == 0:
        return 0, -0.0 if neg else 0.0, i
    if mant > _TWO53 or exp10 > 22 or exp10 < -22:
        ok, v = _eisel_lemire(mant, exp10, _EL_HI, _EL_LO)
        if not ok:
            return 1, 0.0, i
        return 0, -v if neg else v, i
    v = float(mant)
    if exp10 == 0:
        pass
    elif exp10 > 0:
        v = v * pow10[exp10]
    else:
        v = v / pow10[-exp10]
    return 0, -v if neg else v, i


@nb.njit(cache=True)
def _parse_number(buf, s, e, pow10):
    """Parse the whole token buf[s:e] as a decimal number (the token holds no whitespace).

    Returns (status, value): status 0 = exact fast path, 1 = needs the Python fallback
    (well formed but outside the fast path, or a spelling such as ``nan``), 2 = malformed.
    """
    st, v, _ = _parse_number_ws(buf, s, e, pow10)
    return st, v


@nb.njit(cache=True)
def _parse_int(buf, s, e):
    """Non-negative or signed decimal integer in buf[s:e]; returns (ok, value)."""
    i = s
    neg = False
    if i < e and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    if i >= e:
        return False, 0
    v, ok, i = _uint_digits(buf, i, e)
    if not ok or i < e:  # beyond int64 (refused, never wrapped) or a non-digit
        return False, 0
    return True, -v if neg else v


@nb.njit(cache=True)
def _is_null(buf, s, e):
    return e - s == 4 and buf[s] == 78 and buf[s + 1] == 85 and buf[s + 2] == 76 and buf[s + 3] == 76


@nb.njit(cache=True)
def parse(buf, n_rows_max, nnz_max, zero_based, n_features_max, fb_max):
    """Parse SVMlight/LETOR bytes.

    Returns a tuple of arrays/scalars; see ``svmlight._parse_bytes`` for the unpacking.
    """
    pow10 = np.empty(23, dtype=np.float64)
    p = 1.0
    for k in range(23):
        pow10[k] = p
        p *= 10.0
    labels = np.empty(n_rows_max, dtype=np.float64)
    qids = np.empty(n_rows_max, dtype=np.int64)
    has_qid = np.zeros(n_rows_max, dtype=np.bool_)
    line_no = np.empty(n_rows_max, dtype=np.int64)
    docid_s = np.zeros(n_rows_max, dtype=np.int64)
    docid_e = np.zeros(n_rows_max, dtype=np.int64)
    indptr = np.zeros(n_rows_max + 1, dtype=np.int64)
    indices = np.empty(nnz_max, dtype=np.int64)
    values = np.empty(nnz_max, dtype=np.float32)
    # fallback tokens: (kind 0=value 1=label, position, start, end)
    fb_kind = np.empty(fb_max, dtype=np.int8)
    fb_pos = np.empty(fb_max, dtype=np.int64)
    fb_s = np.empty(fb_max, dtype=np.int64)
    fb_e = np.empty(fb_max, dtype=np.int64)
    n_fb = 0
    n_rows = 0
    nnz = 0
    n = buf.shape[0]
    pos = 0
    line = 0
    max_index = -1
    err = 0
    err_line = 0
    err_off = 0
    err_end = 0
    while pos < n:
        line += 1
        # find end of line and comment start
        # one pass: end of the data part ('#' or end of line), control characters, end of line
        ls = pos
        k = pos
        bad = -1
        while k < n:
            c = buf[k]
            if c == 10 or c == 35:
                break
            if c < 32 and c != 9 and c != 13 and c != 11 and c != 12 and bad < 0:
                bad = k
            k += 1
        ce = k  # content end (before '#')
        if bad >= 0:
            return (E_CONTROL, line, bad, bad + 1, labels, qids, has_qid, line_no, docid_s, docid_e,
                    indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
        le = ce
        if le < n and buf[le] == 35:
            while le < n and buf[le] != 10:
                c = buf[le]
                if c < 32 and c != 9 and c != 13:  # NUL and other control bytes in a comment / doc id
                    return (E_CONTROL, line, le, le + 1, labels, qids, has_qid, line_no, docid_s, docid_e,
                            indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
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
            return (E_NO_LABEL, line, ts, te, labels, qids, has_qid, line_no, docid_s, docid_e,
                    indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
        st, v = _parse_number(buf, ts, te, pow10)
        if st == 2:
            return (E_LABEL, line, ts, te, labels, qids, has_qid, line_no, docid_s, docid_e,
                    indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
        if st == 1:
            if n_fb >= fb_max:
                return (E_FALLBACK_FULL, line, ts, te, labels, qids, has_qid, line_no, docid_s, docid_e,
                        indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
            n_fb = _push_fallback(fb_kind, fb_pos, fb_s, fb_e, n_fb, 1, n_rows, ts, te)
        labels[n_rows] = v
        line_no[n_rows] = line
        has_qid[n_rows] = False
        qids[n_rows] = 0
        prev_index = -1
        first = True
        while True:
            while i < ce and _is_ws(buf[i]):
                i += 1
            if i >= ce:
                break
            ts = i
            # qid:<int>
            if (i + 3 < ce and buf[i] == 113 and buf[i + 1] == 105 and buf[i + 2] == 100
                    and buf[i + 3] == 58):
                te = i + 4
                while te < ce and not _is_ws(buf[te]):
                    te += 1
                i = te
                if not first:
                    return (E_QID_POS, line, ts, te, labels, qids, has_qid, line_no, docid_s, docid_e,
                            indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
                ok, q = _parse_int(buf, ts + 4, te)
                if not ok:
                    return (E_QID, line, ts, te, labels, qids, has_qid, line_no, docid_s, docid_e,
                            indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
                qids[n_rows] = q
                has_qid[n_rows] = True
                first = False
                continue
            first = False
            # index digits, parsed while scanning for ':'
            idx, okidx, j = _uint_digits(buf, i, ce)
            if j >= ce or buf[j] != 58 or j == ts or not okidx:
                te = j
                colon = -1
                while te < ce and not _is_ws(buf[te]):
                    if buf[te] == 58 and colon < 0:
                        colon = te
                    te += 1
                if colon < 0 and (j >= ce or buf[j] != 58):
                    return (E_STRAY, line, ts, te, labels, qids, has_qid, line_no, docid_s, docid_e,
                            indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
                return (E_INDEX, line, ts, te, labels, qids, has_qid, line_no, docid_s, docid_e,
                        indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
            colon = j
            if not zero_based:
                if idx == 0:
                    te = colon
                    while te < ce and not _is_ws(buf[te]):
                        te += 1
                    return (E_ZERO_INDEX, line, ts, te, labels, qids, has_qid, line_no, docid_s, docid_e,
                            indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
                idx -= 1
            if idx <= prev_index or (n_features_max >= 0 and idx >= n_features_max):
                te = colon
                while te < ce and not _is_ws(buf[te]):
                    te += 1
                code = E_DUP_INDEX if idx == prev_index else (E_DEC_INDEX if idx < prev_index else E_INDEX_RANGE)
                return (code, line, ts, te, labels, qids, has_qid, line_no, docid_s, docid_e,
                        indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
            prev_index = idx
            if idx > max_index:
                max_index = idx
            # value, parsed in the same pass that finds the token end
            vs = colon + 1
            if vs >= ce or _is_ws(buf[vs]):
                return (E_VALUE, line, ts, vs, labels, qids, has_qid, line_no, docid_s, docid_e,
                        indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
            st, v, te = _parse_number_ws(buf, vs, ce, pow10)
            i = te
            if st == 1 and _is_null(buf, vs, te):
                values[nnz] = np.nan
            else:
                if st == 2:
                    return (E_VALUE, line, ts, te, labels, qids, has_qid, line_no, docid_s, docid_e,
                            indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)
                if st == 1:
                    if n_fb >= fb_max:
                        return (E_FALLBACK_FULL, line, ts, te, labels, qids, has_qid, line_no, docid_s,
                                docid_e, indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos,
                                fb_s, fb_e, n_fb)
                    n_fb = _push_fallback(fb_kind, fb_pos, fb_s, fb_e, n_fb, 0, nnz, vs, te)
                values[nnz] = v
            indices[nnz] = idx
            nnz += 1
        # '#docid = X' in the comment
        if ce < le:
            k = ce + 1
            while k + 5 <= le:
                if (buf[k] == 100 and buf[k + 1] == 111 and buf[k + 2] == 99 and buf[k + 3] == 105
                        and buf[k + 4] == 100):
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
                        docid_s[n_rows] = ds
                        docid_e[n_rows] = j
                    break
                k += 1
        n_rows += 1
        indptr[n_rows] = nnz
    return (OK, line, err_off, err_end, labels, qids, has_qid, line_no, docid_s, docid_e,
            indptr, indices, values, n_rows, nnz, max_index, fb_kind, fb_pos, fb_s, fb_e, n_fb)


@nb.njit(cache=True)
def gather_strings(buf, starts, ends, width):
    n = starts.shape[0]
    out = np.zeros((n, max(width, 1)), dtype=np.uint8)
    for r in range(n):
        s = starts[r]
        for k in range(ends[r] - s):
            out[r, k] = buf[s + k]
    return out


@nb.njit(cache=True)
def scatter_dense(indptr, indices, values, n_rows, n_cols):
    X = np.zeros((n_rows, n_cols), dtype=np.float32)
    for r in range(n_rows):
        for k in range(indptr[r], indptr[r + 1]):
            X[r, indices[k]] = values[k]
    return X


@nb.njit(cache=True)
def _write_uint(out, pos, v):
    if v == 0:
        out[pos] = 48
        return pos + 1
    tmp = np.empty(20, dtype=np.uint8)
    k = 0
    while v > 0:
        tmp[k] = 48 + v % 10
        v //= 10
        k += 1
    for j in range(k):
        out[pos + j] = tmp[k - 1 - j]
    return pos + k


@nb.njit(cache=True)
def format_fixed(labels_i, qids, X, decimals, one_based):
    """Fixed-point LETOR lines ``label qid:q i:v ...`` (values rounded to ``decimals``)."""
    n, d = X.shape
    per_row = 40 + d * (24 + decimals)
    out = np.empty(n * per_row, dtype=np.uint8)
    scale = 10 ** decimals
    pos = 0
    for r in range(n):
        lab = labels_i[r]
        if lab < 0:
            out[pos] = 45
            pos += 1
            lab = -lab
        pos = _write_uint(out, pos, lab)
        out[pos] = 32
        out[pos + 1] = 113
        out[pos + 2] = 105
        out[pos + 3] = 100
        out[pos + 4] = 58
        pos += 5
        q = qids[r]
        if q < 0:
            out[pos] = 45
            pos += 1
            q = -q
        pos = _write_uint(out, pos, q)
        for j in range(d):
            out[pos] = 32
            pos += 1
            pos = _write_uint(out, pos, j + one_based)
            out[pos] = 58
            pos += 1
            x = X[r, j]
            if x < 0:
                out[pos] = 45
                pos += 1
                x = -x
            m = np.int64(np.round(np.float64(x) * scale))
            ip = m // scale
            fp = m - ip * scale
            pos = _write_uint(out, pos, ip)
            if decimals > 0:
                out[pos] = 46
                pos += 1
                div = scale // 10
                for _ in range(decimals):
                    out[pos] = 48 + (fp // div) % 10
                    pos += 1
                    div //= 10
        out[pos] = 10
        pos += 1
    return out[:pos]
