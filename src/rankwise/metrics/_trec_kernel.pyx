# cython: language_level=3
"""Compiled kernel computing every trec_eval measure of a topic in a few passes over its ranking.

Input per topic: the relevance of the ranked documents in trec_eval's order (a grade >= 0,
``NONPOOL`` for a document absent from the qrels, ``UNJUDGED`` for a qrels grade below 0), and
the topic's judged grades with their counts. The code follows trec_eval 10's ``m_*.c`` files
measure by measure (comments name the file); where trec_eval would divide 0 by 0 the value is 0.
Every division is guarded, or done in doubles (IEEE: x/0 is inf or nan, never a trap): integer
quotients are converted to doubles first, as trec_eval does. The kernels release the GIL.
"""
import numpy as np

from libc.math cimport floor, log, log2
from libc.stdint cimport int64_t, uint8_t, uint64_t

from cpython.ref cimport PyObject
from libc.string cimport memcpy

from rankwise.data._trec_kernel cimport (PREFETCH_ROWS, SLOT_WORDS, _cmp, _dict_len, _dict_next, _float_value,
                                         _final, _hash_lf, _int_value, _is_ascii, _is_dict, _is_float, _is_int, _is_str,
                                         _load8_word, _lookup, _low, _mix, _prefetch, _prefetch_line, _str_data,
                                         _str_len, _type_of)

cdef enum:
    _AHEAD = 16  # how many rows ahead ``_walk`` asks for a key and a value

# numpy.float64: a subclass of float that keeps its value where a float does (``eval_dict_runs``
# reads it as ``dict_rows`` does)
cdef PyObject* _NP_FLOAT64 = <PyObject*>np.float64

# relevance codes of ranked documents that are not a judged grade >= 0
cpdef enum:
    NONPOOL = -1
    UNJUDGED = -2

# scalar columns
cpdef enum:
    C_NUM_Q, C_NUM_RET, C_NUM_REL, C_NUM_REL_RET, C_MAP, C_GM_MAP, C_RPREC, C_BPREF, C_RECIP_RANK, C_INFAP
    C_GM_BPREF, C_UTILITY, C_11PT, C_BING, C_G, C_NDCG, C_NDCG_REL, C_RNDCG, C_SET_P, C_SET_REL_P, C_SET_RECALL
    C_SET_MAP, C_SET_F, C_NONREL_JUDGED_RET, C_RBP, C_RBP_RESID
    N_SCALAR

# integer-cutoff families (order of the blocks in ``icuts``)
cpdef enum:
    I_P, I_RECALL, I_NDCG_CUT, I_MAP_CUT, I_REL_P, I_SUCCESS, I_UNJ

# fraction families (order of the blocks in ``fcuts``)
cpdef enum:
    F_IPREC, F_RPREC_MULT, F_11PT

MIN_GEO_MEAN = 1e-5
INFAP_EPSILON = 1e-5
cdef double MIN_GEO = 1e-5
cdef double INFAP_EPS = 1e-5


cdef struct Params:
    # the measures' settings and cut-offs, shared by every topic
    int64_t rl
    const int64_t* icuts
    const int64_t* icut_off
    int64_t n_ifam  # families of integer cut-offs (icut_off has n_ifam + 1 entries)
    int64_t n_icuts
    const double* fcuts
    const int64_t* fcut_off
    int64_t n_ffam
    double rbp_p
    double set_f_beta
    const double* util
    double n_docs_coll
    bint v9
    const int64_t* lv_grade  # every topic's judged grades (ascending per topic) and their counts
    const int64_t* lv_count
    int64_t width  # columns of a row


cdef struct Scratch:
    # per-call work arrays of ``topic_row``, sized for rankings and ideal lists of the longest topic
    const double* lg  # lg[i] = log2(i + 2), the discount of 0-based rank i
    double* cum  # relevant in the top i
    double* apc  # sum of precisions at relevant ranks in the top i
    double* dcg  # DCG of the top i (gain = grade)
    int64_t* rpos  # ranks of the relevant documents
    int64_t* gpos  # ranks of the positive-grade documents
    int64_t* cut  # iprec_at_recall's numbers of relevant documents, one per level


cdef inline const int64_t* _pi(const int64_t[::1] a) noexcept:
    return &a[0] if a.shape[0] > 0 else NULL


cdef inline const double* _pd(const double[::1] a) noexcept:
    return &a[0] if a.shape[0] > 0 else NULL


cdef object _params(int64_t rl, const int64_t[::1] icuts, const int64_t[::1] icut_off, const double[::1] fcuts,
                    const int64_t[::1] fcut_off, double rbp_p, double set_f_beta, const double[::1] util,
                    double n_docs_coll, bint v9, const int64_t[::1] lv_grade, const int64_t[::1] lv_count,
                    Params* P):
    if util.shape[0] < 4:
        raise ValueError(f"util must hold 4 weights; got {util.shape[0]}")
    P.rl = rl
    P.icuts = _pi(icuts)
    P.icut_off = _pi(icut_off)
    P.n_ifam = icut_off.shape[0] - 1
    P.n_icuts = icuts.shape[0]
    P.fcuts = _pd(fcuts)
    P.fcut_off = _pi(fcut_off)
    P.n_ffam = fcut_off.shape[0] - 1
    P.rbp_p = rbp_p
    P.set_f_beta = set_f_beta
    P.util = &util[0]
    P.n_docs_coll = n_docs_coll
    P.v9 = v9
    P.lv_grade = _pi(lv_grade)
    P.lv_count = _pi(lv_count)
    P.width = N_SCALAR + icuts.shape[0] + fcuts.shape[0]


cdef object _scratch(int64_t longest, int64_t n_fcuts, Scratch* S):
    """Work arrays of ``topic_row`` (``S`` points into them; the caller keeps the returned list alive)."""
    # lg: computed once (the same values as calling log2 at every rank, so the sums are bit for bit trec_eval's)
    lg_a = np.log2(np.arange(longest + 2) + 2.0)
    cum_a = np.zeros(longest + 1)
    apc_a = np.zeros(longest + 1)
    dcg_a = np.zeros(longest + 1)
    pos_a = np.zeros((2, longest + 1), dtype=np.int64)
    cut_a = np.zeros(n_fcuts + 1, dtype=np.int64)
    cdef double[::1] lg = lg_a, cum = cum_a, apc = apc_a, dcg = dcg_a
    cdef int64_t[:, ::1] pos = pos_a
    cdef int64_t[::1] cut = cut_a
    S.lg = &lg[0]
    S.cum = &cum[0]
    S.apc = &apc[0]
    S.dcg = &dcg[0]
    S.rpos = &pos[0, 0]
    S.gpos = &pos[1, 0]
    S.cut = &cut[0]
    return [lg_a, cum_a, apc_a, dcg_a, pos_a, cut_a]


