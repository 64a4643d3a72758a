"""TREC runs against qrels: every trec_eval measure against pytrec_eval and hand-worked cases.

pytrec_eval (trec_eval 9 inside, scores as float32) is the oracle for the measures it has;
rbp, rbp_resid and unj (trec_eval 10 only) are checked by hand-worked cases written from
trec_eval's definitions. Collections are generated with score ties, -1 judgments, judged
documents never retrieved, and topics missing on either side.
"""
from __future__ import annotations

import gzip
import math

import numpy as np
import pytest
import pytrec_eval

from rankwise.data import Qrels, Run
from rankwise.errors import InputError, ParseError
from rankwise.metrics import evaluate, evaluate_runs, format_trec_eval, get_metric
from rankwise.metrics.trec import GROUPS

EPS = 1e-5  # trec_eval's INFAP_EPSILON


def _collection(seed=0, n_topics=12, n_runs=3):
    rng = np.random.default_rng(seed)
    qrels, runs = {}, [{} for _ in range(n_runs)]
    for t in range(n_topics):
        q = f"{100 + t}"
        docs = [f"D{t}-{i:03d}" for i in range(60)]
        grades = rng.choice([-1, 0, 0, 0, 1, 1, 2, 3], size=40)
        if t == 3:
            grades[:] = 0  # a topic without relevant documents
        qrels[q] = {d: int(g) for d, g in zip(docs[:40], grades)}  # docs 40..59 never judged
        for r, run in enumerate(runs):
            if t == 5 and r == 0:
                continue  # topic missing from one run
            ret = rng.choice(docs, size=int(rng.integers(10, 50)), replace=False)
            base = rng.normal(size=len(ret)) + (r + 1) * np.array([max(qrels[q].get(d, 0), 0) for d in ret])
            run[q] = {d: float(np.round(s, 1)) for d, s in zip(ret, base)}  # rounding: many ties
    for run in runs:
        run["999"] = {"X1": 1.0, "X2": 0.5}  # a topic without judgments
    qrels["777"] = {"Z1": 1, "Z2": 0}  # a judged topic no run has
    return qrels, runs


PYTREC = sorted(set(pytrec_eval.supported_measures) - {"relstring", "runid"})


@pytest.mark.parametrize("options", [{}, {"relevance_level": 2}, {"judged_only": True}],
                         ids=["default", "l2", "J"])
def test_every_measure_equals_pytrec_eval(options):
    qrels, runs = _collection()
    ev = pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC), relevance_level=options.get("relevance_level", 1),
                                        judged_docs_only_flag=options.get("judged_only", False))
    results = evaluate_runs(qrels, {f"r{i}": r for i, r in enumerate(runs)}, "all_trec", profile="trec_eval9",
                            **options)
    names = [n for n in GROUPS["all_trec"] if not n.startswith(("rbp", "unj"))]
    for i, run in enumerate(runs):
        ref = ev.evaluate(run)
        ours = results[f"r{i}"].per_query
        assert sorted(ours.index) == sorted(ref)  # topics in both: 777, 999 and (run 0) 105 left out
        for name in names:
            for q in ref:
                want = ref[q][name]
                if name.startswith("gm_"):
                    want = math.exp(want)  # pytrec_eval gives the log of each topic's value
                assert ours.loc[q, name] == pytest.approx(want, abs=1e-12), (i, name, q)
        for name in ("map", "P_10", "ndcg_cut_10", "bpref", "iprec_at_recall_0.50"):
            assert results[f"r{i}"].mean[name] == pytest.approx(np.mean([ref[q][name] for q in ref]), abs=1e-12)
        assert results[f"r{i}"].mean["num_rel_ret"] == sum(ref[q]["num_rel_ret"] for q in ref)
        gm = math.exp(np.mean([ref[q]["gm_map"] for q in ref]))
        assert results[f"r{i}"].mean["gm_map"] == pytest.approx(gm, rel=1e-12)


