"""The trec_eval pass over runs given as dicts (``_trec_kernel.eval_dict_runs``, taken by
``evaluate_runs`` for ``{qid: {docno: score}}`` runs): qrels topic by qrels topic, each run's dict
of the topic walked just before the topic is evaluated, no Run built. Against the general path
(``Run.from_dict`` then ``eval_run``, what a Run object takes): the same tables, means, relstrings
and notes, bit for bit, under every option; the general path wherever the walk declines, with its
results and its refusals, for every run query (those without a topic in the qrels too), that run
alone; the same results on any number of workers.
"""
from __future__ import annotations

from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from rankwise.data.trec import Run
from rankwise.errors import InputError
from rankwise.metrics import evaluate_runs
from rankwise.metrics import trec as MT
from rankwise.metrics.registry import get_metric


def _collection(seed=5, n_topics=8, n_docs=120):
    """Qrels and two runs as users pass them: full-precision and tied scores, int scores, numpy
    float64 scores, ids of every length around the 8-byte words, an empty topic, a run query the
    qrels lack and a qrels topic the runs lack."""
    rng = np.random.default_rng(seed)
    qrels, runs = {}, {"a": {}, "b": {}}
    for t in range(n_topics):
        q = str(401 + t)
        pool = [f"{'FBIS3-' if i % 2 else 'LA'}{i:0{1 + i % 19}d}" for i in rng.choice(10 ** 6, 3 * n_docs, False)]
        grades = rng.integers(-1, 4, size=len(pool))
        judged = rng.random(len(pool)) < 0.5
        if t != 3:  # topic 404: in the runs, judged nowhere
            qrels[q] = {d: int(g) for d, g, j in zip(pool, grades, judged) if j}
        for name, run in runs.items():
            docs = rng.choice(len(pool), n_docs, replace=False)
            scores = rng.normal(size=n_docs) * 10.0 ** rng.integers(-8, 3)
            if name == "a" and t % 2 == 0:
                scores = np.round(scores, 1)  # ties: broken by docno
            if t == 5:
                run[q] = dict(zip([pool[i] for i in docs], scores))  # numpy.float64 values
            else:
                run[q] = {pool[i]: (int(round(s)) if k % 9 == 0 else float(s))
                          for k, (i, s) in enumerate(zip(docs, scores.tolist()))}
    qrels["999"] = {"LA1": 1, "LA2": 0}  # in the qrels only
    runs["a"]["401"] = dict(sorted(runs["a"]["401"].items(), key=lambda kv: -kv[1]))  # in rank order
    runs["b"]["402"] = {}
    return qrels, runs


OPTIONS = [{}, {"profile": "trec_eval9"}, {"judged_only": True}, {"max_docs": 17}, {"complete": True},
           {"complete": True, "judged_only": True}, {"relevance_level": 2}, {"rbp_p": 0.5, "n_docs_in_coll": 5000}]


@pytest.fixture
def spy(monkeypatch):
    """Records, for each run that the dict pass took, whether it evaluated it (True) or declined (False)."""
    calls = []

    def wrapped(*args):
        got = real(*args)
        calls.extend(g is not None for g in got)
        return got
    real = MT._dict_passes
    monkeypatch.setattr(MT, "_dict_passes", wrapped)
    return calls


def _same(walked, general, strings=False):
    assert walked.keys() == general.keys()
    for name in walked:
        w, g = walked[name], general[name]
        assert w.mean == g.mean
        assert w.per_query.equals(g.per_query)
        assert w.per_query.index.tolist() == g.per_query.index.tolist()
        assert w.conventions == g.conventions
        if strings:
            assert w.strings.keys() == g.strings.keys()
            for key in w.strings:
                assert w.strings[key].tolist() == g.strings[key].tolist()


@pytest.mark.parametrize("options", OPTIONS)
def test_the_dict_pass_equals_the_general_path_bit_for_bit(spy, options):
    qrels, runs = _collection()
    for metrics in ("all_trec", ["relstring", "relstring_40", "map", "P@5", "ndcg_cut_10", "iprec_at_recall_0.10"]):
        spy.clear()
        walked = evaluate_runs(qrels, runs, metrics, **options)
        assert spy == [True, True]  # both runs took the dict pass
        general = evaluate_runs(qrels, {n: Run.from_dict(r, name=n) for n, r in runs.items()}, metrics, **options)
        _same(walked, general, strings=metrics != "all_trec")


def test_the_dict_pass_equals_the_general_path_on_long_ids_and_long_topics(spy):
    rng = np.random.default_rng(11)
    ids = [f"{'long-id-' * int(rng.integers(1, 60))}{i}" for i in range(3000)]  # up to ~480 bytes an id
    run = {"1": {d: float(s) for d, s in zip(ids, np.round(rng.normal(size=3000), 2).tolist())},
           "2": {d: float(s) for d, s in zip(ids[::-7], rng.normal(size=3000).tolist())}}
    qrels = {q: {d: int(g) for d, g in zip(ids[::3], rng.integers(0, 3, 1000).tolist())} for q in run}
    walked = evaluate_runs(qrels, {"r": run}, "all_trec")
    assert spy == [True]
    _same(walked, evaluate_runs(qrels, {"r": Run.from_dict(run, name="r")}, "all_trec"))


class _OwnFloat(float):
    def __float__(self):
        return 99.0


class _Key(str):
    pass


