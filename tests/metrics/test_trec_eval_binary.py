"""trec_eval's string measure ``relstring`` and its 0/0 cells (``nan``), against the trec_eval 10
binary itself and a brute-force reference.

The binary is built from its C sources once per session (the ``trec_eval_binary`` fixture of
``conftest.py``); the tests that need it skip with a message where the sources or a C compiler
are absent. The reference for ``relstring`` sorts each topic in plain Python (score descending, then docno descending) and writes trec_eval's
characters (m_relstring.c).
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from rankwise.cli.main import main
from rankwise.errors import InputError
from rankwise.metrics import evaluate_runs, format_trec_eval
from rankwise.metrics.trec import relstring_length

def _collection(seed=3):
    """Qrels and one run with every case relstring and the 0/0 cells have: ties, -1 judgments,
    a grade above 9, a topic without relevant documents, a topic whose retrieved documents are
    all unjudged (empty under -J), a run topic without judgments."""
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for t in range(8):
        q = str(10 + t)
        docs = [f"d{t}x{i:02d}" for i in range(30)]
        grades = rng.choice([-1, 0, 0, 1, 2, 3, 12], size=20)
        if t == 2:
            grades[:] = 0  # no relevant document
        qrels[q] = {d: int(g) for d, g in zip(docs[:20], grades)}
        pool = docs[20:] if t == 5 else docs  # topic 15: nothing retrieved is judged
        ret = rng.choice(pool, size=min(len(pool), int(rng.integers(6, 25))), replace=False)
        run[q] = {d: float(np.round(rng.normal(), 1)) for d in ret}  # rounding: ties
    run["99"] = {"z1": 1.0}
    return qrels, run


def _write(tmp_path, qrels, run):
    qp, rp = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qp.write_text("".join(f"{q} 0 {d} {r}\n" for q, docs in qrels.items() for d, r in docs.items()))
    rp.write_text("".join(f"{q} Q0 {d} {k} {s!r} tag\n" for q, docs in run.items()
                          for k, (d, s) in enumerate(docs.items(), start=1)))
    return qp, rp


def _reference_relstring(qrels, docs, length, max_docs=None, judged_only=False):
    """m_relstring.c on a ranking sorted in plain Python."""
    ranked = sorted(docs, reverse=True)  # docno descending, then (stable) score descending
    ranked = sorted(ranked, key=lambda d: -docs[d])[:max_docs]
    rels = [qrels.get(d, "nonpool") for d in ranked]
    if judged_only:
        rels = [r for r in rels if r != "nonpool" and r >= 0]
    chars = {"nonpool": "-"}
    return "".join(chars.get(r) or (">" if r > 9 else str(r) if r >= 0 else ".") for r in rels[:length])


@pytest.mark.parametrize("options", [[], ["-J"], ["-c"], ["-c", "-J"], ["-M", "4"], ["-l", "2"]],
                         ids=["default", "J", "c", "cJ", "M4", "l2"])
def test_trec_eval_format_equals_the_binary_line_for_line(tmp_path, capsys, trec_eval_binary, options):
    qrels, run = _collection()
    if "-c" in options:
        qrels["50"] = {"a": 1, "b": 0}  # a judged topic the run lacks (trec_eval 10 needs -c for it)
    qp, rp = _write(tmp_path, qrels, run)
    want = subprocess.run([str(trec_eval_binary), "-q", *options, "-m", "all_trec", str(qp), str(rp)],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    assert main(["evaluate", "--qrels", str(qp), "-q", *options, "--format", "trec_eval", str(rp)]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == want
    assert any(line.startswith("relstring") for line in got)
    if "-J" in options:  # topic 15 is empty under -J: trec_eval's 0/0
        assert any(line.endswith("\t15\t  -nan") for line in want)


def test_a_run_in_rank_order_with_tied_scores_equals_the_binary(tmp_path, capsys, trec_eval_binary):
    # run files are usually written in rank order: the ranking then checks the order and sorts
    # only the groups of tied scores by docno (here left in a shuffled order)
    qrels, run = _collection(seed=5)
    rng = np.random.default_rng(0)
    for q, docs in run.items():
        items = list(docs.items())
        rng.shuffle(items)
        run[q] = dict(sorted(items, key=lambda kv: -kv[1]))  # stable: ties stay shuffled
    qp, rp = _write(tmp_path, qrels, run)
    want = subprocess.run([str(trec_eval_binary), "-q", "-m", "all_trec", str(qp), str(rp)],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    assert main(["evaluate", "--qrels", str(qp), "-q", "--format", "trec_eval", str(rp)]) == 0
    assert capsys.readouterr().out.splitlines() == want
    res = evaluate_runs(qrels, {"r": run}, ["relstring_30"])["r"]
    for q in res.per_query.index:
        assert res.strings["relstring_30"][q] == _reference_relstring(qrels[q], run[q], 30)


def _strictly_descending(seed):
    """``_collection``'s qrels and a run in rank order with distinct full-precision scores (a
    sprinkling in scientific notation's range): the ranking is the rows' own order."""
    qrels, run = _collection(seed=seed)
    rng = np.random.default_rng(seed)
    for q, docs in run.items():
        scores = np.sort(rng.normal(size=len(docs)) * 10.0 ** rng.integers(-8, 8))[::-1]
        assert np.all(np.diff(scores) < 0)
        run[q] = dict(zip(docs, scores.tolist()))
    return qrels, run


@pytest.mark.parametrize("options", [[], ["-M", "7"], ["-J"], ["-c"]], ids=["default", "M7", "J", "c"])
def test_a_run_in_rank_order_without_ties_equals_the_binary(tmp_path, capsys, trec_eval_binary, options):
    # the ranking pass takes such a run's rows as they come (no sort): the binary decides
    qrels, run = _strictly_descending(seed=11)
    if "-c" in options:
        qrels["50"] = {"a": 1, "b": 0}
    qp, rp = _write(tmp_path, qrels, run)
    want = subprocess.run([str(trec_eval_binary), "-q", *options, "-m", "all_trec", str(qp), str(rp)],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    assert main(["evaluate", "--qrels", str(qp), "-q", *options, "--format", "trec_eval", str(rp)]) == 0
    assert capsys.readouterr().out.splitlines() == want


def test_a_run_in_rank_order_and_the_same_run_shuffled_evaluate_alike():
    qrels, run = _strictly_descending(seed=12)
    rng = np.random.default_rng(1)
    shuffled = {q: dict([list(docs.items())[i] for i in rng.permutation(len(docs))]) for q, docs in run.items()}
    for kw in ({}, {"profile": "trec_eval9"}, {"max_docs": 5}, {"judged_only": True}):
        a = evaluate_runs(qrels, {"r": run}, "all_trec", **kw)["r"]
        b = evaluate_runs(qrels, {"r": shuffled}, "all_trec", **kw)["r"]
        assert a.mean == b.mean and a.per_query.equals(b.per_query), kw
        assert a.strings["relstring"].tolist() == b.strings["relstring"].tolist()


def test_relstring_lengths_and_python_api_against_a_reference(tmp_path, trec_eval_binary):
    qrels, run = _collection(seed=4)
    qp, rp = _write(tmp_path, qrels, run)
    for opts, kw in [([], {}), (["-M", "3"], {"max_docs": 3}), (["-J"], {"judged_only": True})]:
        res = evaluate_runs(qrels, {"r": run}, ["relstring", "relstring_25", "map"], **kw)["r"]
        assert list(res.per_query.columns) == ["map"] and "relstring" not in res.mean  # a string, no summary
        for q in res.per_query.index:
            for key, n in (("relstring", 10), ("relstring_25", 25)):
                assert res.strings[key][q] == _reference_relstring(qrels[q], run[q], n, kw.get("max_docs"),
                                                                   kw.get("judged_only", False)), (opts, key, q)
        want = subprocess.run([str(trec_eval_binary), "-q", *opts, "-m", "relstring.25", str(qp), str(rp)],
                              capture_output=True, text=True, check=True).stdout
        assert format_trec_eval({"r": res}, ["relstring_25"], per_query=True) == want


def test_zero_where_trec_eval_gives_nan_is_explicit():
    qrels = {"1": {"a": 1, "b": 0, "c": 2}, "2": {"a": 0}, "3": {"x": 1}}
    run = {"1": {"a": 1.0, "z": 2.0}, "2": {"zz": 1.0}, "3": {}}  # topic 3: an empty ranking
    res = evaluate_runs(qrels, {"r": run}, ["iprec_at_recall_0.00", "iprec_at_recall_0.50", "11pt_avg", "P_5"],
                        judged_only=True)["r"]
    nan_at = res.conventions["zero_where_trec_eval_nan"]
    # under -J topic 2 has nothing left (R = 0: every level rounds to 0 documents); topic 3 had
    # nothing (R = 1: level 0.5 needs lround(0.5) = 1 document, so only level 0.0 is 0/0)
    assert nan_at == {"iprec_at_recall_0.00": ["2", "3"], "iprec_at_recall_0.50": ["2"], "11pt_avg": ["2", "3"]}
    assert res.per_query.loc[["2", "3"], "iprec_at_recall_0.00"].tolist() == [0.0, 0.0]
    assert not res.per_query.isna().any().any() and "rankwise holds 0" in res.conventions[
        "zero_where_trec_eval_nan_note"]
    text = format_trec_eval({"r": res}, ["iprec_at_recall_0.00", "P_5"], per_query=True).splitlines()
    assert "iprec_at_recall_0.00  \t2\t  -nan" in text and "iprec_at_recall_0.00  \tall\t  -nan" in text
    assert "P_5                   \tall\t0.0667" in text
    plain = evaluate_runs(qrels, {"r": {"1": run["1"]}}, ["11pt_avg"])["r"]
    assert plain.conventions["zero_where_trec_eval_nan"] == {}


def test_relstring_spellings_and_errors():
    assert relstring_length("relstring") == 10
    assert relstring_length("relstring_20") == relstring_length("relstring.20") == 20
    assert relstring_length("relstring@20") == 20
    assert relstring_length("map") is None and relstring_length("relstringx") is None
    with pytest.raises(InputError, match="integer >= 1"):
        relstring_length("relstring_0")
    qrels, run = {"1": {"a": 1}}, {"1": {"a": 1.0}}
    with pytest.raises(InputError, match="relstring"):
        evaluate_runs(qrels, {"r": run}, ["relstring"], profile="ranx")
