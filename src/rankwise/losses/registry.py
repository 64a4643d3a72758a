"""The loss registry: snake_case name -> loss function, and each loss's metadata (:class:`LossSpec`).

Lipschitz constants are *valid upper bounds* on sup ‖∇_s ℓ‖ in the dual norm (ℓ1 for the
ℓ∞ constant, ℓ2 for the ℓ2 constant) over scores and labels, for unit item weights and the
default hyperparameters, as a function of the list length m (``None`` where the loss has no
finite constant, e.g. squared or exponential losses, or where none is known in closed form).
Those marked *tight* in ``notes`` are attained (or approached) by some scores and labels.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Callable

from rankwise.errors import InputError
from rankwise.losses import listwise, pairwise, pointwise


@dataclass(frozen=True)
class LossSpec:
    """Metadata of one registered loss.

    Attributes
    ----------
    name, fn : registry name and the loss function.
    family : ``"pointwise"``, ``"pairwise"`` or ``"listwise"``.
    convex : convex in the score vector (for the default hyperparameters).
    order_preserving : calibrated in the sense of Calauzènes et al. (2013, Def. 3.3) w.r.t. the
        loss's utility (True/False), or None when unknown.
    lipschitz_inf, lipschitz_2 : ``m -> float`` upper bounds (see the module docstring), or None.
    defaults : hyperparameters and their defaults.
    reference : short citation.
    notes : one line on ties, numerics, the Hessian used by :func:`rankwise.losses.as_objective`.
    smooth_at_ties : differentiable where two scores (or labels) tie.
    hessian : ``"exact"`` (closed-form diagonal) or ``"abs_grad"`` (positive approximation)
        in :func:`rankwise.losses.grad_hess`.
    """

    name: str
    fn: Callable
    family: str
    convex: bool
    order_preserving: bool | None
    lipschitz_inf: Callable[[int], float] | None
    lipschitz_2: Callable[[int], float] | None
    defaults: dict = field(default_factory=dict)
    reference: str = ""
    notes: str = ""
    smooth_at_ties: bool = True
    hessian: str = "exact"


def _maxcut(m: int) -> float:
    return 2.0 * (m * m // 4)


def _hinge_l2(m: int) -> float:
    # ‖g‖2 <= sqrt(‖g‖1 ‖g‖inf), ‖g‖1 <= 2⌊m²/4⌋, ‖g‖inf <= m - 1
    return math.sqrt(_maxcut(m) * max(m - 1, 0))


def _kendall_norm(m: int) -> float:
    return 2.0 / (m * (m - 1)) if m > 1 else 0.0


CT = "Calauzènes, Usunier & Gallinari, Machine Learning 93, 2013, Table 2"

_SPECS = [
    LossSpec("pointwise_squared", pointwise.pointwise_squared_loss, "pointwise", True, True, None, None,
             {"utility": "linear"}, CT + "; Cossock & Zhang 2008",
             "unbounded gradient: no Lipschitz constant; Hessian 2 exactly"),
    LossSpec("pointwise_utility_regression", pointwise.pointwise_utility_regression_loss, "pointwise",
             True, True, None, None, {"utility": "exp2"}, "Cossock & Zhang 2008",
             "regression on 2^y - 1: order-preserving w.r.t. the DCG utility"),
    LossSpec("pointwise_logistic", pointwise.pointwise_logistic_loss, "pointwise", True, True,
             lambda m, eta=1.0: m * eta, lambda m, eta=1.0: math.sqrt(m) * eta,
             {"utility": "linear", "eta": 1.0}, CT, "|∂ℓ/∂s_i| <= max(v, η - v) <= η: tight (v = 0, s -> ∞)"),
    LossSpec("pointwise_exponential", pointwise.pointwise_exponential_loss, "pointwise", True, True,
             None, None, {"utility": "linear", "eta": 1.0}, CT, "exp continued linearly above 50"),
    LossSpec("pointwise_squared_hinge", pointwise.pointwise_squared_hinge_loss, "pointwise", True, True,
             None, None, {"utility": "linear", "eta": 1.0, "t": 1.0}, CT, "unbounded gradient"),
    LossSpec("pointwise_smooth_hinge", pointwise.pointwise_smooth_hinge_loss, "pointwise", True, True,
             lambda m, eta=1.0: m * eta, lambda m, eta=1.0: math.sqrt(m) * eta,
             {"utility": "linear", "eta": 1.0, "alpha": 0.25}, CT, "φ_α' ∈ [0, 1]: tight"),
    LossSpec("sigmoid_ce", pointwise.sigmoid_ce_loss, "pointwise", True, True,
             lambda m: float(m), lambda m: math.sqrt(m), {},
             "Kotłowski et al. ICML 2011; " + CT + " (η = 1)", "binary labels in [0, 1]; tight"),
    LossSpec("pairwise_hinge", pairwise.pairwise_hinge_loss, "pairwise", True, False,
             _maxcut, _hinge_l2, {"pair_weights": "none", "method": "auto"},
             "Joachims KDD 2002; Chaudhuri & Tewari ICML 2015 §3.3",
             "ℓ∞ constant 2⌊m²/4⌋ is tight (two label levels, equal scores) and grows with m; "
             "O(n log n) Fenwick sweep; Hessian 0 a.e., so the GBDT adapter uses |grad|",
             hessian="abs_grad"),
    LossSpec("ranknet", pairwise.ranknet_loss, "pairwise", True, False,
             lambda m, sigma=1.0: sigma * _maxcut(m), lambda m, sigma=1.0: sigma * _hinge_l2(m),
             {"sigma": 1.0, "pair_weights": "none"}, "Burges et al. ICML 2005",
             "not order-preserving in general (Duchi, Mackey & Jordan ICML 2010); O(n^2)"),
    LossSpec("rankboost", pairwise.rankboost_loss, "pairwise", True, False, None, None,
             {"pair_weights": "none", "method": "auto"}, "Freund et al. JMLR 2003",
             "exp continued linearly above 50; O(n log n) log-domain Fenwick sweeps for any score range "
             "(dense O(n^2) for delta_ndcg weights); exact Hessian diagonal from the same sweeps"),
    LossSpec("pairwise_squared", pairwise.pairwise_squared_loss, "pairwise", True, True, None, None,
             {"utility": "linear", "method": "auto"}, CT,
             "all pairs; O(n) closed form; Hessian diagonal 2 w_i (Σ_j w_j - w_i)"),
    LossSpec("op_pairwise", pairwise.op_pairwise_loss, "pairwise", True, True, None, None,
             {"utility": "linear", "phi": "logistic", "method": "auto"}, CT + ", eq. (4)",
             "Lipschitz constant depends on the utility range; O(n log n) for phi exponential and "
             "squared_hinge, O(n^2) for the logistic"),
    LossSpec("kendall_hinge", pairwise.kendall_hinge_loss, "pairwise", True, False,
             lambda m: _kendall_norm(m) * _maxcut(m), lambda m: _kendall_norm(m) * _hinge_l2(m),
             {"method": "auto"}, "Shalev-Shwartz & Ben-David 2014, §17.4",
             "averaged over r(r-1)/2 pairs: ℓ∞ constant <= 1 + 1/(m-1), bounded in m; tight",
             hessian="abs_grad"),
    LossSpec("listnet", listwise.listnet_loss, "listwise", True, None,
             lambda m, temperature=1.0: 2.0 / temperature, lambda m, temperature=1.0: math.sqrt(2.0) / temperature,
             {"temperature": 1.0}, "Cao et al. ICML 2007; Chaudhuri & Tewari 2015, Prop. 1",
             "constants independent of m (tight as m grows); NDCG-consistency depends on the target "
             "distribution (Ravikumar et al. 2011)"),
    LossSpec("listmle", listwise.listmle_loss, "listwise", True, None,
             lambda m: 2.0 * max(m - 1, 0), lambda m: math.sqrt(2.0) * max(m - 1, 0), {},
             "Xia et al. ICML 2008", "label ties broken by input order; the gradient ℓ1 norm is < 2 per suffix term"),
    LossSpec("smooth_dcg", listwise.smooth_dcg_loss, "listwise", False, None, None, None,
             {"k": 10, "sigma": 1.0, "gain": "exp2"}, "Chapelle & Wu, Information Retrieval 13, 2010",
             "d(j) from the current ranking: kinks where scores tie", smooth_at_ties=False, hessian="abs_grad"),
    LossSpec("smooth_dcg1", listwise.smooth_dcg1_loss, "listwise", False, None,
             lambda m, sigma=1.0, y_max=4: (2.0 ** y_max - 1) / (2 * sigma),
             lambda m, sigma=1.0, y_max=4: (2.0 ** y_max - 1) / (2 * sigma),
             {"sigma": 1.0, "gain": "exp2"}, "Chaudhuri & Tewari ICML 2015, Prop. 2",
             "constants for labels in [0, y_max] (default 4), independent of m", hessian="abs_grad"),
    LossSpec("lambdaloss", listwise.lambdaloss_loss, "listwise", False, None, None, None,
             {"sigma": 1.0}, "Wang et al. CIKM 2018 (NDCG-Loss2)",
             "rank-dependent weights jump where scores cross", smooth_at_ties=False),
    LossSpec("approx_ndcg", listwise.approx_ndcg_loss, "listwise", False, None, None, None,
             {"alpha": 10.0, "gain": "exp2"}, "Qin, Liu & Li, Information Retrieval 13, 2010", "",
             hessian="abs_grad"),
    LossSpec("bregman", listwise.bregman_loss, "listwise", True, True, None, None,
             {"utility": "linear", "psi": "squared", "link": "identity"},
             "Ravikumar, Tewari & Yang AISTATS 2011; " + CT + ", eq. (5)",
             "convex for (squared, identity) and (kl, exp)"),
]

REGISTRY: dict[str, Callable] = {s.name: s.fn for s in _SPECS}
_BY_NAME: dict[str, LossSpec] = {s.name: s for s in _SPECS}
_BY_FN: dict[Callable, LossSpec] = {s.fn: s for s in _SPECS}


def get(name: str) -> Callable:
    """The loss function registered under ``name``."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise InputError(f"unknown loss {name!r}; valid names: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def spec(name_or_fn) -> LossSpec:
    """The :class:`LossSpec` of a registered loss, by name or function."""
    if callable(name_or_fn) and name_or_fn in _BY_FN:
        return _BY_FN[name_or_fn]
    if isinstance(name_or_fn, str) and name_or_fn in _BY_NAME:
        return _BY_NAME[name_or_fn]
    raise InputError(f"unknown loss {name_or_fn!r}; valid names: {', '.join(sorted(REGISTRY))}")