@pytest.mark.parametrize("change", [
    lambda r: r["401"].update({"é-doc": 0.5}),  # a key beyond ASCII (walked by Run.from_dict)
    lambda r: r["401"].update({7: 0.5}),  # a key that is not a str
    lambda r: r["401"].update({_Key("sub"): 0.5}),  # a str subclass
    lambda r: r["401"].update({"x": True}),  # a bool, a float32, a float subclass: numpy's conversion
    lambda r: r["401"].update({"x": np.float32(0.25)}),
    lambda r: r["401"].update({"x": _OwnFloat(0.25)}),
    lambda r: r["401"].update({"x": 2 ** 70}),  # beyond 64 bits
    lambda r: r.__setitem__("401", OrderedDict(r["401"])),  # a dict subclass
    lambda r: r.__setitem__("404", dict(r["404"], odd=np.float32(1.5))),  # in a topic the qrels lack
    lambda r: r.__setitem__(402, r.pop("402")),  # a query id that is not a str
])
def test_the_general_path_takes_what_the_walk_declines(spy, change):
    qrels, runs = _collection()
    change(runs["a"])
    walked = evaluate_runs(qrels, runs, "all_trec")
    assert False in spy or spy == [True]  # run "a" declined (or, for a query id, never tried)
    _same(walked, evaluate_runs(qrels, {n: Run.from_dict(r, name=n) for n, r in runs.items()}, "all_trec"))


@pytest.mark.parametrize("topic", ["403", "404"])  # judged, and a run query the qrels lack
@pytest.mark.parametrize("bad, message", [
    ({"a\nb": 1.0}, "line break"),
    ({"ok": float("nan")}, "must be finite"),
    ({"ok": float("-inf")}, "must be finite"),
    ({"ok": None}, "must be finite"),
    ({"ok": "high"}, "must be numbers"),
    ({"a\ud800": 1.0}, "valid Unicode"),
    ([1.0, 2.0], "must be a dict"),  # a nested value that is not a dict
])
def test_refusals_are_the_general_paths_in_every_run_query(topic, bad, message):
    qrels, runs = _collection()
    run = runs["a"]
    run[topic] = dict(run[topic], **bad) if isinstance(bad, dict) else bad
    with pytest.raises(InputError, match=message):
        Run.from_dict(run)
    with pytest.raises(InputError, match=message):
        evaluate_runs(qrels, runs, "all_trec")


def test_no_topic_in_common_is_the_general_paths_message():
    qrels, runs = _collection()
    with pytest.raises(InputError, match="no query id in common"):
        evaluate_runs(qrels, {"r": {"nope": {"d": 1.0}}}, "all_trec")


def test_a_declined_run_leaves_the_others_of_the_pass_alone():
    """The walk declines a run on the first item it does not read, wherever it is (first topic,
    last topic, a run query without a topic): that run only, the general path then takes it."""
    qrels, runs = _collection()
    pq = MT.PreparedQrels(qrels)
    plan = MT._Plan([get_metric(m) for m in MT.expand_groups("all_trec")])
    q = pq.qrels
    args = (q.offsets, *pq.table, q.docs.buf, q.docs.s, *pq.levels, *pq.ideal, 10 ** 9, False, 1, plan.icuts,
            plan.icut_off, plan.fcuts, plan.fcut_off, 0.9, 1.0, MT._UTILITY, 0.0, False, 0)
    alone = MT._dict_passes(pq, [MT._dict_prep(pq, runs["b"], False)], args, (plan.icuts, plan.fcuts, 0), None, 1)
    for topic in ("401", "408", "404"):
        bad = {t: dict(d) for t, d in runs["a"].items()}
        bad[topic]["bad"] = float("nan")
        for workers in (1, 3):
            preps = [MT._dict_prep(pq, r, False) for r in (bad, runs["b"], bad)]
            with ThreadPoolExecutor(workers) as pool:
                got = MT._dict_passes(pq, preps, args, (plan.icuts, plan.fcuts, 0), pool, workers)
            assert got[0] is None and got[2] is None
            assert all(np.array_equal(x, y) for x, y in zip(got[1][4], alone[0][4]))


def test_any_number_of_workers_gives_the_same_results(monkeypatch, spy):
    qrels, runs = _collection()
    runs = {f"{n}{k}": r for k in range(4) for n, r in runs.items()}
    results = []
    for n in (1, 2, 3):
        monkeypatch.setenv("RANKWISE_NUM_THREADS", str(n))
        results.append(evaluate_runs(qrels, runs, "all_trec"))
    assert all(spy)
    for other in results[1:]:
        _same(results[0], other)


def test_a_line_break_anywhere_in_any_document_id_is_refused():
    # the walk hashes ids of 8 to 16 bytes from two word loads, others a word at a time: every
    # position of the break in every length around the words, in a judged topic
    qrels = {"1": {"abc": 1}}
    for length in range(1, 26):
        for at in range(length):
            key = "".join("\n" if i == at else "abcdefghijklmnopqrstuvwxyz"[i] for i in range(length))
            with pytest.raises(InputError, match="line break"):
                evaluate_runs(qrels, {"r": {"1": {"abc": 2.0, key: 1.0}}}, "map")
        key = "abcdefghijklmnopqrstuvwxyz"[:length]
        assert evaluate_runs(qrels, {"r": {"1": {"abc": 2.0, key + "x": 1.0}}}, "map")["r"].mean["map"] == 1.0
