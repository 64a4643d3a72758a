"""One registry resolving metric strings (``"ndcg@10"``, ``"map"``, ``"P@5"``) to metric objects.

A measure is one registered entry: its per-query values function, whether it takes a cutoff,
the conventions it accepts, and its trec_eval identity (name, and the column of the trec_eval
kernel that computes it). :func:`get_metric` is the only parser of measure strings: other
modules (early stopping, the CLI, theory, models) call it. It reads rankwise's spelling
(``"P@5"``, ``"ndcg@10"``) and trec_eval's (``"P_5"``, ``"P.5"``, ``"ndcg_cut_10"``,
``"iprec_at_recall_0.10"``); unknown names raise an :class:`~rankwise.errors.InputError`
listing the valid ones.
"""
from __future__ import annotations

from dataclasses import dataclass

from rankwise.errors import InputError
from rankwise.metrics import binary, cascade, correlation, graded
from rankwise.metrics._common import run_metric
from rankwise.metrics._prepare import check_k
from rankwise.metrics._trec_kernel import (
    C_11PT, C_BING, C_BPREF, C_G, C_GM_BPREF, C_GM_MAP, C_INFAP, C_MAP, C_NDCG, C_NDCG_REL, C_NONREL_JUDGED_RET,
    C_NUM_Q, C_NUM_REL, C_NUM_REL_RET, C_NUM_RET, C_RBP, C_RBP_RESID, C_RECIP_RANK, C_RNDCG, C_RPREC, C_SET_F,
    C_SET_MAP, C_SET_P, C_SET_RECALL, C_SET_REL_P, C_UTILITY, F_IPREC, F_RPREC_MULT, I_MAP_CUT, I_NDCG_CUT, I_P,
    I_RECALL, I_REL_P, I_SUCCESS, I_UNJ)
from rankwise.metrics._trec_measures import GROUPS, trec_values

COMMON = ("ties", "empty", "doc_ids")


@dataclass(frozen=True)
class _Entry:
    name: str
    values: object  # values_fn(prepared, **options) -> (values, empty_mask)
    takes_k: bool
    options: tuple  # metric-specific conventions it accepts
    higher_is_better: bool = True
    #: False: defined on the ranking alone, so unretrieved rows (``evaluate(retrieved=...)``) are
    #: dropped before it is computed; True: they count in its ideal / number of relevant items.
    retrieval_aware: bool = True
    #: trec_eval's name without a cutoff and its kernel column (``_trec_kernel.C_*``), if any
    trec_name: str | None = None
    trec_col: int | None = None
    #: trec_eval's name of the family with a cutoff and its kernel family, if any
    trec_cut_name: str | None = None
    trec_cut: tuple | None = None  # ("icut", I_*) or ("fcut", F_*)
    #: the cutoff is a fraction (iprec_at_recall@0.1, Rprec_mult@0.2), not a rank
    fraction: bool = False


def _trec_only(name):
    """values function of a measure computed by the trec_eval kernel alone."""
    def values(prep, *, k=0, x=None, threshold=1.0):
        return trec_values(prep, metric=Metric(name, k or None, _ENTRIES[name], x), threshold=threshold)
    return values


def _t(name, trec_name=None, col=None, cut_name=None, cut=None, *, fraction=False, higher=True):
    takes = cut is not None
    return _Entry(name, _trec_only(name), takes, ("threshold",), higher_is_better=higher, trec_name=trec_name,
                  trec_col=col, trec_cut_name=cut_name, trec_cut=cut, fraction=fraction)