cdef void _iprec(const int64_t* rpos, int64_t n, int64_t num_rel, int64_t num_rel_ret, const double* frac, int64_t m,
                 double* out, int64_t col, bint v9, int64_t* cut) noexcept nogil:
    """m_iprec_at_recall.c: interpolated precision at recall levels ``frac[:m]`` (into out[col+i]).

    The number of relevant documents of a level is ``lround(x R)`` in trec_eval 10 and
    ``(long)(x R + 0.9)`` in trec_eval 9 (``v9``). trec_eval walks the ranks from the last up,
    keeping the best precision seen; between two relevant ranks the precision only grows
    towards the upper one, so the walk visits the relevant ranks ``rpos[:num_rel_ret]``
    (0-based, ascending) and the last rank: the same maxima of the same quotients."""
    cdef int64_t i, t, current, rsf
    cdef double precis, ip
    for i in range(m):
        cut[i] = <int64_t>(frac[i] * num_rel + 0.9) if v9 else <int64_t>floor(frac[i] * num_rel + 0.5)
    for i in range(m):
        out[col + i] = 0.0
    if n == 0:
        return
    current = m - 1
    while current >= 0 and cut[current] > num_rel_ret:
        current -= 1
    precis = <double>num_rel_ret / <double>n
    ip = precis
    rsf = num_rel_ret
    for t in range(num_rel_ret - 1, -1, -1):
        precis = <double>rsf / <double>(rpos[t] + 1)
        if ip < precis:
            ip = precis
        while current >= 0 and rsf == cut[current]:
            out[col + current] = ip
            current -= 1
        rsf -= 1
    while current >= 0:
        out[col + current] = ip
        current -= 1


def ideal_lists(const int64_t[::1] lv_off, const int64_t[::1] lv_grade, const int64_t[::1] lv_count):
    """Per topic, its ideal ranking's gains (the judged grades > 0, descending) and DCG prefix:
    topic ``t``'s gains are ``igr[i_off[t] - t:i_off[t + 1] - t - 1]`` and its DCG of the top
    ``p`` is ``icum[i_off[t] + p]`` (``p`` = 0 .. number of gains). A property of the qrels alone,
    computed once for every run."""
    cdef int64_t nq = lv_off.shape[0] - 1
    i_off_a = np.zeros(nq + 1, dtype=np.int64)
    cdef int64_t[::1] i_off = i_off_a
    cdef int64_t longest = 0, n_pos, t, u, g0, c0, p, grade, rep
    with nogil:
        for t in range(nq):
            n_pos = 0
            for u in range(lv_off[t], lv_off[t + 1]):
                if lv_grade[u] > 0:
                    n_pos += lv_count[u]
            i_off[t + 1] = i_off[t] + n_pos + 1
            longest = max(longest, n_pos)
    lg_a = np.log2(np.arange(longest + 2) + 2.0)
    igr_a = np.zeros(i_off[nq] - nq)
    icum_a = np.zeros(i_off[nq])
    cdef const double[::1] lg = lg_a
    cdef double[::1] igr = igr_a, icum = icum_a
    with nogil:
        for t in range(nq):
            g0 = i_off[t] - t  # start of the gains
            c0 = i_off[t]  # start of the DCG prefix (icum[c0] = 0)
            p = 0
            for u in range(lv_off[t + 1] - 1, lv_off[t] - 1, -1):
                grade = lv_grade[u]
                if grade <= 0:
                    break
                for rep in range(lv_count[u]):
                    igr[g0 + p] = <double>grade  # the ideal gain at rank p
                    icum[c0 + p + 1] = icum[c0 + p] + <double>grade / lg[p]  # ideal DCG of the top p + 1
                    p += 1
    return i_off_a, igr_a, icum_a


cdef inline void _absent_row(int64_t num_rel, double* row, int64_t width) noexcept nogil:
    """trec_eval -c: a topic the run lacks scores as an empty ranking (every measure 0)."""
    cdef int64_t c
    for c in range(width):
        row[c] = 0.0
    row[C_NUM_Q] = 1.0
    row[C_NUM_REL] = <double>num_rel
    row[C_GM_MAP] = log(MIN_GEO)
    row[C_GM_BPREF] = log(MIN_GEO)


cdef inline int64_t _n_judged(int64_t t, const int64_t* lv_off, const int64_t* lv_count) noexcept nogil:
    """Number of documents of topic ``t`` judged with a grade >= 0 (the length of its ideal list)."""
    cdef int64_t judged = 0, u
    for u in range(lv_off[t], lv_off[t + 1]):
        judged += lv_count[u]
    return judged


cdef inline int64_t _num_rel(int64_t la, int64_t lb, const Params* P) noexcept nogil:
    cdef int64_t num_rel = 0, t
    for t in range(la, lb):
        if P.lv_grade[t] >= P.rl:
            num_rel += P.lv_count[t]
    return num_rel


def trec_kernel(const int64_t[::1] off, const int64_t[::1] rels, present, const int64_t[::1] lv_off,
                const int64_t[::1] lv_grade, const int64_t[::1] lv_count, int64_t rl, const int64_t[::1] icuts,
                const int64_t[::1] icut_off, const double[::1] fcuts, const int64_t[::1] fcut_off, double rbp_p,
                double set_f_beta, const double[::1] util, double n_docs_coll, bint v9):
    """Every requested measure of every topic of ranked relevance values (``off``: topic offsets;
    ``present[q]`` False: a topic the run lacks, trec_eval -c)."""
    cdef const uint8_t[::1] pres = np.ascontiguousarray(present, dtype=np.bool_).view(np.uint8)
    cdef Params P
    cdef Scratch S
    _params(rl, icuts, icut_off, fcuts, fcut_off, rbp_p, set_f_beta, util, n_docs_coll, v9, lv_grade, lv_count, &P)
    cdef int64_t nq = off.shape[0] - 1
    cdef int64_t width = P.width
    if pres.shape[0] < nq or lv_off.shape[0] < nq + 1:
        raise ValueError(f"present and lv_off must cover the {nq} topics of off")
    out_a = np.zeros((nq, width))
    cdef double[:, ::1] out = out_a
    cdef int64_t longest = 0, q, c
    for q in range(nq):
        longest = max(longest, off[q + 1] - off[q], _n_judged(q, &lv_off[0], _pi(lv_count)))
    keep = _scratch(longest, fcuts.shape[0], &S)
    i_off_a, ig_a, icum_a = ideal_lists(lv_off, lv_grade, lv_count)
    cdef const int64_t[::1] i_off = i_off_a
    cdef const double[::1] ig_all = ig_a, icum_all = icum_a
    row_a = np.zeros(width)
    cdef double[::1] row = row_a
    cdef const int64_t* r = _pi(rels)
    with nogil:
        for q in range(nq):
            if pres[q]:
                _topic_row(r + off[q], off[q + 1] - off[q], lv_off[q], lv_off[q + 1], &P, &row[0], &S,
                           &ig_all[0] + (i_off[q] - q), i_off[q + 1] - i_off[q] - 1, &icum_all[0] + i_off[q])
            else:
                _absent_row(_num_rel(lv_off[q], lv_off[q + 1], &P), &row[0], width)
            for c in range(width):
                out[q, c] = row[c]
    return out_a


