"""Run fusion (rankwise.data.fusion) against ranx.fuse on Robust03-like runs, and against the
formulas written document by document (tests/reference/fusion_reference.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from rankwise.data import Run, read_trec_run, write_trec_run
from rankwise.data.fusion import FUSION_METHODS, fuse, fuse_scores
from rankwise.errors import InputError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import fusion_reference as ref  # noqa: E402

SCORE_NORMS = ["min-max", "max", "sum", "zmuv", None]
COMB = [m for m in FUSION_METHODS if m != "rrf"]
RANX_NAME = {"combsum": "sum", "combmnz": "mnz", "combmax": "max", "combmin": "min", "combmed": "med",
             "combanz": "anz", "rrf": "rrf"}


def robust_like_runs(n_runs=17, n_topics=5, seed=0):
    """Runs as TREC 2003 Robust participants wrote them: up to 1,000 documents of a topic's pool
    of 3,000 per run (some runs return fewer), each run retrieving its own subset; scores at full
    precision (BM25-like), negative log-probabilities (language models), tiny scores in
    scientific notation, and rounded scores with many ties."""
    rng = np.random.default_rng(seed)
    runs = [{} for _ in range(n_runs)]
    for t in range(n_topics):
        q = str(601 + t)
        cand = rng.choice(2_000_000, size=3000, replace=False)
        names = np.char.add(np.where(cand % 2 == 0, "FBIS3-", "LA0101-"), np.char.zfill(cand.astype(str), 7))
        quality = rng.normal(size=3000)
        for r in range(n_runs):
            s = quality * rng.uniform(0.3, 1.5) + rng.normal(size=3000)
            n = 1000 if rng.random() < 0.8 else int(rng.integers(5, 1000))
            top = np.argsort(-s, kind="stable")[:n]
            sc = s[top]
            if r % 4 == 0:
                sc = np.round(sc, 2)  # many ties
            elif r % 4 == 1:
                sc = -7e-3 * np.exp(-sc)  # negative scores
            elif r % 4 == 2:
                sc = 1e-5 * np.exp(sc)  # scientific notation
            else:
                sc = 10.0 + 3.0 * sc
            runs[r][q] = dict(zip(names[top].tolist(), sc.tolist()))
    return runs


def rank_scores(run: dict) -> dict:
    """The same ranking with distinct scores (minus the trec_eval rank): what ranx is given for the
    rank-based methods, whose ties ranx orders by numba's unstable quicksort."""
    return {q: {d: -float(i) for i, d in enumerate(ref.trec_order(docs))} for q, docs in run.items()}


def max_diff(ours: Run, theirs: dict) -> float:
    got = ours.to_dict()
    assert set(got) == set(theirs)
    worst = 0.0
    for q, docs in theirs.items():
        assert set(got[q]) == set(docs), q
        worst = max(worst, max(abs(got[q][d] - v) / max(1.0, abs(v)) for d, v in docs.items()))
    return worst


@pytest.fixture(scope="module")
def runs():
    return robust_like_runs()


@pytest.fixture(scope="module")
def ranx_runs(runs):
    ranx = pytest.importorskip("ranx")
    return ranx, [ranx.Run(r, name=f"r{i}") for i, r in enumerate(runs)], \
        [ranx.Run(rank_scores(r), name=f"r{i}") for i, r in enumerate(runs)]


@pytest.mark.parametrize("method", COMB)
@pytest.mark.parametrize("norm", SCORE_NORMS)
def test_score_fusion_equals_ranx(runs, ranx_runs, method, norm):
    ranx, rr, _ = ranx_runs
    theirs = ranx.fuse(rr, norm=norm, method=RANX_NAME[method]).to_dict()
    assert max_diff(fuse(runs, method=method, norm=norm), theirs) <= 1e-12


@pytest.mark.parametrize("method", COMB)
def test_rank_norm_fusion_equals_ranx_on_the_trec_eval_ranking(runs, ranx_runs, method):
    ranx, _, rr_ranks = ranx_runs
    theirs = ranx.fuse(rr_ranks, norm="rank", method=RANX_NAME[method]).to_dict()
    assert max_diff(fuse(runs, method=method, norm="rank"), theirs) <= 1e-12


@pytest.fixture(scope="module")
def ranx_borda(runs, ranx_runs):
    """ranx's Borda normalisation of two topics (ranx's borda_norm is slow: a list search per
    document), fused by each method without a further normalisation."""
    ranx, _, _ = ranx_runs
    from ranx.normalization import borda_norm

    two = [{q: r[q] for q in ("601", "602")} for r in runs]
    return two, borda_norm([ranx.Run(rank_scores(r)) for r in two])