_ENTRIES = {
    e.name: e for e in (
        _Entry("ndcg", graded.ndcg_values, True, ("gain", "discount", "short_list"), trec_name="ndcg",
               trec_col=C_NDCG, trec_cut_name="ndcg_cut", trec_cut=("icut", I_NDCG_CUT)),
        _Entry("dcg", graded.dcg_values, True, ("gain", "discount")),
        _Entry("err", cascade.err_values, True, ("max_grade",)),
        _Entry("map", binary.ap_values, True, ("threshold", "ap_denominator"), trec_name="map", trec_col=C_MAP,
               trec_cut_name="map_cut", trec_cut=("icut", I_MAP_CUT)),
        _Entry("precision", binary.precision_values, True, ("threshold",), trec_name="set_P", trec_col=C_SET_P,
               trec_cut_name="P", trec_cut=("icut", I_P)),
        _Entry("recall", binary.recall_values, True, ("threshold",), trec_name="set_recall",
               trec_col=C_SET_RECALL, trec_cut_name="recall", trec_cut=("icut", I_RECALL)),
        _Entry("mrr", cascade.rr_values, True, ("threshold",), trec_name="recip_rank", trec_col=C_RECIP_RANK),
        _Entry("auc", binary.auc_values, False, ("threshold",), retrieval_aware=False),
        _Entry("kendall_tau", correlation.kendall_values, False, (), retrieval_aware=False),
        _Entry("spearman", correlation.spearman_values, False, (), retrieval_aware=False),
        _Entry("pairwise_accuracy", correlation.pairwise_accuracy_values, False, (), retrieval_aware=False),
        _Entry("pairwise_cost", correlation.pairwise_cost_values, False, ("omega",), higher_is_better=False,
               retrieval_aware=False),
        # trec_eval's measures (trec_eval 10, m_*.c), computed by metrics._trec_kernel
        _t("num_q", "num_q", C_NUM_Q),
        _t("num_ret", "num_ret", C_NUM_RET),
        _t("num_rel", "num_rel", C_NUM_REL),
        _t("num_rel_ret", "num_rel_ret", C_NUM_REL_RET),
        _t("num_nonrel_judged_ret", "num_nonrel_judged_ret", C_NONREL_JUDGED_RET, higher=False),
        _t("gm_map", "gm_map", C_GM_MAP),
        _t("rprec", "Rprec", C_RPREC),
        _t("bpref", "bpref", C_BPREF),
        _t("gm_bpref", "gm_bpref", C_GM_BPREF),
        _t("infap", "infAP", C_INFAP),
        _t("utility", "utility", C_UTILITY),
        _t("11pt_avg", "11pt_avg", C_11PT),
        _t("bing", "binG", C_BING),
        _t("g", "G", C_G),
        _t("ndcg_rel", "ndcg_rel", C_NDCG_REL),
        _t("rndcg", "Rndcg", C_RNDCG),
        _t("set_relative_p", "set_relative_P", C_SET_REL_P),
        _t("set_map", "set_map", C_SET_MAP),
        _t("set_f", "set_F", C_SET_F),
        _t("rbp", "rbp", C_RBP),
        _t("rbp_resid", "rbp_resid", C_RBP_RESID, higher=False),
        _t("relative_p", cut_name="relative_P", cut=("icut", I_REL_P)),
        _t("success", cut_name="success", cut=("icut", I_SUCCESS)),
        _t("unj", cut_name="unj", cut=("icut", I_UNJ), higher=False),
        _t("iprec_at_recall", cut_name="iprec_at_recall", cut=("fcut", F_IPREC), fraction=True),
        _t("rprec_mult", cut_name="Rprec_mult", cut=("fcut", F_RPREC_MULT), fraction=True),
    )
}

_ALIASES = {
    "ap": "map", "average_precision": "map", "p": "precision", "prec": "precision",
    "r": "recall", "rr": "mrr", "reciprocal_rank": "mrr", "recip_rank": "mrr",
    "kendall": "kendall_tau", "tau": "kendall_tau", "spearman_rho": "spearman", "rho": "spearman",
    "pairwise_acc": "pairwise_accuracy", "kemeny": "pairwise_cost",
    "set_p": "precision", "set_recall": "recall", "ndcg_cut": "ndcg", "map_cut": "map", "r_prec": "rprec",
}

#: every convention some metric accepts (evaluate() passes each metric the ones it takes)
CONVENTIONS = tuple(sorted({o for e in _ENTRIES.values() for o in e.options} | set(COMMON)))


def available_metrics() -> list[str]:
    """Canonical metric names (a cutoff is written ``name@k`` where the metric takes one)."""
    return sorted(_ENTRIES)