cdef inline bint _before(int64_t i, int64_t j, const double* key, const uint8_t* buf, const int64_t* s,
                         const int64_t* e) noexcept nogil:
    """Row ``i`` ranks before row ``j`` (trec_eval: score descending, then docno descending)."""
    if key[i] != key[j]:
        return key[i] > key[j]
    return _cmp(buf, s[i], e[i], buf, s[j], e[j]) > 0


cdef void _rank_order(int64_t* idx, int64_t* tmp, int64_t n, const double* key, const uint8_t* buf, const int64_t* s,
                      const int64_t* e) noexcept nogil:
    """Sort ``idx[:n]`` (rows 0..n-1) into trec_eval's order (score descending, then docno
    descending). Scores already non-increasing (a run file written in rank order, or its
    dict) cost one pass, then an insertion sort of each group of tied scores by docno; other
    orders: insertion sorts of blocks of 16, then bottom-up merges."""
    cdef bint ordered = True, swapped = False
    cdef int64_t k, lo, hi, mid, i, j, x, width
    cdef int64_t* src
    cdef int64_t* dst
    cdef int64_t* t
    for k in range(1, n):
        if key[idx[k]] > key[idx[k - 1]]:
            ordered = False
            break
    if ordered:
        lo = 0
        while lo < n:
            hi = lo + 1
            while hi < n and key[idx[hi]] == key[idx[lo]]:
                hi += 1
            for i in range(lo + 1, hi):  # a group of tied scores: docno descending
                x = idx[i]
                j = i - 1
                while j >= lo and _cmp(buf, s[x], e[x], buf, s[idx[j]], e[idx[j]]) > 0:
                    idx[j + 1] = idx[j]
                    j -= 1
                idx[j + 1] = x
            lo = hi
        return
    for lo in range(0, n, 16):
        hi = min(lo + 16, n)
        for i in range(lo + 1, hi):
            x = idx[i]
            j = i - 1
            while j >= lo and _before(x, idx[j], key, buf, s, e):
                idx[j + 1] = idx[j]
                j -= 1
            idx[j + 1] = x
    width = 16
    src = idx
    dst = tmp
    while width < n:
        lo = 0
        while lo < n:
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            if mid >= hi or not _before(src[mid], src[mid - 1], key, buf, s, e):
                for k in range(lo, hi):
                    dst[k] = src[k]
                lo += 2 * width
                continue
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if _before(src[j], src[i], key, buf, s, e):
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
            lo += 2 * width
        t = src
        src = dst
        dst = t
        swapped = not swapped
        width *= 2
    if swapped:
        for k in range(n):
            idx[k] = src[k]


cdef struct Pass:
    # what ``_eval_topic`` needs besides the topic's rows: the prepared qrels, the options, the work
    # arrays (sized for the longest topic) and the output
    const uint64_t* tab  # the qrels' join table, filter and judgments (``PreparedQrels.table``)
    const int64_t* t_off
    const int64_t* j_off
    const int64_t* b_off
    const uint64_t* bits
    const uint8_t* jb
    const int64_t* j_s
    const int64_t* lv_off
    const int64_t* i_off
    const double* ig_all
    const double* icum_all
    int64_t max_docs
    bint judged_only
    int64_t rs_len
    int64_t* rel  # work: grade per row, index, merge buffer, ranked grades, score key per row, measure row
    int64_t* idx
    int64_t* tmp
    int64_t* ranked
    double* key
    double* row
    double* out  # the measure table (topics x width), relstrings (topics x rs_len) and their lengths
    uint8_t* rs
    int64_t* rs_n


cdef object _pass(const int64_t[::1] topics, const int64_t[::1] j_off, const int64_t[::1] t_off,
                  const uint64_t[:, ::1] table, const int64_t[::1] b_off, const uint64_t[::1] bits,
                  const uint8_t[::1] j_buf, const int64_t[::1] j_s, const int64_t[::1] lv_off,
                  const int64_t[::1] lv_count, const int64_t[::1] i_off, const double[::1] ig_all,
                  const double[::1] icum_all, int64_t max_docs, bint judged_only, int64_t rs_len, int64_t longest,
                  int64_t n_fcuts, const Params* P, Pass* C, Scratch* S):
    """Fill ``C`` and ``S`` for a pass over ``topics`` whose longest ranking (or ideal list) is
    ``longest``; returns ``(keep, out, rs, rs_n)``: the arrays to keep alive and the outputs."""
    cdef int64_t nt = topics.shape[0], i
    for i in range(nt):
        longest = max(longest, _n_judged(topics[i], &lv_off[0], _pi(lv_count)))
    keep = [_scratch(longest, n_fcuts, S)]
    out_a = np.zeros((nt, P.width))
    rs_a = np.zeros((nt, rs_len), dtype=np.uint8)
    rs_n_a = np.zeros(nt, dtype=np.int64)
    row_a = np.zeros(P.width)
    work_a = np.empty((4, longest + 1), dtype=np.int64)  # rel, idx, tmp, ranked
    key_a = np.empty(longest + 1)
    keep += [row_a, work_a, key_a]
    cdef double[:, ::1] out = out_a
    cdef uint8_t[:, ::1] rs = rs_a
    cdef int64_t[::1] rs_n = rs_n_a
    cdef double[::1] row = row_a, key = key_a
    cdef int64_t[:, ::1] work = work_a
    C.tab = &table[0, 0] if table.shape[0] > 0 else NULL
    C.t_off = &t_off[0]
    C.j_off = &j_off[0]
    C.b_off = &b_off[0]
    C.bits = &bits[0] if bits.shape[0] > 0 else NULL
    C.jb = _pb(j_buf)
    C.j_s = _pi(j_s)
    C.lv_off = &lv_off[0]
    C.i_off = &i_off[0]
    C.ig_all = &ig_all[0]
    C.icum_all = &icum_all[0]
    C.max_docs = max_docs
    C.judged_only = judged_only
    C.rs_len = rs_len
    C.rel = &work[0, 0]
    C.idx = &work[1, 0]
    C.tmp = &work[2, 0]
    C.ranked = &work[3, 0]
    C.key = &key[0]
    C.row = &row[0]
    C.out = &out[0, 0] if nt > 0 and P.width > 0 else NULL
    C.rs = &rs[0, 0] if nt > 0 and rs_len > 0 else NULL
    C.rs_n = &rs_n[0] if nt > 0 else NULL
    return keep, out_a, rs_a, rs_n_a


