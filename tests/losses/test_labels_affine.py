"""Every registered loss declares whether its gradient is affine in the labels (``LossSpec.labels_affine``,
what makes an IPS-weighted risk unbiased); the declaration agrees with the numerical check
:func:`rankwise.theory.ips.labels_enter_linearly` under every choice of the hyperparameters that change it."""
from __future__ import annotations

import itertools

import pytest

from rankwise.errors import InputError
from rankwise.losses.registry import REGISTRY, hyperparameters, spec
from rankwise.theory.ips import labels_enter_linearly

#: the categorical hyperparameters of the registered losses, every value
OPTIONS = {"utility": ["linear", "exp2"], "gain": ["linear", "exp2"],
           "phi": ["logistic", "exponential", "squared_hinge"], "psi": ["squared", "kl"],
           "link": ["identity", "exp"], "pair_weights": ["none", "delta_label", "delta_ndcg"]}


def _variants(name):
    keys = [k for k in (hyperparameters(spec(name).fn) or []) if k in OPTIONS]
    return [dict(zip(keys, combo)) for combo in itertools.product(*[OPTIONS[k] for k in keys])]


CASES = [(name, h) for name in sorted(REGISTRY) for h in _variants(name)]


@pytest.mark.parametrize("name, hyper", CASES, ids=[f"{n}-{'-'.join(h.values()) or 'default'}" for n, h in CASES])
def test_declared_flag_agrees_with_the_numerical_check(name, hyper):
    try:
        numeric = labels_enter_linearly(name, **hyper)
    except InputError:
        pytest.skip(f"{name} refuses {hyper}")
    assert spec(name).affine_in_labels(hyper) is numeric


def test_every_loss_declares_the_flag_and_some_have_it():
    flags = {n: spec(n).affine_in_labels() for n in REGISTRY}
    assert all(f in (True, False) for f in flags.values())
    assert {n for n, f in flags.items() if f} >= {"pointwise_squared", "op_pairwise", "pairwise_squared", "bregman"}
    assert not flags["lambdarank"] and not flags["listnet"]


def test_a_callable_utility_is_unknown():
    assert spec("op_pairwise").affine_in_labels({"utility": lambda y: 2 * y}) is None
