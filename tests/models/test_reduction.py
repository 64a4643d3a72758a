"""Pairwise reduction to binary classification: pairs, weights, aggregate and QuickSort inference."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference.structured_reference import ideal_positions as ideal_positions_ref  # noqa: E402
from reference.structured_reference import naive_aggregate, naive_pairs  # noqa: E402

from rankwise.errors import InputError  # noqa: E402
from rankwise.models.reduction import (  # noqa: E402
    PairwiseReductionRanker,
    ideal_positions,
    make_pairs,
    pair_weights,
)


def _ragged(rng, sizes, levels=3):
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    y = rng.integers(0, levels, size=offsets[-1]).astype(float)
    return y, offsets


def _planted(rng, n_q=30, r=10, d=4, w=None):
    w = rng.normal(size=d) if w is None else w
    X = rng.normal(size=(n_q * r, d))
    u = X @ w
    qid = np.repeat(np.arange(n_q), r)
    y = np.zeros(n_q * r)
    for q in range(n_q):
        m = qid == q
        y[m] = np.digitize(u[m], np.quantile(u[m], [0.4, 0.7, 0.9]))
    return X, y, qid, w


def test_all_pairs_equal_naive_loop():
    rng = np.random.default_rng(0)
    y, off = _ragged(rng, [1, 5, 0, 7, 3])
    u, v, yp = make_pairs(y, off)
    assert sorted(zip(u.tolist(), v.tolist(), yp.tolist())) == sorted(naive_pairs(y.tolist(), off.tolist()))


def test_sampled_pairs_are_valid_reproducible_and_capped():
    rng = np.random.default_rng(1)
    y, off = _ragged(rng, [12, 3, 20, 2])
    valid = set(naive_pairs(y.tolist(), off.tolist()))
    u, v, yp = make_pairs(y, off, pairs=6, random_state=3)
    got = list(zip(u.tolist(), v.tolist(), yp.tolist()))
    assert set(got) <= valid and len(set(got)) == len(got)
    for q in range(len(off) - 1):
        n_valid = sum(1 for p in valid if off[q] <= p[0] < off[q + 1])
        n_got = sum(1 for p in got if off[q] <= p[0] < off[q + 1])
        assert n_got == min(6, n_valid)
    u2, v2, _ = make_pairs(y, off, pairs=6, random_state=3)
    np.testing.assert_array_equal(u, u2)
    np.testing.assert_array_equal(v, v2)
    u3, v3, _ = make_pairs(y, off, pairs=6, random_state=4)
    assert not (np.array_equal(u, u3) and np.array_equal(v, v3))


def test_sampled_pairs_long_list_rejection_path():
    rng = np.random.default_rng(2)
    y, off = _ragged(rng, [3500], levels=2)
    u, v, yp = make_pairs(y, off, pairs=50, random_state=0)
    assert len(u) == 50 and len(set(zip(u.tolist(), v.tolist()))) == 50
    assert np.all(y[u] != y[v]) and np.all(yp == np.where(y[u] > y[v], 1, -1))


def test_weights_against_formulas():
    rng = np.random.default_rng(3)
    y, off = _ragged(rng, [6, 4, 8])
    sigma = ideal_positions(y, off)
    ref = []
    for q in range(len(off) - 1):
        ref += ideal_positions_ref(y[off[q]:off[q + 1]].tolist())
    np.testing.assert_allclose(sigma, ref)
    u, v, _ = make_pairs(y, off)
    np.testing.assert_array_equal(pair_weights(sigma[u], sigma[v], "kemeny"), np.ones(len(u)))
    raw = [abs(1 / math.log2(1 + sigma[a]) - 1 / math.log2(1 + sigma[b])) for a, b in zip(u, v)]
    np.testing.assert_allclose(pair_weights(sigma[u], sigma[v], "ndcg"), np.array(raw) / np.mean(raw))
    np.testing.assert_allclose(pair_weights(sigma[u], sigma[v], lambda a, b: np.minimum(a, b)),
                               np.minimum(sigma[u], sigma[v]))
    with pytest.raises(InputError, match="one weight per pair"):
        pair_weights(sigma[u], sigma[v], lambda a, b: 1.0)
    with pytest.raises(InputError, match="non-negative"):
        pair_weights(sigma[u], sigma[v], lambda a, b: a - b)


def test_weights_reach_the_classifier_as_sample_weight():
    seen = {}

    class Spy(LogisticRegression):
        def fit(self, X, y, sample_weight=None):
            seen["w"] = sample_weight
            return super().fit(X, y, sample_weight=sample_weight)

    X, y, qid, _ = _planted(np.random.default_rng(4), n_q=5)
    PairwiseReductionRanker(Spy(), weights="none").fit(X, y, qid=qid)
    assert seen["w"] is None
    m = PairwiseReductionRanker(Spy(), weights="ndcg").fit(X, y, qid=qid)
    assert len(seen["w"]) == m.n_pairs_ and seen["w"].std() > 0


def test_aggregate_equals_naive_rank_test():
    X, y, qid, _ = _planted(np.random.default_rng(5), n_q=6, r=7)
    m = PairwiseReductionRanker(LogisticRegression(), inference="aggregate", standardize=False).fit(X, y, qid=qid)
    off = np.arange(0, len(y) + 1, 7)
    est = m.estimator_

    def f(a, b):
        return float(est.decision_function((X[a] - X[b])[None, :].astype(np.float32))[0])

    # float32 pair features: sums of ~12 decision values agree to float32 precision
    np.testing.assert_allclose(m.predict(X, qid=qid), naive_aggregate(f, off.tolist()), rtol=1e-5, atol=1e-4)


def test_aggregate_of_a_linear_classifier_orders_like_its_weights(mq2008_dir):
    """For f(x_u − x_v) = ⟨w, x_u − x_v⟩ + b, aggregation gives 2n⟨w, x_u⟩ − const: same order as ⟨w, x⟩."""
    from sklearn.datasets import load_svmlight_file

    X, y, qid = load_svmlight_file(str(mq2008_dir / "Fold1" / "vali.txt.gz"), query_id=True, n_features=46)
    X = X.toarray()
    m = PairwiseReductionRanker(LogisticRegression(max_iter=500), pairs=40, random_state=0,
                                standardize=False).fit(X, y, qid=qid)
    s = m.predict(X, qid=qid)
    lin = X.astype(np.float32) @ m.estimator_.coef_[0]
    for q in np.unique(qid)[:50]:
        idx = np.flatnonzero(qid == q)
        n = len(idx)
        centred = 2 * n * lin[idx] - 2 * lin[idx].sum()
        np.testing.assert_allclose(s[idx], centred, rtol=1e-4, atol=1e-3)


class _PerfectComparator:
    """predict_proba = [u after v, u before v] from the first pair feature (x_u − x_v)[0]; counts rows."""

    def __init__(self):
        self.n_rows = 0
        self.n_calls = 0
        self.classes_ = np.array([-1, 1])

    def fit(self, X, y, sample_weight=None):
        return self

    def predict(self, X):
        return np.where(np.asarray(X)[:, 0] > 0, 1, -1)

    def predict_proba(self, X):
        self.n_rows += X.shape[0]
        self.n_calls += 1
        p = (np.asarray(X)[:, 0] > 0).astype(float)
        return np.column_stack([1 - p, p])

    def get_params(self, deep=False):
        return {}

    def set_params(self, **p):
        return self


def _fitted_with(comparator, inference, n=10, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.permutation(n).astype(float), rng.normal(size=n)])
    y = X[:, 0].copy()
    m = PairwiseReductionRanker(LogisticRegression(), inference=inference, random_state=seed)
    m.fit(X, y, qid=np.zeros(n))
    m.estimator_ = comparator
    return m, X, y


@pytest.mark.parametrize("inference", ["aggregate", "quicksort"])
def test_perfect_classifier_recovers_the_true_order(inference):
    m, X, y = _fitted_with(_PerfectComparator(), inference, n=40)
    qid = np.repeat([7, 3], 20)
    s = m.predict(X, qid=qid)
    for q in (7, 3):
        idx = np.flatnonzero(qid == q)
        np.testing.assert_array_equal(np.argsort(-s[idx]), np.argsort(-y[idx]))


def test_quicksort_comparisons_match_randomised_quicksort_expectation():
    n, runs = 200, 30
    expected = 2 * (n + 1) * sum(1 / i for i in range(1, n + 1)) - 4 * n  # E[comparisons] of randomised QuickSort
    counts = []
    for seed in range(runs):
        comp = _PerfectComparator()
        m, X, _ = _fitted_with(comp, "quicksort", n=n, seed=seed)
        m.predict(X, qid=np.zeros(n))
        assert comp.n_rows == m.n_comparisons_
        assert comp.n_calls <= 4 * math.ceil(math.log2(n)) + 10  # one batched call per recursion level
        counts.append(comp.n_rows)
    assert abs(np.mean(counts) - expected) < 0.06 * expected
    assert max(counts) < n * (n - 1) / 2


def test_quicksort_is_reproducible_from_the_seed():
    X, y, qid, _ = _planted(np.random.default_rng(6), n_q=8)
    a = PairwiseReductionRanker(LogisticRegression(C=0.01), inference="quicksort", random_state=1).fit(X, y, qid=qid)
    np.testing.assert_array_equal(a.predict(X, qid=qid), a.predict(X, qid=qid))
    b = PairwiseReductionRanker(LogisticRegression(C=0.01), inference="quicksort", random_state=2).fit(X, y, qid=qid)
    assert not np.array_equal(a.predict(X, qid=qid), b.predict(X, qid=qid))


def test_ndcg_weights_favour_the_feature_that_orders_the_top():
    """Feature a orders the top pairs right and the bottom pairs wrong, feature b the reverse.

    With Kemeny weights the two are symmetric (equal coefficients); NDCG weights charge top
    mistakes more, so the learned model must lean on feature a.
    """
    rng = np.random.default_rng(8)
    n_q = 60
    a = np.tile([1.0, 0.0, 0.0, 1.0], n_q)  # labels 3, 2, 1, 0
    b = np.tile([0.0, 1.0, 1.0, 0.0], n_q)
    noise = 0.05 * rng.normal(size=(4 * n_q, 2))
    X = np.column_stack([a, b]) + noise
    y = np.tile([3.0, 2.0, 1.0, 0.0], n_q)
    qid = np.repeat(np.arange(n_q), 4)
    kem = PairwiseReductionRanker(LogisticRegression(), weights="kemeny", standardize=False).fit(X, y, qid=qid)
    ndc = PairwiseReductionRanker(LogisticRegression(), weights="ndcg", standardize=False).fit(X, y, qid=qid)
    ck, cn = kem.estimator_.coef_[0], ndc.estimator_.coef_[0]
    assert abs(ck[0] - ck[1]) < 0.1 * abs(ck).max()
    assert cn[0] - cn[1] > 0.5 * abs(cn).max()
    s = ndc.predict(X, qid=qid).reshape(n_q, 4)
    assert np.mean(s[:, 0] > s[:, 1]) > 0.9  # the top pair (labels 3 > 2) is ordered right


def _classifiers():
    from lightgbm import LGBMClassifier
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.svm import LinearSVC
    from sklearn.tree import DecisionTreeClassifier

    return {
        "logreg": LogisticRegression(),
        "linearsvc": LinearSVC(),
        "tree": DecisionTreeClassifier(max_depth=6, random_state=0),
        "forest": RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0, n_jobs=1),
        "histgb": HistGradientBoostingClassifier(max_iter=30, random_state=0),
        "lightgbm": LGBMClassifier(n_estimators=30, verbose=-1, n_jobs=1, random_state=0),
    }


@pytest.mark.parametrize("name", ["logreg", "linearsvc", "tree", "forest", "histgb", "lightgbm"])
def test_works_with_common_classifiers(name):
    from rankwise.metrics import ndcg

    rng = np.random.default_rng(9)
    X, y, qid, w = _planted(rng, n_q=30)
    Xt, yt, qt, _ = _planted(np.random.default_rng(10), n_q=20, w=w)
    inference = "aggregate" if name == "linearsvc" else "quicksort"
    m = PairwiseReductionRanker(_classifiers()[name], weights="kemeny", inference=inference, random_state=0)
    m.fit(X, y, qid=qid)
    got = ndcg(m.predict(Xt, qid=qt), yt, qid=qt, k=5)
    const = ndcg(np.zeros(len(yt)), yt, qid=qt, k=5)
    assert got > const + 0.5 * (1.0 - const)


def test_predict_regroups_interleaved_queries():
    X, y, qid, _ = _planted(np.random.default_rng(11), n_q=5)
    m = PairwiseReductionRanker(LogisticRegression()).fit(X, y, qid=qid)
    perm = np.random.default_rng(0).permutation(len(y))
    np.testing.assert_allclose(m.predict(X[perm], qid=qid[perm]), m.predict(X, qid=qid)[perm], rtol=1e-6)


@pytest.mark.parametrize("name", ["logreg", "linearsvc", "lightgbm"])
def test_save_load_roundtrip(tmp_path, name):
    import rankwise

    X, y, qid, _ = _planted(np.random.default_rng(12), n_q=10)
    m = PairwiseReductionRanker(_classifiers()[name], weights="ndcg").fit(X, y, qid=qid)
    loaded = rankwise.load(m.save(tmp_path / "m.npz"))
    np.testing.assert_allclose(loaded.predict(X, qid=qid), m.predict(X, qid=qid), rtol=1e-9, atol=1e-9)


def test_save_refuses_classifiers_that_need_pickle(tmp_path):
    X, y, qid, _ = _planted(np.random.default_rng(13), n_q=5)
    m = PairwiseReductionRanker(_classifiers()["tree"]).fit(X, y, qid=qid)
    with pytest.raises(InputError, match="cannot save a PairwiseReductionRanker around DecisionTreeClassifier"):
        m.save(tmp_path / "m.npz")
    m = PairwiseReductionRanker(LogisticRegression(), weights=lambda a, b: np.ones_like(a)).fit(X, y, qid=qid)
    with pytest.raises(InputError, match="callable weights"):
        m.save(tmp_path / "m.npz")


def test_bad_input_messages():
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import LinearSVC

    X, y, qid, _ = _planted(np.random.default_rng(14), n_q=4)
    with pytest.raises(InputError, match="inference='quicksort' needs a classifier with predict_proba"):
        PairwiseReductionRanker(LinearSVC(), inference="quicksort").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="takes no sample_weight"):
        PairwiseReductionRanker(KNeighborsClassifier(), weights="kemeny").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="pairs must be 'all' or an integer >= 1"):
        PairwiseReductionRanker(pairs=0).fit(X, y, qid=qid)
    with pytest.raises(InputError, match="weights must be one of"):
        PairwiseReductionRanker(weights="dcg").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="pair_features must be one of"):
        PairwiseReductionRanker(pair_features="sum").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="no query has two rows with different labels"):
        PairwiseReductionRanker().fit(X, np.zeros(len(y)), qid=qid)
    m = PairwiseReductionRanker(LogisticRegression(), inference="quicksort").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="needs qid="):
        m.predict(X)
    with pytest.raises(InputError, match="X has 3 features"):
        m.predict(X[:, :3], qid=qid)


def test_concat_pair_features_and_sparse_input():
    import scipy.sparse as sp

    X, y, qid, _ = _planted(np.random.default_rng(15), n_q=10)
    dense = PairwiseReductionRanker(LogisticRegression(), pair_features="concat", standardize=False).fit(X, y, qid=qid)
    sparse = PairwiseReductionRanker(LogisticRegression(), pair_features="concat", standardize=False).fit(
        sp.csr_matrix(X), y, qid=qid)
    assert dense.estimator_.coef_.shape == (1, 2 * X.shape[1])
    np.testing.assert_allclose(sparse.predict(sp.csr_matrix(X), qid=qid), dense.predict(X, qid=qid), rtol=1e-3,
                               atol=1e-3)


@pytest.mark.parametrize("make_rs", [lambda: np.random.default_rng(0), lambda: np.random.RandomState(0), lambda: None])
def test_generator_random_state_gives_reproducible_predictions(make_rs, tmp_path):
    """A Generator was passed to default_rng at every predict and advanced: two predict calls of
    the same fitted model differed. Now fit draws one seed from it (scikit-learn semantics)."""
    import rankwise

    X, y, qid, _ = _planted(np.random.default_rng(6), n_q=8)
    m = PairwiseReductionRanker(LogisticRegression(C=0.01), inference="quicksort", pairs=15,
                                random_state=make_rs()).fit(X, y, qid=qid)
    assert isinstance(m.random_seed_, int)
    first = m.predict(X, qid=qid)
    np.testing.assert_array_equal(m.predict(X, qid=qid), first)
    np.testing.assert_array_equal(m.predict(X, qid=qid), first)
    loaded = rankwise.load(m.save(tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.predict(X, qid=qid), first)


def test_generator_is_consumed_by_fit_like_scikit_learn():
    X, y, qid, _ = _planted(np.random.default_rng(6), n_q=8)
    rng = np.random.default_rng(0)
    a = PairwiseReductionRanker(LogisticRegression(), pairs=5, random_state=rng).fit(X, y, qid=qid)
    b = PairwiseReductionRanker(LogisticRegression(), pairs=5, random_state=rng).fit(X, y, qid=qid)
    assert a.random_seed_ != b.random_seed_
    c = PairwiseReductionRanker(LogisticRegression(), pairs=5, random_state=np.random.default_rng(0)).fit(X, y, qid=qid)
    assert c.random_seed_ == a.random_seed_  # same generator state, same model
    np.testing.assert_array_equal(c.estimator_.coef_, a.estimator_.coef_)
    for bad in ("seed", -1, 1.5):
        with pytest.raises(InputError, match="random_state must be"):
            PairwiseReductionRanker(random_state=bad).fit(X, y, qid=qid)


def test_aggregate_generates_pairs_in_blocks_and_matches_one_big_block():
    """Pair indices of a long query are generated per block of rows (memory O(batch·m), was m²)."""
    rng = np.random.default_rng(9)
    sizes = [2, 3, 40, 2, 25, 5]
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    X = rng.normal(size=(offsets[-1], 3))
    y = rng.integers(0, 3, offsets[-1]).astype(float)
    qid = np.repeat(np.arange(len(sizes)), sizes)
    big = PairwiseReductionRanker(LogisticRegression()).fit(X, y, qid=qid)
    want = big.predict(X, qid=qid)
    for bs in (1, 7, 50, 600):
        m = PairwiseReductionRanker(LogisticRegression(), batch_size=bs).fit(X, y, qid=qid)
        blocks = list(m._pair_blocks(offsets))
        seen = [(int(a), int(b)) for u, v in blocks for a, b in zip(u, v)]
        expect = [(a, b) for q in range(len(sizes)) for a in range(offsets[q], offsets[q + 1])
                  for b in range(offsets[q], offsets[q + 1]) if a != b]
        assert sorted(seen) == sorted(expect) and len(seen) == len(set(seen))
        assert max(len(u) for u, _ in blocks) <= max(bs, max(sizes) - 1)
        # float32 pair features: sums in another order agree to float32 precision
        np.testing.assert_allclose(m.predict(X, qid=qid), want, rtol=1e-5, atol=1e-5)


def test_sample_weight_multiplies_pair_weights_and_eval_set_records_validation_ndcg(tmp_path):
    """Row weights w reach the classifier as w_u·w_v per pair; a zero-weight query is ignored."""
    from sklearn.linear_model import LogisticRegression

    import rankwise
    from rankwise.data import make_synthetic
    from rankwise.metrics import ndcg

    data = make_synthetic(30, n_features=4, list_length=(4, 9), seed=5)
    qid = data.qid
    w = np.where(qid == qid[0], 0.0, 1.0)  # the first query carries no weight
    rest = data.take(np.arange(1, data.n_queries))
    weighted = PairwiseReductionRanker(LogisticRegression(max_iter=1000), random_state=0, standardize=False).fit(
        data, sample_weight=w, eval_set=data)
    dropped = PairwiseReductionRanker(LogisticRegression(max_iter=1000), random_state=0, standardize=False).fit(rest)
    np.testing.assert_allclose(weighted.estimator_.coef_, dropped.estimator_.coef_, rtol=1e-5, atol=1e-7)
    want = ndcg(weighted.predict(data.X, qid=qid), data.labels, qid=qid, k=10)
    assert weighted.history_ == {"ndcg@10": [pytest.approx(want)]}
    weighted.save(tmp_path / "m.npz")
    assert rankwise.load(tmp_path / "m.npz").history_["ndcg@10"] == [pytest.approx(want)]


def test_aggregate_inference_follows_the_pair_budget():
    # issue 29 item 5: inference="aggregate" classifies m(m-1) ordered pairs of a query of m rows; over the pair
    # budget (rankwise.losses.max_pairs) it is refused before any classifier call, naming the query, its rows and
    # pairs and the way out (quicksort); at the budget it runs and gives the same scores as without one
    from rankwise.losses import max_pairs
    from rankwise.models import PairwiseReductionRanker

    rng = np.random.default_rng(3)
    X = rng.normal(size=(130, 4))
    y = (X[:, 0] > 0).astype(float) + (X[:, 1] > 1)
    qid = np.repeat([0, 1], [30, 100])
    m = PairwiseReductionRanker(random_state=0).fit(X, y, qid=qid)
    ref = m.predict(X, qid=qid)
    with max_pairs(100 * 99):
        np.testing.assert_array_equal(m.predict(X, qid=qid), ref)
    with max_pairs(100 * 99 - 1), pytest.raises(InputError, match=r"query 1 \(0-based, of 2\) has 100 rows, so "
                                                                   r"inference='aggregate' classifies 9,900 ordered "
                                                                   r"pairs.*inference='quicksort'"):
        m.predict(X, qid=qid)
    with max_pairs(1):
        m.set_params(inference="quicksort")
        assert m.predict(X, qid=qid).shape == (130,)
