"""The compiled engine against the autograd definition of every loss, over the whole registry.

Every registered loss whose spec declares a kernel for the hyperparameters is checked: value and
gradient of ``grad_hess`` (flat arrays, O(n) memory, no torch) equal the torch loss's own value
and autograd gradient to 1e-10 in float64, query by query -- on random lists, at ties, on
1-document and empty lists, at ±1e4 scores; the Hessian diagonal equals the torch reference
path's; ``training_loss`` (the engine as a torch autograd Function) equals the torch loss on padded
batches; and the result does not depend on the number of threads.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from _losses_cases import ALL, VARIANTS, vid
from rankwise.errors import InputError
from rankwise.losses import REGISTRY, grad_hess, spec, training_loss
from rankwise.losses import objective as _objective

OPTIONS = [
    ("ranknet", {"pair_weights": "delta_ndcg", "truncation_level": 3}),
    ("ranknet", {"pair_weights": "delta_ndcg", "norm": True, "sigma": 2.0}),
    ("ranknet", {"pair_weights": "delta_ndcg", "truncation_level": 2, "norm": True, "gain": "linear"}),
    ("ranknet", {"pair_weights": "none", "truncation_level": 4}),
    ("lambdaloss", {"weighting": "ndcg1"}),
    ("lambdaloss", {"weighting": "lambdarank", "truncation_level": 3}),
    ("lambdaloss", {"weighting": "ndcg2pp", "mu": 5.0}),
    ("lambdaloss", {"weighting": "ndcg2", "truncation_level": 4, "norm": True}),
    ("lambdaloss", {"weighting": "arp1"}),
    ("lambdaloss", {"weighting": "arp2", "sigma": 0.5}),
    ("lambdaloss", {"weighting": "ndcg2", "gain": "linear"}),
    ("op_pairwise", {"utility": "exp2"}),
]
CASES = [(n, {**spec(n).example_hyper, **h}) for n, h in VARIANTS + OPTIONS]
ENGINE_CASES = [c for c in CASES if spec(c[0]).kernel is not None and spec(c[0]).kernel(c[1]) is not None]


def test_every_loss_the_issue_lists_has_a_kernel():
    names = {n for n, _ in ENGINE_CASES}
    want = {"ranknet", "pairwise_hinge", "rankboost", "lambdaloss", "op_pairwise", "listnet", "listmle", "approx_ndcg",
            "smooth_dcg", "smooth_dcg1", "pairwise_squared", "bregman"} | {n for n in ALL if spec(n).family == "pointwise"}
    assert want <= names
    for pw in ("none", "delta_label", "delta_ndcg"):
        assert spec("ranknet").kernel({"pair_weights": pw}) is not None
    for weighting in ("ndcg1", "ndcg2", "ndcg2pp", "lambdarank", "arp1", "arp2"):
        assert spec("lambdaloss").kernel({"weighting": weighting}) is not None


def _inputs(kind, name, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "short":  # empty, 1-document and 2-document lists
        sizes = np.array([0, 1, 2, 0, 1, 3, 2, 0])
    else:
        sizes = rng.integers(1, 12, 8)
        sizes[2] = 0
    off = np.concatenate(([0], np.cumsum(sizes)))
    n = off[-1]
    s = rng.normal(size=n) * 1.5
    if kind == "ties":
        s = np.round(s * 2) / 2
    if kind == "extreme":
        s = np.where(rng.random(n) < 0.5, -1e4, 1e4) + rng.normal(size=n)
    hi = 1 if spec(name).binary_labels else 2
    y = rng.integers(0, hi + 1, n).astype(float)
    w = rng.uniform(0.5, 1.5, n)
    return s, y, off, w


def _autograd(name, hyper, s, y, off, w):
    """Sum over the queries of the torch loss and its autograd gradient, one query at a time."""
    g = np.zeros_like(s)
    total = 0.0
    for q in range(len(off) - 1):
        a, b = off[q], off[q + 1]
        sq = torch.tensor(s[a:b], requires_grad=True)
        v = REGISTRY[name](sq, torch.tensor(y[a:b]), weights=torch.tensor(w[a:b]), reduction="sum", **hyper)
        gq, = torch.autograd.grad(v, sq)
        g[a:b] = gq.numpy()
        total += float(v.detach())
    return total, g


@pytest.mark.parametrize("kind", ["random", "ties", "short", "extreme"])
@pytest.mark.parametrize("case", ENGINE_CASES, ids=vid)
def test_engine_equals_the_autograd_definition(case, kind):
    name, hyper = case
    s, y, off, w = _inputs(kind, name, seed=hash(vid(case)) % 1000)
    g, h, value = grad_hess(name, s, y, off, weights=w, return_value=True, hess_floor=1e-300, **hyper)
    want_value, want_g = _autograd(name, hyper, s, y, off, w)
    scale = max(1.0, float(np.abs(want_g).max(initial=0)))
    np.testing.assert_allclose(value, want_value, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(g, want_g, rtol=1e-10, atol=1e-10 * scale)
    _, want_h, _ = _objective._torch_grad_hess(spec(name), hyper, s, y, off, w, None, False)
    if spec(name).hessian != "exact":
        want_h = np.abs(want_g)
    np.testing.assert_allclose(h, np.maximum(want_h, 1e-300), rtol=1e-9, atol=1e-10 * scale)


@pytest.mark.parametrize("case", ENGINE_CASES, ids=vid)
def test_training_loss_equals_the_torch_loss_on_padded_batches(case):
    name, hyper = case
    gen = torch.Generator().manual_seed(5)
    s = torch.randn(4, 7, generator=gen, dtype=torch.float64) * 1.5
    hi = 1 if spec(name).binary_labels else 2
    y = torch.randint(0, hi + 1, (4, 7), generator=gen).double()
    m = torch.rand(4, 7, generator=gen) > 0.25
    m[:, 0] = True
    m[3] = False  # an empty list
    w = torch.rand(4, 7, generator=gen, dtype=torch.float64) + 0.5
    lw = torch.tensor([1.0, 2.0, 0.5, 3.0], dtype=torch.float64)
    for weights in (w, lw, None):
        for reduction in ("mean", "sum", "none"):
            a = s.clone().requires_grad_(True)
            b = s.clone().requires_grad_(True)
            va = training_loss(name, a, y, where=m, weights=weights, reduction=reduction, **hyper)
            vb = REGISTRY[name](b, y, where=m, weights=weights, reduction=reduction, **hyper)
            torch.testing.assert_close(va, vb, rtol=1e-10, atol=1e-12)
            ga, = torch.autograd.grad(va.sum(), a)
            gb, = torch.autograd.grad(vb.sum(), b)
            torch.testing.assert_close(ga, gb, rtol=1e-10, atol=1e-12)


def test_training_loss_falls_back_to_torch_without_a_kernel():
    s = torch.tensor([[0.3, -0.2, 0.9]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([[1.0, 0.0, 2.0]], dtype=torch.float64)
    for name, hyper in (("kendall_hinge", {}), ("pointwise_squared", {"utility": lambda t: t * 2})):
        torch.testing.assert_close(training_loss(name, s, y, **hyper), REGISTRY[name](s, y, **hyper))


@pytest.mark.parametrize("name,hyper", [("ranknet", {"pair_weights": "delta_ndcg", "truncation_level": 5}),
                                        ("lambdaloss", {}), ("listnet", {}), ("listmle", {}),
                                        ("pointwise_squared", {})])
def test_the_result_does_not_depend_on_the_number_of_threads(name, hyper):
    rng = np.random.default_rng(3)
    sizes = rng.integers(1, 60, 400)
    off = np.concatenate(([0], np.cumsum(sizes)))
    s = rng.normal(size=off[-1])
    y = rng.integers(0, 5, off[-1]).astype(float)
    one = grad_hess(name, s, y, off, n_jobs=1, return_value=True, **hyper)
    two = grad_hess(name, s, y, off, n_jobs=2, return_value=True, **hyper)
    for a, b in zip(one, two):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("case", ENGINE_CASES, ids=vid)
def test_read_only_arrays_give_the_same_result(case):
    # arrays a caller cannot write (a memory map, np.frombuffer, a view marked read-only) go straight to the
    # compiled kernels, which must read them without a copy or a "buffer is read-only" error
    name, hyper = case
    s, y, off, w = _inputs("random", name, seed=5)
    frozen = [np.frombuffer(a.tobytes(), dtype=a.dtype) for a in (s, y, off, w)]
    assert not any(a.flags.writeable for a in frozen)
    one = grad_hess(name, s, y, off, weights=w, return_value=True, **hyper)
    two = grad_hess(name, *frozen[:3], weights=frozen[3], return_value=True, **hyper)
    for a, b in zip(one, two):
        assert np.array_equal(a, b)


# --------------------------------------------------------------- hostile input (issue 17)


def test_gradients_that_overflow_are_refused_never_nan():
    with pytest.raises(InputError, match="pairwise_squared: the gradient or Hessian overflows float64"):
        grad_hess("pairwise_squared", [0.1, 0.2, 0.3], [0.0, 1e308, 1e308], [0, 3])


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("labels,scores", [([0.0, 1e308, 1e308, 1.0], [0.1, 0.2, 0.3, 0.4]),
                                           ([0.0, 1.0, 2.0, 1.0], [1e4, -1e4, 3e4, 0.0]),
                                           ([0.0, 1.0, 1.0, 0.0], [1e300, -1e300, 0.0, 5.0])])
def test_extreme_labels_and_scores_give_finite_results_or_a_clear_error(name, labels, scores):
    hyper = dict(spec(name).example_hyper)
    if spec(name).binary_labels:
        labels = [min(v, 1.0) for v in labels]
    try:
        g, h, v = grad_hess(name, scores, labels, [0, 4], return_value=True, **hyper)
    except InputError:
        return
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(h)) and np.isfinite(v) and np.all(h > 0)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", ALL)
def test_float16_32_64_inputs_give_the_float64_result(name, dtype):
    s, y, off, w = _inputs("random", name, seed=4)
    hyper = dict(spec(name).example_hyper)
    s16 = s.astype(dtype)
    g, h = grad_hess(name, s16, y.astype(dtype), off, weights=w.astype(dtype), **hyper)
    g64, h64 = grad_hess(name, s16.astype(np.float64), y, off, weights=w.astype(dtype).astype(np.float64), **hyper)
    assert np.array_equal(g, g64) and np.array_equal(h, h64) and np.all(np.isfinite(g))


def test_non_numeric_arrays_are_refused_clearly():
    with pytest.raises(InputError, match="scores_flat must be an array of numbers"):
        grad_hess("listnet", np.array(["a", "b"], dtype=object), [0.0, 1.0], [0, 2])
    with pytest.raises(InputError, match="labels_flat must be an array of numbers"):
        grad_hess("ranknet", [0.0, 1.0], ["x", "y"], [0, 2])
    with pytest.raises(InputError, match="offsets must hold integers"):
        grad_hess("ranknet", [0.0, 1.0], [0.0, 1.0], [0, 1.5, 2])
    with pytest.raises(InputError, match="labels_flat contains NaN"):
        grad_hess("ranknet", [0.0, 1.0], [0.0, np.nan], [0, 2])


@pytest.mark.parametrize("name,hyper", [("approx_ndcg", {}), ("ranknet", {}), ("lambdaloss", {}),
                                        ("ranknet", {"pair_weights": "delta_ndcg"}), ("kendall_hinge", {"method": "dense"}),
                                        ("op_pairwise", {}), ("pairwise_hinge", {"pair_weights": "delta_ndcg"})])
def test_a_dense_pair_form_that_cannot_fit_is_refused_before_allocation(name, hyper):
    n = 1_000_000
    s = torch.zeros(1, n, dtype=torch.float64)
    y = torch.zeros(1, n, dtype=torch.float64)
    y[0, :10] = 1.0
    with pytest.raises(InputError, match=rf"{name}: the dense pair form of 1 list\(s\) of {n} items needs about"):
        REGISTRY[name](s, y, **hyper)
    if name == "kendall_hinge":  # no kernel: grad_hess's torch path refuses it the same way
        with pytest.raises(InputError, match="dense pair form"):
            grad_hess(name, np.zeros(n), np.zeros(n), [0, n], **hyper)


TORCH_EXTREMES = [([1e200, -1e200, 0.0], [0.0, 1.0, 2.0]), ([1e308, -1e308, 1.0], [1.0, 0.0, 2.0]),
                  ([3e38, -3e38, 0.0], [0.0, 1.0, 1.0]), ([0.0, 0.0, 0.0], [1e308, 0.0, 1e308]),
                  ([6e4, -6e4, 1.0], [0.0, 1.0, 1.0]), ([100.0, -100.0, 1.0], [0.0, 1.0, 1.0])]


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("name", ALL)
def test_the_torch_form_never_returns_nan_for_extreme_scores_and_labels(name, dtype):
    """Issue 17: NaN gradients of smooth_dcg (huge score gaps), of the sort-based hinges (labels
    1e308), inf in float16: every case gives a finite value and gradient, or an InputError."""
    for s, y in TORCH_EXTREMES:
        st = torch.tensor([s], dtype=dtype)
        if not torch.isfinite(st).all():
            continue
        if spec(name).binary_labels:
            y = [min(v, 1.0) for v in y]
        st.requires_grad_(True)
        try:
            v = REGISTRY[name](st, torch.tensor([y], dtype=dtype), **spec(name).example_hyper)
        except InputError:
            continue
        g, = torch.autograd.grad(v, st)
        assert torch.isfinite(v) and torch.isfinite(g).all(), (s, y, v, g)


@pytest.mark.parametrize("shift", [0.0, 1e4, -1e4])
def test_listmle_linear_time_hessian_equals_the_quadratic_sum(shift):
    """The O(n) ListMLE Hessian diagonal (prefix sums of exp(lse_i - lse_k)) equals the textbook
    O(n^2) sum over the Plackett-Luce steps, h_k = sum_{i <= pos(k)} w_i p_ik (1 - p_ik), on a long
    weighted list with ties, at shifted scores."""
    rng = np.random.default_rng(5)
    n = 300
    s = rng.normal(size=n) * 3.0 + shift
    y = rng.integers(0, 5, size=n).astype(float)
    w = rng.uniform(0.2, 2.0, size=n)
    g, h = grad_hess("listmle", s, y, [0, n], weights=w, hess_floor=1e-300)
    order = np.argsort(-y, kind="stable")
    z, ws = s[order] - shift, w[order]
    lse = np.logaddexp.accumulate(z[::-1])[::-1]
    want_g, want_h = np.empty(n), np.empty(n)
    for i in range(n):
        p = np.exp(z[i] - lse[:i + 1])
        want_g[order[i]] = -ws[i] + np.sum(ws[:i + 1] * p)
        want_h[order[i]] = np.sum(ws[:i + 1] * p * (1.0 - p))
    np.testing.assert_allclose(g, want_g, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(h, np.maximum(want_h, 1e-300), rtol=1e-10, atol=1e-10)


def test_lambdarank_without_the_value_gives_the_same_gradient_and_hessian():
    """grad_hess without return_value skips the value in the LambdaMART loop (no log1p per pair);
    the gradient and Hessian are bit-identical to the call that also computes it."""
    rng = np.random.default_rng(3)
    off = np.r_[0, np.cumsum(rng.integers(1, 60, size=40))]
    s, y = rng.normal(size=off[-1]), rng.integers(0, 5, size=off[-1]).astype(float)
    g0, h0 = grad_hess("lambdarank", s, y, off)
    g1, h1, value = grad_hess("lambdarank", s, y, off, return_value=True)
    assert np.array_equal(g0, g1) and np.array_equal(h0, h1) and value > 0


@pytest.mark.parametrize("name,hyper", [("ranknet", {"pair_weights": "delta_ndcg", "norm": True}),
                                        ("lambdaloss", {"weighting": "ndcg1", "sigma": 2.0}),
                                        ("lambdaloss", {"weighting": "ndcg2pp", "truncation_level": 3}),
                                        ("ranknet", {"pair_weights": "delta_label"})])
@pytest.mark.parametrize("spread", [60.0, 499.0, 501.0, 2000.0])
def test_logistic_pairs_on_either_side_of_the_exponential_form_equal_autograd(name, hyper, spread):
    """The logistic pair loop computes a pair's sigmoid from per-item exponentials
    exp(σ (s_p - max s)) where the query's σ-scaled score spread is at most 500 (every one a normal
    float) and falls back to one exp per pair beyond; both sides, and the x > 20 branch of torch's
    softplus inside the spread, equal the autograd definition."""
    rng = np.random.default_rng(int(spread))
    sizes = np.array([9, 14, 2, 11])
    off = np.concatenate(([0], np.cumsum(sizes)))
    sigma = hyper.get("sigma", 1.0)
    s = rng.uniform(-0.5, 0.5, off[-1]) * spread / sigma
    s[off[:-1]] = -0.5 * spread / sigma  # each list spans the whole spread
    s[off[:-1] + 1] = 0.5 * spread / sigma
    y = rng.integers(0, 4, off[-1]).astype(float)
    w = rng.uniform(0.5, 1.5, off[-1])
    g, h, value = grad_hess(name, s, y, off, weights=w, return_value=True, hess_floor=1e-300, **hyper)
    want_value, want_g = _autograd(name, hyper, s, y, off, w)
    np.testing.assert_allclose(value, want_value, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(g, want_g, rtol=1e-10, atol=1e-10 * max(1.0, float(np.abs(want_g).max())))
    _, want_h, _ = _objective._torch_grad_hess(spec(name), hyper, s, y, off, w, None, False)
    np.testing.assert_allclose(h, np.maximum(want_h, 1e-300), rtol=1e-9, atol=1e-10 * max(1.0, float(np.abs(want_g).max())))
    g0, h0 = grad_hess(name, s, y, off, weights=w, hess_floor=1e-300, **hyper)
    assert np.array_equal(g0, g) and np.array_equal(h0, h)  # the value pass leaves the gradient alone


@pytest.mark.parametrize("name,hyper", [("ranknet", {"pair_weights": "delta_label"}),
                                        ("lambdaloss", {"weighting": "ndcg2", "gain": "linear"}),
                                        ("lambdaloss", {"weighting": "ndcg1", "gain": "linear", "norm": True}),
                                        ("ranknet", {"pair_weights": "delta_ndcg", "gain": "linear"})])
@pytest.mark.parametrize("labels", ["real", "large grades", "negative"])
def test_untruncated_pairs_grouped_by_label_equal_autograd_for_any_labels(name, hyper, labels):
    """Untruncated pair losses visit the items grouped by label (a count per grade for grades
    0..63, a stable sort otherwise), skipping the pairs of equal labels; both groupings equal the
    autograd definition, with ties among the labels and the scores."""
    rng = np.random.default_rng(7)
    sizes = np.array([12, 1, 0, 17, 5])
    off = np.concatenate(([0], np.cumsum(sizes)))
    n = off[-1]
    if labels == "real":
        y = rng.choice([0.0, 0.25, 1.5, 2.75], n)
    elif labels == "large grades":
        y = rng.choice([0.0, 3.0, 70.0, 200.0], n)
    else:
        y = rng.choice([-1.0, 0.0, 2.0], n)
    s = np.round(rng.normal(size=n) * 2) / 2
    w = rng.uniform(0.5, 1.5, n)
    g, h, value = grad_hess(name, s, y, off, weights=w, return_value=True, hess_floor=1e-300, **hyper)
    want_value, want_g = _autograd(name, hyper, s, y, off, w)
    np.testing.assert_allclose(value, want_value, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(g, want_g, rtol=1e-10, atol=1e-10 * max(1.0, float(np.abs(want_g).max())))
    _, want_h, _ = _objective._torch_grad_hess(spec(name), hyper, s, y, off, w, None, False)
    np.testing.assert_allclose(h, np.maximum(want_h, 1e-300), rtol=1e-9, atol=1e-12)
