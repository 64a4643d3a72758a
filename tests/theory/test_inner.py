"""Inner performance and its supremum; inner risk minimisation on cones (isotonic peer)."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.errors import InputError
from rankwise.theory import (
    Distribution, best_performance, expected_utility, get_measure, inner_performance, label_space,
    make_inner_risk, minimize_inner_risk, minimize_inner_risk_in_cone,
)

from _ref import ref

RNG = np.random.default_rng(3)
DIRECT = {"dcg": lambda y, p: ref.dcg(y, p), "ndcg@2": lambda y, p: ref.ndcg(y, p, 2),
          "p@2": lambda y, p: ref.precision(y, p, 2), "auc": ref.auc, "err": ref.err,
          "ap": ref.average_precision}


@pytest.mark.parametrize("name", list(DIRECT))
def test_supremum_sort_by_U_equals_brute_force(name):
    binary = name in ("p@2", "auc", "err", "ap")
    Y = label_space(4, 2 if binary else 3)
    for _ in range(5):
        d = Distribution(Y, RNG.dirichlet(np.full(len(Y), 0.3)))
        rbar, sigma = best_performance(name, d)
        assert rbar == pytest.approx(ref.best_inner_performance(DIRECT[name], d.labels, d.probs), abs=1e-12)
        assert inner_performance(name, d, -np.argsort(sigma).astype(float)) == pytest.approx(rbar, abs=1e-12)


def test_inner_performance_with_ties_is_the_mixture_of_scoring_values():
    Y = label_space(3, 3)
    d = Distribution(Y, RNG.dirichlet(np.ones(len(Y))))
    s = np.array([1.0, 1.0, 0.0])
    expect = sum(p * ref.scoring_value(DIRECT["dcg"], y, s) for y, p in zip(Y, d.probs))
    assert inner_performance("dcg", d, s) == pytest.approx(expect)


def test_expected_utility_and_refusal_for_err():
    Y = np.array([[0.0, 1.0], [2.0, 0.0]])
    d = Distribution(Y, [0.25, 0.75])
    np.testing.assert_allclose(expected_utility("dcg", d), [0.75 * 3.0, 0.25 * 1.0])
    with pytest.raises(InputError, match="needs a GPPM"):
        expected_utility("err", d)


def test_squared_loss_minimiser_is_U_and_cone_minimum_is_isotonic_regression():
    """inf over the cone of σ of E‖v − s‖² is the (antitonic) isotonic regression of U along σ:
    checked against scikit-learn's IsotonicRegression."""
    from sklearn.isotonic import IsotonicRegression

    Y = label_space(4, 3)
    m = get_measure("dcg")
    for _ in range(5):
        d = Distribution(Y, RNG.dirichlet(np.full(len(Y), 0.5)))
        V = np.stack([m.utility(y) for y in Y])
        risk = make_inner_risk("pointwise_squared", d, targets=V, utility="linear")
        U = expected_utility(m, d)
        s_star, l_star = minimize_inner_risk(risk)
        np.testing.assert_allclose(s_star, U, atol=1e-6)
        const = d.probs @ (V ** 2).sum(1) - (U ** 2).sum()
        assert l_star == pytest.approx(const, abs=1e-8)
        sigma = RNG.permutation(4)
        s_cone, l_cone = minimize_inner_risk_in_cone(risk, sigma)
        iso = IsotonicRegression(increasing=False).fit_transform(np.arange(4), U[sigma])
        np.testing.assert_allclose(s_cone[sigma], iso, atol=1e-5)
        assert l_cone == pytest.approx(const + ((U[sigma] - iso) ** 2).sum(), abs=1e-7)


def test_non_convex_loss_uses_multistart():
    Y = label_space(3, 2)
    d = Distribution(Y, RNG.dirichlet(np.ones(len(Y))))
    risk = make_inner_risk("smooth_dcg1", d)
    assert not risk.convex
    _, l_multi = minimize_inner_risk(risk, seed=0)
    _, l_single = minimize_inner_risk(risk, n_starts=0)
    assert l_multi <= l_single + 1e-12


def test_loss_returning_nan_is_reported():
    import torch

    def bad(scores, labels, *, reduction="none"):
        return torch.full(scores.shape[:1], float("nan"), dtype=scores.dtype) + 0 * scores.sum(-1)

    d = Distribution(label_space(2, 2), np.full(4, 0.25))
    with pytest.raises(InputError, match="non-finite"):
        minimize_inner_risk(make_inner_risk(bad, d))