@dataclass(frozen=True)
class Metric:
    """A resolved metric: ``name``, cutoff ``k`` (None = whole list) and its conventions.

    ``param`` is the fraction of the measures cut at a recall level (``iprec_at_recall@0.1``).
    """

    name: str
    k: int | None
    entry: _Entry
    param: float | None = None

    @property
    def spec(self) -> str:
        if self.param is not None:
            return f"{self.name}@{self.param:g}"
        return self.name if self.k is None else f"{self.name}@{self.k}"

    @property
    def trec(self):
        """``("scalar", column)``, ``("icut", family)`` or ``("fcut", family)`` of the trec_eval
        kernel, or None when trec_eval has no such measure."""
        if self.k is None and self.param is None:
            return None if self.entry.trec_col is None else ("scalar", self.entry.trec_col)
        return self.entry.trec_cut

    @property
    def trec_base(self) -> str | None:
        """trec_eval's name of the measure without its cutoff (``"P"``, ``"ndcg_cut"``, ``"map"``)."""
        return self.entry.trec_name if self.k is None and self.param is None else self.entry.trec_cut_name

    @property
    def trec_spec(self) -> str:
        """The name trec_eval prints (``"P_5"``, ``"ndcg_cut_10"``, ``"iprec_at_recall_0.10"``)."""
        if self.param is not None:
            return f"{self.trec_base}_{self.param:.2f}"
        return self.trec_base if self.k is None else f"{self.trec_base}_{self.k}"

    @property
    def higher_is_better(self) -> bool:
        return self.entry.higher_is_better

    def _options(self, conventions: dict, *, strict: bool) -> dict:
        opts = {}
        for key, val in conventions.items():
            if key in self.entry.options:
                opts[key] = val
            elif strict and key not in COMMON:
                raise InputError(f"{self.spec} takes no option {key!r}; it takes "
                                 f"{', '.join(self.entry.options + COMMON) or 'none'}")
        if self.entry.takes_k:
            opts["k"] = self.k
        if self.entry.fraction:
            opts["x"] = self.param
        return opts

    def values(self, prepared, conventions: dict | None = None, *, strict: bool = False):
        """Per-query ``(values, empty_mask)`` on already prepared input."""
        opts = self._options(conventions or {}, strict=strict)
        if "k" in opts:
            opts["k"] = check_k(opts["k"])
        if not self.entry.retrieval_aware:
            prepared = prepared.ranked_only()
        return self.entry.values(prepared, **opts)

    def __call__(self, scores, labels, *, qid=None, where=None, ties="average", empty=0.0,
                 reduction="mean", doc_ids=None, **conventions):
        opts = self._options(conventions, strict=True)
        return run_metric(self.entry.values, scores, labels, qid=qid, where=where, ties=ties, doc_ids=doc_ids,
                          empty=empty, reduction=reduction, **opts)


#: trec_eval's families with a cutoff, by lower-case name -> rankwise entry
_TREC_CUTS = {"p": "precision", "recall": "recall", "ndcg_cut": "ndcg", "map_cut": "map", "relative_p": "relative_p",
              "success": "success", "unj": "unj", "iprec_at_recall": "iprec_at_recall", "rprec_mult": "rprec_mult"}


def _number(text: str):
    try:
        return float(text) if text.replace(".", "", 1).isdigit() and text.isascii() else None
    except ValueError:  # pragma: no cover
        return None


def get_metric(spec) -> Metric:
    """Resolve ``"ndcg@10"``, ``"map"``, ``"P@5"``, ``"mrr@10"``... (case-insensitive).

    trec_eval's spellings resolve to the same measures: ``"P_5"`` and ``"P.5"`` are ``"P@5"``,
    ``"ndcg_cut_10"`` is ``"ndcg@10"``, ``"map_cut_100"`` is ``"map@100"``, ``"recip_rank"`` is
    ``"mrr"``, ``"iprec_at_recall_0.10"`` is ``"iprec_at_recall@0.1"``, ``"set_P"`` is
    ``"precision"`` (whole ranking).

    Raises
    ------
    InputError
        For an unknown name (the message lists the valid ones), a cutoff on a metric that takes
        none, or a cutoff that is not an integer >= 1 (a fraction in [0, 1] for the recall levels).
    """
    if isinstance(spec, Metric):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"a metric must be given as a string such as 'ndcg@10'; got {spec!r}")
    text = spec.strip().lower()
    name, sep, cut = text.partition("@")
    if not sep:  # trec_eval spellings: P_5, P.5, ndcg_cut_10, iprec_at_recall_0.10
        for mark in ("_", "."):
            head, s2, tail = text.rpartition(mark) if mark == "_" else text.partition(mark)
            if s2 and head in _TREC_CUTS and _number(tail) is not None:
                name, sep, cut = _TREC_CUTS[head], "@", tail
                break
    name = name.replace("-", "_")
    name = _ALIASES.get(name, name)
    entry = _ENTRIES.get(name)
    if entry is None:
        raise InputError(f"unknown metric {spec!r}; valid names: {', '.join(available_metrics())} "
                         f"(aliases: {', '.join(sorted(_ALIASES))}; trec_eval names such as P_5, ndcg_cut_10, "
                         "iprec_at_recall_0.10 and the groups all_trec / official); a cutoff is written like 'ndcg@10'")
    k = None
    param = None
    if sep:
        if not entry.takes_k:
            raise InputError(f"metric {name!r} takes no cutoff; got {spec!r}")
        if entry.fraction:
            x = _number(cut)
            if x is None or (name == "iprec_at_recall" and x > 1):
                raise InputError(f"the level in {spec!r} must be a number in [0, 1] (a fraction of R for "
                                 f"rprec_mult), as in '{name}@0.1'")
            param = x
        else:
            if not cut.isdigit() or not cut.isascii() or int(cut) < 1:
                raise InputError(f"the cutoff in {spec!r} must be an integer >= 1, as in '{name}@10'")
            k = int(cut)
    elif entry.trec_col is None and entry.trec_cut is not None:
        raise InputError(f"{spec!r} needs a cutoff, as in '{name}@{'0.1' if entry.fraction else '10'}' "
                         f"(trec_eval: '{entry.trec_cut_name}_{'0.10' if entry.fraction else '10'}')")
    return Metric(name, k, entry, param)