@pytest.mark.parametrize("method", COMB)
def test_borda_fusion_equals_ranx_on_the_trec_eval_ranking(ranx_runs, ranx_borda, method):
    ranx, _, _ = ranx_runs
    two, normed = ranx_borda
    theirs = ranx.fuse(normed, norm=None, method=RANX_NAME[method]).to_dict()
    assert max_diff(fuse(two, method=method, norm="borda"), theirs) <= 1e-12


def test_rrf_equals_ranx_on_the_trec_eval_ranking(runs, ranx_runs):
    ranx, _, rr_ranks = ranx_runs
    theirs = ranx.fuse(rr_ranks, norm=None, method="rrf").to_dict()
    assert max_diff(fuse(runs, method="rrf"), theirs) <= 1e-12


def test_rrf_k_and_norms_that_keep_the_ranking(runs, ranx_runs):
    ranx, _, rr_ranks = ranx_runs
    theirs = ranx.fuse(rr_ranks, norm="min-max", method="rrf", params={"k": 10}).to_dict()
    for norm in ("min-max", "zmuv", "rank", None):
        assert max_diff(fuse(runs, method="rrf", norm=norm, k=10), theirs) <= 1e-12


def test_ties_follow_trec_eval_not_ranx(runs, ranx_runs):
    """Run 0 has tied scores: the rank-based fusions differ from ranx's there, only there."""
    ranx, rr, _ = ranx_runs
    ours = fuse(runs[:2], method="rrf").to_dict()
    theirs = ranx.fuse(rr[:2], method="rrf").to_dict()
    assert max(abs(ours[q][d] - v) for q in theirs for d, v in theirs[q].items()) > 1e-6
    expected = ref.fuse(runs[:2], "rrf", None)
    for q in expected:
        assert ours[q] == pytest.approx(expected[q], rel=1e-12, abs=0)


@pytest.mark.parametrize("method", FUSION_METHODS)
@pytest.mark.parametrize("norm", SCORE_NORMS + ["rank", "borda"])
@pytest.mark.parametrize("missing", ["skip", "zero"])
def test_matches_the_formulas(method, norm, missing):
    runs = robust_like_runs(n_runs=4, n_topics=3, seed=1)
    del runs[2]["602"]  # a run without a query: an empty ranking there
    runs[3]["699"] = {"LA0101-0000001": 1.5, "FBIS3-0000002": 1.5, "LA0101-0000003": 0.25}  # one run's query
    if method == "rrf" and norm == "borda":
        with pytest.raises(InputError, match="borda"):
            fuse(runs, method=method, norm=norm)
        return
    ours = fuse(runs, method=method, norm=norm, missing=missing).to_dict()
    expected = ref.fuse(runs, method, None if method == "rrf" else norm, missing=missing)
    assert list(ours) == list(expected)
    for q in expected:
        assert set(ours[q]) == set(expected[q])
        for d, v in expected[q].items():
            assert ours[q][d] == pytest.approx(v, rel=1e-12, abs=1e-12), (q, d)


