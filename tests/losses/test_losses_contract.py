"""The loss contract, checked over the whole registry (and hyperparameter variants)."""
from __future__ import annotations

import math

import pytest
import torch

from _losses_cases import (
    ALL,
    BASE_HYPER,
    SPECS,
    VARIANTS,
    is_pair_based,
    labels_for,
    needs_two_items,
    random_batch,
    reference_values,
    vid,
)
from rankwise.errors import InputError
from rankwise.losses import REGISTRY, get, spec


def _call(name, s, y, **kw):
    hyper = dict(BASE_HYPER.get(name, {}))
    hyper.update(kw.pop("hyper", {}))
    return REGISTRY[name](s, y, **kw, **hyper)


@pytest.mark.parametrize("variant", VARIANTS, ids=vid)
def test_matches_naive_reference(variant):
    name, hyper = variant
    for seed, use_w in ((0, False), (1, True)):
        s, y, m, w = random_batch(name, seed=seed)
        got = REGISTRY[name](s, y, where=m, weights=w if use_w else None, reduction="none", **hyper)
        want = reference_values(name, hyper, s, y, m, w if use_w else None)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", ALL)
def test_masking_equals_truncation(name):
    gen = torch.Generator().manual_seed(3)
    n, pad = 5, 3
    s = torch.randn(n, generator=gen, dtype=torch.float64)
    y = labels_for(name, (n,), gen)
    y[0], y[1] = 0.0, 1.0  # at least one ordered pair
    garbage_s = torch.tensor([1e3, -7.0, 0.0], dtype=torch.float64)
    garbage_y = torch.tensor([2.0, 0.0, 1.0], dtype=torch.float64).clamp(max=y.max())
    sp_ = torch.cat([s[:2], garbage_s[:1], s[2:], garbage_s[1:]]).requires_grad_(True)
    yp = torch.cat([y[:2], garbage_y[:1], y[2:], garbage_y[1:]])
    mask = torch.ones(n + pad, dtype=torch.bool)
    mask[2] = False
    mask[-2:] = False
    st = s.clone().requires_grad_(True)
    full = _call(name, sp_, yp, where=mask)
    trunc = _call(name, st, y)
    torch.testing.assert_close(full, trunc, rtol=1e-12, atol=1e-12)
    gf, = torch.autograd.grad(full, sp_)
    gt, = torch.autograd.grad(trunc, st)
    assert torch.all(gf[~mask] == 0)
    torch.testing.assert_close(gf[mask], gt, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ALL)
def test_empty_lists_give_zero_and_leave_the_mean(name):
    s, y, m, _ = random_batch(name, B=3, L=6, seed=5, p_mask=0.0)
    y[:, 0], y[:, 1] = 0.0, 1.0
    base = _call(name, s, y, where=m)
    # add an all-masked list and (for pairwise losses) lists without a valid pair
    extra_s = torch.randn(3, 6, dtype=torch.float64)
    extra_y = torch.ones(3, 6, dtype=torch.float64)
    extra_m = torch.zeros(3, 6, dtype=torch.bool)
    n_empty = 1
    if is_pair_based(name):  # equal labels: no ordered pair
        extra_m[1] = True
        n_empty += 1
    if is_pair_based(name) or needs_two_items(name):  # a one-item list
        extra_m[2, 3] = True
        n_empty += 1
    s2 = torch.cat([s, extra_s]).requires_grad_(True)
    y2, m2 = torch.cat([y, extra_y]), torch.cat([m, extra_m])
    none = _call(name, s2, y2, where=m2, reduction="none")
    assert torch.all(none[3:3 + n_empty] == 0)
    mean = _call(name, s2, y2, where=m2)
    torch.testing.assert_close(mean, base, rtol=1e-12, atol=1e-12)
    g, = torch.autograd.grad(mean, s2)
    assert torch.all(g[3:3 + n_empty] == 0) and torch.isfinite(g).all()
    # a batch made only of empty lists: exactly 0 with a zero (finite) gradient
    se = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    z = _call(name, se, torch.zeros(2, 4, dtype=torch.float64), where=torch.zeros(2, 4, dtype=torch.bool))
    assert z.item() == 0.0
    gz, = torch.autograd.grad(z, se)
    assert torch.all(gz == 0)


