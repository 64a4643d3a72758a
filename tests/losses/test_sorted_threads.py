"""The compiled sort-based sweeps (pairwise hinge, Kendall hinge, RankBoost) run on ranges of lists in
threads: the values, gradients and Hessian diagonals do not depend on the number of threads."""
from __future__ import annotations

import pytest
import torch

from rankwise._validation import limit_threads
from rankwise.losses import _sorted_exp, _sorted_hinge, get


def _batch():
    gen = torch.Generator().manual_seed(27)
    s = torch.round(torch.randn(40, 300, generator=gen, dtype=torch.float64) * 8) / 4  # ties
    s[5] *= 40.0  # gaps beyond the exponential's linear continuation
    y = torch.randint(0, 5, (40, 300), generator=gen).double()
    y[7] = torch.rand(300, generator=gen, dtype=torch.float64) * 3  # real-valued labels
    m = torch.rand(40, 300, generator=gen) > 0.1
    m[3, 2:] = False  # a list of two items
    m[4] = False  # an empty list
    w = torch.rand(40, 300, generator=gen, dtype=torch.float64) + 0.5
    return s, y, m, w


def _spy(monkeypatch, module, name):
    calls = []
    kernel = getattr(module, name)

    def spy(*args):
        calls.append(args)
        return kernel(*args)
    monkeypatch.setattr(module, name, spy)
    return calls


@pytest.mark.parametrize("name,kws", [("pairwise_hinge", {"pair_weights": "none"}),
                                      ("pairwise_hinge", {"pair_weights": "delta_label"}),
                                      ("kendall_hinge", {}), ("rankboost", {"pair_weights": "none"}),
                                      ("rankboost", {"pair_weights": "delta_label"})])
def test_sort_forms_do_not_depend_on_the_thread_count(monkeypatch, name, kws):
    s, y, m, w = _batch()
    calls = _spy(monkeypatch, *((_sorted_hinge, "hinge_rows") if "hinge" in name else (_sorted_exp, "exp_rows")))
    out = {}
    for threads in (1, 3):
        calls.clear()
        x = s.clone().requires_grad_(True)
        with limit_threads(threads):
            v = get(name)(x, y, where=m, weights=w, reduction="none", method="sort", **kws)
            g, = torch.autograd.grad(v.sum(), x)
        assert (len(calls) == 1) == (threads == 1), len(calls)  # ranges of lists on 3 threads
        assert torch.isfinite(v).all() and torch.isfinite(g).all()
        out[threads] = v.detach(), g
    assert torch.equal(out[1][0], out[3][0]) and torch.equal(out[1][1], out[3][1])


@pytest.mark.parametrize("c0,c1", [(1.0, 0.0), (0.0, 1.0)])
def test_rankboost_hessian_does_not_depend_on_the_thread_count(c0, c1):
    s, y, m, w = _batch()
    with limit_threads(1):
        one = _sorted_exp.sorted_exp_terms(s, y, w * m, m, c0, c1, 50.0)
    with limit_threads(2):
        two = _sorted_exp.sorted_exp_terms(s, y, w * m, m, c0, c1, 50.0)
    for a, b in zip(one, two):
        assert torch.equal(a, b)
    assert (one[2] > 0).any()