# ---------------------------------------------------------------------------- measures added by users

#: names added by :func:`register` (only these can be removed by :func:`unregister`)
_REGISTERED: set = set()
#: names a measure cannot take: trec_eval's groups and string measures, read before the registry
_RESERVED = ("runid", "relstring")


def _check_name(name) -> str:
    if not isinstance(name, str) or not name.isidentifier() or not name.isascii() or name != name.lower():
        raise InputError(f"a measure name must be a lower-case identifier such as 'my_measure' (its cutoff is "
                         f"written 'my_measure@10'); got {name!r}")
    clash = (f"a measure named {name!r} is already registered" if name in _ENTRIES
             else f"{name!r} is an alias of {_ALIASES[name]!r}" if name in _ALIASES
             else f"{name!r} is a trec_eval measure group" if name in GROUPS
             else f"{name!r} is reserved by trec_eval's output" if name.startswith(_RESERVED) else None)
    if clash:
        raise InputError(f"cannot register {name!r}: {clash}")
    return name


def _check_signature(name: str, fn, takes_k: bool, options: tuple) -> None:
    import inspect

    if not callable(fn):
        raise InputError(f"register({name!r}): fn must be callable as fn(labels{', *, k' if takes_k else ''}, ...); "
                         f"got {type(fn).__name__}")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise InputError(f"register({name!r}): cannot read the signature of {fn!r}; pass a Python function") from None
    P = inspect.Parameter
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    if not positional and not any(p.kind is P.VAR_POSITIONAL for p in params):
        raise InputError(f"register({name!r}): fn must take the labels of one query as its first argument")
    first = positional[0].name if positional else None  # the labels
    keywords = {p.name for p in params if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY) and p.name != first}
    var_kw = any(p.kind is P.VAR_KEYWORD for p in params)
    wanted = (("k",) if takes_k else ()) + options
    missing = [w for w in wanted if w not in keywords and not var_kw]
    if missing:
        raise InputError(f"register({name!r}): fn is called as fn(labels, {', '.join(f'{w}=...' for w in wanted)}) "
                         f"but takes no keyword {missing[0]!r}")
    given = {first, *wanted}
    required = [p.name for p in params if p.default is P.empty and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)
                and p.name not in given]
    if required:
        raise InputError(f"register({name!r}): fn requires {required[0]!r}, which the metrics never pass "
                         f"(it is called as fn(labels{''.join(f', {w}=...' for w in wanted)}))")


#: ties="average" on a registered measure: the distinct orders of a query's tied labels are enumerated
#: while (orders x query length) stays at most this; beyond it, a tie rule that breaks ties is asked for
_MAX_TIE_WORK = 2_000_000


def _distinct_orders(values: list) -> list:
    """Every distinct order of a multiset, in lexicographic order (the next-permutation algorithm)."""
    a = sorted(values)
    out = [tuple(a)]
    while True:
        i = len(a) - 2
        while i >= 0 and a[i] >= a[i + 1]:
            i -= 1
        if i < 0:
            return out
        j = len(a) - 1
        while a[j] <= a[i]:
            j -= 1
        a[i], a[j] = a[j], a[i]
        a[i + 1:] = reversed(a[i + 1:])
        out.append(tuple(a))


def _tie_orders(labels, gstart):
    """The rankings uniformly random tie-breaking gives, each equally likely: the product over tie
    groups of the distinct orders of the group's labels (every distinct order is reached by the same
    number of permutations of the items). None when there are too many to enumerate."""
    import itertools
    import math

    import numpy as np

    groups = np.split(labels, np.flatnonzero(gstart)[1:]) if len(labels) else []
    count = 1
    for g in groups:
        counts = np.unique(g, return_counts=True)[1]
        count *= math.factorial(len(g)) // math.prod(math.factorial(int(c)) for c in counts)
        if count * len(labels) > _MAX_TIE_WORK:
            return None
    per_group = [_distinct_orders(g.tolist()) for g in groups]
    return (np.array([x for part in order for x in part]) for order in itertools.product(*per_group))


