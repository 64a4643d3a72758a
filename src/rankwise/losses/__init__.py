"""Surrogate losses for learning to rank (PyTorch), one family per module, with metadata.

Every loss has the signature
``name_loss(scores, labels, *, where=None, weights=None, reduction="mean", **hyper)`` on
``[batch, list]`` tensors (a 1-d list is a batch of one). ``REGISTRY`` maps names to functions,
:func:`get` resolves a name, :func:`spec` gives a :class:`LossSpec` (family, convexity,
calibration, Lipschitz constants, pair and sorted forms, compiled kernel, regret constants), and
:func:`as_objective` / :func:`grad_hess` turn any loss into a LightGBM / XGBoost objective;
:func:`training_loss` / :func:`compiled` run a loss's compiled kernel as a torch loss on CPU.
:func:`max_pairs` sets how many pairs one query may visit per call of a pair loss (default
:data:`DEFAULT_MAX_PAIRS`; ``RANKWISE_MAX_PAIRS``); a query beyond it is refused up front.
"""
from __future__ import annotations

from rankwise.losses.listwise import (
    approx_ndcg_loss,
    bregman_loss,
    lambdaloss_loss,
    listmle_loss,
    listnet_loss,
    smooth_dcg1_loss,
    smooth_dcg_loss,
)
from rankwise.losses._autograd import compiled, training_loss
from rankwise.losses.objective import as_objective, grad_hess
from rankwise.losses.pairwise import (
    kendall_hinge_loss,
    lambdarank_loss,
    op_pairwise_loss,
    pairwise_hinge_loss,
    pairwise_squared_loss,
    rankboost_loss,
    ranknet_loss,
)
from rankwise.losses.pointwise import (
    pointwise_exponential_loss,
    pointwise_logistic_loss,
    pointwise_smooth_hinge_loss,
    pointwise_squared_hinge_loss,
    pointwise_squared_loss,
    pointwise_utility_regression_loss,
    sigmoid_ce_loss,
)
from rankwise.losses._spec import LossSpec, RegretRule
from rankwise.losses._utils import DEFAULT_MAX_PAIRS, max_pairs
from rankwise.losses.registry import REGISTRY, get, register, spec, unregister

__all__ = [
    "REGISTRY", "LossSpec", "RegretRule", "get", "spec", "register", "unregister", "as_objective", "grad_hess",
    "training_loss", "compiled", "max_pairs", "DEFAULT_MAX_PAIRS",
    "pointwise_squared_loss", "pointwise_utility_regression_loss", "pointwise_logistic_loss",
    "pointwise_exponential_loss", "pointwise_squared_hinge_loss", "pointwise_smooth_hinge_loss",
    "sigmoid_ce_loss", "pairwise_hinge_loss", "ranknet_loss", "lambdarank_loss", "rankboost_loss",
    "pairwise_squared_loss", "op_pairwise_loss", "kendall_hinge_loss", "listnet_loss",
    "listmle_loss", "smooth_dcg_loss", "smooth_dcg1_loss", "lambdaloss_loss", "approx_ndcg_loss",
    "bregman_loss",
]
