"""Invariants over every registered metric, and the bad-input contract."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval
from hypothesis import given, settings, strategies as st

import rankwise.metrics as M
from rankwise.errors import InputError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import metrics_reference as ref  # noqa: E402

SPECS = ["ndcg", "ndcg@3", "dcg@3", "err@3", "map", "map@3", "P@3", "recall@3", "mrr", "auc",
         "kendall_tau", "spearman", "pairwise_accuracy", "pairwise_cost"]
BOUNDED = [s for s in SPECS if not s.startswith(("dcg", "pairwise_cost"))]
TIES = ["average", "input", "pessimistic", "optimistic", "docid", "ranx"]


def test_registry_covers_every_measure():
    assert {"ndcg", "dcg", "err", "map", "precision", "recall", "mrr", "auc", "kendall_tau", "spearman",
            "pairwise_accuracy", "pairwise_cost"} <= set(M.available_metrics())
    # every trec_eval measure of all_trec resolves, and prints under its trec_eval name
    for name in M.GROUPS["all_trec"]:
        assert M.get_metric(name).trec_spec == name
    assert M.get_metric("NDCG@10").spec == "ndcg@10"
    assert M.get_metric("P@5").name == "precision"
    assert M.get_metric("recip_rank").name == "mrr"
    assert M.get_metric("pairwise_cost").higher_is_better is False


@pytest.mark.parametrize("bad, match", [("ndgc@10", "unknown metric 'ndgc@10'; valid names: 11pt_avg, auc"),
                                        ("ndcg@0", "cutoff in 'ndcg@0' must be an integer >= 1"),
                                        ("ndcg@x", "must be an integer >= 1"),
                                        ("auc@5", "takes no cutoff"), (3, "must be given as a string")])
def test_registry_errors(bad, match):
    with pytest.raises(InputError, match=match):
        M.get_metric(bad)


@st.composite
def batch(draw):
    sizes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=6))
    n = sum(sizes)
    scores = np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), float)
    labels = np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), float)
    return scores, labels, np.repeat(np.arange(len(sizes)), sizes), sizes


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=25, deadline=None)
@given(b=batch(), seed=st.integers(0, 2**16))
def test_permutation_invariance_under_average_ties(spec, b, seed):
    """Moving items (with their scores) inside a query, or moving whole queries, changes nothing."""
    scores, labels, qid, _ = b
    metric = M.get_metric(spec)
    base = metric(scores, labels, qid=qid, reduction="none")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(scores))  # interleaves queries too: regrouped stably by qid
    shuffled = metric(scores[perm], labels[perm], qid=qid[perm], reduction="none")
    order = [list(dict.fromkeys(qid[perm])).index(q) for q in dict.fromkeys(qid)]
    np.testing.assert_allclose(shuffled[order], base, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("ties", ["average", "input"])
@settings(max_examples=20, deadline=None)
@given(b=batch(), extra=st.integers(1, 4))
def test_masking_equals_truncation(spec, ties, b, extra):
    """Padding masked with where=False (arbitrary scores/labels there) equals the unpadded lists."""
    scores, labels, qid, sizes = b
    metric = M.get_metric(spec)
    L = max(sizes) + extra
    S = np.full((len(sizes), L), 99.0)  # padded items would rank first if they leaked
    Y = np.full((len(sizes), L), 3.0)
    W = np.zeros((len(sizes), L), bool)
    off = np.r_[0, np.cumsum(sizes)]
    for i, n in enumerate(sizes):
        S[i, :n], Y[i, :n], W[i, :n] = scores[off[i]:off[i + 1]], labels[off[i]:off[i + 1]], True
    flat = metric(scores, labels, qid=qid, ties=ties, reduction="none")
    np.testing.assert_array_equal(metric(S, Y, where=W, ties=ties, reduction="none"), flat)
    # a flat row mask does the same
    rows = np.r_[np.arange(len(scores)), np.arange(len(scores))]
    keep = np.r_[np.ones(len(scores), bool), np.zeros(len(scores), bool)]
    got = metric(np.r_[scores, scores + 50], np.r_[labels, labels], qid=qid[rows], where=keep,
                 ties=ties, reduction="none")
    np.testing.assert_array_equal(got, flat)


@pytest.mark.parametrize("spec", BOUNDED)
@pytest.mark.parametrize("ties", TIES)
@settings(max_examples=15, deadline=None)
@given(b=batch())
def test_bounds_and_no_nan(spec, ties, b):
    scores, labels, qid, _ = b
    docs = np.arange(len(scores))
    v = M.get_metric(spec)(scores, labels, qid=qid, ties=ties, doc_ids=docs, reduction="none")
    assert np.all(np.isfinite(v))
    lo = -1.0 if spec in ("kendall_tau", "spearman") else 0.0
    assert np.all(v >= lo - 1e-12) and np.all(v <= 1 + 1e-12)


@pytest.mark.parametrize("spec", ["ndcg", "ndcg@3", "map", "map@3", "mrr", "auc", "kendall_tau", "spearman",
                                  "pairwise_accuracy"])
@settings(max_examples=20, deadline=None)
@given(b=batch())
def test_perfect_ranking_scores_one(spec, b):
    """Scores that order by label (ties only among equal labels) score 1 where defined."""
    _, labels, qid, _ = b
    metric = M.get_metric(spec)
    # AP@k divided by R cannot reach 1 when R > k: the min(R, k) denominator can
    extra = {"ap_denominator": "min_k"} if spec == "map@3" else {}
    v = metric(labels.copy(), labels, qid=qid, empty=1.0, reduction="none", **extra)
    if spec in ("kendall_tau", "spearman"):
        # tau-b / rho of a ranking against tied labels reach 1 only without label ties
        for qq, val in zip(dict.fromkeys(qid), v):
            lab = labels[qid == qq]
            if len(np.unique(lab)) == len(lab):
                assert val == pytest.approx(1.0)
        return
    np.testing.assert_allclose(v, 1.0, rtol=1e-12)
    assert M.get_metric("pairwise_cost")(labels, labels, qid=qid) == 0.0


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("ties", TIES)
def test_degenerate_queries_give_no_nan(spec, ties):
    """Empty (no relevant), single-document and all-tied queries: finite values, empty rule applied."""
    scores = np.array([1.0, 0.5, 0.5, 0.5, 2.0, 2.0, 2.0])
    labels = np.array([0.0, 0.0, 0.0, 0.0, 2.0, 1.0, 0.0])
    qid = np.array([0, 1, 1, 1, 2, 2, 2])  # single doc / no relevant / all tied
    metric = M.get_metric(spec)
    v = metric(scores, labels, qid=qid, ties=ties, doc_ids=np.arange(7), reduction="none", empty=0.25)
    assert np.all(np.isfinite(v)) and len(v) == 3
    assert v[0] == 0.25 and v[1] == 0.25
    dropped = metric(scores, labels, qid=qid, ties=ties, doc_ids=np.arange(7), reduction="none", empty="drop")
    assert len(dropped) == 1 and dropped[0] == v[2]
    # a padded row with no real item is empty too
    out = metric(np.zeros((2, 3)), np.ones((2, 3)), where=np.array([[True, True, False], [False] * 3]),
                 reduction="none", empty=0.25)
    assert out[1] == 0.25 and np.all(np.isfinite(out))


def test_constant_scorer_on_label_sorted_file_is_not_perfect():
    labels = np.array([2.0, 1, 1, 0, 0, 0])
    s = np.zeros(6)
    assert M.ndcg(s, labels, ties="input") == 1.0  # the artefact "average" removes
    expected = ref.reference(ref.ndcg, list(s), list(labels), ties="average")
    assert M.ndcg(s, labels) == pytest.approx(expected) and expected < 0.9
    assert M.ndcg(s, labels, ties="pessimistic") < M.ndcg(s, labels) < M.ndcg(s, labels, ties="optimistic")


def test_reductions_and_query_order():
    s = np.array([1.0, 2, 3, 1, 2])
    y = np.array([1.0, 0, 0, 1, 0])
    q = np.array(["b", "a", "b", "a", "b"])  # interleaved: regrouped, order of first appearance
    per = M.ndcg(s, y, qid=q, reduction="none")
    assert per[0] == pytest.approx(M.ndcg(s[q == "b"], y[q == "b"]))
    assert per[1] == pytest.approx(M.ndcg(s[q == "a"], y[q == "a"]))
    assert M.ndcg(s, y, qid=q) == pytest.approx(per.mean()) and isinstance(M.ndcg(s, y, qid=q), float)
    assert M.ndcg(s, y, qid=q, reduction="sum") == pytest.approx(per.sum())
    r = M.evaluate(s, y, q, ["ndcg", "map"])
    assert list(r.per_query.index) == ["b", "a"] and r.mean["ndcg"] == pytest.approx(per.mean())


def test_err_uses_the_scale_maximum():
    s, y = np.array([2.0, 1.0]), np.array([1.0, 0.0])
    assert M.err(s, y) == pytest.approx((2 ** 1 - 1) / 2 ** 1)
    assert M.err(s, y, max_grade=4) == pytest.approx((2 ** 1 - 1) / 2 ** 4)
    with pytest.raises(InputError, match="max_grade=2 is below the largest label 3"):
        M.err(s, np.array([3.0, 0]), max_grade=2)


def test_evaluate_profiles_and_conventions():
    s = np.array([1.0, 1.0, 0.0, 2.0, 2.0])
    y = np.array([0.0, 2.0, 1.0, 0.0, 0.0])
    q = np.array([1, 1, 1, 2, 2])
    lg = M.evaluate(s, y, q, ["ndcg@2"], profile="lightgbm")
    assert lg.per_query["ndcg@2"].iloc[1] == 1.0  # LightGBM: a query without relevant docs scores 1
    assert lg.mean["ndcg@2"] == pytest.approx((M.ndcg(s[:3], y[:3], k=2, ties="input") + 1) / 2)
    ex = M.evaluate(s, y, q, ["ndcg@2"], profile="lightgbm", empty=0.0)  # explicit beats profile
    assert ex.per_query["ndcg@2"].iloc[1] == 0.0
    assert M.evaluate(s, y, q, ["ndcg"], profile="xgboost").mean.keys() == {"ndcg@32"}
    with pytest.raises(InputError, match="ties='docid' needs doc_ids="):
        M.evaluate(s, y, q, ["map"], profile="trec_eval")
    with pytest.raises(InputError, match="unknown profile 'trec'; valid profiles: letor, lightgbm"):
        M.evaluate(s, y, q, ["map"], profile="trec")
    with pytest.raises(InputError, match="unknown convention 'gian'"):
        M.evaluate(s, y, q, ["map"], gian="linear")
    dropped = M.evaluate(s, y, q, ["ndcg", "map"], empty="drop")
    assert dropped.per_query["ndcg"].isna().tolist() == [False, True]
    assert dropped.mean["ndcg"] == pytest.approx(M.ndcg(s[:3], y[:3]))


@pytest.mark.parametrize("k", [1, 5, 10])
@settings(max_examples=30, deadline=None)
@given(b=batch())
def test_letor_profile_matches_script_reference(k, b):
    """LETOR 4.0 script semantics (first two positions undiscounted, NDCG@k = 0 for lists shorter than k)."""
    scores, labels, qid, _ = b
    labels = np.minimum(labels, 2)  # MQ2008 grades
    r = M.evaluate(scores, labels, qid, [f"ndcg@{k}", "map", f"P@{k}"], profile="letor").per_query
    for i, qq in enumerate(dict.fromkeys(qid)):
        m = qid == qq
        ranked = [labels[m][j] for j in ref.ranked_orders(list(scores[m]), list(labels[m]), "input")[0]]
        nd = ref.ndcg(ranked, k=k, gain_kind=[0, 1, 3], discount="jarvelin", short_list="zero")
        assert r[f"ndcg@{k}"].iloc[i] == pytest.approx(0.0 if nd is None else nd)
        ap = ref.average_precision(ranked)
        assert r["map"].iloc[i] == pytest.approx(0.0 if ap is None else ap)
        assert r[f"P@{k}"].iloc[i] == pytest.approx(sum(x >= 1 for x in ranked[:k]) / k)


# ------------------------------------------------------------------------------ bad input

GOOD = dict(scores=np.array([1.0, 2.0, 3.0]), labels=np.array([0.0, 1.0, 2.0]))


@pytest.mark.parametrize("kwargs, match", [
    (dict(scores=[1.0, 2.0], labels=[1.0, 2.0, 3.0]), r"scores and labels must have the same shape; got scores \(2,\)"),
    (dict(scores=[1.0, np.nan, 2.0]), "scores contains NaN values"),
    (dict(scores=[1.0, np.inf, 2.0]), "scores contains inf values"),
    (dict(labels=[0.0, np.nan, 1.0]), "labels contains NaN or inf"),
    (dict(labels=[0.0, -1.0, 1.0]), "labels must be non-negative for gain='exp2'; got minimum label -1"),
    (dict(k=0), r"k must be >= 1 \(or None for the whole list\); got 0"),
    (dict(k=2.5), "k must be a positive integer or None"),
    (dict(qid=[1, 1]), r"qid must have one entry per score"),
    (dict(ties="random"), "ties must be one of 'average', 'pessimistic'"),
    (dict(gain="log"), "gain must be 'exp2', 'linear' or a table"),
    (dict(gain=[0.0, 1.0]), "labels must be integers in 0..1"),
    (dict(empty="skip"), "empty must be a number or 'drop'"),
    (dict(reduction="avg"), "reduction must be one of 'mean', 'none', 'sum'"),
    (dict(scores=["a", "b", "c"]), "scores must be numeric"),
    (dict(scores=np.zeros((1, 3)), labels=np.zeros((1, 3)), where=np.ones((1, 2), bool)), "where must have the shape"),
    (dict(scores=np.zeros((1, 3)), labels=np.zeros((1, 3)), where=np.ones((1, 3))), "where must be a boolean mask"),
    (dict(discount="ln"), "discount must be one of 'log2', 'jarvelin'"),
    (dict(k=10**20), r"k must be at most 2\*\*63 - 1"),
    (dict(gain=[0.0, -1.0, 3.0]), r"gain table must hold non-negative gains .* gain\[1\] = -1"),
    (dict(qid=np.array([1, None, 1], dtype=object)), "qid is missing at row 1"),
    (dict(qid=np.array([1, "1", 1], dtype=object)), "qid mixes strings and numbers"),
    (dict(qid=[1, "1", 1]), "qid mixes strings and numbers"),
])
def test_bad_input_names_the_parameter(kwargs, match):
    args = {**GOOD, **kwargs}
    with pytest.raises(InputError, match=match):
        M.ndcg(args.pop("scores"), args.pop("labels"), **args)


def test_bad_input_other_measures():
    with pytest.raises(InputError, match="labels must be non-negative grades for err"):
        M.err([1.0, 2.0], [0.0, -1.0])
    with pytest.raises(InputError, match="threshold must be a finite number"):
        M.average_precision([1.0, 2.0], [0.0, 1.0], threshold=None)
    with pytest.raises(InputError, match="ap_denominator must be 'relevant' or 'min_k'"):
        M.average_precision([1.0, 2.0], [0.0, 1.0], ap_denominator="hits")
    with pytest.raises(InputError, match="omega must be 'kemeny' or a callable"):
        M.pairwise_cost([1.0, 2.0], [0.0, 1.0], omega="spearman")
    with pytest.raises(InputError, match=r"ndcg@10 takes no option 'threshold'"):
        M.get_metric("ndcg@10")([1.0, 2.0], [0.0, 1.0], threshold=1)
    # negative labels are fine where no gain is involved
    assert M.auc([1.0, 2.0, 0.0], [-1.0, 1.0, -1.0], threshold=0) == 1.0


def test_import_does_not_pull_torch():
    import subprocess
    code = ("import sys, rankwise.metrics as m; m.ndcg([1.0, 2.0], [0.0, 1.0]); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("mode", [0, 1])
def test_sort_kernel_exact_on_nearly_equal_scores(mode):
    """The packed-key sort truncates low mantissa bits first; scores one ulp apart, exact ties and
    -0.0 / +0.0 must still come out as a stable exact sort (ties by key in mode 1)."""
    from rankwise.metrics._kernels import sort_queries

    rng = np.random.default_rng(5)
    # every row width of the packed sort: 0..16 one by one, then the ~1.25x steps, up to 1,300
    sizes = np.r_[0, 1, 2, 7, 64, 300, 1300, 0, np.arange(1, 17), rng.integers(17, 400, size=60)]
    off = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    base = rng.choice([0.0, -0.0, 1.0, -2.5, 1e-300], size=off[-1])
    ulps = rng.integers(0, 4, size=off[-1])
    s = base.copy()
    for _ in range(3):
        s = np.where(ulps > _, np.nextafter(s, np.inf), s)
    key = rng.integers(0, 3, size=off[-1]).astype(float)
    perm = sort_queries(off, -s, key, mode)
    qidx = np.repeat(np.arange(len(sizes)), sizes)
    tie_key = key if mode == 1 else np.zeros_like(key)
    expected = np.lexsort((np.arange(off[-1]), tie_key, -s, qidx))  # last key sorts first
    np.testing.assert_array_equal(perm, expected)


def test_ranx_sort_is_numbas_quicksort_tie_order_included():
    """ties="ranx" orders ties as numba's unstable np.argsort(kind="quicksort") does (ranx sorts
    runs with it): the compiled reimplementation must give numba's very permutation, on heavy ties
    (2..5 distinct values, all equal, +-0.0, pre-sorted and reversed runs, organ pipes) as well as
    on distinct full-precision scores, for every length 0..40 and random lengths up to 5,000."""
    numba = pytest.importorskip("numba", reason="numba (a dependency of ranx) is the reference here")
    from rankwise.metrics._kernels import sort_queries
    from rankwise.metrics._metric_kernels import quicksort_argsort

    numba_argsort = numba.njit(lambda x: np.argsort(x, kind="quicksort"))
    rng = np.random.default_rng(11)

    def arrays(n):
        yield rng.integers(0, 2, n).astype(float)
        yield rng.integers(0, 5, n) * 0.25 - 0.5
        yield np.full(n, 3.5)
        yield rng.choice([0.0, -0.0, 1e-300, -7.25e12], n)
        yield np.sort(rng.integers(0, 4, n).astype(float))
        yield np.sort(rng.integers(0, 4, n).astype(float))[::-1].copy()
        yield np.minimum(np.arange(n), n - np.arange(n)) // 3 * 1.5  # organ pipe with runs of 3
        yield rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, n)  # distinct, scientific notation
        yield np.round(rng.normal(size=n), 1)

    sizes = list(range(41)) + sorted(rng.integers(41, 5001, 40).tolist()) + [5000]
    runs = []
    for n in sizes:
        for x in arrays(n):
            want = numba_argsort(x)
            np.testing.assert_array_equal(quicksort_argsort(x), want, err_msg=f"n={n}, x={x[:20]}...")
            runs.append((x, want))
    # and per query through the sort that ties="ranx" uses (scores descending: argsort of -score)
    sel = [runs[i] for i in rng.choice(len(runs), 150, replace=False)]
    off = np.r_[0, np.cumsum([len(x) for x, _ in sel])].astype(np.int64)
    neg = np.concatenate([x for x, _ in sel])
    want = np.concatenate([w + off[i] for i, (_, w) in enumerate(sel)])
    np.testing.assert_array_equal(sort_queries(off, neg, np.zeros(len(neg)), 2), want)


def test_evaluate_keys_results_by_the_spec_as_written():
    s, y, q = np.array([3.0, 2, 1]), np.array([0.0, 1, 1]), np.array([1, 1, 1])
    r = M.evaluate(s, y, q, ["P@2", "NDCG@2"])
    assert list(r.mean) == ["P@2", "NDCG@2"] and r.mean["P@2"] == pytest.approx(1 / 2)
    with pytest.raises(InputError, match="metrics name 'precision@2' twice"):
        M.evaluate(s, y, q, ["precision@2", "precision@2"])


@settings(max_examples=40, deadline=None)
@given(b=batch(), data=st.data())
def test_unretrieved_documents_count_in_the_ideal_but_take_no_rank(b, data):
    """evaluate(retrieved=...) equals the metric computed on the retrieved rows alone with the
    ideal DCG and the relevant count taken over every judged row (trec_eval's view of a run)."""
    scores, labels, qid, _ = b
    retrieved = np.array(data.draw(st.lists(st.booleans(), min_size=len(scores), max_size=len(scores))))
    specs = ["ndcg", "ndcg@3", "map", "map@3", "P@3", "recall@3", "mrr", "err@3", "auc"]
    got = M.evaluate(scores, labels, qid, specs, ties="input", retrieved=retrieved).per_query
    for i, qq in enumerate(dict.fromkeys(qid)):
        m = qid == qq
        r, y_all = retrieved[m], labels[m]
        order = np.argsort(-scores[m][r], kind="stable")
        ranked = list(y_all[r][order])
        ideal = sorted(y_all, reverse=True)
        R = int((y_all >= 1).sum())

        def dcg(lst, k=None):
            return sum((2 ** g - 1) / np.log2(j + 2) for j, g in enumerate(lst[:k]))

        for spec, k in (("ndcg", None), ("ndcg@3", 3)):
            want = dcg(ranked, k) / dcg(ideal, k) if dcg(ideal, k) > 0 else 0.0
            assert got[spec].iloc[i] == pytest.approx(want, abs=1e-12), spec
        for spec, k in (("map", None), ("map@3", 3)):
            hits, acc = 0, 0.0
            for j, g in enumerate(ranked[:k]):
                if g >= 1:
                    hits += 1
                    acc += hits / (j + 1)
            assert got[spec].iloc[i] == pytest.approx(acc / R if R else 0.0, abs=1e-12), spec
        top3 = sum(g >= 1 for g in ranked[:3])
        assert got["P@3"].iloc[i] == pytest.approx(top3 / 3 if R else 0.0, abs=1e-12)
        assert got["recall@3"].iloc[i] == pytest.approx(top3 / R if R else 0.0, abs=1e-12)
        first = next((j for j, g in enumerate(ranked) if g >= 1), None)
        assert got["mrr"].iloc[i] == pytest.approx(0.0 if first is None else 1 / (first + 1), abs=1e-12)
        # AUC is defined on the ranking alone: the retrieved rows only
        sub = M.evaluate(scores[m][r], y_all[r], None, ["auc"], ties="input").mean["auc"] if r.any() else 0.0
        assert got["auc"].iloc[i] == pytest.approx(sub, abs=1e-12)


def test_unretrieved_documents_match_pytrec_eval():
    rng = np.random.default_rng(7)
    qrels, run, rows = {}, {}, []
    for q in range(25):
        docs = [f"d{q}_{i}" for i in range(12)]
        qrels[f"q{q}"] = {d: int(rng.integers(0, 3)) for d in docs}
        returned = rng.choice(docs, size=7, replace=False)
        run[f"q{q}"] = {d: float(np.round(rng.normal(), 1)) for d in returned}
        for d in docs:
            rows.append((f"q{q}", d, qrels[f"q{q}"][d], run[f"q{q}"].get(d, 0.0), d in run[f"q{q}"]))
    q, d, y, s, r = (np.array(c) for c in zip(*rows))
    measures = {"ndcg": "ndcg", "ndcg_cut_5": "ndcg@5", "map": "map", "P_5": "P@5", "recall_10": "recall@10",
                "recip_rank": "mrr"}
    peer = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
    ours = M.evaluate(s.astype(float), y.astype(float), q, list(measures.values()), profile="trec_eval9",
                      doc_ids=d, retrieved=r.astype(bool)).per_query
    for te_name, spec in measures.items():
        expected = np.array([peer[qq][te_name] for qq in ours.index])
        np.testing.assert_allclose(ours[spec].to_numpy(float), expected, rtol=0, atol=1e-12, err_msg=te_name)
    with pytest.raises(InputError, match="retrieved must be a boolean array"):
        M.evaluate(s.astype(float), y.astype(float), q, ["map"], retrieved=[1, 0])


def test_k_beyond_every_list_keeps_the_whole_list():
    s, y = np.array([3.0, 2.0, 1.0]), np.array([0.0, 1.0, 2.0])
    for spec in ("ndcg", "map", "err", "mrr"):
        whole = M.get_metric(spec)(s, y)
        assert M.get_metric(f"{spec}@{2**63 - 1}")(s, y) == whole, spec
    assert M.precision(s, y, k=2**62) == pytest.approx(2 / 2**62)  # P@k still divides by k
    with pytest.raises(InputError, match=r"k must be at most 2\*\*63 - 1"):
        M.evaluate(s, y, None, ["ndcg@100000000000000000000"])


def test_evaluate_default_k_is_validated():
    s, y, q = np.array([3.0, 2.0]), np.array([0.0, 1.0]), np.array([1, 1])
    with pytest.raises(InputError, match=r"default_k must be a positive integer or None .*got 'x'"):
        M.evaluate(s, y, q, ["ndcg"], default_k="x")
    with pytest.raises(InputError, match="default_k must be >= 1"):
        M.evaluate(s, y, q, ["ndcg"], default_k=0)
    assert list(M.evaluate(s, y, q, ["ndcg"], default_k=1).mean) == ["ndcg@1"]


def test_err_max_grade_is_global_and_reported():
    """ERR's y_max is a property of the label scale: a query's value must not depend on which
    other queries share the call once max_grade is given, and when it is inferred it is the
    maximum over the whole input (not per query) and reported in .conventions."""
    rng = np.random.default_rng(3)
    sizes = [5, 9, 3, 12]
    q = np.repeat(np.arange(len(sizes)), sizes)
    y = rng.integers(0, 3, size=len(q)).astype(float)  # grades 0..2: no query reaches 4
    y[q == 2] = np.minimum(y[q == 2], 1)  # one query whose top label is 1
    s = np.round(rng.normal(size=len(q)), 1)
    together = M.evaluate(s, y, q, ["err@5", "err"], max_grade=4).per_query
    for i in range(len(sizes)):
        m = q == i
        alone = M.evaluate(s[m], y[m], q[m], ["err@5", "err"], max_grade=4).per_query
        np.testing.assert_array_equal(alone.to_numpy(), together.iloc[[i]].to_numpy())
    inferred = M.evaluate(s, y, q, ["err"])
    assert inferred.conventions["max_grade"] == y.max() == 2.0
    # the query whose labels stop at 1 is still scored against the global maximum 2
    m = q == 2
    assert inferred.per_query["err"].iloc[2] == M.err(s[m], y[m], max_grade=2.0)
    assert inferred.per_query["err"].iloc[2] != M.err(s[m], y[m])  # per-query inference would differ
    assert "max_grade" not in M.evaluate(s, y, q, ["ndcg"]).conventions


def test_pairwise_cost_omega_gets_ideal_positions():
    """omega(sigma_u, sigma_v) receives 1-based positions in the ideal order; equal labels share
    the mean of the positions they occupy, so omega is asked once per pair of distinct labels."""
    y = np.array([0.0, 2.0, 1.0, 1.0])  # ideal order: item 1 (pos 1), items 2, 3 (pos 2.5), item 0 (pos 4)
    s = np.array([4.0, 3.0, 2.0, 1.0])  # item 0 first: every pair with item 0 is discordant
    seen = []

    def omega(su, sv):
        seen.extend(zip(su.tolist(), sv.tolist()))
        return np.ones_like(su)

    cost = M.pairwise_cost(s, y, omega=omega, ties="input")
    assert sorted(seen) == [(1.0, 2.5), (1.0, 4.0), (2.5, 4.0)]
    assert cost == M.pairwise_cost(s, y, ties="input") == 3.0
    weighted = M.pairwise_cost(s, y, omega=lambda su, sv: sv - su, ties="input")
    assert weighted == pytest.approx((4.0 - 1.0) + 2 * (4.0 - 2.5))


def test_ideal_dcg_paths_agree():
    """Integer grades (< 64) go through a histogram, other labels through a top-k buffer or a
    sort: the same labels scaled by 1/2 (non-integer), or shifted beyond 63, give the reference."""
    rng = np.random.default_rng(11)
    sizes = rng.integers(1, 60, size=40)
    q = np.repeat(np.arange(len(sizes)), sizes)
    y = rng.integers(0, 5, size=len(q)).astype(float)
    s = np.round(rng.normal(size=len(q)), 1)
    for labels, gain in ((y, "exp2"), (y / 2, "exp2"), (y + 60, "linear"), (y / 2, "linear")):
        for k in (None, 3, 40):
            got = M.ndcg(s, labels, qid=q, k=k, gain=gain, ties="input", reduction="none", empty=-1.0)
            for i in range(len(sizes)):
                m = q == i
                ranked = [labels[m][j] for j in ref.ranked_orders(list(s[m]), list(labels[m]), "input")[0]]
                want = ref.ndcg(ranked, k=k, gain_kind=gain)
                assert got[i] == pytest.approx(-1.0 if want is None else want, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("ties", TIES)
def test_threaded_query_ranges_equal_one_pass(monkeypatch, ties):
    """Large inputs are sorted and scored on query ranges in threads: the per-query values are
    exactly those of one pass over all queries."""
    from rankwise.metrics import _kernels as K

    rng = np.random.default_rng(2)
    sizes = rng.integers(1, 300, size=120)
    q = np.repeat(rng.permutation(1000)[:len(sizes)], sizes)
    y = rng.integers(0, 5, size=len(q)).astype(float)
    s = np.round(rng.normal(size=len(q)), 1)  # ties everywhere
    docs = rng.permutation(len(q))
    specs = ["ndcg@10", "ndcg", "dcg@5", "map", "map@10", "err@10", "P@5", "recall@10", "mrr", "auc"]
    one = M.evaluate(s, y, q, specs, ties=ties, doc_ids=docs, max_grade=4).per_query
    monkeypatch.setattr(K, "n_threads", lambda n_rows: 3)
    threaded = M.evaluate(s, y, q, specs, ties=ties, doc_ids=docs, max_grade=4).per_query
    np.testing.assert_array_equal(threaded.to_numpy(), one.to_numpy())
    assert list(threaded.index) == list(one.index)


def test_trec_eval_profile_ties_scores_equal_in_float32():
    """trec_eval <= 9 (pytrec_eval) keeps run scores as float32: scores that differ only beyond
    float32 precision are tied there (and ordered by docno), and the trec_eval9 profile must agree."""
    rng = np.random.default_rng(4)
    qrels, run, rows = {}, {}, []
    for q in range(30):
        base = rng.normal(size=8)
        s = base.copy()
        s[4:] = base[:4] * (1 + 1e-12)  # equal to the first four as float32, distinct as float64
        for i in range(8):
            d = f"d{q}_{rng.integers(10**6)}_{i}"
            y = int(rng.integers(0, 3))
            qrels.setdefault(f"q{q}", {})[d] = y
            run.setdefault(f"q{q}", {})[d] = float(s[i])
            rows.append((f"q{q}", d, y, s[i]))
    q, d, y, s = (np.array(c) for c in zip(*rows))
    assert len(np.unique(s)) == len(s) and len(np.unique(s.astype(np.float32))) < len(s)
    measures = {"ndcg_cut_5": "ndcg@5", "map": "map", "P_5": "P@5", "recip_rank": "mrr"}
    peer = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
    ours = M.evaluate(s.astype(float), y.astype(float), q, list(measures.values()), profile="trec_eval9",
                      doc_ids=d).per_query
    for te_name, spec in measures.items():
        expected = np.array([peer[qq][te_name] for qq in ours.index])
        np.testing.assert_allclose(ours[spec].to_numpy(float), expected, rtol=0, atol=1e-12, err_msg=te_name)


def test_extreme_labels_give_finite_metrics():
    """labels of 1e308 (linear gain) would overflow a DCG sum: NDCG is computed on scaled gains."""
    s, y = np.array([0.2, 0.1]), np.array([1e308, 1e308])
    res = M.evaluate(s, y, None, metrics=["ndcg", "ndcg@1", "map", "P@1"], profile="sklearn")
    assert res.mean["ndcg"] == pytest.approx(1.0) and res.mean["ndcg@1"] == pytest.approx(1.0)
    y2 = np.array([1e308, 0.5e308, 0.0])
    got = M.ndcg(np.array([0.1, 0.2, 0.3]), y2, gain="linear")
    want = M.ndcg(np.array([0.1, 0.2, 0.3]), y2 / 1e308, gain="linear")
    assert got == pytest.approx(want, rel=1e-12)
    with pytest.raises(InputError, match="DCG overflows"):
        M.dcg(s, np.array([1.5e308, 1.5e308]), gain="linear")
    for name in ("auc", "kendall_tau", "spearman", "pairwise_accuracy", "pairwise_cost", "mrr", "recall"):
        assert np.isfinite(M.get_metric(name)(np.array([0.3, 0.2, 0.1]), np.array([0.0, 1e308, 1e308])))