def _user_values(name: str, fn, takes_k: bool):
    """The registry's values function of a measure given per query: ``fn(labels in rank order, ...)``;
    under ``ties="average"``, its mean over the orders of the tied labels."""
    import numpy as np

    def checked(v, i, prep):
        if v is None:
            return None
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not np.isfinite(v):
            qid = "" if prep.qids is None else f" (query id {prep.qids[i]})"
            raise InputError(f"measure {name!r} returned {v!r} on query {i}{qid}; it must return a finite "
                             "number, or None where it is undefined")
        return float(v)

    def values(prep, *, k=None, **options):
        off, y = prep.offsets, prep.labels
        out = np.zeros(prep.n_queries)
        empty = np.zeros(prep.n_queries, dtype=bool)
        kw = dict(options, k=k or None) if takes_k else options  # the kernels' k=0 is the whole list
        for i in range(prep.n_queries):
            a, b = off[i], off[i + 1]
            tied = not prep.singletons and not prep.gstart[a:b].all()
            orders = _tie_orders(y[a:b], prep.gstart[a:b]) if tied else [y[a:b].copy()]
            if orders is None:
                qid = "" if prep.qids is None else f" (query id {prep.qids[i]})"
                raise InputError(f"{name} (a registered measure) is averaged over the orders of tied scores, and "
                                 f"query {i}{qid} has too many to enumerate: pass ties='pessimistic', "
                                 "'optimistic', 'input' or 'docid'")
            vals = [checked(fn(order, **kw), i, prep) for order in orders]
            if any(v is None for v in vals):  # undefined on this query: the `empty` rule applies
                empty[i] = True
            else:
                out[i] = sum(vals) / len(vals)
        return out, empty
    return values


def register(name: str, fn, *, takes_k: bool = False, options=(), higher_is_better: bool = True) -> Metric:
    """Add a measure: from then on :func:`get_metric`, :func:`rankwise.metrics.evaluate` and the command
    line (``rankwise evaluate --metrics NAME@10``, in the same process) read its name like a built-in
    one. It is computed per query in Python.

    Parameters
    ----------
    name : str
        A lower-case identifier not yet taken by a measure, an alias or a trec_eval name.
    fn : callable
        ``fn(labels, *, k, **options) -> float | None``, called once per query with the labels of
        that query in rank order (descending score, ties broken by the ``ties`` rule; under
        ``ties="average"`` the value is the mean over every order of the tied labels, exact, and
        refused where there are too many orders to enumerate). ``k`` (the cutoff, None for the
        whole list) is passed when ``takes_k``; ``None`` marks a query on which the measure is
        undefined (``empty=`` decides its value). The measure sees the ranked documents only: judged
        documents a run did not retrieve (``evaluate(retrieved=...)``) are dropped before it.
    takes_k : bool
        Whether the measure takes a cutoff (``name@k``).
    options : tuple of str
        The conventions it takes, passed as keywords when given (e.g. ``("threshold",)``); each one
        an existing convention name (:data:`CONVENTIONS`).
    higher_is_better : bool

    Returns
    -------
    Metric
        The measure, whole list (callable like the built-ins: ``m(scores, labels, qid=q)``).

    Raises
    ------
    InputError
        For a name already taken, a bad name, or ``fn``'s signature not matching how it is called.
    """
    name = _check_name(name)
    if isinstance(options, str) or not all(isinstance(o, str) for o in options):
        raise InputError(f"register({name!r}): options must be a tuple of convention names; got {options!r}")
    options = tuple(options)
    bad = [o for o in options if o not in CONVENTIONS or o in COMMON]
    if bad:
        raise InputError(f"register({name!r}): {bad[0]!r} is not a measure convention; valid: "
                         f"{', '.join(c for c in CONVENTIONS if c not in COMMON)}")
    _check_signature(name, fn, bool(takes_k), options)
    _ENTRIES[name] = _Entry(name, _user_values(name, fn, bool(takes_k)), bool(takes_k), options,
                            higher_is_better=bool(higher_is_better), retrieval_aware=False)
    _REGISTERED.add(name)
    return get_metric(name)


def unregister(name: str) -> None:
    """Remove a measure added by :func:`register` (built-in measures cannot be removed)."""
    if name not in _REGISTERED:
        raise InputError(f"{name!r} was not added by rankwise.metrics.register; registered: {sorted(_REGISTERED)}")
    _REGISTERED.discard(name)
    del _ENTRIES[name]
