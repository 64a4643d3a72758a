"""trec_eval's measure groups and default cutoffs, and its measures on prepared arrays.

The lowest of the trec_eval modules of ``rankwise.metrics``: the registry's trec_eval-only
entries compute their values with :func:`trec_values`, :func:`rankwise.metrics.evaluate`
expands group names (``all_trec``, ``official``) with :func:`expand_groups`, and
:mod:`rankwise.metrics.trec` (runs against qrels) builds its kernel calls with :class:`_Plan`.
It imports none of them: a measure reaches :func:`trec_values` already resolved.
"""
from __future__ import annotations

import numpy as np

from rankwise.data.trec import grade_levels
from rankwise.errors import InputError
from rankwise.metrics._trec_kernel import C_11PT, C_NUM_REL, F_11PT, N_SCALAR, UNJUDGED, trec_kernel

#: trec_eval's default cutoffs per family
P_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
SUCCESS_CUTS = (1, 5, 10)
UNJ_CUTS = (5, 10, 20)
RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
RPREC_MULT = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)


def _group(names_and_cuts):
    out = []
    for name, cuts in names_and_cuts:
        if cuts is None:
            out.append(name)
        else:
            out.extend(f"{name}_{c:.2f}" if isinstance(c, float) else f"{name}_{c}" for c in cuts)
    return out


#: trec_eval's measure groups, in trec_eval's print order: the numeric measures (``runid`` is
#: printed by the trec_eval output format; ``relstring``, a string per topic, joins ``all_trec``
#: in :func:`evaluate_runs` and its output, see ``STRING_MEASURES``)
GROUPS = {
    "official": _group([("num_q", None), ("num_ret", None), ("num_rel", None), ("num_rel_ret", None), ("map", None),
                        ("gm_map", None), ("Rprec", None), ("bpref", None), ("recip_rank", None),
                        ("iprec_at_recall", RECALL_LEVELS), ("P", P_CUTS)]),
    "all_trec": _group([
        ("num_q", None), ("num_ret", None), ("num_rel", None), ("num_rel_ret", None), ("map", None), ("gm_map", None),
        ("Rprec", None), ("bpref", None), ("recip_rank", None), ("iprec_at_recall", RECALL_LEVELS), ("P", P_CUTS),
        ("recall", P_CUTS), ("infAP", None), ("gm_bpref", None), ("Rprec_mult", RPREC_MULT), ("utility", None),
        ("11pt_avg", None), ("binG", None), ("G", None), ("ndcg", None), ("ndcg_rel", None), ("Rndcg", None),
        ("ndcg_cut", P_CUTS), ("map_cut", P_CUTS), ("relative_P", P_CUTS), ("success", SUCCESS_CUTS),
        ("set_P", None), ("set_relative_P", None), ("set_recall", None), ("set_map", None), ("set_F", None),
        ("num_nonrel_judged_ret", None), ("rbp", None), ("rbp_resid", None), ("unj", UNJ_CUTS)]),
}
GROUPS["set"] = ["num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall", "set_relative_P",
                 "set_map", "set_F"]


def _spec_list(metrics) -> list:
    if isinstance(metrics, str):
        return [m.strip() for m in metrics.split(",")] if "," in metrics else [metrics]
    return list(metrics)


#: string measures of a group: (group, the measure they follow in print order, their names)
STRING_MEASURES = {"all_trec": ("P_1000", ["relstring"])}


def expand_groups(metrics, *, strings=False) -> list:
    """Replace trec_eval group names (``all_trec``, ``official``, ``set``) by their measures
    (``runid``, the run's tag, is no measure: it is left out). With ``strings``, the groups
    include their string measures (``relstring`` in ``all_trec``), which only
    :func:`evaluate_runs` computes."""
    out = []
    for m in _spec_list(metrics):
        if isinstance(m, str) and m.strip() in GROUPS:
            names = list(GROUPS[m.strip()])
            if strings and m.strip() in STRING_MEASURES:
                after, extra = STRING_MEASURES[m.strip()]
                pos = names.index(after) + 1
                names[pos:pos] = extra
            out.extend(names)
        elif not (isinstance(m, str) and m.strip() == "runid"):
            out.append(m)
    return out


# ---------------------------------------------------------------------------- the kernel call