def test_files_dicts_frames_and_gzip_agree(tmp_path):
    qrels, runs = _collection(seed=1)
    qpath = tmp_path / "qrels.txt"
    qpath.write_text("# judgments\n" + "".join(f"{q}\t0\t{d}\t{r}\n" for q, docs in qrels.items()
                                             for d, r in docs.items()))
    paths = []
    for i, run in enumerate(runs):
        text = "".join(f"{q} Q0 {d} {k} {s!r} tag{i} extra column\n" for q, docs in run.items()
                       for k, (d, s) in enumerate(docs.items(), start=1))
        p = tmp_path / f"run{i}.gz"
        p.write_bytes(gzip.compress(text.encode()))
        paths.append(p)
    from_files = evaluate_runs(qpath, paths, "all_trec")
    from_dicts = evaluate_runs(qrels, {p.name: r for p, r in zip(paths, runs)}, "all_trec")
    import pandas as pd

    frame = pd.DataFrame([(q, d, s) for q, docs in runs[0].items() for d, s in docs.items()],
                         columns=["q_id", "doc_id", "score"])
    from_frame = evaluate_runs(Qrels.from_dict(qrels), {"run0.gz": Run.from_pandas(frame)}, "all_trec")
    for name in from_files:
        assert from_files[name].mean == from_dicts[name].mean
        assert from_files[name].conventions["runid"] == f"tag{paths.index(tmp_path / name)}"
    assert from_frame["run0.gz"].mean == from_files["run0.gz"].mean
    assert Qrels.read(qpath).to_dict() == qrels and Run.read(paths[1]).to_dict() == runs[1]


def _toy():
    qrels = {"1": {"a": 1, "b": 0, "c": 2}, "2": {"x": 1}, "3": {"y": -1, "z": 1}}
    run = {"1": {"a": 0.5, "d": 0.5, "c": 0.1}, "3": {"y": 2.0, "w": 1.0}}
    return qrels, run


