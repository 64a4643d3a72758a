"""Runs against qrels, with trec_eval's semantics: :func:`evaluate_runs` and the trec_eval measures.

The layer in front of the array metrics for IR evaluation. A :class:`~rankwise.data.Qrels` is
prepared once (documents hashed and sorted, judged grades counted per topic); each
:class:`~rankwise.data.Run` is joined to it by document hash, ranked as trec_eval ranks (score
descending, ties by docno descending; ``-M`` cut, ``-J`` filter), and every requested trec_eval
measure of a topic is computed in a few passes over that ranking (``_trec_kernel``).

trec_eval's semantics are built in: documents judged but not retrieved count in R and in the
ideal DCG; retrieved documents without a judgment are non-relevant (and "unjudged" for bpref,
infAP, unj, rbp_resid); a negative grade is "in the pool, not judged"; topics of the run without
judgments are ignored; topics of the qrels missing from the run are ignored, or scored as empty
rankings with ``complete=True`` (``-c``).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rankwise._validation import kernel_threads
from rankwise.errors import InputError
from rankwise.metrics._trec_kernel import (C_NUM_REL, C_NUM_RET, NONPOOL, UNJUDGED, dict_run_outputs, eval_dict_runs,
                                           eval_run, ideal_lists)
from rankwise.metrics._trec_measures import GROUPS, STRING_MEASURES, _Plan, _spec_list, expand_groups
from rankwise.metrics.evaluate import EvaluationResult

#: profiles evaluated by the trec_eval kernel (scores as doubles, or as float32 like trec_eval <= 9)
TREC_PROFILES = ("trec_eval", "trec_eval9")

#: measures whose trec_eval summary is a sum (printed as integers), and geometric means
SUMMED = {"num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"}
GEOMETRIC = {"gm_map", "gm_bpref"}


def prints_runid(metrics) -> bool:
    """trec_eval prints the ``runid`` line when it is asked for, alone or in a group."""
    return any(isinstance(m, str) and (m.strip() in GROUPS or m.strip() == "runid") for m in _spec_list(metrics))


#: trec_eval's default length of ``relstring`` (m_relstring.c)
RELSTRING_LEN = 10


def relstring_length(spec):
    """The length N of a ``relstring`` spec (``"relstring"`` = 10, ``"relstring_20"``,
    ``"relstring.20"``, ``"relstring@20"``), or None when ``spec`` is another measure.

    trec_eval's ``relstring`` is a string, not a number: one character per document of the
    first N ranked, ``0``-``9`` its grade, ``>`` a grade above 9, ``-`` a document absent from
    the qrels, ``.`` one judged -1 (in the pool, not judged). It has no summary value.
    """
    if not isinstance(spec, str):
        return None
    text = spec.strip()
    if text.lower() == "relstring":
        return RELSTRING_LEN
    head, tail = text[:9], text[10:]
    if head.lower() != "relstring" or len(text) < 11 or text[9] not in "_.@":
        return None
    if not (tail.isascii() and tail.isdigit() and int(tail) >= 1):
        raise InputError(f"the length in {spec!r} must be an integer >= 1, as in 'relstring_10'")
    return int(tail)


def _key(spec) -> str:
    """The result key of a measure spec: the string as given (stripped)."""
    from rankwise.metrics.registry import get_metric

    return spec.strip() if isinstance(spec, str) else get_metric(spec).spec


# ---------------------------------------------------------------------------- runs against qrels

def _as_qrels(qrels):
    from rankwise.data.trec import Qrels

    if isinstance(qrels, Qrels):
        return qrels
    if isinstance(qrels, (str, os.PathLike)):
        return Qrels.read(qrels)
    return Qrels.from_dict(qrels)


def _load_run(src, name=None):
    from rankwise.data.trec import Run

    if isinstance(src, Run):
        return src
    if isinstance(src, (str, os.PathLike)):
        return Run.read(src, name=name)
    return Run.from_dict(src, name=name)


def _as_runs(runs) -> dict:
    """``{name: source}`` (a path, a Run or a dict, loaded later by ``_load_run``)."""
    from rankwise.data.trec import Run

    if isinstance(runs, (str, os.PathLike, Run)):
        runs = [runs]
    if isinstance(runs, dict) and runs and all(isinstance(v, dict) for v in runs.values()) and \
            not all(isinstance(v2, dict) for v in runs.values() for v2 in list(v.values())[:1]):
        runs = [runs]  # one run in dict form {qid: {doc: score}}
    out = {}
    if isinstance(runs, dict):
        for k, v in runs.items():
            out[str(k)] = v
    else:
        for i, r in enumerate(runs):
            if isinstance(r, Run):
                name = r.name or f"run{i}"
            elif isinstance(r, (str, os.PathLike)):
                name = os.path.basename(os.fspath(r))
            else:
                name = getattr(r, "name", None) or f"run{i}"
            if name in out:
                raise InputError(f"two runs are named {name!r}; pass a dict {{name: run}} to name them")
            out[name] = r
    if not out:
        raise InputError("runs must name at least one run (paths, Run objects or dicts)")
    return out


class PreparedQrels:
    """A :class:`~rankwise.data.Qrels` made ready for many runs: judged grades counted per topic,
    and a hash table and a bit-set filter of each topic's judgments (built once, shared by every
    run; ``table`` = ``(t_off, slots, b_off, bits)``)."""

    def __init__(self, qrels):
        from rankwise.data import _trec_kernel as DK

        self.qrels = _as_qrels(qrels)
        self.levels = self.qrels.levels()
        d = self.qrels.docs
        self.table = DK.join_table(self.qrels.offsets, d.h, d.buf, d.s, d.e, self.qrels.rel) + \
            DK.join_filter(self.qrels.offsets, d.h)
        self.ideal = ideal_lists(*self.levels)

    def join(self, run):
        """Relevance of each run row (``NONPOOL`` when not in the qrels) and the qrels topic of
        each run query (-1 when the qrels lack it)."""
        from rankwise.data import _trec_kernel as DK

        q = self.qrels
        qmap = self.topic_map(run)
        rel = DK.join(run.offsets, run.docs.h, run.docs.buf, run.docs.s, run.docs.e, qmap, q.offsets, *self.table,
                      q.docs.buf, q.docs.s, NONPOOL, UNJUDGED)
        return rel, qmap

    def topic_map(self, run):
        """The qrels topic of each run query (-1 when the qrels lack it); checks the run."""
        index = self.qrels._index
        qmap = np.fromiter((index.get(x, -1) for x in run.qids), dtype=np.int64, count=len(run.qids))
        run.hash_order()  # no document twice in a topic
        return qmap


class RunEvaluation(EvaluationResult):
    """:class:`~rankwise.metrics.EvaluationResult` of one run, with trec_eval's string measures.

    Attributes
    ----------
    strings : dict
        Measure key -> pandas Series of ``str`` per topic (same index as ``per_query``) for the
        measures whose value is a string (``relstring``); they have no summary value and no
        column in ``per_query`` (which stays numeric).
    """

    def __init__(self, mean, per_query, conventions, strings=None, *, build=None, n_queries=None,
                 build_strings=None):
        super().__init__(mean, per_query, conventions, build=build, n_queries=n_queries)
        self._strings, self._build_strings = strings, build_strings

    @property
    def strings(self) -> dict:
        if self._strings is None:  # built on first access, as per_query (pandas is imported then)
            self._strings = {} if self._build_strings is None else self._build_strings()
            self._build_strings = None
        return self._strings


class _DictRun:
    """What ``evaluate_runs`` reads of a run that ``_dict_passes`` evaluated without building a Run."""

    __slots__ = ("qids", "tag")

    def __init__(self, qids):
        self.qids, self.tag = qids, None

    @property
    def n_queries(self) -> int:
        return len(self.qids)


def _dict_prep(pq, src, complete):
    """A run given as ``{qid: {docno: score}}`` with str query ids, made ready for ``eval_dict_runs``:
    ``(run, qmap, topics, run_of, dicts)``, or None where the general path must take it (other kinds
    of ids, no topic in common with the qrels: ``Run.from_dict`` then reads it or says what is
    wrong, where)."""
    if not isinstance(src, dict) or not src:
        return None
    qids = list(src)
    if not all(type(q) is str for q in qids):
        return None
    index = pq.qrels._index
    qmap = np.fromiter((index.get(x, -1) for x in qids), dtype=np.int64, count=len(qids))
    run = _DictRun(qids)
    topics, run_of = _topics(pq, run, qmap, complete)
    if len(topics) == 0:
        return None
    return run, qmap, topics, run_of, list(src.values())


def _dict_passes(pq, preps, args, shape, pool, workers):
    """``eval_dict_runs`` over the prepared dict runs ``preps`` (``_dict_prep``), qrels topic by
    qrels topic, the topics shared between ``workers`` threads of ``pool`` (None: this thread);
    ``args``: the kernel's arguments after the runs', ``shape``: ``(icuts, fcuts, rs_len)``.
    Returns, per run, ``(run, qmap, topics, run_of, (table, relstrings, lengths))``, or None for a
    run that the walk declined (a dict, key or score of another kind: the general path takes it)."""
    nq = pq.qrels.n_queries
    row_of = np.full((len(preps), nq), -1, dtype=np.int64)
    g_of = np.full((len(preps), nq), -1, dtype=np.int64)
    icuts, fcuts, rs_len = shape
    outs = []
    for r, (_, _, topics, run_of, _) in enumerate(preps):
        row_of[r, topics] = np.arange(len(topics))
        g_of[r, topics] = run_of
        outs.append(dict_run_outputs(len(topics), icuts, fcuts, rs_len))
    failed = np.zeros(len(preps), dtype=np.uint8)
    runs = [p[4] for p in preps]
    bounds = np.linspace(0, nq, max(1, min(workers, nq)) + 1).astype(np.int64).tolist()
    calls = [(runs, row_of, g_of, outs, failed, lo, hi, k == 0, tuple(args))
             for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))]
    if pool is None or len(calls) == 1:
        for c in calls:
            eval_dict_runs(*c)
    else:
        for f in [pool.submit(eval_dict_runs, *c) for c in calls]:
            f.result()
    return [None if failed[r] else (*p[:4], outs[r]) for r, p in enumerate(preps)]


def _topics(pq, run, qmap, complete):
    """Qrels topics to evaluate (in qrels order) and, for each, its run query (-1: absent)."""
    run_of = np.full(pq.qrels.n_queries, -1, dtype=np.int64)
    hit = qmap >= 0
    run_of[qmap[hit]] = np.flatnonzero(hit)
    topics = np.arange(pq.qrels.n_queries) if complete else np.flatnonzero(run_of >= 0)
    return topics, run_of[topics]


def _check_int(value, name, low):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < low:
        raise InputError(f"{name} must be an integer >= {low}; got {value!r}")
    return int(value)


def _nan_cells(metrics, keys, table, present, profile, judged_only):
    """``{key: row mask}`` of the cells where trec_eval prints ``nan`` and rankwise holds 0.

    trec_eval divides 0 by 0 in one place: the precision of an empty ranking that seeds
    ``iprec_at_recall`` at the levels whose number of relevant documents rounds to 0 (always
    level 0.0), and so ``11pt_avg``. A ranking is empty after ``-J`` when none of its documents
    is judged, for a run topic without documents, and for every topic the run lacks under
    ``-c -J`` (trec_eval scores such a topic as a ranking of one unjudged document, which
    ``-J`` removes)."""
    empty = (present & (table[:, C_NUM_RET] == 0)) | (~present & judged_only)
    out = {}
    if not empty.any():
        return out
    num_rel = table[:, C_NUM_REL]
    for key, m in zip(keys, metrics):
        if m.trec_base == "11pt_avg":
            out[key] = empty
        elif m.trec_base == "iprec_at_recall":
            x = float(m.param)
            cut = np.floor(x * num_rel + 0.9) if profile == "trec_eval9" else np.floor(x * num_rel + 0.5)
            out[key] = empty & (cut == 0)
    return {k: v for k, v in out.items() if v.any()}


def evaluate_runs(qrels, runs, metrics=("map", "ndcg@10", "P@10"), profile="trec_eval", *, complete=False,
                  relevance_level=1, max_docs=None, judged_only=False, n_docs_in_coll=0, rbp_p=0.9,
                  **conventions) -> dict:
    """Evaluate one or many runs against one set of judgments, as trec_eval does.

    .. math::

        \\text{for every run } r \\text{ and topic } q:\\quad
        m(q, r) = \\mathrm{measure}\\big(\\text{trec\\_eval ranking of } r_q,\\ \\text{qrels}_q\\big)

    Parameters
    ----------
    qrels : path, Qrels or dict
        A TREC qrels file (plain or ``.gz``), a :class:`~rankwise.data.Qrels`, or
        ``{qid: {docno: rel}}`` (pytrec_eval / ranx form). Prepared once for all runs.
    runs : path, Run, dict, or a list / dict of them
        Run files, :class:`~rankwise.data.Run` objects or ``{qid: {docno: score}}`` dicts; a dict
        ``{name: run}`` names them (otherwise file names, or ``run0``, ``run1``...).
    metrics : str or sequence of str
        Measure specs resolved by :func:`rankwise.metrics.get_metric`, in rankwise's spelling
        (``"P@5"``, ``"ndcg@10"``, ``"map"``) or trec_eval's (``"P_5"``, ``"ndcg_cut_10"``,
        ``"iprec_at_recall_0.10"``), trec_eval's groups ``"all_trec"``, ``"official"``, ``"set"``,
        and ``"relstring"`` / ``"relstring_N"`` (a string per topic, in ``.strings``).
    profile : str
        ``"trec_eval"`` (default: trec_eval 10, scores compared as doubles), ``"trec_eval9"``
        (scores compared as float32, as trec_eval <= 9 and pytrec_eval) or any array profile
        (``"ranx"``, ``"sklearn"``... or None with explicit ``conventions``): the run is then
        turned into arrays (judged-unretrieved documents included, as ``retrieved=False``) and
        evaluated by :func:`rankwise.metrics.evaluate`.
    complete : bool
        trec_eval ``-c``: every qrels topic counts; one the run lacks scores as an empty ranking.
        Default: topics in both (trec_eval 9 / pytrec_eval; trec_eval 10 stops with an error).
    relevance_level : int
        trec_eval ``-l``: grades >= this are relevant (binary measures; the gains of ndcg, G,
        rbp are the grades themselves).
    max_docs : int, optional
        trec_eval ``-M``: only the first ``max_docs`` ranked documents of a topic count.
    judged_only : bool
        trec_eval ``-J``: drop the ranked documents without a judgment before measuring.
    n_docs_in_coll : int
        trec_eval ``-N``, for ``utility``.
    rbp_p : float
        Persistence of ``rbp`` and ``rbp_resid`` (trec_eval's default 0.9).

    Returns
    -------
    dict
        Run name -> :class:`RunEvaluation` (an :class:`~rankwise.metrics.EvaluationResult`).
        ``.mean`` holds trec_eval's summary: the mean over topics, except ``num_*`` (sums) and
        ``gm_map`` / ``gm_bpref`` (geometric means of the per-topic values floored at 1e-5);
        ``.per_query`` one numeric row per topic (qrels order); ``.strings`` the string
        measures (``relstring``: a Series per key); ``.conventions`` the conventions in force,
        with ``runid`` and ``zero_where_trec_eval_nan``: ``{measure: [topics]}`` where
        trec_eval divides 0 by 0 and prints ``nan`` and rankwise holds 0 (the precision of an
        empty ranking in ``iprec_at_recall`` / ``11pt_avg``; empty when there is none).

    References
    ----------
    Buckley, C. and Voorhees, E. M. trec_eval 10.0 (NIST), measures as defined in its
    ``m_*.c`` files. Voorhees, E. M. and Harman, D. K. *TREC: Experiment and Evaluation in
    Information Retrieval*, MIT Press, 2005.
    """
    from rankwise.metrics.registry import get_metric

    specs = expand_groups(metrics, strings=True)
    if not specs:
        raise InputError("metrics must name at least one measure, e.g. ['map', 'P@10'] or 'all_trec'")
    keys = [_key(m) for m in specs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise InputError(f"metrics name {dup!r} twice; give each measure once")
    rs_lens = {k: relstring_length(m) for k, m in zip(keys, specs) if relstring_length(m) is not None}
    num_specs = [m for k, m in zip(keys, specs) if k not in rs_lens]
    num_keys = [k for k in keys if k not in rs_lens]
    resolved = [get_metric(m) for m in num_specs]
    relevance_level = _check_int(relevance_level, "relevance_level", -10**6)
    if max_docs is not None:
        max_docs = _check_int(max_docs, "max_docs", 1)
    if not (isinstance(rbp_p, (int, float)) and 0.0 < rbp_p < 1.0):
        raise InputError(f"rbp_p must be in (0, 1); got {rbp_p!r}")
    conv = {"profile": profile, "complete": bool(complete), "relevance_level": relevance_level,
            "max_docs": max_docs, "judged_only": bool(judged_only)}
    # the qrels are prepared once (on a worker, while another converts the first run: see below)
    pq_ready = qrels if isinstance(qrels, PreparedQrels) else None
    pq_future = None

    def prepared():
        return pq_ready if pq_future is None else pq_future.result()

    run_objs = _as_runs(runs)

    # the trec_eval kernel computes the trec_eval profiles' measures; anything else (other
    # profiles, or a measure trec_eval lacks such as err@10 or auc) goes through the array metrics
    trec_mode = profile in TREC_PROFILES and all(m.trec is not None for m in resolved) and not conventions
    if rs_lens and not trec_mode:
        raise InputError(f"{next(iter(rs_lens))!r} (trec_eval's relstring) is computed under the trec_eval "
                         "profiles only, with trec_eval's measures")
    if trec_mode:
        plan = _Plan(resolved)
        rs_len = max(rs_lens.values(), default=0)
        limit = np.iinfo(np.int64).max if max_docs is None else max_docs
        nan_note = ("trec_eval prints nan (0/0: the precision of an empty ranking in iprec_at_recall and "
                    "11pt_avg) for these {measure: [topics]}; rankwise holds 0 there")
        # per measure column: how its summary is taken (built once for every run)
        geo_cols = [c for c, m in enumerate(resolved) if m.trec_base in GEOMETRIC]
        sum_cols = np.array([m.trec_base in SUMMED for m in resolved], dtype=bool)
    by_topics = {}  # topics (bytes) -> (qids, summation order): the runs mostly share them

    def topic_labels(pq, topics):
        key = topics.tobytes()
        hit = by_topics.get(key)
        if hit is None:
            qids = [pq.qrels.qids[t] for t in topics.tolist()]
            # trec_eval sums the topics one by one in the order of their ids (as strings): so do
            # we, so that a summary printed with 4 decimals rounds the same way
            order = np.array(sorted(range(len(qids)), key=qids.__getitem__), dtype=np.int64)
            hit = by_topics[key] = (qids, order)
        return hit

    def trec_args(pq):  # the arguments of eval_run and eval_dict_runs after the run's own
        q = pq.qrels
        return (q.offsets, *pq.table, q.docs.buf, q.docs.s, *pq.levels, *pq.ideal, limit, bool(judged_only),
                relevance_level, plan.icuts, plan.icut_off, plan.fcuts, plan.fcut_off, float(rbp_p), 1.0, _UTILITY,
                float(n_docs_in_coll), profile == "trec_eval9", rs_len)

    walked = {}  # run name -> what _dict_passes gave

    def walk_dicts(pq, pool):  # the runs given as dicts, evaluated as they are walked (topic by topic)
        named = [(name, _dict_prep(pq, src, complete)) for name, src in items if isinstance(src, dict)]
        named = [(name, p) for name, p in named if p is not None]
        if named:
            got = _dict_passes(pq, [p for _, p in named], trec_args(pq), (plan.icuts, plan.fcuts, rs_len), pool,
                               workers)
            walked.update((name, g) for (name, _), g in zip(named, got) if g is not None)

    def one(item):
        name, src = item
        pq = prepared()
        got = walked.get(name)
        if got is not None:  # a plain {qid: {docno: score}} dict, evaluated as it was walked
            run, qmap, topics, run_of, (table_, rs, rs_n) = got
        else:
            run = _load_run(src, name=name)
            qmap = pq.topic_map(run)
            topics, run_of = _topics(pq, run, qmap, complete)
        if len(topics) == 0:
            raise InputError(f"run {name}: the run and the qrels have no query id in common (run: {run.n_queries} "
                             f"topics, e.g. {run.qids[:1]}; qrels: {pq.qrels.n_queries}, e.g. {pq.qrels.qids[:1]})")
        notes = dict(conv, topics=len(topics), run_topics_without_judgments=int((qmap < 0).sum()),
                     qrels_topics_missing_from_run=int((run_of < 0).sum()) if complete else
                     pq.qrels.n_queries - len(topics))
        qids, order = topic_labels(pq, topics)
        if not trec_mode:
            rel, _ = pq.join(run)
            return _evaluate_arrays(pq, run, rel, topics, run_of, num_specs, profile, conventions, notes, qids)
        if got is None:
            d = run.docs
            table_, rs, rs_n = eval_run(run.offsets, d.buf, d.s, d.e, d.h, run.scores, topics, run_of, *trec_args(pq))
        matrix = plan.matrix(table_)
        totals = np.cumsum(matrix[order], axis=0)[-1]
        n = len(matrix)
        values = np.where(sum_cols, totals, totals / n)
        for c in geo_cols:
            values[c] = np.exp(totals[c] / n)
            matrix[:, c] = np.exp(matrix[:, c])
        means = dict(zip(num_keys, values.tolist()))

        def frame():  # the per-topic table, built on first access (pandas is imported then)
            import pandas as pd

            return pd.DataFrame(matrix, index=pd.Index(qids, name="qid"), columns=pd.Index(num_keys), copy=False)
        nan_cells = _nan_cells(resolved, num_keys, table_, run_of >= 0, profile, bool(judged_only))
        notes["runid"] = run.tag or name
        notes["zero_where_trec_eval_nan"] = {k: [qids[i] for i in np.flatnonzero(v).tolist()]
                                             for k, v in nan_cells.items()}
        if nan_cells:
            notes["zero_where_trec_eval_nan_note"] = nan_note

        def strings():
            import pandas as pd

            out, codes, w = {}, rs.tobytes(), rs.shape[1]
            for key, length in rs_lens.items():
                out[key] = pd.Series([codes[i * w:i * w + min(length, int(k))].decode("ascii")
                                      for i, k in enumerate(rs_n.tolist())], index=pd.Index(qids, name="qid"),
                                     dtype=object)
            return out
        return RunEvaluation(means, None, notes, build=frame, n_queries=len(qids),
                             build_strings=strings if rs_lens else None)

    items = list(run_objs.items())
    # runs are independent and the kernels release the GIL: a few threads over the runs. Runs
    # given as plain dicts are evaluated first, all together, qrels topic by qrels topic
    # (eval_dict_runs: each run's dict of a topic walked under the GIL, then evaluated without
    # it, while the topic's join table is in cache), the topics shared between the workers; a
    # dict the walk declines is turned into a Run here, by this thread, and evaluated as a Run
    # by a worker. Files are read by the workers (their scanner releases the GIL).
    workers = min(len(items), kernel_threads(None))
    dicts = trec_mode and any(isinstance(src, dict) for _, src in items)
    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            if dicts:  # the dict runs first, their topics shared between the workers
                if pq_ready is None:
                    pq_ready = PreparedQrels(qrels)
                walk_dicts(pq_ready, pool)
            elif pq_ready is None:  # queued first: prepared while the first runs are converted
                pq_future = pool.submit(PreparedQrels, qrels)
            from rankwise.data.trec import Run

            futures = []
            for name, src in items:
                if not isinstance(src, (str, os.PathLike, Run)) and name not in walked:
                    src = _load_run(src, name=name)  # a dict the walk declined, a ranx.Run...: converted here
                futures.append(pool.submit(one, (name, src)))
            results = [f.result() for f in futures]
    else:
        if pq_ready is None:
            pq_ready = PreparedQrels(qrels)
        if dicts:
            walk_dicts(pq_ready, None)
        results = [one(item) for item in items]
    return {name: res for (name, _), res in zip(items, results)}


_UTILITY = np.array([1.0, -1.0, 0.0, 0.0])


def _evaluate_arrays(pq, run, rel, topics, run_of, specs, profile, conventions, notes, qids):
    """A run against qrels through the array metrics: retrieved rows, then judged-unretrieved rows. The per-query
    table (indexed by the topics' ``qids``) is built on first access, as :func:`evaluate`'s."""
    from rankwise.metrics.evaluate import evaluate

    q = pq.qrels
    if notes["max_docs"] is not None or notes["judged_only"]:
        raise InputError("max_docs (-M) and judged_only (-J) apply to trec_eval's measures under the trec_eval "
                         "profiles only")
    parts_s, parts_y, parts_q, parts_d, parts_r = [], [], [], [], []
    for t, r in zip(topics.tolist(), run_of.tolist()):
        a, b = int(q.offsets[t]), int(q.offsets[t + 1])
        qdocs = q.docs.h[a:b]
        if r >= 0:
            ra, rb = int(run.offsets[r]), int(run.offsets[r + 1])
            s = run.scores[ra:rb]
            y = np.maximum(rel[ra:rb], 0)
            ids = run.docs.strings(ra, rb)
            seen = np.isin(qdocs, run.docs.h[ra:rb])
        else:
            s, y, ids, seen = np.zeros(0), np.zeros(0, np.int64), [], np.zeros(b - a, dtype=bool)
        rest = np.flatnonzero(~seen) + a
        parts_s += [s, np.full(len(rest), (s.min() if len(s) else 0.0) - 1.0)]
        parts_y += [y, np.maximum(q.rel[rest], 0)]
        parts_q.append(np.full(len(s) + len(rest), q.qids[t], dtype=object))
        parts_d += [np.asarray(ids, dtype=object), np.asarray([q.docs.string(int(x)) for x in rest], dtype=object)]
        parts_r += [np.ones(len(s), bool), np.zeros(len(rest), bool)]
    scores = np.concatenate(parts_s)
    res = evaluate(scores, np.concatenate(parts_y).astype(np.float64), np.concatenate(parts_q), metrics=specs,
                   profile=profile, doc_ids=np.concatenate(parts_d), retrieved=np.concatenate(parts_r),
                   **conventions)
    build = res._build  # evaluate() defers its table; this one gets the topics' ids when it is built

    def indexed():
        import pandas as pd

        table = build()
        table.index = pd.Index(qids, name="qid")
        return table

    res._build = indexed
    res.conventions.update(notes)
    return res


# ---------------------------------------------------------------------------- trec_eval output

def _trec_name(key, metric) -> str:
    return metric.trec_spec if metric.trec is not None else key


def _nan_text(value) -> str:
    """trec_eval's ``%6.4f`` of its 0/0 (x86's default NaN has the sign bit set: ``-nan``)."""
    return f"{'-nan':>6}"


def format_trec_eval(results: dict, metrics, *, per_query=False, run_names=None, file=None, summary=True) -> str:
    """trec_eval's text output (``measure<TAB>topic<TAB>value``; ``all`` for the summary).

    With several runs, every line starts with the run's name and a tab. Values print as
    trec_eval prints them: ``%6.4f``, integers for the counts, ``relstring`` quoted (``-q``
    only), ``-nan`` where trec_eval divides 0 by 0 (the cells listed in the result's
    ``conventions["zero_where_trec_eval_nan"]``, which hold 0), and the ``runid`` line when
    ``metrics`` asks for it (``"runid"`` or a group); topics in ``-q`` output are sorted as
    trec_eval sorts them (by id, as strings). ``summary=False`` leaves out the summary lines
    (``all``, ``runid`` included), as trec_eval ``-n``. ``relstring`` prints as ``relstring`` when
    asked for by that name, else as ``relstring_N`` (trec_eval's ``-m relstring.N``).
    """
    from rankwise.metrics.registry import get_metric

    specs = expand_groups(metrics, strings=True)
    show_runid = prints_runid(metrics)
    lines = []
    many = len(results) > 1 if run_names is None else run_names
    width = 22
    cols = []  # (key, label, base, relstring length or None)
    for spec in specs:
        key = _key(spec)
        length = relstring_length(spec)
        if length is not None:
            plain = spec.strip().lower() == "relstring"
            cols.append((key, "relstring" if plain else f"relstring_{length}", None, length))
        else:
            m = get_metric(spec)
            cols.append((key, _trec_name(key, m), m.trec_base, None))
    for name, res in results.items():
        prefix = f"{name}\t" if many else ""
        nan_at = res.conventions.get("zero_where_trec_eval_nan") or {}
        # per topic only (relstring has no summary line): the summary alone never builds them (nor imports pandas)
        strings = getattr(res, "strings", {}) if per_query else {}

        def fmt(label, topic, value, base, nan=False):
            if nan:
                return f"{prefix}{label:<{width}}\t{topic}\t{_nan_text(value)}"
            if base in SUMMED:
                return f"{prefix}{label:<{width}}\t{topic}\t{int(round(value))}"
            return f"{prefix}{label:<{width}}\t{topic}\t{value:6.4f}"

        if per_query:
            frame = res.per_query
            topics = [str(t) for t in frame.index]
            order = sorted(range(len(topics)), key=topics.__getitem__)
            values = {key: frame[key].to_numpy() for key, _, _, length in cols if length is None}
            nan_sets = {key: set(v) for key, v in nan_at.items()}
            for i in order:
                topic = topics[i]
                for key, label, base, length in cols:
                    if length is not None:
                        lines.append(f"{prefix}{label:<{width}}\t{topic}\t'{strings[key].iloc[i]}'")
                        continue
                    if base in GEOMETRIC or base == "num_q":
                        continue  # trec_eval prints these in the summary only
                    lines.append(fmt(label, topic, float(values[key][i]), base, topic in nan_sets.get(key, ())))
        if not summary:
            continue
        runid = res.conventions.get("runid")
        if runid is not None and show_runid:
            lines.append(f"{prefix}{'runid':<{width}}\tall\t{runid}")
        for key, label, base, length in cols:
            if length is None:  # relstring has no summary line
                lines.append(fmt(label, "all", res.mean[key], base, key in nan_at))
    text = "\n".join(lines) + "\n" if lines else ""
    if file is not None:
        file.write(text)
    return text


def describe_conventions(profile, conv: dict) -> str:
    """One line saying which conventions were in force (printed by the CLI)."""
    if profile in TREC_PROFILES:
        scores = "doubles (trec_eval 10)" if profile == "trec_eval" else "float32 (trec_eval <= 9, pytrec_eval)"
        ties = conv.get("ties", "docid")
        gain = conv.get("gain", "linear")
        parts = [f"profile {profile}: ranked by score ({scores}), "
                 + ("ties by docno descending" if ties == "docid" else f"ties={ties} (overridden)"),
                 f"relevant = grade >= {conv.get('relevance_level', 1)}",
                 "gain = grade" if gain == "linear" else f"gain={gain} (overridden)", "unjudged = non-relevant"]
        parts.append("topics: every qrels topic (-c)" if conv.get("complete") else "topics: in both run and qrels")
        if conv.get("max_docs") is not None:
            parts.append(f"at most {conv['max_docs']} documents per topic (-M)")
        if conv.get("judged_only"):
            parts.append("judged documents only (-J)")
        return "; ".join(parts)
    shown = {k: v for k, v in conv.items() if k in ("gain", "discount", "ties", "empty", "threshold",
                                                    "ap_denominator", "complete")}
    return f"profile {profile}: " + ", ".join(f"{k}={v}" for k, v in shown.items())


__all__ = ["evaluate_runs", "format_trec_eval", "expand_groups", "GROUPS", "STRING_MEASURES", "PreparedQrels", "RunEvaluation",
           "describe_conventions", "relstring_length"]