class _Plan:
    """Cutoff lists for one kernel call and the column of every requested measure."""

    def __init__(self, metrics):
        fam_i = [[] for _ in range(7)]
        fam_f = [[] for _ in range(3)]
        self.where = []
        for m in metrics:
            kind, fam = m.trec
            if kind == "scalar":
                self.where.append(("s", fam, None))
            elif kind == "icut":
                self.where.append(("i", fam, len(fam_i[fam])))
                fam_i[fam].append(int(m.k))
            else:
                self.where.append(("f", fam, len(fam_f[fam])))
                fam_f[fam].append(float(m.param))
        if any(m.trec == ("scalar", C_11PT) for m in metrics):
            fam_f[F_11PT] = list(RECALL_LEVELS)
        self.icuts = np.array([c for f in fam_i for c in f], dtype=np.int64)
        self.icut_off = np.concatenate(([0], np.cumsum([len(f) for f in fam_i]))).astype(np.int64)
        self.fcuts = np.array([c for f in fam_f for c in f], dtype=np.float64)
        self.fcut_off = np.concatenate(([0], np.cumsum([len(f) for f in fam_f]))).astype(np.int64)

    def matrix(self, table):
        """The requested measures' columns of a kernel table, as one (topics x measures) array."""
        if not hasattr(self, "_take"):
            n_i = len(self.icuts)
            take = []
            for kind, fam, pos in self.where:
                if kind == "s":
                    take.append(fam)
                elif kind == "i":
                    take.append(N_SCALAR + self.icut_off[fam] + pos)
                else:
                    take.append(N_SCALAR + n_i + self.fcut_off[fam] + pos)
            self._take = np.array(take, dtype=np.int64)
        return table[:, self._take]

    def columns(self, table):
        n_i = len(self.icuts)
        cols = []
        for kind, fam, pos in self.where:
            if kind == "s":
                cols.append(table[:, fam])
            elif kind == "i":
                cols.append(table[:, N_SCALAR + self.icut_off[fam] + pos])
            else:
                cols.append(table[:, N_SCALAR + n_i + self.fcut_off[fam] + pos])
        return cols


def kernel_table(plan, off, rels, present, levels, *, relevance_level=1, rbp_p=0.9, set_f_beta=1.0,
                 utility=(1.0, -1.0, 0.0, 0.0), n_docs_in_coll=0, v9=False):
    lv_off, lv_grade, lv_count = levels
    return trec_kernel(off, rels, present, lv_off, lv_grade, lv_count, int(relevance_level), plan.icuts,
                          plan.icut_off, plan.fcuts, plan.fcut_off, float(rbp_p), float(set_f_beta),
                          np.asarray(utility, dtype=np.float64), float(n_docs_in_coll), bool(v9))


def trec_values(prep, *, metric, threshold=1.0):
    """Per-query values of a trec_eval measure on prepared arrays (the ``evaluate`` path).

    Every row given has a label, so every row is judged; rows with ``retrieved=False`` count in
    R and the ideal DCG only. Labels must be integer grades; a negative one is trec_eval's
    "in the pool, not judged".
    """
    if not prep.singletons:
        raise InputError(f"{metric.spec} is defined on one ranking, and the scores hold ties: pass ties='docid' "
                         "(trec_eval: larger document id first), 'input', 'pessimistic' or 'optimistic'")
    y = prep.labels
    if y.size and (np.any(y != np.round(y)) or np.abs(y).max() > 1e6):
        raise InputError(f"{metric.spec} takes integer relevance grades (|grade| <= 1e6); got non-integer labels")
    rel = y.astype(np.int64)
    rel = np.where(rel < 0, UNJUDGED, rel)
    off = prep.offsets
    if prep.retrieved is None:
        ranked, roff = rel, off
    else:
        ranked = rel[prep.retrieved]
        roff = np.concatenate(([0], np.cumsum(prep.n_ranked()))).astype(np.int64)
    levels = grade_levels(off, np.where(y >= 0, y, -1).astype(np.int64))
    rl = int(np.ceil(threshold))
    table = kernel_table(_Plan([metric]), roff, ranked, np.ones(prep.n_queries, dtype=np.bool_), levels,
                         relevance_level=rl)
    return _Plan([metric]).columns(table)[0], table[:, C_NUM_REL] == 0
