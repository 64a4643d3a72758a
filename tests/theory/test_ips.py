"""IPS unbiasedness under the PBM (rankwise.theory.ips): exact expectation and simulation."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.errors import InputError
from rankwise.theory.ips import ips_risk_bias, labels_enter_linearly, simulate_ips_gradient

S = np.array([0.3, -0.2, 1.0, 0.1])
R = np.array([0.9, 0.2, 0.5, 0.0])
THETA = np.array([1.0, 0.5, 1 / 3, 0.25])

LINEAR = ["op_pairwise", "pointwise_squared", "pairwise_squared", "bregman"]
NONLINEAR = ["listnet", "listmle", "pairwise_hinge"]


@pytest.mark.parametrize("loss", LINEAR)
def test_linear_losses_are_detected_and_unbiased(loss):
    assert labels_enter_linearly(loss)
    b = ips_risk_bias(loss, S, R, THETA)
    assert b.grad_bias < 1e-10
    if loss in ("op_pairwise",):  # affine in the labels in value too, not only in the gradient
        assert abs(b.value_bias) < 1e-10


@pytest.mark.parametrize("loss", NONLINEAR)
def test_nonlinear_losses_are_detected_and_biased(loss):
    assert not labels_enter_linearly(loss)
    assert ips_risk_bias(loss, S, R, THETA).grad_bias > 1e-3


def test_unbiasedness_by_simulation():
    mean, se, full = simulate_ips_gradient("op_pairwise", S, R, THETA, n_sessions=40000, random_state=1)
    z = np.abs(mean - full) / np.maximum(se, 1e-12)
    assert np.all(z < 4.5), z
    # clipping at a level that binds (θ = 0.25, 1/3 < 0.5) biases the estimate
    mean_c, se_c, _ = simulate_ips_gradient("op_pairwise", S, R, THETA, n_sessions=40000, random_state=1, clip=0.5)
    assert np.max(np.abs(mean_c - full) / np.maximum(se_c, 1e-12)) > 6


def test_naive_clicks_are_biased():
    """Training on raw clicks (θ taken as 1) is the full-information risk at θ r, not at r."""
    b_naive = ips_risk_bias("op_pairwise", S, R * THETA, np.ones(4))
    b_full = ips_risk_bias("op_pairwise", S, R, THETA)
    assert abs(b_naive.ips_value - b_full.full_value) > 1e-2


def test_zero_propensity_refused():
    with pytest.raises(InputError, match="zero propensity"):
        ips_risk_bias("op_pairwise", S, R, np.array([1.0, 0.5, 0.0, 0.2]))
