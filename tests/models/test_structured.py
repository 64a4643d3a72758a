"""Structured hinge surrogates: exact maximisers against brute force, bound, convexity, the ranker."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from rankwise.errors import InputError  # noqa: E402
from rankwise.models.structured import (  # noqa: E402
    StructuredHingeRanker,
    kendall_hinge_value_grad,
    multivariate_delta,
    multivariate_hinge_argmax,
    ndcg_delta,
    ndcg_hinge_argmax,
    structured_hinge,
)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference.structured_reference import (  # noqa: E402
    kendall_hinge_loop,
    kendall_tau_loss,
    multivariate_hinge_brute,
    multivariate_reference_brute,
    ndcg_at_k,
    ndcg_hinge_brute,
)


def _random_list(rng, r, n_levels=3):
    scale = rng.choice([0.05, 1.0, 5.0])
    s = rng.normal(size=r) * scale
    if rng.random() < 0.3:  # score ties
        s = np.round(s, 0)
    y = rng.integers(0, n_levels, size=r).astype(float)
    return s, y


@pytest.mark.parametrize("method", ["assignment", "dp", "auto"])
@pytest.mark.parametrize("gain", ["exp2", "linear"])
def test_ndcg_maximiser_equals_brute_force(method, gain):
    rng = np.random.default_rng(7)
    for _ in range(120):
        r = int(rng.integers(1, 7))
        s, y = _random_list(rng, r)
        k = int(rng.integers(1, r + 1)) if rng.random() < 0.7 else None
        res = ndcg_hinge_argmax(s, y, k=k, gain=gain, method=method)
        best, _ = ndcg_hinge_brute(list(s), list(y), r if k is None else k, gain)
        assert res.value == pytest.approx(best, abs=1e-9)
        # the returned argmax is a permutation that attains the value
        assert sorted(res.argmax.tolist()) == list(range(1, r + 1))
        recomputed = ndcg_delta(res.argmax, y, k=k, gain=gain) + float((res.argmax - res.reference) @ s)
        assert recomputed == pytest.approx(res.value, abs=1e-9)


@pytest.mark.parametrize("gain", ["exp2", "linear"])
@pytest.mark.parametrize("k", [1, 3, None])
def test_ndcg_maximiser_r7_exhaustive_check(gain, k):
    rng = np.random.default_rng(11 if k is None else 11 + k)
    for _ in range(3):
        s, y = _random_list(rng, 7, n_levels=4)
        best, _ = ndcg_hinge_brute(list(s), list(y), 7 if k is None else k, gain)
        for method in ("dp", "assignment", "auto"):
            assert ndcg_hinge_argmax(s, y, k=k, gain=gain, method=method).value == pytest.approx(best, abs=1e-9)


def test_ndcg_dp_equals_assignment_on_longer_lists():
    rng = np.random.default_rng(3)
    for r, k, levels in [(60, 10, 3), (40, 5, 5), (25, None, 2), (120, 10, 2)]:
        s, y = _random_list(rng, r, n_levels=levels)
        a = ndcg_hinge_argmax(s, y, k=k, method="assignment")
        d = ndcg_hinge_argmax(s, y, k=k, method="dp")
        assert d.value == pytest.approx(a.value, rel=1e-12, abs=1e-9)


def test_ndcg_delta_matches_reference_ndcg():
    rng = np.random.default_rng(5)
    for _ in range(20):
        r = int(rng.integers(2, 6))
        _, y = _random_list(rng, r)
        v = rng.permutation(r) + 1
        n = ndcg_at_k(tuple(v), list(y), 3)
        assert ndcg_delta(v, y, k=3) == pytest.approx(0.0 if n is None else 1.0 - n)


MV_CASES = [(m, c) for m in ("precision", "recall", "f1", "accuracy") for c in ("any", "eq", "ge", "le")]


@pytest.mark.parametrize("measure,constraint", MV_CASES)
def test_multivariate_maximiser_equals_brute_force(measure, constraint):
    rng = np.random.default_rng(hash((measure, constraint)) % 2**32)
    for _ in range(25):
        r = int(rng.integers(1, 8))
        s, y = _random_list(rng, r, n_levels=2)
        k = int(rng.integers(1, r + 1))
        res = multivariate_hinge_argmax(s, y, measure=measure, k=k, constraint=constraint)
        rho = multivariate_reference_brute(list(y), k, constraint)  # independent of the code's ρ
        np.testing.assert_allclose(res.reference, rho, atol=1e-12)
        best, _ = multivariate_hinge_brute(list(s), list(y), measure, k, constraint, rho)
        assert res.value == pytest.approx(best, abs=1e-9)
        assert multivariate_delta(res.argmax, y, measure=measure) == pytest.approx(res.delta)
        ones = int(np.sum(res.argmax > 0))
        assert {"any": True, "eq": ones == k, "ge": ones >= k, "le": ones <= k}[constraint]


@pytest.mark.parametrize("measure,default", [("precision", "ge"), ("recall", "le"), ("f1", "any"), ("accuracy", "any")])
def test_default_constraint_is_umls(measure, default):
    """UML §17.5: V_{≥k} for precision@k, V_{≤k} for recall@k, {±1}^r for F1/accuracy (was "eq")."""
    rng = np.random.default_rng(17)
    for _ in range(10):
        s, y = _random_list(rng, 6, n_levels=2)
        a = multivariate_hinge_argmax(s, y, measure=measure, k=3)
        b = multivariate_hinge_argmax(s, y, measure=measure, k=3, constraint=default)
        assert a.value == b.value
        np.testing.assert_array_equal(a.argmax, b.argmax)
        np.testing.assert_array_equal(a.reference, b.reference)


def _small_lists(rng, n_q=12, d=3, r_max=7):
    """Queries of 2..r_max items (brute force stays cheap), each with at least one relevant item."""
    sizes = rng.integers(2, r_max + 1, size=n_q)
    X = rng.normal(size=(int(sizes.sum()), d))
    y = (rng.random(int(sizes.sum())) < 0.4).astype(float)
    qid = np.repeat(np.arange(n_q), sizes)
    for q in range(n_q):
        y[np.flatnonzero(qid == q)[0]] = 1.0
    return X, y, qid


@pytest.mark.parametrize("measure,constraint", [(m, c) for m in ("precision@3", "recall@2")
                                                for c in (None, "eq", "ge", "le", "any")])
def test_ranker_trains_on_the_chosen_constraint_brute_force(measure, constraint):
    """The ranker path: its reported training surrogate equals the brute-force hinge over V (all
    ±1 vectors with the constraint, ρ computed independently) at the fitted w and intercept."""
    rng = np.random.default_rng(3)
    X, y, qid = _small_lists(rng)
    model = StructuredHingeRanker(measure, constraint=constraint, max_iter=2, random_state=0).fit(X, y, qid=qid)
    name, k = measure.split("@")
    used = constraint or {"precision": "ge", "recall": "le"}[name]
    scores = model.predict(X)
    if used == "eq":
        assert model.intercept_ == 0.0  # b(s) = top k: no offset to learn
    total = []
    for q in np.unique(qid):
        idx = np.flatnonzero(qid == q)
        kk = min(int(k), len(idx))
        rho = multivariate_reference_brute(list(y[idx]), kk, used)
        total.append(multivariate_hinge_brute(list(scores[idx]), list(y[idx]), name, kk, used, rho)[0])
    assert model.train_loss_[-1] == pytest.approx(np.mean(total), rel=1e-9, abs=1e-9)
    if constraint is None:  # the default is UML's choice, not "exactly k"
        ref = StructuredHingeRanker(measure, constraint=used, max_iter=2, random_state=0).fit(X, y, qid=qid)
        np.testing.assert_array_equal(model.coef_, ref.coef_)
        eq = StructuredHingeRanker(measure, constraint="eq", max_iter=2, random_state=0).fit(X, y, qid=qid)
        assert not np.array_equal(model.coef_, eq.coef_)


def test_ranker_constraint_validation():
    X, y, qid = _small_lists(np.random.default_rng(0), n_q=3)
    with pytest.raises(InputError, match="constraint must be one of"):
        StructuredHingeRanker("precision@2", constraint="exactly").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="the ndcg hinge takes none"):
        StructuredHingeRanker("ndcg@2", constraint="ge").fit(X, y, qid=qid)
    with pytest.raises(InputError, match="needs a cutoff k"):
        StructuredHingeRanker("f1", constraint="le").fit(X, y, qid=qid)


def _induced_prediction(s, k, constraint):
    """b(s) = argmax_{v ∈ V} Σ v_i s_i (UML eq. 17.13)."""
    order = np.argsort(-s, kind="stable")
    n_pos = int(np.sum(s > 0))
    n_ones = {"any": n_pos, "eq": k, "ge": max(k, n_pos), "le": min(k, n_pos)}[constraint]
    v = -np.ones(len(s))
    v[order[:n_ones]] = 1.0
    return v


def test_surrogates_upper_bound_the_true_loss():
    rng = np.random.default_rng(21)
    for _ in range(60):
        r = int(rng.integers(2, 12))
        s = rng.normal(size=r)
        y = rng.integers(0, 3, size=r).astype(float)
        k = int(rng.integers(1, r + 1))
        pos = np.empty(r, dtype=np.int64)
        pos[np.argsort(s)] = np.arange(1, r + 1)  # π(s): largest score at position r
        assert ndcg_hinge_argmax(s, y, k=k).value >= ndcg_delta(pos, y, k=k) - 1e-12
        for measure, constraint in MV_CASES:
            res = multivariate_hinge_argmax(s, y, measure=measure, k=k, constraint=constraint)
            b = _induced_prediction(s, k, constraint)
            assert res.value >= multivariate_delta(b, y, measure=measure) - 1e-12
        assert kendall_hinge_value_grad(s, y)[0] >= kendall_tau_loss(list(s), list(y)) - 1e-12


@pytest.mark.parametrize("measure", ["ndcg@3", "ndcg", "precision@2", "recall@3", "f1", "accuracy", "kendall"])
def test_surrogate_is_convex_in_w_along_random_segments(measure):
    rng = np.random.default_rng(len(measure))
    for _ in range(10):
        r = int(rng.integers(2, 9))
        X = rng.normal(size=(r, 4))
        y = rng.integers(0, 3, size=r).astype(float)
        w0, w1 = rng.normal(size=4) * 2, rng.normal(size=4) * 2
        f0 = structured_hinge(X @ w0, y, measure=measure)[0]
        f1 = structured_hinge(X @ w1, y, measure=measure)[0]
        for t in np.linspace(0.1, 0.9, 9):
            ft = structured_hinge(X @ ((1 - t) * w0 + t * w1), y, measure=measure)[0]
            assert ft <= (1 - t) * f0 + t * f1 + 1e-9


@pytest.mark.parametrize("measure", ["ndcg@3", "precision@2", "f1", "kendall"])
def test_gradient_is_a_subgradient(measure):
    rng = np.random.default_rng(99)
    for _ in range(15):
        r = int(rng.integers(2, 8))
        s = rng.normal(size=r)
        y = rng.integers(0, 3, size=r).astype(float)
        f, g = structured_hinge(s, y, measure=measure)
        for _ in range(5):
            s2 = s + rng.normal(size=r)
            assert structured_hinge(s2, y, measure=measure)[0] >= f + g @ (s2 - s) - 1e-9


def test_kendall_hinge_matches_loop_and_losses_module():
    torch = pytest.importorskip("torch")
    from rankwise.losses.pairwise import kendall_hinge_loss

    rng = np.random.default_rng(4)
    for _ in range(30):
        r = int(rng.integers(1, 9))
        s = rng.normal(size=r)
        y = rng.integers(0, 3, size=r).astype(float)
        val, grad = kendall_hinge_value_grad(s, y)
        assert val == pytest.approx(kendall_hinge_loop(list(s), list(y)), abs=1e-12)
        if r >= 2:
            st = torch.tensor(s[None, :], dtype=torch.float64, requires_grad=True)
            lt = kendall_hinge_loss(st, torch.tensor(y[None, :], dtype=torch.float64), reduction="sum")
            assert float(lt.detach()) == pytest.approx(val, abs=1e-10)
            lt.backward()
            np.testing.assert_allclose(st.grad.numpy()[0], grad, atol=1e-10)


def _synthetic(rng, n_q=40, r=12, d=5, noise=0.1, w=None):
    """Lists whose labels are quantile bins of a planted linear utility ⟨w, x⟩ + noise."""
    w = rng.normal(size=d) if w is None else w
    X = rng.normal(size=(n_q * r, d))
    u = X @ w + noise * rng.normal(size=n_q * r)
    qid = np.repeat(np.arange(n_q), r)
    y = np.zeros(n_q * r)
    for q in range(n_q):
        m = qid == q
        y[m] = np.digitize(u[m], np.quantile(u[m], [0.5, 0.8]))
    return X, y, qid, w


@pytest.mark.parametrize("measure", ["ndcg@5", "precision@3", "recall@3", "f1", "kendall"])
def test_ranker_learns_a_planted_linear_order(measure):
    from rankwise.metrics import ndcg

    rng = np.random.default_rng(0)
    X, y, qid, w = _synthetic(rng)
    model = StructuredHingeRanker(measure, alpha=0.1, max_iter=15, random_state=0).fit(X, y, qid=qid)
    Xt, yt, qt, _ = _synthetic(np.random.default_rng(1), w=w, noise=0.0)
    ut = Xt @ w
    got = ndcg(model.predict(Xt), yt, qid=qt, k=5)
    oracle = ndcg(ut, yt, qid=qt, k=5)
    const = ndcg(np.zeros(len(yt)), yt, qid=qt, k=5)
    assert oracle == pytest.approx(1.0)
    assert got > const + 0.5 * (oracle - const)
    cos = model.coef_ @ w / np.linalg.norm(model.coef_) / np.linalg.norm(w)
    assert cos > 0.8


def test_ranker_is_reproducible_and_saves_without_pickle(tmp_path):
    import rankwise

    rng = np.random.default_rng(2)
    X, y, qid, _ = _synthetic(rng, n_q=10)
    a = StructuredHingeRanker("f1", max_iter=3, random_state=5).fit(X, y, qid=qid)
    b = StructuredHingeRanker("f1", max_iter=3, random_state=5).fit(X, y, qid=qid)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    path = a.save(tmp_path / "m.npz")
    c = rankwise.load(path)
    assert isinstance(c, StructuredHingeRanker) and c.get_params() == a.get_params()
    np.testing.assert_array_equal(c.predict(X), a.predict(X))


def test_ranker_mq2008_beats_constant(mq2008_dir):
    from sklearn.datasets import load_svmlight_file

    from rankwise.metrics import ndcg

    X, y, qid = load_svmlight_file(str(mq2008_dir / "Fold1" / "train.txt.gz"), query_id=True, n_features=46)
    Xt, yt, qt = load_svmlight_file(str(mq2008_dir / "Fold1" / "test.txt.gz"), query_id=True, n_features=46)
    model = StructuredHingeRanker("ndcg@10", max_iter=3, random_state=0).fit(X, y, qid=qid)
    got = ndcg(model.predict(Xt), yt, qid=qt, k=10)
    const = ndcg(np.zeros(len(yt)), yt, qid=qt, k=10)
    assert got > const + 0.05


@pytest.mark.parametrize("kwargs,match", [
    ({"measure": "map"}, "unknown measure 'map'"),
    ({"measure": "precision"}, "needs a cutoff"),
    ({"measure": "ndcg@10", "alpha": -1.0}, r"StructuredHingeRanker: alpha must be a finite number > 0; got -1.0"),
    ({"measure": "ndcg@10", "solver": "lbfgs"}, "solver must be 'sgd'"),
    ({"measure": "ndcg@10", "max_iter": 0}, "max_iter must be an integer >= 1; got 0"),
])
def test_ranker_bad_params(kwargs, match):
    X, y, qid, _ = _synthetic(np.random.default_rng(0), n_q=3)
    with pytest.raises(InputError, match=match):
        StructuredHingeRanker(**kwargs).fit(X, y, qid=qid)


def test_maximiser_bad_input():
    with pytest.raises(InputError, match="scores has 3 entries but labels has 2"):
        ndcg_hinge_argmax([1, 2, 3], [0, 1])
    with pytest.raises(InputError, match="finite"):
        ndcg_hinge_argmax([1, np.nan], [0, 1])
    with pytest.raises(InputError, match="k is required"):
        multivariate_hinge_argmax([1, 2], [0, 1], measure="precision", constraint="eq")
    with pytest.raises(InputError, match="V would be empty"):
        multivariate_hinge_argmax([1, 2], [0, 1], measure="precision", k=3)
    with pytest.raises(InputError, match="method must be"):
        ndcg_hinge_argmax([1, 2], [0, 1], method="fast")
    with pytest.raises(InputError, match="no query can train"):
        StructuredHingeRanker("ndcg@5").fit(np.ones((4, 2)), np.zeros(4), qid=[1, 1, 2, 2])


def test_ranker_sample_weight_and_eval_set_history(tmp_path):
    """A zero-weight query leaves the model as if it were absent; eval_set gives a validation curve."""
    import rankwise
    from rankwise.data import make_synthetic

    data = make_synthetic(25, n_features=4, list_length=(4, 9), seed=2)
    w = np.where(data.qid == data.qid[0], 0.0, 1.0)
    a = StructuredHingeRanker(measure="ndcg@5", max_iter=3, random_state=0).fit(data, sample_weight=w, eval_set=data)
    b = StructuredHingeRanker(measure="ndcg@5", max_iter=3, random_state=0).fit(data)
    assert not np.allclose(a.coef_, b.coef_)  # the weight changed the training
    assert len(a.history_["ndcg@10"]) == 3 and all(0.0 <= v <= 1.0 for v in a.history_["ndcg@10"])
    assert a.history_["loss"] == a.train_loss_
    a.save(tmp_path / "s.npz")
    assert rankwise.load(tmp_path / "s.npz").history_["ndcg@10"] == pytest.approx(a.history_["ndcg@10"])