def test_hand_worked_topic_with_a_tie_and_an_unjudged_document():
    qrels, run = _toy()
    res = evaluate_runs(qrels, {"r": run}, "all_trec")["r"].per_query.loc["1"]
    # ties by docno descending: d (not judged) before a; then c. R = 2 (a: 1, c: 2), one judged non-relevant (b)
    assert res["map"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert res["Rprec"] == pytest.approx(1 / 2)
    assert res["recip_rank"] == pytest.approx(1 / 2)
    assert res["bpref"] == pytest.approx(1.0)  # no judged non-relevant document above a relevant one
    inf2 = 1 / 3 + (2 / 3) * (1 / 2) * ((1 + EPS) / (1 + 2 * EPS))
    assert res["infAP"] == pytest.approx((1 / 2 + inf2) / 2)
    assert res["ndcg"] == pytest.approx((1 / math.log2(3) + 2 / 2) / (2 + 1 / math.log2(3)))
    assert res["P_5"] == pytest.approx(2 / 5) and res["recall_5"] == pytest.approx(1.0)
    assert res["success_1"] == 0 and res["success_5"] == 1
    assert res["num_nonrel_judged_ret"] == 0 and res["num_ret"] == 3 and res["num_rel"] == 2
    assert res["set_F"] == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    assert res["unj_5"] == pytest.approx(1 / 5)
    p = 0.9  # rbp: gains scaled by the top grade 2; ranks 2 and 3
    assert res["rbp"] == pytest.approx((1 - p) * (0.5 * p + 1.0 * p ** 2))
    assert res["rbp_resid"] == pytest.approx(p ** 3 + (1 - p) * 1.0)
    # binG: a relevant at rank i discounted by log2(2 + i - #relevant so far)
    assert res["binG"] == pytest.approx((1 / math.log2(3 + 1 - 1) + 1 / math.log2(3 + 2 - 2)) / 2)


def test_minus_one_judgments_missing_topics_and_complete():
    qrels, run = _toy()
    r = evaluate_runs(qrels, {"r": run}, "all_trec")["r"]
    t3 = r.per_query.loc["3"]  # y judged -1 (in the pool, not judged), w not in the qrels
    assert t3["num_rel"] == 1 and t3["map"] == 0 and t3["bpref"] == 0
    assert t3["num_nonrel_judged_ret"] == 0 and t3["unj_5"] == pytest.approx(2 / 5)
    assert t3["rbp_resid"] == pytest.approx(0.9 ** 2 + 0.1 * (1 + 0.9))
    assert list(r.per_query.index) == ["1", "3"] and r.conventions["qrels_topics_missing_from_run"] == 1
    full = evaluate_runs(qrels, {"r": run}, ["map", "gm_map", "num_q", "num_rel", "num_ret"], complete=True)["r"]
    assert list(full.per_query.index) == ["1", "2", "3"]
    assert full.per_query.loc["2"].tolist() == pytest.approx([0.0, 1e-5, 1.0, 1.0, 0.0], rel=1e-12)
    assert full.mean["map"] == pytest.approx(r.per_query["map"].sum() / 3)
    assert full.mean["num_q"] == 3
    gm = math.exp((math.log(r.per_query.loc["1", "map"]) + 2 * math.log(1e-5)) / 3)
    assert full.mean["gm_map"] == pytest.approx(gm)
    judged = evaluate_runs(qrels, {"r": run}, ["num_ret", "P_5", "bpref"], judged_only=True)["r"].per_query
    assert judged.loc["1", "num_ret"] == 2 and judged.loc["3", "num_ret"] == 0  # -J drops d; y (-1) and w
    assert judged.loc["1", "P_5"] == pytest.approx(2 / 5)


def test_max_docs_equals_truncating_the_run():
    qrels, runs = _collection(seed=2)
    m = 7
    cut = {}
    for q, docs in runs[1].items():  # trec_eval order: score descending, docno descending
        order = sorted(docs.items(), key=lambda kv: (-kv[1], [-ord(c) for c in kv[0]]))
        cut[q] = dict(order[:m])
    a = evaluate_runs(qrels, {"r": runs[1]}, "all_trec", max_docs=m)["r"]
    b = evaluate_runs(qrels, {"r": cut}, "all_trec")["r"]
    assert a.mean == b.mean


def test_trec_eval9_compares_scores_as_float32_and_trec_eval_as_doubles():
    qrels = {"1": {"a": 1, "b": 0}}
    run = {"1": {"a": 1.0, "b": 1.0 + 1e-12}}  # equal in float32: the tie goes to the larger docno, b
    t10 = evaluate_runs(qrels, {"r": run}, ["recip_rank"], profile="trec_eval")["r"].mean["recip_rank"]
    t9 = evaluate_runs(qrels, {"r": run}, ["recip_rank"], profile="trec_eval9")["r"].mean["recip_rank"]
    assert t10 == 0.5 and t9 == 0.5
    run = {"1": {"b": 1.0, "a": 1.0 + 1e-12}}  # a is above b as doubles only
    assert evaluate_runs(qrels, {"r": run}, ["recip_rank"], profile="trec_eval")["r"].mean["recip_rank"] == 1.0
    assert evaluate_runs(qrels, {"r": run}, ["recip_rank"], profile="trec_eval9")["r"].mean["recip_rank"] == 0.5
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)["1"]["recip_rank"]
    assert ref == 0.5


def test_trec_names_resolve_to_the_same_measures():
    assert get_metric("P_5").spec == get_metric("P@5").spec == get_metric("p.5").spec == "precision@5"
    assert get_metric("ndcg_cut_10").spec == "ndcg@10" and get_metric("map_cut_100").spec == "map@100"
    assert get_metric("recip_rank").spec == "mrr" and get_metric("set_P").spec == "precision"
    assert get_metric("iprec_at_recall_0.10").trec_spec == "iprec_at_recall_0.10"
    assert get_metric("ndcg@10").trec_spec == "ndcg_cut_10" and get_metric("P@5").trec_spec == "P_5"
    with pytest.raises(InputError, match="needs a cutoff"):
        get_metric("success")
    with pytest.raises(InputError, match="in \\[0, 1\\]"):
        get_metric("iprec_at_recall@2")