cdef void _eval_topic(const Pass* C, const Params* P, const Scratch* S, int64_t i, int64_t t, int64_t n,
                      const uint64_t* r_h, const uint8_t* rb, int64_t nbuf, const int64_t* r_s, const int64_t* r_e,
                      const double* scores) noexcept nogil:
    """Output row ``i``: qrels topic ``t`` against the ``n`` run rows given by their hashes ``r_h``,
    their ids ``rb[r_s[k]:r_e[k]]`` and their ``scores`` (``n`` = -1: a topic the run lacks, -c)."""
    cdef int64_t width = P.width, la = C.lv_off[t], lb = C.lv_off[t + 1], c, k, slot, v, m, stop
    cdef double* out = C.out + i * width
    cdef int64_t* rel = C.rel
    cdef double* key = C.key
    cdef int64_t* ranking
    cdef bint descending
    if n < 0:
        _absent_row(_num_rel(la, lb, P), out, width)
        return
    # join: each document's grade (NONPOOL: not in the qrels; UNJUDGED: a negative grade)
    cdef const uint64_t* tab = C.tab
    cdef int64_t base = C.t_off[t]
    cdef int64_t size = C.t_off[t + 1] - base
    cdef int64_t first = C.j_off[t] - 1
    cdef int64_t b_base = C.b_off[t]
    cdef uint64_t b_mask = <uint64_t>((C.b_off[t + 1] - b_base) * 64 - 1)
    cdef uint64_t mask = <uint64_t>(size - 1)
    for k in range(min(n, <int64_t>PREFETCH_ROWS)):
        _prefetch(tab, base + <int64_t>(r_h[k] & mask))
    descending = True
    for k in range(n):
        if k + PREFETCH_ROWS < n:
            _prefetch(tab, base + <int64_t>(r_h[k + PREFETCH_ROWS] & mask))
        slot = _lookup(tab, base, size, first, C.bits, b_base, b_mask, r_h[k], rb, nbuf, r_s[k], r_e[k], C.jb, C.j_s)
        v = NONPOOL
        if slot >= 0:
            v = <int64_t>tab[SLOT_WORDS * slot]  # the grade
            if v < 0:
                v = UNJUDGED
        rel[k] = v
        key[k] = <double>(<float>scores[k]) if P.v9 else scores[k]
        if k > 0 and key[k] >= key[k - 1]:  # not strictly descending: ranked by _rank_order
            descending = False
    stop = min(n, C.max_docs)
    if descending and not C.judged_only and stop == n:
        # scores strictly descending (a run in rank order without ties): trec_eval's order is
        # the rows' own, the ranking is ``rel`` as it is
        ranking = rel
        m = n
    else:
        for k in range(n):
            C.idx[k] = k
        _rank_order(C.idx, C.tmp, n, key, rb, r_s, r_e)
        m = 0
        for k in range(stop):
            v = rel[C.idx[k]]
            if C.judged_only and v < 0:
                continue
            C.ranked[m] = v
            m += 1
        ranking = C.ranked
    cdef uint8_t* rs = C.rs + i * C.rs_len
    for k in range(min(m, C.rs_len)):  # m_relstring.c
        v = ranking[k]
        rs[k] = 62 if v > 9 else (48 + v if v >= 0 else (45 if v == NONPOOL else 46))
    C.rs_n[i] = min(m, C.rs_len)
    _topic_row(ranking, m, la, lb, P, C.row, S, C.ig_all + (C.i_off[t] - t), C.i_off[t + 1] - C.i_off[t] - 1,
               C.icum_all + C.i_off[t])
    for c in range(width):
        out[c] = C.row[c]


def eval_run(const int64_t[::1] r_off, const uint8_t[::1] r_buf, const int64_t[::1] r_s, const int64_t[::1] r_e,
             const uint64_t[::1] r_h, const double[::1] scores, const int64_t[::1] topics, const int64_t[::1] run_of,
             const int64_t[::1] j_off, const int64_t[::1] t_off, const uint64_t[:, ::1] table,
             const int64_t[::1] b_off, const uint64_t[::1] bits, const uint8_t[::1] j_buf, const int64_t[::1] j_s,
             const int64_t[::1] lv_off, const int64_t[::1] lv_grade, const int64_t[::1] lv_count,
             const int64_t[::1] i_off, const double[::1] ig_all, const double[::1] icum_all, int64_t max_docs,
             bint judged_only, int64_t rl, const int64_t[::1] icuts, const int64_t[::1] icut_off,
             const double[::1] fcuts, const int64_t[::1] fcut_off, double rbp_p, double set_f_beta,
             const double[::1] util, double n_docs_coll, bint v9, int64_t rs_len):
    """A run against prepared qrels in one pass per topic: join, rank, measure.

    For output row ``i``: qrels topic ``topics[i]``, run query ``run_of[i]`` (-1: absent, -c).
    Each run document is joined to its topic's judgments through the qrels' filter and hash
    table (``data._trec_kernel.join_filter``, ``join_table``; probed by ``_lookup`` of
    ``data/_trec_kernel.pxd``; the slot of the row ``PREFETCH_ROWS`` ahead is prefetched; a match is
    confirmed on the bytes), the topic is ranked as trec_eval ranks it (score descending, docno descending;
    ``v9``: scores as float32), cut at ``max_docs`` (-M), stripped of unjudged documents with
    ``judged_only`` (-J), and measured by ``_topic_row`` (``_eval_topic``). Returns the measure table,
    trec_eval's ``relstring`` of the first ``rs_len`` ranked documents per topic (ASCII codes) and their
    lengths.
    """
    cdef Params P
    cdef Scratch S
    cdef Pass C
    _params(rl, icuts, icut_off, fcuts, fcut_off, rbp_p, set_f_beta, util, n_docs_coll, v9, lv_grade, lv_count, &P)
    cdef int64_t nt = topics.shape[0]
    if run_of.shape[0] < nt:
        raise ValueError(f"run_of must give the run query of each of the {nt} topics")
    cdef int64_t longest = 0, i, g, a
    for i in range(nt):
        g = run_of[i]
        if g >= 0:
            longest = max(longest, r_off[g + 1] - r_off[g])
    keep, out_a, rs_a, rs_n_a = _pass(topics, j_off, t_off, table, b_off, bits, j_buf, j_s, lv_off, lv_count, i_off,
                                      ig_all, icum_all, max_docs, judged_only, rs_len, longest, fcuts.shape[0], &P,
                                      &C, &S)
    cdef const uint8_t* rb = _pb(r_buf)
    cdef int64_t nbuf = r_buf.shape[0]
    with nogil:
        for i in range(nt):
            g = run_of[i]
            if g < 0:
                _eval_topic(&C, &P, &S, i, topics[i], -1, NULL, NULL, 0, NULL, NULL, NULL)
            else:
                a = r_off[g]
                _eval_topic(&C, &P, &S, i, topics[i], r_off[g + 1] - a, &r_h[0] + a, rb, nbuf, &r_s[0] + a,
                            &r_e[0] + a, &scores[0] + a)
    return out_a, rs_a, rs_n_a


