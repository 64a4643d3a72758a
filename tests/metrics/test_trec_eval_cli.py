"""``rankwise trec_eval``: a trec_eval command line with the program name replaced prints the
trec_eval 10 binary's output line for line.

The binary is built from its C sources (``conftest.py``; skipped with a message where that is
not possible). The collection looks like a TREC one: graded qrels with -1 judgments, a topic
without relevant documents, runs with full-precision (``repr``) scores, some in scientific
notation, ties, a run topic without judgments, a judged topic some runs lack.
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from rankwise.cli.main import main


def _collection(tmp_path, seed=0):
    rng = np.random.default_rng(seed)
    qlines, rlines = [], []
    for t in range(14):
        q = str(401 + t)
        docs = [f"FBIS3-{t:02d}{i:04d}" for i in range(90)]
        grades = rng.choice([-1, 0, 0, 0, 1, 1, 2, 3], size=45)
        if t == 3:
            grades[:] = np.minimum(grades, 0)  # no relevant document
        qlines += [f"{q} 0 {d} {g}\n" for d, g in zip(docs[:45], grades.tolist())]
        ret = rng.choice(docs, size=int(rng.integers(20, 80)), replace=False)
        scores = rng.normal(size=len(ret)) * 10.0 ** rng.integers(-6, 3)
        if t % 4 == 0:
            scores = np.round(scores, 1)  # ties, broken by docno
        order = np.argsort(-scores, kind="stable")
        for k, i in enumerate(order.tolist(), start=1):
            v = float(scores[i])
            text = f"{v:.16e}" if k % 3 == 0 else repr(v)  # full precision, some scientific
            rlines.append(f"{q} Q0 {ret[i]} {k} {text} sys.v2\n")
    rlines.append("999 Q0 X-1 1 1.0000000000000002 sys.v2\n")  # a run topic without judgments
    qp, rp = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qp.write_text("".join(qlines))
    rp.write_text("".join(rlines))
    extra = tmp_path / "qrels_extra.txt"  # a judged topic the run lacks: trec_eval 10 needs -c
    extra.write_text("".join(qlines) + "500 0 FBIS4-1 1\n500 0 FBIS4-2 0\n")
    return qp, rp, extra


COMMAND_LINES = [
    [], ["-q"], ["-m", "all_trec"], ["-q", "-m", "all_trec"], ["-m", "P.5,10", "-m", "map"],
    ["-mP.10,5", "-mmap", "-q"], ["-m", "official", "-m", "all_trec", "-m", "P.5"],
    ["-q", "-m", "ndcg_cut.3,20", "-m", "recall.7", "-m", "iprec_at_recall.0.25,0.75", "-m", "Rprec_mult.0.5",
     "-m", "success.2", "-m", "relstring.15", "-m", "map_cut.1000,4"],
    ["-m", "set", "-n", "-q"], ["-n", "-m", "official"], ["-qJ", "-m", "all_trec"],
    ["-M", "25", "-l", "2", "-q", "-m", "all_trec"], ["-l2", "-M10", "-m", "official"],
    ["--measure=map", "--query_eval_wanted", "--level_for_rel=2", "--measure", "P.3"],
    ["-m", "map.5", "-m", "runid", "-m", "relstring"], ["-m", "unj", "-m", "utility", "-N", "1000", "-q"],
    ["-m", "gm_map", "-m", "gm_bpref", "-m", "num_q", "-q"], ["-m", "recip_rank", "-m", "relstring.10", "-q"],
]


@pytest.mark.parametrize("options", COMMAND_LINES, ids=[" ".join(o) or "default" for o in COMMAND_LINES])
def test_the_output_is_the_binarys_line_for_line(tmp_path, capsys, trec_eval_binary, options):
    qp, rp, _ = _collection(tmp_path)
    want = subprocess.run([str(trec_eval_binary), *options, str(qp), str(rp)], capture_output=True, text=True,
                          check=True).stdout
    assert main(["trec_eval", *options, str(qp), str(rp)]) == 0
    got = capsys.readouterr()
    assert got.out == want
    assert got.out or "-n" in options


@pytest.mark.parametrize("options", [["-c", "-q"], ["-c", "-J", "-q", "-m", "all_trec"], ["-qc", "-m", "official"]])
def test_complete_with_a_judged_topic_the_run_lacks(tmp_path, capsys, trec_eval_binary, options):
    qp, rp, extra = _collection(tmp_path, seed=1)
    want = subprocess.run([str(trec_eval_binary), *options, str(extra), str(rp)], capture_output=True, text=True,
                          check=True).stdout
    assert "\t500\t" in want
    assert main(["trec_eval", *options, str(extra), str(rp)]) == 0
    assert capsys.readouterr().out == want


def test_options_after_the_files_as_getopt_permutes_them(tmp_path, capsys, trec_eval_binary):
    qp, rp, _ = _collection(tmp_path, seed=2)
    cmd = [str(qp), str(rp), "-q", "-m", "P.5", "-m", "bpref"]
    want = subprocess.run([str(trec_eval_binary), *cmd], capture_output=True, text=True, check=True).stdout
    assert main(["trec_eval", *cmd]) == 0
    assert capsys.readouterr().out == want


def test_a_judged_topic_missing_from_the_run_stops_as_trec_eval_10_does(tmp_path, capsys, trec_eval_binary):
    qp, rp, extra = _collection(tmp_path)
    ref = subprocess.run([str(trec_eval_binary), "-m", "map", str(extra), str(rp)], capture_output=True, text=True)
    assert ref.returncode != 0 and "'500'" in ref.stderr
    assert main(["trec_eval", "-m", "map", str(extra), str(rp)]) == 2
    err = capsys.readouterr().err
    assert "judged topic '500' is not in the run" in err and "-c" in err


@pytest.mark.parametrize("options,message", [
    (["-Z", "zmeans.txt"], "option -Z zmeans.txt is not supported"),
    (["--Zscore=z.txt"], "option --Zscore z.txt is not supported"),
    (["-D", "3"], "option -D 3 is not supported"), (["-R", "prefs"], "option -R prefs is not supported"),
    (["-T", "tops"], "option -T tops"), (["-o"], "option -o is not supported"),
    (["-m", "prefs_simp"], "does not compute trec_eval's 'prefs_simp'"),
    (["-m", "dcg"], "does not compute trec_eval's 'dcg'"),
    (["-m", "all_prefs"], "does not compute"),
    (["-m", "utility.1,-1,0,0"], "utility with trec_eval's default parameters only"),
    (["-m", "ndcg.1=0,2=1"], "ndcg with trec_eval's default parameters only"),
    (["-m", "P.0"], "integers >= 1"), (["-m", "P.5,x"], "got 'x'"), (["-m", "P.5,5"], "duplicate cutoffs"),
    (["-m", "P."], "no parameters after '.'"), (["-m", "MAP"], "illegal measure 'MAP'"),
    (["-m", "relstring.0"], "relstring.0: the length must be an integer >= 1")])
def test_unsupported_options_and_measures_are_named(tmp_path, capsys, options, message):
    qp, rp, _ = _collection(tmp_path)
    assert main(["trec_eval", *options, str(qp), str(rp)]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_accepted_default_formats_and_usage_errors(tmp_path, capsys):
    qp, rp, _ = _collection(tmp_path)
    assert main(["trec_eval", "-R", "qrels", "-T", "trec_results", "-m", "map", str(qp), str(rp)]) == 0
    assert capsys.readouterr().out.startswith("map                   \tall\t")
    assert main(["trec_eval", "-m", "map", str(qp)]) == 2  # trec_eval takes exactly two files
    assert "run" in capsys.readouterr().err
    assert main(["trec_eval", "-q", "-x", str(qp), str(rp)]) == 2
    assert "-x" in capsys.readouterr().err