def test_other_profiles_and_non_trec_measures_go_through_the_array_metrics():
    qrels, runs = _collection(seed=3)
    res = evaluate_runs(qrels, {"r": runs[0]}, ["ndcg@10", "err@10", "auc"], profile="trec_eval")["r"]
    assert set(res.mean) == {"ndcg@10", "err@10", "auc"}
    trec = evaluate_runs(qrels, {"r": runs[0]}, ["ndcg@10", "map"], profile="trec_eval")["r"]
    assert res.mean["ndcg@10"] == pytest.approx(trec.mean["ndcg@10"], abs=1e-12)
    ranx_like = evaluate_runs(qrels, {"r": runs[0]}, ["ndcg@10"], profile=None, gain="exp2", ties="average")["r"]
    assert ranx_like.conventions["gain"] == "exp2"
    with pytest.raises(InputError, match="-M"):
        evaluate_runs(qrels, {"r": runs[0]}, ["auc"], max_docs=3)


def test_trec_measures_in_evaluate_on_arrays():
    qrels, run = _toy()
    ref = evaluate_runs(qrels, {"r": run}, ["bpref", "Rprec", "P_5"])["r"].per_query
    # topic 1 as arrays: retrieved rows in trec order, then the judged row the run missed (b)
    s = np.array([0.5, 0.5, 0.1, 0.0])
    y = np.array([0, 1, 2, 0])
    got = evaluate(s, y, np.array(["1"] * 4), ["bpref", "Rprec", "P_5"], ties="docid", doc_ids=["d", "a", "c", "b"],
                   retrieved=np.array([True, True, True, False]), score_precision="float64")
    # the arrays API has no "unjudged": d (label 0) is judged non-relevant here, so bpref drops
    assert got.mean["Rprec"] == ref.loc["1", "Rprec"] and got.mean["P_5"] == ref.loc["1", "P_5"]
    assert got.mean["bpref"] == pytest.approx(1 - 1 / 2 * (1 / 1) - 0.0 + 0.0) or got.mean["bpref"] == 0.5
    with pytest.raises(InputError, match="one ranking"):
        evaluate(np.array([1.0, 1.0]), np.array([1, 0]), np.array([1, 1]), ["bpref"])


def test_trec_eval_output_format():
    qrels, run = _toy()
    res = evaluate_runs(qrels, {"r": run}, "official")
    text = format_trec_eval(res, "official", per_query=True)
    lines = text.splitlines()
    assert lines[0].split("\t") == ["num_ret".ljust(22), "1", "3"]
    assert "runid                 \tall\tr" in lines
    assert "num_q                 \tall\t2" in lines
    assert f"map                   \tall\t{res['r'].mean['map']:6.4f}" in lines
    assert not any(line.startswith("gm_map") and "\t1\t" in line for line in lines)  # summary only
    two = format_trec_eval({"a": res["r"], "b": res["r"]}, "official")
    assert all(line.split("\t")[0] in ("a", "b") for line in two.splitlines())