# arguments of the loss signature that are not hyperparameters
_NOT_HYPER = ("where", "weights", "reduction")


def hyperparameters(fn) -> list[str] | None:
    """Names of the keyword-only hyperparameters of a loss function, or None if it takes ``**kwargs``."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in _NOT_HYPER]


def check_hyper(fn, hyper, *, loss: str, param: str = "hyperparameters") -> dict:
    """Validate loss hyperparameters before any call: a dict whose keys are keyword-only
    parameters of ``fn`` (every name is accepted when ``fn`` takes ``**kwargs``).

    ``param`` names the argument in messages (``"loss_params"`` for the models). Returns a copy."""
    if hyper is None:
        return {}
    if not isinstance(hyper, dict):
        raise InputError(f"{param} must be a dict of {loss}'s hyperparameters (e.g. {{'sigma': 1.0}}); "
                         f"got {type(hyper).__name__} {hyper!r}")
    bad = [k for k in hyper if not isinstance(k, str)]
    if bad:
        raise InputError(f"{param}: hyperparameter names must be strings; got {bad!r}")
    known = hyperparameters(fn)
    if known is not None:
        unknown = set(hyper) - set(known)
        if unknown:
            raise InputError(f"{param}: unknown hyperparameter(s) {sorted(unknown)} for loss {loss!r}; "
                             f"known: {sorted(known)}")
    return dict(hyper)
