"""The loss contract, checked over the whole registry (and hyperparameter variants)."""
from __future__ import annotations

import dataclasses
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
    needs_positive_gain,
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
    if is_pair_based(name) or needs_positive_gain(name):
        # equal labels: no ordered pair; all labels 0: ideal DCG 0, nothing to rank
        extra_m[1] = True
        if needs_positive_gain(name):
            extra_y[1] = 0.0
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
def test_zero_length_lists_give_zero_like_empty_lists(name):
    for shape in ((3, 0), (0,)):
        s = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
        y = torch.zeros(shape, dtype=torch.float64)
        v = _call(name, s, y)
        g, = torch.autograd.grad(v, s)
        assert v.item() == 0.0 and g.shape == shape
        none = _call(name, s, y, reduction="none")
        assert none.shape == shape[:-1] and torch.all(none == 0)
    w = torch.zeros(3, 0, dtype=torch.float64)
    assert _call(name, torch.zeros(3, 0), torch.zeros(3, 0), weights=w, reduction="sum").item() == 0.0


EXP2_GAIN_LOSSES = [("approx_ndcg", {}), ("smooth_dcg", {}), ("smooth_dcg1", {}), ("lambdaloss", {}),
                    ("pointwise_utility_regression", {}), ("ranknet", {"pair_weights": "delta_ndcg"}),
                    ("bregman", {"utility": "exp2"})]


@pytest.mark.parametrize("name,hyper", EXP2_GAIN_LOSSES, ids=lambda v: v if isinstance(v, str) else str(v))
@pytest.mark.parametrize("dtype,limit", [(torch.float64, 1024), (torch.float32, 128)])
def test_exp2_gain_overflow_is_refused_naming_the_loss_and_the_label(name, hyper, dtype, limit):
    s = torch.zeros(2, 3, dtype=dtype)
    y = torch.tensor([[0.0, 1.0, 2.0], [0.0, float(limit), 1.0]], dtype=dtype)
    with pytest.raises(InputError, match=rf"{name}: label {limit} overflows the exp2 gain 2\^y - 1 in "
                                         rf"{str(dtype)[6:]} \(labels must be < {limit}\)"):
        REGISTRY[name](s, y, **hyper)
    # a masked huge label is not a label
    assert torch.isfinite(REGISTRY[name](s, y, where=y < limit, **hyper))