@pytest.mark.parametrize("content,needle", [
    (b"1 0 a 1\r2 0 b 1\r", ":1: a carriage return"),
    (b"1 0 a 1\r\n2 0 b 1\n", ":2: mixed line endings"),
    (b"\xef\xbb\xbf1 0 a 1\n", ":1: the file starts with a UTF-8 byte-order mark"),
    (b"1 0 a\x00b 1\n", ":1: control byte 0x00"),
    ("1 0 a \u0661\n".encode(), ":1: relevance '\u0661' is not an integer"),
    ("1 0 a \uff11\n".encode(), ":1: relevance '\uff11' is not an integer"),
    (b"1 0 a 1_0\n", ":1: relevance '1_0' is not an integer"),
    (b"1 0 a 9223372036854775808\n", ":1: relevance '9223372036854775808' is not an integer"),
    (b"1 0 a 2000000\n", ":1: relevance '2000000' is out of range"),
    (b"1 0 a 1\n1 0 a 0\n", ":2: document 'a' of query '1' is judged twice"),
    (b"1 0 a \xff\n", ":1: not valid UTF-8"),
])
def test_qrels_reader_rejects_invalid_input(tmp_path, content, needle):
    p = tmp_path / "q.txt"
    p.write_bytes(content)
    with pytest.raises(ParseError, match=f"^{p}{needle}".replace("\\", "\\\\").replace("(", "\\(")):
        Qrels.read(p)


@pytest.mark.parametrize("content,needle", [
    (b"1 Q0 a 1 1_0 t\n", ":1: score '1_0' is not a number"),
    ("1 Q0 a 1 \u0661 t\n".encode(), ":1: score '\u0661' is not a number"),
    (b"1 Q0 a 1 inf t\n", ":1: score 'inf' is not finite"),
    (b"1 Q0 a 1 1e999 t\n", ":1: score '1e999' is out of the range"),
    (b"1 Q0 a 99999999999999999999 1 t\n", ":1: rank '99999999999999999999' is not an integer"),
    (b"1 Q0 a 1 1 t\n1 Q0 a 2 0 t\n", ":2: document 'a' appears twice for query '1'"),
])
def test_run_reader_rejects_invalid_input(tmp_path, content, needle):
    p = tmp_path / "r.txt"
    p.write_bytes(content)
    with pytest.raises(ParseError, match=f"^{p}{needle}"):
        Run.read(p)