@pytest.mark.parametrize("name", ALL)
def test_none_summed_equals_sum_and_mean(name):
    s, y, m, w = random_batch(name, seed=7)
    none = _call(name, s, y, where=m, weights=w, reduction="none")
    total = _call(name, s, y, where=m, weights=w, reduction="sum")
    torch.testing.assert_close(none.sum(), total)
    lw = torch.tensor([1.0, 2.0, 0.5, 3.0], dtype=torch.float64)
    none_lw = _call(name, s, y, where=m, weights=lw, reduction="none")
    torch.testing.assert_close(none_lw, _call(name, s, y, where=m, reduction="none") * lw)


@pytest.mark.parametrize("variant", VARIANTS, ids=vid)
def test_gradcheck_random_points(variant):
    name, hyper = variant
    s, y, m, w = random_batch(name, B=2, L=5, seed=11)
    s = s.clone().requires_grad_(True)
    f = lambda x: REGISTRY[name](x, y, where=m, weights=w, reduction="sum", **hyper)  # noqa: E731
    assert torch.autograd.gradcheck(f, (s,), eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", [n for n in ALL if SPECS[n].smooth_at_ties])
def test_gradcheck_at_ties(name):
    # tied scores within a list, tied labels, and a tie between a relevant and a non-relevant item
    s = torch.tensor([[0.3, 0.3, 0.3, -1.2, 0.8], [0.0, 0.0, 0.5, 0.5, 0.5]], dtype=torch.float64,
                     requires_grad=True)
    hi = 1.0 if name == "sigmoid_ce" else 2.0
    y = torch.tensor([[hi, 0.0, hi, 1.0 if hi > 1 else 0.0, 0.0], [hi, hi, 0.0, 0.0, hi]], dtype=torch.float64)
    f = lambda x: _call(name, x, y, reduction="sum")  # noqa: E731
    assert torch.autograd.gradcheck(f, (s,), eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ALL)
def test_finite_for_extreme_scores_zero_labels_and_single_items(name, dtype):
    gen = torch.Generator().manual_seed(13)
    sign = torch.where(torch.rand(3, 6, generator=gen) > 0.5, 1.0, -1.0)
    cases = [
        (1e4 * sign, labels_for(name, (3, 6), gen)),
        (torch.randn(3, 6, generator=gen), torch.zeros(3, 6)),
        (1e4 * sign[:, :1], labels_for(name, (3, 1), gen)),
        (torch.tensor([[1e4, -1e4, 1e4, -1e4]]), torch.tensor([[0.0, 2.0, 0.0, 1.0]]).clamp(max=1 if name == "sigmoid_ce" else 2)),
    ]
    for s, y in cases:
        s = s.to(dtype).requires_grad_(True)
        v = _call(name, s, y.to(dtype))
        g, = torch.autograd.grad(v, s)
        assert torch.isfinite(v), (name, v)
        assert torch.isfinite(g).all(), (name, g)


@pytest.mark.parametrize("name", ALL)
def test_one_dimensional_input_is_a_batch_of_one(name):
    s, y, m, w = random_batch(name, B=1, L=6, seed=17)
    a = _call(name, s[0], y[0], where=m[0], weights=w[0], reduction="none")
    b = _call(name, s, y, where=m, weights=w, reduction="none")
    assert a.dim() == 0
    torch.testing.assert_close(a, b[0])


def test_sort_and_dense_forms_agree_on_long_lists_with_ties():
    gen = torch.Generator().manual_seed(19)
    s = torch.round(torch.randn(3, 300, generator=gen, dtype=torch.float64) * 4) / 4  # many ties
    y = torch.randint(0, 5, (3, 300), generator=gen).double()
    y[2] = torch.rand(300, generator=gen, dtype=torch.float64) * 3  # real-valued labels
    m = torch.rand(3, 300, generator=gen) > 0.1
    w = torch.rand(3, 300, generator=gen, dtype=torch.float64) + 0.5
    for fn_name, kws in (("pairwise_hinge", {"pair_weights": "none"}),
                         ("pairwise_hinge", {"pair_weights": "delta_label"}),
                         ("kendall_hinge", {}), ("rankboost", {"pair_weights": "none"}),
                         ("rankboost", {"pair_weights": "delta_label"}), ("pairwise_squared", {})):
        fn = get(fn_name)
        a = s.clone().requires_grad_(True)
        b = s.clone().requires_grad_(True)
        va = fn(a, y, where=m, weights=w, method="sort", reduction="sum", **kws)
        vb = fn(b, y, where=m, weights=w, method="dense", reduction="sum", **kws)
        torch.testing.assert_close(va, vb, rtol=1e-10, atol=1e-8)
        ga, = torch.autograd.grad(va, a)
        gb, = torch.autograd.grad(vb, b)
        torch.testing.assert_close(ga, gb, rtol=1e-9, atol=1e-8)


# ------------------------------------------------------------------ errors at the boundary


def test_get_unknown_name_lists_valid_names():
    with pytest.raises(InputError, match=r"unknown loss 'ndcg_loss'; valid names: .*listnet.*ranknet"):
        get("ndcg_loss")
    with pytest.raises(InputError, match="valid names"):
        spec("nope")


def test_registry_names_and_specs():
    required = {"pointwise_squared", "pointwise_logistic", "pointwise_exponential",
                "pointwise_squared_hinge", "pointwise_smooth_hinge", "sigmoid_ce", "pairwise_hinge",
                "ranknet", "rankboost", "pairwise_squared", "op_pairwise", "kendall_hinge", "listnet",
                "listmle", "smooth_dcg", "lambdaloss", "approx_ndcg", "bregman"}
    assert required <= set(REGISTRY)
    for name, fn in REGISTRY.items():
        sp = spec(name)
        assert sp is spec(fn) and sp.fn is fn and sp.name == name
        assert fn.__name__ == name + "_loss"
        assert sp.family in ("pointwise", "pairwise", "listwise")
        assert sp.order_preserving in (True, False, None)
        assert ".. math::" in fn.__doc__ and "References" in fn.__doc__
        with pytest.raises(Exception):
            sp.name = "x"  # frozen


@pytest.mark.parametrize("name", ALL)
def test_bad_input_gives_clear_errors(name):
    s = torch.zeros(2, 3)
    y = torch.zeros(2, 3)
    with pytest.raises(InputError, match="labels have shape"):
        _call(name, s, torch.zeros(2, 4))
    with pytest.raises(InputError, match="where must be a boolean mask"):
        _call(name, s, y, where=torch.ones(2, 3))
    with pytest.raises(InputError, match="reduction must be one of"):
        _call(name, s, y, reduction="avg")
    with pytest.raises(InputError, match="weights must be finite and non-negative"):
        _call(name, s, y, weights=-torch.ones(2, 3))
    with pytest.raises(InputError, match="weights must be per item"):
        _call(name, s, y, weights=torch.ones(5))
    with pytest.raises(InputError, match="scores contain NaN"):
        _call(name, torch.full((2, 3), math.nan), y)
    with pytest.raises(InputError, match="scores must be"):
        _call(name, torch.zeros(2, 3, 1), torch.zeros(2, 3, 1))


def test_template_range_errors_name_the_parameter():
    s, y = torch.zeros(1, 3), torch.tensor([[0.0, 1.0, 2.0]])
    with pytest.raises(InputError, match=r"pointwise_logistic: utilities u\(y\) must lie in \[0, eta\]"):
        get("pointwise_logistic")(s, y)
    with pytest.raises(InputError, match="sigmoid_ce: labels must lie in"):
        get("sigmoid_ce")(s, y)
    with pytest.raises(InputError, match=r"alpha must lie in \(0, eta/2\)"):
        get("pointwise_smooth_hinge")(s, y, eta=2.0, alpha=1.5)
    with pytest.raises(InputError, match="pair_weights must be one of"):
        get("ranknet")(s, y, pair_weights="ndcg")
    with pytest.raises(InputError, match="utility must be 'linear', 'exp2' or a callable"):
        get("bregman")(s, y, utility="log")
    with pytest.raises(InputError, match="psi='kl' .* needs link='exp'"):
        get("bregman")(s, y, psi="kl")
    with pytest.raises(InputError, match="k must be a positive integer"):
        get("smooth_dcg")(s, y, k=0)


def test_callable_utility_and_float64_float_labels():
    s = torch.tensor([[0.2, -0.1, 0.4]], dtype=torch.float64)
    y = torch.tensor([[0.0, 1.0, 2.0]], dtype=torch.float64)
    a = get("op_pairwise")(s, y, utility=lambda t: torch.exp2(t) - 1)
    b = get("op_pairwise")(s, y, utility="exp2")
    assert a.dtype == torch.float64
    torch.testing.assert_close(a, b)