cdef struct Rows:
    # one topic's rows as ``_eval_topic`` reads them: ids in ``buf`` (``cap`` bytes), spans, hashes, scores
    uint8_t* buf
    int64_t cap
    int64_t* s
    int64_t* e
    uint64_t* h
    double* sc
    PyObject** obj  # the dict's keys and values, in pairs


cdef inline uint64_t _hash_8_16(const uint8_t* src, int64_t ln, bint* lf) noexcept nogil:
    """``_hash_lf`` of the ``ln`` bytes at ``src``, 8 <= ``ln`` <= 16, from the word at ``src`` and the
    word ending at ``src + ln`` (no byte read outside the span): the same words, the same value."""
    cdef uint64_t w = _load8_word(src), v, found
    cdef uint64_t x = _mix(0, w)
    v = w ^ 0x0A0A0A0A0A0A0A0AULL
    found = (v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL
    if ln > 8:
        w = _load8_word(src + ln - 8) >> (8 * (16 - ln))  # bytes 8 .. ln - 1, zero-padded
        v = w ^ 0x0A0A0A0A0A0A0A0AULL
        if ln < 16:
            v |= ~_low(ln - 8)  # the padding never tests as a line feed
        found |= (v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL
        x = _mix(x, w)
    if found:
        lf[0] = True
    return _final(x, ln)


cdef int64_t _walk(PyObject* d, list holder, Rows* W, const uint64_t* tab, uint64_t mask) except -2:
    """Read the ``{docno: score}`` dict ``d`` into ``W`` (at most ``len(W.s)`` rows, checked by the
    caller): its keys' bytes copied and hashed (``_hash_lf``) as ``dict_rows`` does, its values as
    doubles; each key's first slot in the join table ``tab`` (its topic's, ``mask`` = size - 1; NULL:
    none) is asked of memory for the join that follows. Returns the bytes used in ``W.buf``, or -1
    where a key or value is not of the plain kinds read here (see ``eval_dict_runs``). ``holder[0]``
    keeps ``W.buf``'s array (replaced when it grows).

    Two passes: the dict's entries first (its key and value pointers, in ``W.obj``), then the
    objects, each key and value asked of memory ``_AHEAD`` rows before it is read (a run's strings
    and floats lie all over the heap, far beyond the caches; measured: 1-3% faster)."""
    cdef Py_ssize_t pos = 0
    cdef PyObject* k
    cdef PyObject* v
    cdef PyObject** obj = W.obj
    cdef int64_t n = _dict_len(d), r = 0, used = 0, ln, cap
    cdef int overflow = 0
    cdef long long iv
    cdef double x
    cdef bint line_break = False
    cdef uint8_t[::1] bv
    cdef const uint8_t* src
    # borrowed references: the dict holds them, and no Python code runs until the walk's end
    while _dict_next(d, &pos, &k, &v):
        if r == n:
            return -1
        obj[2 * r] = k
        obj[2 * r + 1] = v
        r += 1
    if r != n:
        return -1
    for r in range(min(n, <int64_t>_AHEAD)):
        _prefetch_line(obj[2 * r])
        _prefetch_line(obj[2 * r + 1])
    for r in range(n):
        if r + _AHEAD < n:
            _prefetch_line(obj[2 * (r + _AHEAD)])
            _prefetch_line(obj[2 * (r + _AHEAD) + 1])
        k = obj[2 * r]
        v = obj[2 * r + 1]
        if _is_float(v) or _type_of(v) == _NP_FLOAT64:  # a float, or numpy's float64 (a float's layout)
            x = _float_value(v)
            if not (x - x == 0.0):  # NaN or inf: the general path refuses it
                return -1
        elif _is_int(v):
            iv = _int_value(v, &overflow)
            if overflow:
                return -1
            x = <double>iv
        else:
            return -1
        if not _is_str(k) or not _is_ascii(k):
            return -1
        ln = _str_len(k)
        if used + ln + 9 > W.cap:  # the key, its separator, and the 8 bytes a word load may read past it
            cap = W.cap
            while used + ln + 9 > cap:
                cap *= 2
            grown = np.empty(cap, dtype=np.uint8)
            grown[:used] = holder[0][:used]
            holder[0] = grown
            bv = grown
            W.buf = &bv[0]
            W.cap = cap
        src = <const uint8_t*>_str_data(k)
        W.s[r] = used
        W.e[r] = used + ln
        if 8 <= ln <= 16:  # most document ids: copied and hashed from two word loads (no call)
            memcpy(W.buf + used, src, 8)
            memcpy(W.buf + used + ln - 8, src + ln - 8, 8)
            W.h[r] = _hash_8_16(src, ln, &line_break)
        else:
            memcpy(W.buf + used, src, ln)
            W.h[r] = _hash_lf(W.buf, used, used + ln, &line_break)
        if tab != NULL:  # the id's slot in its topic's join table, asked of memory for the join
            _prefetch(tab, <int64_t>(W.h[r] & mask))
        W.sc[r] = x
        used += ln + 1
    if line_break:
        return -1
    return used


def dict_run_outputs(int64_t nt, const int64_t[::1] icuts, const double[::1] fcuts, int64_t rs_len):
    """Zeroed outputs of ``eval_dict_runs`` for a run of ``nt`` topics: ``eval_run``'s triple."""
    return (np.zeros((nt, N_SCALAR + icuts.shape[0] + fcuts.shape[0])), np.zeros((nt, rs_len), dtype=np.uint8),
            np.zeros(nt, dtype=np.int64))


cdef object _shared(tuple args, object topics, int64_t longest, Params* P, Pass* C, Scratch* S):
    """``_params`` and ``_pass`` from ``args``: ``eval_run``'s arguments after ``run_of``."""
    (j_off, t_off, table, b_off, bits, j_buf, j_s, lv_off, lv_grade, lv_count, i_off, ig_all, icum_all, max_docs,
     judged_only, rl, icuts, icut_off, fcuts, fcut_off, rbp_p, set_f_beta, util, n_docs_coll, v9, rs_len) = args
    _params(rl, icuts, icut_off, fcuts, fcut_off, rbp_p, set_f_beta, util, n_docs_coll, v9, lv_grade, lv_count, P)
    return _pass(topics, j_off, t_off, table, b_off, bits, j_buf, j_s, lv_off, lv_count, i_off, ig_all, icum_all,
                 max_docs, judged_only, rs_len, longest, len(fcuts), P, C, S)


def eval_dict_runs(list runs, const int64_t[:, ::1] row_of, const int64_t[:, ::1] g_of, list outs,
                   uint8_t[::1] failed, int64_t t_lo, int64_t t_hi, bint check_rest, tuple args):
    """``eval_run`` of runs given as ``{docno: score}`` dicts, qrels topic by qrels topic: for each
    topic ``t`` in ``[t_lo, t_hi)``, each run's dict of that topic is walked into work arrays and
    the topic is joined, ranked and measured at once (no copy of a whole run; the topic's join
    table, grades and ideal list stay in cache from one run to the next). The walk copies and
    hashes the keys' bytes as ``dict_rows`` does and reads the scores as doubles (the value
    ``float()`` gives); it holds the GIL, the rest of each topic lets it go.

    ``args``: ``eval_run``'s arguments after ``run_of`` (the prepared qrels, the options, the
    cut-offs). ``runs[r]``: run ``r``'s dicts (``runs[r][g]``: run query ``g``); ``row_of[r, t]``: the row of
    ``outs[r]`` (``dict_run_outputs``: ``eval_run``'s triple) that topic ``t`` fills (-1: none);
    ``g_of[r, t]``: its run query (-1: absent, an empty ranking, -c). ``check_rest``: the dicts of
    the run queries without a topic are walked too, first, and checked the same way (one caller
    of those that share the topics between them).

    A run with a dict, key or score not of the plain kinds this walk reads (an exact ``dict``; an
    ASCII ``str`` without a line break; a finite ``float`` or ``numpy.float64``, an ``int`` within
    64 bits) gets ``failed[r] = 1`` and is left (its outputs partly written): the caller takes the
    general path for it (``Run.from_dict``, then ``eval_run``), which reads or refuses them."""
    cdef Params P
    cdef Scratch S
    cdef Pass C
    cdef Rows W
    cdef int64_t n_runs = len(runs), nq = row_of.shape[1], longest = 0, r, i, g, n, used, t, n_dicts
    cdef int64_t rs_len = args[len(args) - 1]
    if row_of.shape[0] != n_runs or g_of.shape[0] != n_runs or g_of.shape[1] != nq or len(outs) != n_runs or \
            failed.shape[0] != n_runs or nq != len(args[7]) - 1 or not (0 <= t_lo <= t_hi <= nq):
        raise ValueError("row_of, g_of, outs and failed must describe each run; row_of a row per qrels topic")
    cdef PyObject* d
    cdef list dicts
    for r in range(n_runs):
        dicts = runs[r]
        for g in range(len(dicts)):
            d = <PyObject*>dicts[g]
            if not _is_dict(d):
                failed[r] = 1
            else:
                longest = max(longest, <int64_t>_dict_len(d))
        for t in range(nq):
            if g_of[r, t] >= len(dicts) or row_of[r, t] >= (<tuple>outs[r])[2].shape[0]:
                raise ValueError(f"run {r}: topic {t} names a run query or a row the run lacks")
    keep = _shared(args, np.arange(nq), longest, &P, &C, &S)
    # one Pass per run: the shared work arrays, the run's own outputs
    cs_a = np.empty(max(n_runs, 1) * sizeof(Pass), dtype=np.uint8)
    cdef uint8_t[::1] cs_v = cs_a
    cdef Pass* Cs = <Pass*>&cs_v[0]
    cdef double[:, ::1] o_out
    cdef uint8_t[:, ::1] o_rs
    cdef int64_t[::1] o_n
    for r in range(n_runs):
        Cs[r] = C
        o_out, o_rs, o_n = outs[r]
        if o_out.shape[1] != P.width or o_rs.shape[1] != rs_len or o_rs.shape[0] != o_n.shape[0] or \
                o_out.shape[0] != o_n.shape[0]:
            raise ValueError("outs must come from dict_run_outputs with these cut-offs")
        Cs[r].out = &o_out[0, 0] if o_out.shape[0] > 0 and P.width > 0 else NULL
        Cs[r].rs = &o_rs[0, 0] if o_rs.shape[0] > 0 and rs_len > 0 else NULL
        Cs[r].rs_n = &o_n[0] if o_n.shape[0] > 0 else NULL
    rows_a = np.empty((2, longest + 1), dtype=np.int64)
    h_a = np.empty(longest + 1, dtype=np.uint64)
    sc_a = np.empty(longest + 1)
    holder = [np.empty(16 * longest + 64, dtype=np.uint8)]
    cdef int64_t[:, ::1] rows = rows_a
    cdef uint64_t[::1] h = h_a
    cdef double[::1] sc = sc_a
    cdef uint8_t[::1] bv = holder[0]
    W.buf = &bv[0]
    W.cap = bv.shape[0]
    W.s = &rows[0, 0]
    W.e = &rows[1, 0]
    W.h = &h[0]
    W.sc = &sc[0]
    obj_a = np.empty(2 * longest + 2, dtype=np.uintp)
    cdef size_t[::1] obj_v = obj_a
    W.obj = <PyObject**>&obj_v[0]
    cdef uint8_t[::1] seen
    if check_rest:  # the run queries without a topic: read (or refused) all the same
        for r in range(n_runs):
            dicts = runs[r]
            n_dicts = len(dicts)
            if failed[r] or n_dicts == 0:
                continue
            seen = np.zeros(n_dicts, dtype=np.uint8)
            for t in range(nq):
                if g_of[r, t] >= 0:
                    seen[g_of[r, t]] = 1
            for g in range(n_dicts):
                d = <PyObject*>dicts[g]
                if not seen[g] and (_dict_len(d) > longest or _walk(d, holder, &W, NULL, 0) < 0):
                    failed[r] = 1
                    break
    for t in range(t_lo, t_hi):
        for r in range(n_runs):
            i = row_of[r, t]
            if i < 0 or failed[r]:
                continue
            g = g_of[r, t]
            if g < 0:
                with nogil:
                    _eval_topic(&Cs[r], &P, &S, i, t, -1, NULL, NULL, 0, NULL, NULL, NULL)
                continue
            d = <PyObject*>(<list>runs[r])[g]
            n = _dict_len(d)
            if n > longest:  # grown since it was measured (another thread, while this one had let go of the GIL)
                failed[r] = 1
                continue
            used = _walk(d, holder, &W, C.tab + SLOT_WORDS * C.t_off[t], <uint64_t>(C.t_off[t + 1] - C.t_off[t] - 1))
            if used < 0:
                failed[r] = 1
                continue
            with nogil:
                _eval_topic(&Cs[r], &P, &S, i, t, n, W.h, W.buf, used, W.s, W.e, W.sc)


cdef inline const uint8_t* _pb(const uint8_t[::1] a) noexcept:
    return &a[0] if a.shape[0] > 0 else NULL


cdef void _topic_row(const int64_t* rels, int64_t n, int64_t la, int64_t lb, const Params* P, double* row,
                     const Scratch* S, const double* igr, int64_t n_pos, const double* icum) noexcept nogil:
    """Every requested measure of one topic (into ``row``): its ranked relevance values
    ``rels[:n]``, its judged grades ``P.lv_grade[la:lb]`` (ascending) with their counts, and
    its ideal gains ``igr[:n_pos]`` and ideal DCG prefix ``icum`` (``ideal_lists``)."""
    cdef int64_t rl = P.rl
    cdef int64_t n_i = P.n_icuts
    cdef int64_t num_rel = 0, num_nonrel = 0, max_grade = 0, t, c, i, v
    cdef const double* lg = S.lg
    cdef double* cum = S.cum
    cdef double* apc = S.apc
    cdef double* dcg = S.dcg
    for t in range(la, lb):
        if P.lv_grade[t] >= rl:
            num_rel += P.lv_count[t]
        else:
            num_nonrel += P.lv_count[t]
        if P.lv_count[t] > 0 and P.lv_grade[t] > max_grade:
            max_grade = P.lv_grade[t]
    for c in range(P.width):
        row[c] = 0.0
    row[C_NUM_Q] = 1.0
    row[C_NUM_REL] = <double>num_rel
    # ---- one pass over the ranking: prefix counts, AP, DCG, reciprocal rank, judged counts,
    # bpref / infAP (m_bpref.c, m_infap.c), binG (m_binG.c), rbp / rbp_resid (m_rbp.c,
    # m_rbp_resid.c: gains = grades, scaled to [0, 1]); each sum in trec_eval's order
    cdef double rr = 0.0, bpref = 0.0, infap = 0.0, bing = 0.0, rbp = 0.0, sr = 0.0, cur = 1.0, fj
    cdef double cum_i = 0.0, apc_i = 0.0, dcg_i = 0.0
    cdef int64_t nonpool = 0, unjudged = 0, nonrel_sf = 0, rel_sf = 0, k = 0, unj = 0, n_gain = 0, neg
    cdef double scale = <double>max_grade if max_grade > 1 else 1.0
    cdef double rbp_p = P.rbp_p
    # the counts and the sums of every rank are kept without a branch (a ranking mixes its kinds of
    # documents at random: each branch on them would be mispredicted half the time); only the
    # relevant and the positive-grade documents, a minority, take one. A sum that a document does
    # not change is left as it is, or has +0.0 added (the same double: each sum is >= 0)
    for i in range(n):
        v = rels[i]
        if v >= rl:  # relevant at the level
            cum_i += 1.0
            apc_i += cum_i / (i + 1.0)
            if rr == 0.0:
                rr = 1.0 / (i + 1.0)
            S.rpos[k] = i
            k += 1
            bing += 1.0 / lg[1 + i - k]
            if v >= 0:  # judged relevant (not a NONPOOL or UNJUDGED code below a negative level)
                rel_sf += 1
                if nonrel_sf > 0:
                    bpref += 1.0 - <double>min(nonrel_sf, num_rel) / <double>min(num_nonrel, num_rel)
                else:
                    bpref += 1.0
                if i == 0:
                    infap += 1.0
                else:
                    fj = <double>i
                    infap += 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * \
                        (<double>(rel_sf - 1 + nonrel_sf + unjudged) / fj) * \
                        ((<double>(rel_sf - 1) + INFAP_EPS) / (<double>(rel_sf - 1 + nonrel_sf) + 2 * INFAP_EPS))
        cum[i + 1] = cum_i
        apc[i + 1] = apc_i
        if v > 0:
            dcg_i += <double>v / lg[i]
            S.gpos[n_gain] = i
            n_gain += 1
            rbp += (<double>v / scale) * cur
        dcg[i + 1] = dcg_i
        neg = v < 0
        unj += neg
        sr += cur * <double>neg
        cur *= rbp_p
        nonpool += v == NONPOOL
        unjudged += v == UNJUDGED
        nonrel_sf += (v >= 0) & (v < rl)
    cdef double nrr = cum[n]
    row[C_NUM_RET] = <double>n
    row[C_NUM_REL_RET] = nrr
    row[C_NONREL_JUDGED_RET] = <double>(n - nonpool - unjudged) - nrr
    row[C_RECIP_RANK] = rr
    cdef double ap = apc[n] / <double>num_rel if nrr > 0 else 0.0
    row[C_MAP] = ap
    row[C_GM_MAP] = log(MIN_GEO if MIN_GEO > ap else ap)
    cdef int64_t look = min(n, num_rel)
    row[C_RPREC] = cum[look] / <double>num_rel if look > 0 else 0.0
    if num_rel > 0:
        bpref /= <double>num_rel
        infap /= <double>num_rel
    row[C_BPREF] = bpref
    row[C_GM_BPREF] = log(MIN_GEO if MIN_GEO > bpref else bpref)
    row[C_INFAP] = infap
    row[C_BING] = bing / <double>num_rel if k > 0 else 0.0
    row[C_RBP] = (1.0 - rbp_p) * rbp
    if unj > 0:
        row[C_RBP_RESID] = cur + (1.0 - rbp_p) * sr
    # ---- set measures, utility (m_set_*.c, m_utility.c)
    cdef double Pr, R
    if n > 0:
        row[C_SET_P] = nrr / <double>n
    if num_rel > 0:
        row[C_SET_RECALL] = nrr / <double>num_rel
    if n > 0 and num_rel > 0:
        row[C_SET_REL_P] = nrr / <double>min(n, num_rel)
        row[C_SET_MAP] = nrr * nrr / (<double>n * <double>num_rel)
    if nrr > 0:
        Pr = nrr / <double>n
        R = nrr / <double>num_rel
        row[C_SET_F] = (P.set_f_beta + 1.0) * Pr * R / (P.set_f_beta * Pr + R)
    row[C_UTILITY] = P.util[0] * nrr + P.util[1] * (<double>n - nrr) + P.util[2] * (<double>num_rel - nrr) + \
        P.util[3] * (P.n_docs_coll + nrr - <double>n - <double>num_rel)
    # ---- the ideal list (``ideal_lists``): grades > 0 descending, and its DCG prefix (m_ndcg.c)
    cdef double ideal_total = icum[n_pos], ideal
    row[C_NDCG] = dcg[n] / ideal_total if ideal_total > 0 else 0.0
    # ---- ndcg_rel, Rndcg, G (m_ndcg_rel.c, m_Rndcg.c, m_G.c), walking ranking and ideal together
    _graded_walks(rels, n, igr, icum, n_pos, num_rel, row, lg, dcg, S.gpos, n_gain)
    # ---- integer-cutoff families
    cdef int64_t fam, kk, m, col, u, a0, a1, cut
    for fam in range(P.n_ifam):
        for c in range(P.icut_off[fam], P.icut_off[fam + 1]):
            kk = P.icuts[c]
            m = min(kk, n)
            col = N_SCALAR + c
            if fam == I_P:
                row[col] = cum[m] / <double>kk
            elif fam == I_RECALL:
                row[col] = cum[m] / <double>num_rel if num_rel > 0 else 0.0
            elif fam == I_MAP_CUT:
                row[col] = apc[m] / <double>num_rel if num_rel > 0 else 0.0
            elif fam == I_REL_P:
                row[col] = cum[m] / <double>min(kk, num_rel) if num_rel > 0 else 0.0
            elif fam == I_SUCCESS:
                row[col] = 1.0 if cum[m] > 0 else 0.0
            elif fam == I_UNJ:
                u = 0
                for i in range(m):
                    if rels[i] < 0:
                        u += 1
                row[col] = <double>u / <double>kk
            elif fam == I_NDCG_CUT:  # m_ndcg_cut.c: ideal over the grades > 0, cut at k
                ideal = icum[min(kk, n_pos)]
                row[col] = dcg[m] / ideal if ideal > 0 else 0.0
    # ---- fraction families
    cdef double tot
    for fam in range(P.n_ffam):
        a0 = P.fcut_off[fam]
        a1 = P.fcut_off[fam + 1]
        col = N_SCALAR + n_i + a0
        if fam == F_IPREC:
            _iprec(S.rpos, n, num_rel, <int64_t>nrr, P.fcuts + a0, a1 - a0, row, col, P.v9, S.cut)
        elif fam == F_11PT:
            if _same_levels(P, a0, a1):  # iprec_at_recall's levels (all_trec: 0.0 ... 1.0 both): its values
                for c in range(a1 - a0):
                    row[col + c] = row[N_SCALAR + n_i + P.fcut_off[F_IPREC] + c]
            else:
                _iprec(S.rpos, n, num_rel, <int64_t>nrr, P.fcuts + a0, a1 - a0, row, col, P.v9, S.cut)
            tot = 0.0
            for c in range(a1 - a0):
                tot += row[col + c]
            row[C_11PT] = tot / <double>(a1 - a0) if a1 > a0 else 0.0
        else:  # Rprec_mult (m_Rprec_mult.c): precision at cut = (long)(x * R + 0.9)
            for c in range(a1 - a0):
                cut = <int64_t>(P.fcuts[a0 + c] * num_rel + 0.9)
                if cut > 0:
                    row[col + c] = cum[min(cut, n)] / <double>cut


cdef inline bint _same_levels(const Params* P, int64_t a0, int64_t a1) noexcept nogil:
    """The recall levels ``P.fcuts[a0:a1]`` are those of the ``iprec_at_recall`` family (computed before)."""
    cdef int64_t b0 = P.fcut_off[F_IPREC], c
    if P.n_ffam <= F_IPREC or P.fcut_off[F_IPREC + 1] - b0 != a1 - a0:
        return False
    for c in range(a1 - a0):
        if P.fcuts[b0 + c] != P.fcuts[a0 + c]:
            return False
    return True


cdef void _graded_walks(const int64_t* rels, int64_t n, const double* igr, const double* icum, int64_t n_pos,
                        int64_t num_rel, double* row, const double* lg, const double* dcg, const int64_t* gpos,
                        int64_t n_gain) noexcept nogil:
    """ndcg_rel, Rndcg and G of one topic: trec_eval's loops, where the ideal gain at rank ``i``
    is ``igr[i]`` (the judged grades in descending order, 0 from rank ``n_pos`` on: the walk down
    the grades that trec_eval repeats in each of these measures, done once by the caller) and
    ``icum[p]`` the ideal DCG of the top ``p``.

    Past the ideal list only the documents of positive grade change a sum: the loops there
    visit their ranks ``gpos[:n_gain]`` (0-based, ascending), take the running DCG from the
    caller's prefix ``dcg`` (the same additions in the same order, so the same doubles) and,
    for G, the cost count as the integer it is (whole grades and steps of 1.0 add exactly)."""
    # ndcg_rel: at each positive grade, the DCG so far over the ideal DCG so far (whose prefix
    # stops growing past the ideal list), then the relevant documents not retrieved; ``dcg`` and
    # ``icum`` are trec_eval's running sums (the same additions in the same order)
    cdef double total = 0.0, idcg, rdcg, ig, old, g, rg, sres, sideal, scost
    cdef int64_t t, p, changes, i, v, seen
    for t in range(n_gain):
        p = gpos[t] + 1
        total += dcg[p] / icum[p if p < n_pos else n_pos]
    idcg = icum[n_pos]
    if idcg > 0:
        total += <double>(n_pos - n_gain) * dcg[n] / idcg
    row[C_NDCG_REL] = total / <double>n_pos if total > 0.0 else 0.0
    # Rndcg
    if num_rel > 0:
        rdcg = 0.0
        idcg = 0.0
        total = 0.0
        changes = 0
        ig = igr[0] if n_pos > 0 else 0.0
        old = ig
        i = 0
        while i < n and ig > 0.0:
            v = rels[i]
            g = <double>v if v > 0 else 0.0
            ig = igr[i] if i < n_pos else 0.0
            if old != ig:
                if idcg > 0.0:
                    total += rdcg / idcg
                    changes += 1
                old = ig
            if g != 0:
                rdcg += g / lg[i]
            if ig > 0.0:
                idcg += ig / lg[i]
            i += 1
        if i < n:
            rdcg = dcg[n]
            i = n
            if idcg > 0.0:
                total += rdcg / idcg
                changes += 1
        while ig > 0.0:
            ig = igr[i] if i < n_pos else 0.0
            if old != ig:
                if idcg > 0.0:
                    total += rdcg / idcg
                    changes += 1
                old = ig
            if ig > 0.0:
                idcg += ig / lg[i]
            i += 1
        row[C_RNDCG] = total / <double>changes if changes > 0 else 0.0
    # G
    rg = 0.0
    sres = 0.0
    sideal = 0.0
    scost = 0.0
    ig = igr[0] if n_pos > 0 else 0.0
    i = 0
    seen = 0
    while i < n and ig > 0.0:
        v = rels[i]
        g = <double>v if v > 0 else 0.0
        sres += g
        ig = igr[i] if i < n_pos else 0.0
        if ig > 0.0:
            sideal += ig
        scost += ig if ig >= 1.0 else 1.0
        if g != 0:
            rg += g / log2(2.0 + scost - sres)
            seen += 1
        i += 1
    if i < n:
        for t in range(seen, n_gain):  # past the ideal list every rank costs 1.0
            p = gpos[t]
            g = <double>rels[p]
            sres += g
            rg += g / log2(2.0 + (scost + <double>(p - i + 1)) - sres)
        i = n
    while ig > 0.0:
        ig = igr[i] if i < n_pos else 0.0
        if ig > 0.0:
            sideal += ig
        i += 1
    row[C_G] = rg / sideal if sideal > 0.0 else 0.0
