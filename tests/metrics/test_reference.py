"""Every measure against the naive reference (tests/reference/metrics_reference.py).

Random ragged batches from hypothesis, scores drawn from few values so ties are common; every
tie rule; ``ties="average"`` against brute-force enumeration of all tie permutations.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import rankwise.metrics as M

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import metrics_reference as ref  # noqa: E402

TIES = ["average", "input", "pessimistic", "optimistic", "docid"]

# (name, fast function, fast kwargs, reference function, reference kwargs)
CASES = [
    ("ndcg", M.ndcg, {}, ref.ndcg, {}),
    ("ndcg@3", M.ndcg, {"k": 3}, ref.ndcg, {"k": 3}),
    ("ndcg@3 linear jarvelin", M.ndcg, {"k": 3, "gain": "linear", "discount": "jarvelin"},
     ref.ndcg, {"k": 3, "gain_kind": "linear", "discount": "jarvelin"}),
    ("ndcg@4 table short=zero", M.ndcg, {"k": 4, "gain": [0.0, 1.0, 3.0, 7.5], "short_list": "zero"},
     ref.ndcg, {"k": 4, "gain_kind": [0.0, 1.0, 3.0, 7.5], "short_list": "zero"}),
    ("dcg@2", M.dcg, {"k": 2}, ref.dcg_query, {"k": 2}),
    ("err", M.err, {"max_grade": 3}, ref.err, {"ymax": 3}),
    ("err@3", M.err, {"k": 3, "max_grade": 3}, ref.err, {"k": 3, "ymax": 3}),
    ("map", M.average_precision, {}, ref.average_precision, {}),
    ("map@3", M.average_precision, {"k": 3}, ref.average_precision, {"k": 3}),
    ("map@3 min_k thr2", M.average_precision, {"k": 3, "ap_denominator": "min_k", "threshold": 2},
     ref.average_precision, {"k": 3, "denominator": "min_k", "thr": 2}),
    ("P@3", M.precision, {"k": 3}, ref.precision, {"k": 3}),
    ("P", M.precision, {}, ref.precision, {}),
    ("recall@2", M.recall, {"k": 2}, ref.recall, {"k": 2}),
    ("rr", M.reciprocal_rank, {}, ref.reciprocal_rank, {}),
    ("rr@2 thr2", M.reciprocal_rank, {"k": 2, "threshold": 2}, ref.reciprocal_rank, {"k": 2, "thr": 2}),
    ("auc", M.auc, {}, ref.auc, {}),
    ("kendall", M.kendall_tau, {}, ref.kendall_tau, {}),
    ("spearman", M.spearman, {}, ref.spearman, {}),
    ("pairwise_accuracy", M.pairwise_accuracy, {}, ref.pairwise_accuracy, {}),
    ("pairwise_cost", M.pairwise_cost, {}, ref.pairwise_cost, {}),
    ("pairwise_cost omega", M.pairwise_cost, {"omega": lambda su, sv: (sv - su) ** 2},
     ref.pairwise_cost, {"omega": lambda su, sv: (sv - su) ** 2}),
    ("pairwise_cost omega dcg", M.pairwise_cost, {"omega": lambda su, sv: 1 / np.log2(1 + su) - 1 / np.log2(1 + sv)},
     ref.pairwise_cost, {"omega": lambda su, sv: 1 / math.log2(1 + su) - 1 / math.log2(1 + sv)}),
]


@st.composite
def ragged_batch(draw, max_len=6, max_queries=5):
    sizes = draw(st.lists(st.integers(1, max_len), min_size=1, max_size=max_queries))
    n = sum(sizes)
    n_levels = draw(st.integers(1, 4))  # few distinct scores -> ties everywhere
    scores = draw(st.lists(st.integers(0, n_levels - 1), min_size=n, max_size=n))
    labels = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    docs = draw(st.permutations(range(n)))
    qid = np.repeat(np.arange(len(sizes)) * 7 + 3, sizes)
    return np.array(scores, float) * 0.5, np.array(labels, float), qid, np.array(docs), sizes


def _reference_values(fn, kw, scores, labels, qid, docs, ties):
    out = []
    for q in dict.fromkeys(qid):
        m = qid == q
        v = ref.reference(fn, list(scores[m]), list(labels[m]), ties=ties,
                          doc_ids=[f"d{d:03d}" for d in docs[m]], **kw)
        out.append(v)
    return out


@pytest.mark.parametrize("ties", TIES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@settings(max_examples=25, deadline=None)
@given(batch=ragged_batch())
def test_against_reference(case, ties, batch):
    _, fast, fkw, slow, skw = case
    scores, labels, qid, docs, _ = batch
    expected = _reference_values(slow, skw, scores, labels, qid, docs, ties)
    sentinel = -12345.0
    got = fast(scores, labels, qid=qid, ties=ties, doc_ids=np.array([f"d{d:03d}" for d in docs]),
               empty=sentinel, reduction="none", **fkw)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        if e is None:
            assert g == sentinel
        else:
            assert g == pytest.approx(e, rel=1e-12, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(batch=ragged_batch(max_len=7, max_queries=3))
def test_padded_equals_flat(batch):
    scores, labels, qid, _, sizes = batch
    L = max(sizes)
    S = np.full((len(sizes), L), np.nan)
    Y = np.zeros((len(sizes), L))
    W = np.zeros((len(sizes), L), bool)
    off = np.concatenate(([0], np.cumsum(sizes)))
    for i, n in enumerate(sizes):
        S[i, :n] = scores[off[i]:off[i + 1]]
        Y[i, :n] = labels[off[i]:off[i + 1]]
        W[i, :n] = True
    for name in ["ndcg@3", "err@2", "map", "mrr", "auc", "kendall_tau", "spearman", "P@2"]:
        metric = M.get_metric(name)
        flat = metric(scores, labels, qid=qid, reduction="none")
        padded = metric(S, Y, where=W, reduction="none")
        np.testing.assert_allclose(padded, flat, rtol=0, atol=0)


def test_long_tie_group_err_against_enumeration():
    """One tie group of 8 items (40,320 orders) with graded labels: ERR, AP, RR exact."""
    labels = [3, 0, 1, 2, 0, 1, 3, 0, 2]
    scores = [5, 1, 1, 1, 1, 1, 1, 1, 1]
    for fast, slow, kw, skw in [(M.err, ref.err, {"k": 5, "max_grade": 3}, {"k": 5, "ymax": 3}),
                                (M.average_precision, ref.average_precision, {}, {}),
                                (M.reciprocal_rank, ref.reciprocal_rank, {"k": 3}, {"k": 3}),
                                (M.ndcg, ref.ndcg, {"k": 4}, {"k": 4})]:
        expected = ref.reference(slow, scores, labels, ties="average", **skw)
        assert fast(np.array(scores, float), np.array(labels, float), **kw) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_pair_counts_equal_the_quadratic_definition(seed):
    """The O(n log n) pair kernel (Fenwick counts over tie groups) equals the pair-by-pair sums."""
    from rankwise.metrics import _kernels as K

    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 40, size=8)
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    y = rng.integers(0, 4, size=offsets[-1]).astype(float)
    gstart = rng.random(offsets[-1]) < 0.6  # random tie groups
    gstart[offsets[:-1][sizes > 0]] = True
    got = K.pair_kernel(offsets, y, gstart, 2.0)
    for q in range(len(sizes)):
        a, b = offsets[q], offsets[q + 1]
        gid = np.cumsum(gstart[a:b])
        want = ref.pair_counts_quadratic(y[a:b], gid, 2.0)
        np.testing.assert_allclose(got[q], want, rtol=0, atol=1e-9)


def test_pair_metrics_scale_to_a_million_documents():
    """One query of 1e6 documents: the O(n log n) forms run (a dense pair form would need 1e12 pairs)."""
    rng = np.random.default_rng(0)
    n = 1_000_000
    y = rng.integers(0, 5, size=n).astype(float)
    s = np.round(y + rng.normal(size=n), 2)  # ties
    for f in (M.auc, M.pairwise_accuracy, M.kendall_tau, M.pairwise_cost):
        v = f(s, y)
        assert np.isfinite(v)
    w = M.pairwise_cost(s, y, omega=lambda su, sv: sv - su)
    assert np.isfinite(w) and w > 0
