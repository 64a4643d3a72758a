"""numba kernel computing every trec_eval measure of a topic in a few passes over its ranking.

Input per topic: the relevance of the ranked documents in trec_eval's order (a grade >= 0,
``NONPOOL`` for a document absent from the qrels, ``UNJUDGED`` for a qrels grade below 0), and
the topic's judged grades with their counts. The code follows trec_eval 10's ``m_*.c`` files
measure by measure (comments name the file); where trec_eval would divide 0 by 0 the value is 0.
Every division is guarded, so the kernels are compiled with numpy's error model (no Python
ZeroDivisionError check on each division).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from rankwise.data import _trec_numba as DK  # the join's byte helpers as numba functions

NONPOOL = -1
UNJUDGED = -2
MIN_GEO_MEAN = 1e-5
INFAP_EPSILON = 1e-5

# scalar columns
(C_NUM_Q, C_NUM_RET, C_NUM_REL, C_NUM_REL_RET, C_MAP, C_GM_MAP, C_RPREC, C_BPREF, C_RECIP_RANK, C_INFAP,
 C_GM_BPREF, C_UTILITY, C_11PT, C_BING, C_G, C_NDCG, C_NDCG_REL, C_RNDCG, C_SET_P, C_SET_REL_P, C_SET_RECALL,
 C_SET_MAP, C_SET_F, C_NONREL_JUDGED_RET, C_RBP, C_RBP_RESID) = range(26)
N_SCALAR = 26
# integer-cutoff families (order of the blocks in ``icuts``)
I_P, I_RECALL, I_NDCG_CUT, I_MAP_CUT, I_REL_P, I_SUCCESS, I_UNJ = range(7)
# fraction families (order of the blocks in ``fcuts``)
F_IPREC, F_RPREC_MULT, F_11PT = range(3)


@njit(cache=True, inline="always")
def _lround(x):
    return np.floor(x + 0.5)


@njit(cache=True, error_model="numpy")
def _iprec(rpos, n, num_rel, num_rel_ret, frac, out, col, v9):
    """m_iprec_at_recall.c: interpolated precision at recall levels ``frac`` (into out[col+i]).

    The number of relevant documents of a level is ``lround(x R)`` in trec_eval 10 and
    ``(long)(x R + 0.9)`` in trec_eval 9 (``v9``). trec_eval walks the ranks from the last up,
    keeping the best precision seen; between two relevant ranks the precision only grows
    towards the upper one, so the walk visits the relevant ranks ``rpos[:num_rel_ret]``
    (0-based, ascending) and the last rank: the same maxima of the same quotients."""
    m = frac.shape[0]
    cut = np.empty(m, dtype=np.int64)
    for i in range(m):
        cut[i] = np.int64(frac[i] * num_rel + 0.9) if v9 else np.int64(_lround(frac[i] * num_rel))
    for i in range(m):
        out[col + i] = 0.0
    if n == 0:
        return
    current = m - 1
    while current >= 0 and cut[current] > num_rel_ret:
        current -= 1
    precis = num_rel_ret / n
    ip = precis
    rsf = num_rel_ret
    for t in range(num_rel_ret - 1, -1, -1):
        precis = rsf / (rpos[t] + 1)
        if ip < precis:
            ip = precis
        while current >= 0 and rsf == cut[current]:
            out[col + current] = ip
            current -= 1
        rsf -= 1
    while current >= 0:
        out[col + current] = ip
        current -= 1


@njit(cache=True, nogil=True, error_model="numpy")
def ideal_lists(lv_off, lv_grade, lv_count):
    """Per topic, its ideal ranking's gains (the judged grades > 0, descending) and DCG prefix:
    topic ``t``'s gains are ``igr[i_off[t] - t:i_off[t + 1] - t - 1]`` and its DCG of the top
    ``p`` is ``icum[i_off[t] + p]`` (``p`` = 0 .. number of gains). A property of the qrels alone,
    computed once for every run."""
    nq = lv_off.shape[0] - 1
    i_off = np.zeros(nq + 1, dtype=np.int64)
    longest = 0
    for t in range(nq):
        n_pos = 0
        for u in range(lv_off[t], lv_off[t + 1]):
            if lv_grade[u] > 0:
                n_pos += lv_count[u]
        i_off[t + 1] = i_off[t] + n_pos + 1
        longest = max(longest, n_pos)
    lg = np.log2(np.arange(longest + 2) + 2.0)
    igr = np.zeros(i_off[nq] - nq)
    icum = np.zeros(i_off[nq])
    for t in range(nq):
        g0 = i_off[t] - t  # start of the gains
        c0 = i_off[t]  # start of the DCG prefix (icum[c0] = 0)
        p = 0
        for u in range(lv_off[t + 1] - 1, lv_off[t] - 1, -1):
            grade = lv_grade[u]
            if grade <= 0:
                break
            for _ in range(lv_count[u]):
                igr[g0 + p] = grade  # the ideal gain at rank p
                icum[c0 + p + 1] = icum[c0 + p] + grade / lg[p]  # ideal DCG of the top p + 1
                p += 1
    return i_off, igr, icum


@njit(cache=True, error_model="numpy")
def _scratch(longest):
    """Per-call work arrays of ``_topic_row``, sized for rankings and ideal lists of ``longest``."""
    # lg[i] = log2(i + 2), the discount of 0-based rank i: computed once (the same values as
    # calling log2 at every rank, so the sums are bit for bit trec_eval's)
    lg = np.log2(np.arange(longest + 2) + 2.0)
    cum = np.zeros(longest + 1)  # relevant in the top i
    apc = np.zeros(longest + 1)  # sum of precisions at relevant ranks in the top i
    dcg = np.zeros(longest + 1)  # DCG of the top i (gain = grade)
    pos = np.zeros((2, longest + 1), dtype=np.int64)  # ranks of the relevant / positive-grade documents
    return lg, cum, apc, dcg, pos



@njit(cache=True, error_model="numpy")
def _absent_row(num_rel, row):
    """trec_eval -c: a topic the run lacks scores as an empty ranking (every measure 0)."""
    for c in range(row.shape[0]):
        row[c] = 0.0
    row[C_NUM_Q] = 1.0
    row[C_NUM_REL] = num_rel
    row[C_GM_MAP] = np.log(MIN_GEO_MEAN)
    row[C_GM_BPREF] = np.log(MIN_GEO_MEAN)


@njit(cache=True, error_model="numpy")
def _n_judged(t, lv_off, lv_count):
    """Number of documents of topic ``t`` judged with a grade >= 0 (the length of its ideal list)."""
    judged = 0
    for u in range(lv_off[t], lv_off[t + 1]):
        judged += lv_count[u]
    return judged


@njit(cache=True, error_model="numpy")
def _num_rel(la, lb, lv_grade, lv_count, rl):
    num_rel = np.int64(0)
    for t in range(la, lb):
        if lv_grade[t] >= rl:
            num_rel += lv_count[t]
    return num_rel


@njit(cache=True, nogil=True, error_model="numpy")
def trec_kernel(off, rels, present, lv_off, lv_grade, lv_count, rl, icuts, icut_off, fcuts, fcut_off,
                rbp_p, set_f_beta, util, n_docs_coll, v9):
    """Every requested measure of every topic of ranked relevance values (``off``: topic offsets;
    ``present[q]`` False: a topic the run lacks, trec_eval -c)."""
    nq = off.shape[0] - 1
    width = N_SCALAR + icuts.shape[0] + fcuts.shape[0]
    out = np.zeros((nq, width))
    longest = np.int64(0)
    for q in range(nq):
        longest = max(longest, off[q + 1] - off[q], _n_judged(q, lv_off, lv_count))
    lg, cum, apc, dcg, pos = _scratch(longest)
    i_off, ig_all, icum_all = ideal_lists(lv_off, lv_grade, lv_count)
    row = np.zeros(width)
    for q in range(nq):
        if present[q]:
            igr = ig_all[i_off[q] - q:i_off[q + 1] - q - 1]
            icum = icum_all[i_off[q]:i_off[q + 1]]
            _topic_row(rels, off[q], off[q + 1] - off[q], lv_off[q], lv_off[q + 1], lv_grade, lv_count, rl, icuts,
                       icut_off, fcuts, fcut_off, rbp_p, set_f_beta, util, n_docs_coll, v9, row, lg, cum, apc, dcg, pos,
                       igr, icum)
        else:
            _absent_row(_num_rel(lv_off[q], lv_off[q + 1], lv_grade, lv_count, rl), row)
        for c in range(width):
            out[q, c] = row[c]
    return out


@njit(cache=True, error_model="numpy", inline="always")
def _docno_after(buf, s1, e1, s2, e2):
    """Docno ``buf[s1:e1]`` sorts after ``buf[s2:e2]`` (strcmp), so ranks first among ties."""
    return DK._cmp(buf, s1, e1, buf, s2, e2) > 0


@njit(cache=True, error_model="numpy", inline="always")
def _before(i, j, key, buf, s, e):
    """Row ``i`` ranks before row ``j`` (trec_eval: score descending, then docno descending)."""
    if key[i] != key[j]:
        return key[i] > key[j]
    return _docno_after(buf, s[i], e[i], s[j], e[j])


@njit(cache=True, error_model="numpy")
def _rank_order(idx, tmp, n, key, buf, s, e):
    """Sort ``idx[:n]`` (rows 0..n-1) into trec_eval's order (score descending, then docno
    descending). Scores already non-increasing (a run file written in rank order, or its
    dict) cost one pass, then an insertion sort of each group of tied scores by docno; other
    orders: insertion sorts of blocks of 16, then bottom-up merges."""
    ordered = True
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
                while j >= lo and _docno_after(buf, s[x], e[x], s[idx[j]], e[idx[j]]):
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
    swapped = False
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            if mid >= hi or not _before(src[mid], src[mid - 1], key, buf, s, e):
                for k in range(lo, hi):
                    dst[k] = src[k]
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
        src, dst = dst, src
        swapped = not swapped
        width *= 2
    if swapped:
        for k in range(n):
            idx[k] = src[k]


@njit(cache=True, nogil=True, error_model="numpy")
def eval_run(r_off, r_buf, r_s, r_e, r_h, scores, topics, run_of, j_off, t_off, table, b_off, bits, j_buf, j_s,
             lv_off, lv_grade, lv_count, i_off, ig_all, icum_all, max_docs, judged_only, rl, icuts, icut_off, fcuts,
             fcut_off, rbp_p, set_f_beta, util, n_docs_coll, v9, rs_len):
    """A run against prepared qrels in one pass per topic: join, rank, measure.

    For output row ``i``: qrels topic ``topics[i]``, run query ``run_of[i]`` (-1: absent, -c).
    Each run document is joined to its topic's judgments through the qrels' filter and hash
    table (``data._trec_kernel.join_filter``, ``join_table``, ``_lookup``; the slot of the row
    ``PREFETCH`` ahead is prefetched; a match is confirmed on the bytes), the topic is ranked
    as trec_eval ranks it (score descending, docno descending; ``v9``: scores as float32),
    cut at ``max_docs`` (-M), stripped of unjudged documents with ``judged_only`` (-J), and
    measured by ``_topic_row``. Returns the measure table, trec_eval's ``relstring`` of the first
    ``rs_len`` ranked documents per topic (ASCII codes) and their lengths.
    """
    nt = topics.shape[0]
    width = N_SCALAR + icuts.shape[0] + fcuts.shape[0]
    out = np.zeros((nt, width))
    rs = np.zeros((nt, rs_len), dtype=np.uint8)
    rs_n = np.zeros(nt, dtype=np.int64)
    longest = np.int64(0)  # typed: a literal 0 would compile the callees twice
    for i in range(nt):
        g = run_of[i]
        if g >= 0:
            longest = max(longest, r_off[g + 1] - r_off[g])
        longest = max(longest, _n_judged(topics[i], lv_off, lv_count))
    lg, cum, apc, dcg, pos = _scratch(longest)
    row = np.zeros(width)
    rel = np.empty(longest, dtype=np.int64)
    key = np.empty(longest)
    idx = np.empty(longest, dtype=np.int64)
    tmp = np.empty(longest, dtype=np.int64)
    ranked = np.empty(longest, dtype=np.int64)
    for i in range(nt):
        t = topics[i]
        g = run_of[i]
        la = lv_off[t]
        lb = lv_off[t + 1]
        if g < 0:
            _absent_row(_num_rel(la, lb, lv_grade, lv_count, rl), row)
            for c in range(width):
                out[i, c] = row[c]
            continue
        a = r_off[g]
        n = r_off[g + 1] - a
        # join: each document's grade (NONPOOL: not in the qrels; UNJUDGED: a negative grade)
        base = t_off[t]
        size = t_off[t + 1] - base
        first = j_off[t] - 1
        b_base = b_off[t]
        b_mask = np.uint64((b_off[t + 1] - b_base) * 64 - 1)
        mask = np.uint64(size - 1)
        for k in range(min(n, DK.PREFETCH)):
            DK._prefetch(table, base + np.int64(r_h[a + k] & mask))
        for k in range(n):
            r = a + k
            if k + DK.PREFETCH < n:
                DK._prefetch(table, base + np.int64(r_h[r + DK.PREFETCH] & mask))
            slot = DK._lookup(table, base, size, first, bits, b_base, b_mask, r_h[r], r_buf, r_s[r], r_e[r], j_buf,
                              j_s)
            v = NONPOOL
            if slot >= 0:
                v = np.int64(table[slot, 0])
                if v < 0:
                    v = UNJUDGED
            rel[k] = v
            key[k] = np.float64(np.float32(scores[r])) if v9 else scores[r]
            idx[k] = k
        _rank_order(idx, tmp, n, key, r_buf, r_s[a:a + n], r_e[a:a + n])
        m = np.int64(0)
        for k in range(min(n, max_docs)):
            v = rel[idx[k]]
            if judged_only and v < 0:
                continue
            ranked[m] = v
            m += 1
        for k in range(min(m, rs_len)):  # m_relstring.c
            v = ranked[k]
            rs[i, k] = 62 if v > 9 else (48 + v if v >= 0 else (45 if v == NONPOOL else 46))
        rs_n[i] = min(m, rs_len)
        _topic_row(ranked, np.int64(0), m, la, lb, lv_grade, lv_count, rl, icuts, icut_off, fcuts, fcut_off, rbp_p,
                   set_f_beta, util, n_docs_coll, v9, row, lg, cum, apc, dcg, pos,
                   ig_all[i_off[t] - t:i_off[t + 1] - t - 1], icum_all[i_off[t]:i_off[t + 1]])
        for c in range(width):
            out[i, c] = row[c]
    return out, rs, rs_n


@njit(cache=True, error_model="numpy")
def _topic_row(rels, a, n, la, lb, lv_grade, lv_count, rl, icuts, icut_off, fcuts, fcut_off, rbp_p, set_f_beta,
               util, n_docs_coll, v9, row, lg, cum, apc, dcg, pos, igr, icum):
    """Every requested measure of one topic (into ``row``): its ranked relevance values
    ``rels[a:a+n]``, its judged grades ``lv_grade[la:lb]`` (ascending) with their counts, and
    its ideal gains ``igr`` and ideal DCG prefix ``icum`` (``ideal_lists``)."""
    n_i = icuts.shape[0]
    num_rel = np.int64(0)  # typed: a literal 0 would compile the callees twice
    num_nonrel = np.int64(0)
    max_grade = np.int64(0)
    for t in range(la, lb):
        if lv_grade[t] >= rl:
            num_rel += lv_count[t]
        else:
            num_nonrel += lv_count[t]
        if lv_count[t] > 0 and lv_grade[t] > max_grade:
            max_grade = lv_grade[t]
    for c in range(row.shape[0]):
        row[c] = 0.0
    row[C_NUM_Q] = 1.0
    row[C_NUM_REL] = num_rel
    # ---- one pass over the ranking: prefix counts, AP, DCG, reciprocal rank, judged counts,
    # bpref / infAP (m_bpref.c, m_infap.c), binG (m_binG.c), rbp / rbp_resid (m_rbp.c,
    # m_rbp_resid.c: gains = grades, scaled to [0, 1]); each sum in trec_eval's order
    rr = 0.0
    nonpool = 0
    unjudged = 0
    nonrel_sf = 0
    rel_sf = 0
    bpref = 0.0
    infap = 0.0
    bing = 0.0
    k = 0
    scale = float(max_grade) if max_grade > 1 else 1.0
    rbp = 0.0
    sr = 0.0
    cur = 1.0
    unj = 0
    n_gain = 0
    for i in range(n):
        v = rels[a + i]
        r = 1.0 if v >= rl else 0.0
        cum[i + 1] = cum[i] + r
        apc[i + 1] = apc[i] + (cum[i + 1] / (i + 1.0) if r > 0 else 0.0)
        dcg[i + 1] = dcg[i] + (v / lg[i] if v > 0 else 0.0)
        if r > 0:
            if rr == 0.0:
                rr = 1.0 / (i + 1.0)
            pos[0, k] = i
            k += 1
            bing += 1.0 / lg[1 + i - k]
        if v > 0:
            pos[1, n_gain] = i
            n_gain += 1
            rbp += (v / scale) * cur
        if v < 0:
            unj += 1
            sr += cur
        cur *= rbp_p
        if v == NONPOOL:
            nonpool += 1
        elif v == UNJUDGED:
            unjudged += 1
        elif v < rl:
            nonrel_sf += 1
        else:
            rel_sf += 1
            if nonrel_sf > 0:
                bpref += 1.0 - min(nonrel_sf, num_rel) / min(num_nonrel, num_rel)
            else:
                bpref += 1.0
            if i == 0:
                infap += 1.0
            else:
                fj = float(i)
                infap += 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((rel_sf - 1 + nonrel_sf + unjudged) / fj) * \
                    ((rel_sf - 1 + INFAP_EPSILON) / (rel_sf - 1 + nonrel_sf + 2 * INFAP_EPSILON))
    nrr = cum[n]
    row[C_NUM_RET] = n
    row[C_NUM_REL_RET] = nrr
    row[C_NONREL_JUDGED_RET] = n - nonpool - unjudged - nrr
    row[C_RECIP_RANK] = rr
    ap = apc[n] / num_rel if nrr > 0 else 0.0
    row[C_MAP] = ap
    row[C_GM_MAP] = np.log(max(ap, MIN_GEO_MEAN))
    look = min(n, num_rel)
    row[C_RPREC] = cum[look] / num_rel if look > 0 else 0.0
    if num_rel > 0:
        bpref /= num_rel
        infap /= num_rel
    row[C_BPREF] = bpref
    row[C_GM_BPREF] = np.log(max(bpref, MIN_GEO_MEAN))
    row[C_INFAP] = infap
    row[C_BING] = bing / num_rel if k > 0 else 0.0
    row[C_RBP] = (1.0 - rbp_p) * rbp
    if unj > 0:
        row[C_RBP_RESID] = cur + (1.0 - rbp_p) * sr
    # ---- set measures, utility (m_set_*.c, m_utility.c)
    if n > 0:
        row[C_SET_P] = nrr / n
    if num_rel > 0:
        row[C_SET_RECALL] = nrr / num_rel
    if n > 0 and num_rel > 0:
        row[C_SET_REL_P] = nrr / min(n, num_rel)
        row[C_SET_MAP] = nrr * nrr / (n * float(num_rel))
    if nrr > 0:
        P = nrr / n
        R = nrr / num_rel
        row[C_SET_F] = (set_f_beta + 1.0) * P * R / (set_f_beta * P + R)
    row[C_UTILITY] = util[0] * nrr + util[1] * (n - nrr) + util[2] * (num_rel - nrr) + \
        util[3] * (n_docs_coll + nrr - n - num_rel)
    # ---- the ideal list (``ideal_lists``): grades > 0 descending, and its DCG prefix (m_ndcg.c)
    n_pos = igr.shape[0]
    ideal_total = icum[n_pos]
    row[C_NDCG] = dcg[n] / ideal_total if ideal_total > 0 else 0.0
    # ---- ndcg_rel, Rndcg, G (m_ndcg_rel.c, m_Rndcg.c, m_G.c), walking ranking and ideal together
    _graded_walks(rels, a, n, igr, icum, n_pos, num_rel, row, lg, dcg, pos[1], n_gain)
    # ---- integer-cutoff families
    for fam in range(icut_off.shape[0] - 1):
        for c in range(icut_off[fam], icut_off[fam + 1]):
            kk = icuts[c]
            m = min(kk, n)
            col = N_SCALAR + c
            if fam == I_P:
                row[col] = cum[m] / kk
            elif fam == I_RECALL:
                row[col] = cum[m] / num_rel if num_rel > 0 else 0.0
            elif fam == I_MAP_CUT:
                row[col] = apc[m] / num_rel if num_rel > 0 else 0.0
            elif fam == I_REL_P:
                row[col] = cum[m] / min(kk, num_rel) if num_rel > 0 else 0.0
            elif fam == I_SUCCESS:
                row[col] = 1.0 if cum[m] > 0 else 0.0
            elif fam == I_UNJ:
                u = 0
                for i in range(m):
                    if rels[a + i] < 0:
                        u += 1
                row[col] = u / kk
            elif fam == I_NDCG_CUT:  # m_ndcg_cut.c: ideal over the grades > 0, cut at k
                ideal = icum[min(kk, n_pos)]
                row[col] = dcg[m] / ideal if ideal > 0 else 0.0
    # ---- fraction families
    for fam in range(fcut_off.shape[0] - 1):
        a0 = fcut_off[fam]
        a1 = fcut_off[fam + 1]
        col = N_SCALAR + n_i + a0
        if fam == F_IPREC:
            _iprec(pos[0], n, num_rel, int(nrr), fcuts[a0:a1], row, col, v9)
        elif fam == F_11PT:
            _iprec(pos[0], n, num_rel, int(nrr), fcuts[a0:a1], row, col, v9)
            tot = 0.0
            for c in range(a1 - a0):
                tot += row[col + c]
            row[C_11PT] = tot / (a1 - a0) if a1 > a0 else 0.0
        else:  # Rprec_mult (m_Rprec_mult.c): precision at cut = (long)(x * R + 0.9)
            for c in range(a1 - a0):
                cut = np.int64(fcuts[a0 + c] * num_rel + 0.9)
                if cut > 0:
                    row[col + c] = cum[min(cut, n)] / cut


@njit(cache=True, error_model="numpy")
def _graded_walks(rels, a, n, igr, icum, n_pos, num_rel, row, lg, dcg, gpos, n_gain):
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
    total = 0.0
    for t in range(n_gain):
        p = gpos[t] + 1
        total += dcg[p] / icum[p if p < n_pos else n_pos]
    idcg = icum[n_pos]
    if idcg > 0:
        total += (n_pos - n_gain) * dcg[n] / idcg
    row[C_NDCG_REL] = total / n_pos if total > 0.0 else 0.0
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
            v = rels[a + i]
            g = float(v) if v > 0 else 0.0
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
        row[C_RNDCG] = total / changes if changes > 0 else 0.0
    # G
    rg = 0.0
    sres = 0.0
    sideal = 0.0
    scost = 0.0
    ig = igr[0] if n_pos > 0 else 0.0
    i = 0
    seen = 0
    while i < n and ig > 0.0:
        v = rels[a + i]
        g = float(v) if v > 0 else 0.0
        sres += g
        ig = igr[i] if i < n_pos else 0.0
        if ig > 0.0:
            sideal += ig
        scost += ig if ig >= 1.0 else 1.0
        if g != 0:
            rg += g / np.log2(2.0 + scost - sres)
            seen += 1
        i += 1
    if i < n:
        for t in range(seen, n_gain):  # past the ideal list every rank costs 1.0
            p = gpos[t]
            g = float(rels[a + p])
            sres += g
            rg += g / np.log2(2.0 + (scost + float(p - i + 1)) - sres)
        i = n
    while ig > 0.0:
        ig = igr[i] if i < n_pos else 0.0
        if ig > 0.0:
            sideal += ig
        i += 1
    row[C_G] = rg / sideal if sideal > 0.0 else 0.0