def test_missing_zero_counts_a_document_a_run_missed_as_0():
    a = {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
    b = {"q": {"d1": 5.0, "d2": 1.0}}
    skip = fuse([a, b], method="combmin").to_dict()["q"]
    zero = fuse([a, b], method="combmin", missing="zero").to_dict()["q"]
    assert skip == {"d1": 1.0, "d2": 0.0, "d3": 0.0}  # min-max: a -> 1, 1/2, 0; b -> 1, 0
    assert zero == {"d1": 1.0, "d2": 0.0, "d3": 0.0}
    anz = fuse([a, b], method="combanz", missing="zero").to_dict()["q"]
    assert anz == {"d1": 1.0, "d2": 0.25, "d3": 0.0}
    assert fuse([a, b], method="combanz").to_dict()["q"] == {"d1": 1.0, "d2": 0.25, "d3": 0.0}
    c = {"q": {"d1": 1.0, "d3": 2.0, "d2": 0.0}}
    assert fuse([b, c], method="combanz").to_dict()["q"]["d3"] == 1.0
    assert fuse([b, c], method="combanz", missing="zero").to_dict()["q"]["d3"] == 0.5


def test_order_depth_and_trec_file_round_trip(runs, tmp_path):
    fused = fuse(runs, method="rrf", depth=100, name="rrf60")
    assert fused.name == "rrf60" and np.all(np.diff(fused.offsets) == 100)
    full = fuse(runs, method="rrf").to_dict()
    for q, docs in fused.to_dict().items():
        assert list(docs) == ref.trec_order(full[q])[:100]  # ties in RRF broken by docno, as trec_eval
    path = tmp_path / "fused.run"
    write_trec_run(fused, path, tag="rrf60")
    back = read_trec_run(path)
    assert back == fused.to_dict()
    assert path.read_text().splitlines()[0].split()[3:] == ["1", repr(float(fused.scores[0])), "rrf60"]


def test_reads_run_files_and_ranx_runs(runs, ranx_runs, tmp_path):
    _, rr, _ = ranx_runs
    paths = []
    for i, r in enumerate(runs[:3]):
        p = tmp_path / f"r{i}.run"
        write_trec_run({q: r[q] for q in list(r)[:2]}, p)
        paths.append(p)
    from_files = fuse(paths, method="combmnz").to_dict()
    from_dicts = fuse([{q: r[q] for q in list(r)[:2]} for r in runs[:3]], method="combmnz").to_dict()
    assert from_files == from_dicts
    assert max_diff(fuse(rr[:3], method="combsum"), fuse(runs[:3], method="combsum").to_dict()) == 0.0
    two = [{q: r[q] for q in list(r)[:2]} for r in runs[:2]]
    assert max_diff(fuse({"a": two[0], "b": paths[1]}, method="combsum"),
                    fuse(two, method="combsum").to_dict()) == 0.0
    assert max_diff(fuse({"a": two[0], "b": two[1]}, method="combsum"), fuse(two, method="combsum").to_dict()) == 0


@pytest.mark.parametrize("method", FUSION_METHODS)
@pytest.mark.parametrize("norm", ["min-max", "zmuv", "rank", "borda", None])
def test_score_arrays_equal_runs(method, norm):
    if method == "rrf" and norm == "borda":
        return
    rng = np.random.default_rng(3)
    n = 300
    qid = rng.integers(0, 7, n)  # queries interleaved
    scores = np.round(rng.normal(size=(3, n)), 1)  # ties, broken by row order
    present = rng.random((3, n)) < 0.7
    present[0, ~present.any(axis=0)] = True
    got = fuse_scores(scores, qid, present=present, method=method, norm=norm)
    # the same as runs whose docnos sort like the rows in reverse (earlier row = larger docno)
    docs = [f"d{n - i:04d}" for i in range(n)]
    runs = [{str(q): {docs[i]: scores[r, i] for i in np.flatnonzero(present[r] & (qid == q))} for q in range(7)}
            for r in range(3)]
    runs = [{q: d for q, d in run.items() if d} for run in runs]
    expected = fuse(runs, method=method, norm=norm).to_dict()
    np.testing.assert_allclose(got, [expected[str(qid[i])][docs[i]] for i in range(n)], rtol=1e-15, atol=0)


@pytest.mark.parametrize("kwargs,match", [
    ({"method": "borda"}, "method must be one of"),
    ({"norm": "l2"}, "norm must be None or one of"),
    ({"missing": "nan"}, "missing must be"),
    ({"k": -1}, "k \\(RRF\\)"),
    ({"k": float("nan")}, "k \\(RRF\\)"),
    ({"depth": 0}, "depth must be"),
    ({"method": "rrf", "norm": "borda"}, "does not apply"),
])
def test_bad_options(kwargs, match):
    a, b = {"q": {"d": 1.0}}, {"q": {"e": 2.0}}
    with pytest.raises(InputError, match=match):
        fuse([a, b], **kwargs)


def test_bad_inputs():
    a = {"q": {"d": 1.0}}
    with pytest.raises(InputError, match="at least 2 runs"):
        fuse([a])
    with pytest.raises(InputError, match="sequence of at least 2 runs"):
        fuse(a)
    with pytest.raises(InputError, match="runs\\[1\\].*finite"):
        fuse([a, {"q": {"d": float("nan")}}])
    with pytest.raises(InputError, match="every row must be retrieved"):
        fuse_scores(np.ones((2, 3)), [1, 1, 2], present=np.array([[1, 0, 1], [1, 0, 0]], dtype=bool))
    with pytest.raises(InputError, match="finite"):
        fuse_scores(np.array([[1.0, np.inf], [1.0, 2.0]]), [1, 1])
    with pytest.raises(InputError, match="qid must have one entry per row"):
        fuse_scores(np.ones((2, 3)), [1, 1])
    with pytest.raises(InputError, match="2-d array"):
        fuse_scores(np.ones(3), [1, 1, 1])


def test_max_norm_warns_on_lists_without_a_positive_score():
    a = {"q": {"d1": -1.0, "d2": -2.0}, "r": {"d1": 2.0}}
    b = {"q": {"d1": 3.0, "d3": 1.0}, "r": {"d2": 1.0}}
    with pytest.warns(UserWarning, match=r"in 1 of 4 \(run, query\) lists the largest score is <= 0"):
        fused = fuse([a, b], method="combsum", norm="max").to_dict()
    assert fused["q"]["d1"] == pytest.approx(-1e9 + 1.0)  # ranx's definition, said in the warning