@pytest.mark.parametrize("name", ["approx_ndcg", "smooth_dcg", "lambdaloss", "smooth_dcg1"])
def test_ndcg_type_losses_stay_finite_for_gains_near_the_limit(name):
    # 2^1023 twice overflows a DCG sum; the NDCG ratio does not (gains are scaled by the largest)
    s = torch.tensor([[0.5, -0.2, 0.1]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([[1023.0, 1023.0, 0.0]], dtype=torch.float64)
    v = REGISTRY[name](s, y)
    g, = torch.autograd.grad(v, s)
    assert torch.isfinite(v) and torch.isfinite(g).all()
    if name != "smooth_dcg1":  # NDCG-type: equal to the same list with both top labels 1
        torch.testing.assert_close(v, REGISTRY[name](s, torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64)))


def test_a_loss_that_overflows_its_dtype_is_refused_not_returned():
    with pytest.raises(InputError,
                       match=r"pointwise_squared: the loss value overflows float32 .*largest \|score\| 1e\+30"):
        get("pointwise_squared")(torch.tensor([[1e30, 0.0]]), torch.tensor([[1.0, 0.0]]))


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
    if spec(name).step_weights(hyper):
        pytest.skip("weights held constant in the step (norm): the gradient is the step's, checked against the "
                    "engine and the naive reference instead")
    s, y, m, w = random_batch(name, B=2, L=5, seed=11)
    s = s.clone().requires_grad_(True)
    f = lambda x: REGISTRY[name](x, y, where=m, weights=w, reduction="sum", **hyper)  # noqa: E731
    assert torch.autograd.gradcheck(f, (s,), eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", [n for n in ALL if SPECS[n].smooth_at_ties])
def test_gradcheck_at_ties(name):
    # tied scores within a list, tied labels, and a tie between a relevant and a non-relevant item
    s = torch.tensor([[0.3, 0.3, 0.3, -1.2, 0.8], [0.0, 0.0, 0.5, 0.5, 0.5]], dtype=torch.float64,
                     requires_grad=True)
    hi = 1.0 if spec(name).binary_labels else 2.0
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
        (torch.tensor([[1e4, -1e4, 1e4, -1e4]]), torch.tensor([[0.0, 2.0, 0.0, 1.0]]).clamp(max=1 if spec(name).binary_labels else 2)),
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


SORT_FORMS = (("pairwise_hinge", {"pair_weights": "none"}), ("pairwise_hinge", {"pair_weights": "delta_label"}),
              ("kendall_hinge", {}), ("rankboost", {"pair_weights": "none"}),
              ("rankboost", {"pair_weights": "delta_label"}), ("pairwise_squared", {}),
              ("op_pairwise", {"phi": "exponential"}), ("op_pairwise", {"phi": "exponential", "utility": "exp2"}),
              ("op_pairwise", {"phi": "squared_hinge"}))


@pytest.mark.parametrize("spread", [4.0, 60.0])
def test_sort_and_dense_forms_agree_on_long_lists_with_ties(spread):
    """Spread 60: score gaps far beyond 50, where the exponential continues linearly -- the
    sort-based RankBoost and exponential template are exact there too (no dense fallback)."""
    gen = torch.Generator().manual_seed(19)
    s = torch.round(torch.randn(3, 300, generator=gen, dtype=torch.float64) * spread) / 4  # many ties
    y = torch.randint(0, 5, (3, 300), generator=gen).double()
    y[2] = torch.rand(300, generator=gen, dtype=torch.float64) * 3  # real-valued labels
    m = torch.rand(3, 300, generator=gen) > 0.1
    w = torch.rand(3, 300, generator=gen, dtype=torch.float64) + 0.5
    for fn_name, kws in SORT_FORMS:
        fn = get(fn_name)
        a = s.clone().requires_grad_(True)
        b = s.clone().requires_grad_(True)
        va = fn(a, y, where=m, weights=w, method="sort", reduction="sum", **kws)
        vb = fn(b, y, where=m, weights=w, method="dense", reduction="sum", **kws)
        torch.testing.assert_close(va, vb, rtol=1e-10, atol=1e-8, msg=lambda e: f"{fn_name} {kws}: {e}")
        ga, = torch.autograd.grad(va, a)
        gb, = torch.autograd.grad(vb, b)
        torch.testing.assert_close(ga, gb, rtol=1e-9, atol=1e-8 * float(gb.abs().max()),
                                   msg=lambda e: f"{fn_name} {kws}: {e}")


def test_rankboost_auto_is_the_sort_form_for_any_score_range(monkeypatch):
    """No dense O(n^2) fallback when a list's scores span more than 50: "auto" never builds the
    pair matrices, and equals the dense value."""
    from rankwise.losses import pairwise

    s = torch.tensor([[-3000.0, 0.0, 20.0, 90.0, 4000.0]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([[2.0, 1.0, 0.0, 1.0, 0.0]], dtype=torch.float64)
    want = get("rankboost")(s, y, method="dense")

    def no_dense(*args, **kwargs):
        raise AssertionError("the dense pair form was used")
    monkeypatch.setattr(pairwise, "_dense", no_dense)
    for pw in ("none", "delta_label"):
        v = get("rankboost")(s, y, pair_weights=pw)
        g, = torch.autograd.grad(v, s)
        assert torch.isfinite(v) and torch.isfinite(g).all()
    torch.testing.assert_close(get("rankboost")(s, y), want, rtol=1e-12, atol=0)


_SORT_EXP_FORMS = [("rankboost", {}), ("rankboost", {"pair_weights": "delta_label"}),
                   ("op_pairwise", {"phi": "exponential"}), ("op_pairwise", {"phi": "squared_hinge"})]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name,kws", _SORT_EXP_FORMS)
def test_sort_forms_are_finite_for_extreme_scores(name, kws, dtype):
    s = torch.tensor([[1e4, -1e4, 1e4, -1e4, 0.0], [3.0, 3.0, -2.0, 1e4, 1e4]], dtype=dtype, requires_grad=True)
    y = torch.tensor([[0.0, 2.0, 0.0, 1.0, 1.0], [1.0, 0.0, 2.0, 0.0, 2.0]], dtype=dtype)
    v = get(name)(s, y, method="sort", **kws)
    g, = torch.autograd.grad(v, s)
    assert torch.isfinite(v) and torch.isfinite(g).all()
    if dtype == torch.float64:
        torch.testing.assert_close(v, get(name)(s, y, method="dense", **kws), rtol=1e-10, atol=0)


@pytest.mark.parametrize("name,kws", _SORT_EXP_FORMS)
def test_sort_forms_pass_gradcheck_across_the_linear_continuation(name, kws):
    # gaps of ~50 on both sides of the threshold, ties, a masked item
    s = torch.tensor([[0.0, 49.0, 51.5, 51.5, -52.0, 3.0], [0.3, 0.3, 0.3, -1.0, 0.8, 0.8]], dtype=torch.float64,
                     requires_grad=True)
    y = torch.tensor([[2.0, 0.0, 1.0, 0.0, 1.0, 2.0], [1.0, 0.0, 1.0, 2.0, 0.0, 0.0]], dtype=torch.float64)
    m = torch.ones(2, 6, dtype=torch.bool)
    m[0, 5] = False
    w = torch.tensor([[1.0, 0.5, 2.0, 1.0, 1.5, 1.0], [1.0] * 6], dtype=torch.float64)
    # per-list outputs: list 0 reaches e^50, a finite difference of a sum would drown list 1
    f = lambda x: get(name)(x, y, where=m, weights=w, reduction="none", method="sort", **kws)  # noqa: E731
    assert torch.autograd.gradcheck(f, (s,), eps=1e-6, atol=1e-5, rtol=1e-4)


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
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'name'"):
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
