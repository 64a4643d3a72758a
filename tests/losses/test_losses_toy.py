"""A loss added in one place: a toy loss registered here only (its function, its LossSpec) is
picked up by the registry-wide contract tests, the GBDT objective and the Lipschitz checker
without any other edit."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import test_losses_contract as contract
import test_losses_objective as objective
from rankwise.losses import REGISTRY, LossSpec, as_objective, grad_hess, spec
from rankwise.losses._utils import prepare, reduce
from rankwise.losses.registry import register, unregister


def toy_logcosh_loss(scores, labels, *, where=None, weights=None, reduction="mean", scale=1.0):
    r"""Toy pointwise loss: log cosh of the residual.

    .. math:: \ell = \sum_i \log\cosh\bigl(s_i - y_i / c\bigr)

    References
    ----------
    None: a test fixture.
    """
    name = "toy_logcosh"
    b = prepare(scores, labels, where, weights, loss=name)
    r = b.scores - b.labels / scale
    # log cosh r = |r| + log1p(e^{-2|r|}) - log 2: finite for any r
    term = r.abs() + torch.log1p(torch.exp(-2 * r.abs())) - math.log(2.0)
    if b.item_w is not None:
        term = term * b.item_w
    term = torch.where(b.mask, term, torch.zeros_like(term))
    return reduce(term.sum(-1), b.mask.any(-1), b, reduction, loss=name)


TOY = LossSpec("toy_logcosh", toy_logcosh_loss, "pointwise", True, True,
               lambda m, scale=1.0: float(m), lambda m, scale=1.0: math.sqrt(m), {"scale": 1.0},
               "test fixture", "|tanh| <= 1", separable=True)


@pytest.fixture
def toy():
    register(TOY)
    try:
        yield TOY.name
    finally:
        unregister(TOY.name)


def test_registered_and_unregistered(toy):
    assert REGISTRY[toy] is toy_logcosh_loss and spec(toy_logcosh_loss) is TOY
    with pytest.raises(Exception, match="already registered"):
        register(TOY)


CONTRACT = [contract.test_masking_equals_truncation, contract.test_empty_lists_give_zero_and_leave_the_mean,
            contract.test_zero_length_lists_give_zero_like_empty_lists, contract.test_none_summed_equals_sum_and_mean,
            contract.test_gradcheck_at_ties, contract.test_one_dimensional_input_is_a_batch_of_one,
            contract.test_bad_input_gives_clear_errors]


@pytest.mark.parametrize("check", CONTRACT, ids=lambda f: f.__name__)
def test_the_registry_wide_contract_covers_the_toy_loss(toy, check):
    check(toy)


def test_extreme_scores_and_gradcheck_cover_the_toy_loss(toy):
    for dtype in (torch.float32, torch.float64):
        contract.test_finite_for_extreme_scores_zero_labels_and_single_items(toy, dtype)
    contract.test_gradcheck_random_points((toy, {}))


def test_the_gbdt_objective_covers_the_toy_loss(toy):
    objective.test_grad_hess_matches_autograd_on_the_padded_form(toy)
    # and it drives LightGBM through as_objective with no other edit
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.clip(np.round(X[:, 0] + 1), 0, 2)
    dtrain = lgb.Dataset(X, y, group=[20] * 10)
    bst = lgb.train({"objective": as_objective(toy), "verbosity": -1, "min_data_in_leaf": 5}, dtrain,
                    num_boost_round=5)
    g, h = grad_hess(toy, np.zeros(200), y, np.arange(0, 201, 20))
    assert np.all(h > 0) and np.corrcoef(bst.predict(X), y)[0, 1] > 0.5


def test_the_lipschitz_checker_covers_the_toy_loss(toy):
    from rankwise.theory import lipschitz

    est = lipschitz(toy, "inf", 4, n_restarts=4, n_steps=20)
    assert est.declared == 4.0 and est.declared_ok and est.estimate > 3.5