def test_corrupt_gzip_is_a_parse_error(tmp_path):
    data = gzip.compress(b"1 Q0 a 1 1.0 t\n" * 1000)
    for bad in (data[:len(data) // 2], data[:10] + bytes(len(data) - 10)):
        p = tmp_path / "r.gz"
        p.write_bytes(bad)
        with pytest.raises(ParseError, match="corrupt gzip"):
            Run.read(p)


def test_accepted_forms_comments_extra_columns_and_exact_scores(tmp_path):
    p = tmp_path / "r.txt"
    p.write_text("# a comment\n\n1\tQ0\ta\t1\t0.1\ttag\tmore\n1 Q0 b 2 -2.5e-3 tag\n1 Q0 c 3 "
                 "0.30000000000000004441 tag\n")
    run = Run.read(p)
    assert run.to_dict() == {"1": {"a": 0.1, "b": -2.5e-3, "c": float("0.30000000000000004441")}}
    assert run.tag == "tag"


def test_evaluate_without_qid_warns_and_qid_none_opts_in():
    s, y = np.array([0.3, 0.2, 0.1]), np.array([0, 1, 2])
    with pytest.warns(UserWarning, match="no qid: all 3 rows are scored as ONE query"):
        evaluate(s, y, metrics=["ndcg@10"])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        evaluate(s, y, None, metrics=["ndcg@10"])
        evaluate(s[None, :], y[None, :], metrics=["ndcg@10"])  # padded input carries its queries


def test_cli_evaluates_many_runs_in_trec_eval_format(tmp_path, capsys):
    from rankwise.cli.main import main

    qrels, runs = _collection(seed=4)
    (tmp_path / "q.txt").write_text("".join(f"{q} 0 {d} {r}\n" for q, docs in qrels.items() for d, r in docs.items()))
    paths = []
    for i, run in enumerate(runs):
        p = tmp_path / f"r{i}.txt"
        p.write_text("".join(f"{q} Q0 {d} 1 {s!r} t{i}\n" for q, docs in run.items() for d, s in docs.items()))
        paths.append(str(p))
    assert main(["evaluate", "--qrels", str(tmp_path / "q.txt"), "--format", "trec_eval", "--per-query", *paths]) == 0
    out, err = capsys.readouterr()
    assert "profile trec_eval" in err and "ties by docno descending" in err and "gain = grade" in err
    # conventions overridden on the command line: the stderr line names them (it said trec_eval's before)
    assert main(["evaluate", "--qrels", str(tmp_path / "q.txt"), "--convention", "gain=exp2", "--convention",
                 "ties=average", paths[0]]) == 0
    _, err2 = capsys.readouterr()
    assert "ties=average (overridden)" in err2 and "gain=exp2 (overridden)" in err2
    assert "docno descending" not in err2 and "gain = grade" not in err2
    api = evaluate_runs(str(tmp_path / "q.txt"), paths, "all_trec")
    lines = out.splitlines()
    for i, p in enumerate(paths):
        name = p.rsplit("/", 1)[-1]
        want = f"{name}\tmap                   \tall\t{api[name].mean['map']:6.4f}"
        assert want in lines
        assert f"{name}\tP_10                  \t101\t{api[name].per_query.loc['101', 'P_10']:6.4f}" in lines
    assert all((tmp_path / f"r{i}.txt").read_text().startswith("1") for i in range(3))  # no run overwritten


def test_dict_run_keys_merged_by_str_are_duplicates_and_str_keys_skip_the_check():
    qrels = {"1": {"7": 1, "8": 0}}
    with pytest.raises(InputError, match="'7' appears twice"):
        evaluate_runs(qrels, {"r": {"1": {7: 0.5, "7": 0.4}}}, "map")
    run = Run.from_dict({"1": {"7": 0.5, "9": 0.4}})
    assert run._checked  # distinct str keys of one dict: nothing to check
    assert evaluate_runs(qrels, {"r": run}, "map")["r"].mean["map"] == 1.0


def _ids(words):
    """A buffer of ids joined by newlines, their spans and hashes (the TREC reader's)."""
    from rankwise.data import _trec_kernel as DK

    buf = np.frombuffer("\n".join(words).encode(), dtype=np.uint8)
    s, e, h = DK.split_hash(buf)
    return buf, s, e, h


def test_join_table_probes_every_topic_and_joins_only_equal_bytes():
    from rankwise.data import _trec_kernel as DK

    # two topics; the same docno in both with different grades; enough docs to wrap the table
    j_words = [f"d{i}" for i in range(50)] + ["d0", "x"]
    j_off = np.array([0, 50, 52], dtype=np.int64)
    j_rel = np.array(list(range(50)) + [7, -1], dtype=np.int64)
    jb, js, je, jh = _ids(j_words)
    t_off, table = DK.join_table(j_off, jh, jb, js, je, j_rel)
    assert np.count_nonzero(table[:, 3]) == 52  # occupied slots
    r_words = ["d0", "d49", "zz", "x", "d0", "d3"]
    r_off = np.array([0, 3, 6], dtype=np.int64)
    rb, rs, re_, rh = _ids(r_words)
    qmap = np.array([0, 1], dtype=np.int64)
    args = (qmap, j_off, t_off, table, *DK.join_filter(j_off, jh), jb, js, -9, -8)
    assert DK.join(r_off, rh, rb, rs, re_, *args).tolist() == [0, 49, -9, -8, 7, -9]
    # a forged hash equal to a judged document's, other bytes: the hash only picks candidates
    rh2 = rh.copy()
    rh2[2] = jh[5]
    assert DK.join(r_off, rh2, rb, rs, re_, *args).tolist() == [0, 49, -9, -8, 7, -9]
    # every judged document of a topic with the same hash: still joined by its bytes
    same = np.full(50, jh[0])
    t_off1, table1 = DK.join_table(j_off[:2], same, jb, js, je, j_rel)
    got = DK.join(np.array([0, 3]), np.full(3, jh[0]), rb, rs, re_, qmap[:1], j_off[:2], t_off1, table1,
                  *DK.join_filter(j_off[:2], same), jb, js, -9, -8)
    assert got.tolist() == [0, 49, -9]


def test_eval_run_joins_by_bytes_under_forged_hashes_and_long_docnos():
    """The trec_eval pass probes the qrels' tables itself: a hash only picks candidates, documents
    longer than 16 bytes are compared past their first 16, and equal hashes never join different ids."""
    from rankwise.data import _trec_kernel as DK
    from rankwise.data.trec import grade_levels
    from rankwise.metrics import _trec_kernel as TK
    from rankwise.metrics._trec_measures import _Plan
    from rankwise.metrics.trec import _UTILITY

    stem = "LA010190-0000000000"  # 19 bytes: ids differ only past the first 16
    j_words = [f"{stem}{i}" for i in range(30)] + ["short", f"{stem}1x"]
    grades = [i % 4 for i in range(30)] + [2, -1]
    j_off = np.array([0, len(j_words)], dtype=np.int64)
    j_rel = np.array(grades, dtype=np.int64)
    jb, js, je, jh = _ids(j_words)
    r_words = [f"{stem}{i}" for i in (3, 33, 7, 1)] + [f"{stem}1x", "short", "shorter", f"{stem}"]
    rb, rs, re_, rh = _ids(r_words)
    scores = -np.arange(len(r_words), dtype=np.float64)  # ranked as given
    truth = dict(zip(j_words, grades))
    expect = "".join("-" if w not in truth else ("." if truth[w] < 0 else str(truth[w])) for w in r_words)
    plan = _Plan([get_metric("map")])
    levels = grade_levels(j_off, j_rel)

    def relstring(j_hash, r_hash):
        table = DK.join_table(j_off, j_hash, jb, js, je, j_rel) + DK.join_filter(j_off, j_hash)
        _, rs_codes, rs_n = TK.eval_run(
            np.array([0, len(r_words)]), rb, rs, re_, r_hash, scores, np.array([0]), np.array([0]), j_off, *table,
            jb, js, *levels, *TK.ideal_lists(*levels), np.iinfo(np.int64).max, False, 1, plan.icuts, plan.icut_off,
            plan.fcuts, plan.fcut_off, 0.9, 1.0, _UTILITY, 0.0, False, 20)
        return rs_codes[0, :rs_n[0]].tobytes().decode()

    assert relstring(jh, rh) == expect == "3-31.2--"
    assert relstring(np.full_like(jh, jh[0]), np.full_like(rh, jh[0])) == expect  # one hash for every id
    forged = rh.copy()
    forged[1] = jh[3]  # an unjudged id with a judged id's hash
    forged[7] = jh[0]
    assert relstring(jh, forged) == expect


def test_run_workers_follow_kernel_threads_and_never_change_the_results(monkeypatch):
    """evaluate_runs spreads runs over rankwise.kernel_threads() workers (RANKWISE_NUM_THREADS here);
    every thread count gives the same doubles."""
    import rankwise.metrics.trec as T

    qrels, runs = _collection(seed=4, n_runs=5)
    named = {f"r{i}": r for i, r in enumerate(runs)}
    pools = []
    real = T.ThreadPoolExecutor

    def spy(max_workers):
        pools.append(max_workers)
        return real(max_workers=max_workers)

    monkeypatch.setattr(T, "ThreadPoolExecutor", spy)
    out = {}
    for n in (1, 3):
        monkeypatch.setenv("RANKWISE_NUM_THREADS", str(n))
        out[n] = evaluate_runs(qrels, named, "all_trec", complete=True)
    assert pools == [3]  # one worker: no pool; three: a pool of three
    for name in named:
        a, b = out[1][name], out[3][name]
        assert a.mean == b.mean
        assert np.array_equal(a.per_query.to_numpy().view(np.uint64), b.per_query.to_numpy().view(np.uint64))
