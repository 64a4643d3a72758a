"""What rankwise knows about one loss, in one object: :class:`LossSpec`.

Each loss module declares the :class:`LossSpec` of its losses right below their functions (its
``SPECS`` list); :mod:`rankwise.losses.registry` collects them. Every caller -- the GBDT
objective (:mod:`rankwise.losses.objective`), the compiled training engine
(:mod:`rankwise.losses._engine`), theory (regret constants, Lipschitz checks) and the tests --
asks the spec, never the loss's name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from rankwise.errors import InputError


def _never(hyper: dict) -> bool:
    return False


def never(hyper: dict) -> bool:
    """A :class:`LossSpec` rule that holds for no hyperparameters."""
    return False


def always(hyper: dict) -> bool:
    """A :class:`LossSpec` rule that holds for all hyperparameters."""
    return True


def affine_if_linear_utility(hyper: dict) -> bool | None:
    """``labels_affine`` of a template in the utility u(y): affine in the labels for ``utility="linear"``,
    not for ``"exp2"`` (2^y - 1), unknown (None) for a callable utility."""
    u = hyper.get("utility", "linear")
    return u == "linear" if isinstance(u, str) else None


def affine_if_linear_gain(hyper: dict) -> bool | None:
    """``labels_affine`` of a loss linear in its gains: affine in the labels for ``gain="linear"``, not for
    ``"exp2"``, unknown (None) otherwise."""
    g = hyper.get("gain", "exp2")
    return g == "linear" if isinstance(g, str) else None


@dataclass(frozen=True)
class RegretRule:
    """A surrogate regret bound of Calauzènes, Usunier & Gallinari (2013), Table 2 (p = q = 2).

    Attributes
    ----------
    family : ``"pointwise"``, ``"pairwise"`` or ``"bregman"`` (the theorem the constant comes from).
    constant : ``(hyper, U) -> c``; raises :class:`InputError` for hyperparameters Table 2 does
        not cover. ``U`` is U(Δ) (None when not given).
    needs_u : ``hyper -> bool``: whether the constant depends on U(Δ).
    symbol : ``hyper -> str``: the constant as written in the paper (for printing).
    bound_params : parameters of the bound itself (never handed to the loss), e.g. ``("mu",)``.
    check : ``(loss_hyper, bound_hyper) -> None``: validates both before any computation.
    """

    family: str
    constant: Callable[[dict, object], float]
    symbol: Callable[[dict], str]
    needs_u: Callable[[dict], bool] = _never
    bound_params: tuple = ()
    check: Callable[[dict, dict], None] | None = None


@dataclass(frozen=True)
class LossSpec:
    """Metadata and machinery of one registered loss.

    Attributes
    ----------
    name, fn : registry name and the loss function.
    family : ``"pointwise"``, ``"pairwise"`` or ``"listwise"``.
    convex : convex in the score vector (for the default hyperparameters).
    order_preserving : calibrated in the sense of Calauzènes et al. (2013, Def. 3.3) w.r.t. the
        loss's utility (True/False), or None when unknown.
    lipschitz_inf, lipschitz_2 : ``m -> float`` upper bounds (see the registry docstring), or None.
    defaults : hyperparameters and their defaults.
    reference : short citation.
    notes : one line on ties, numerics, the Hessian used by :func:`rankwise.losses.as_objective`.
    smooth_at_ties : differentiable where two scores (or labels) tie.
    hessian : ``"exact"`` (closed-form diagonal) or ``"abs_grad"`` (positive approximation)
        in :func:`rankwise.losses.grad_hess`.
    valid_when : what a list needs to count (otherwise it gives exactly 0 and is left out of
        the mean): ``"item"`` (a real item), ``"two_items"``, ``"ordered_pair"`` (y_i > y_j),
        ``"positive_gain"`` (ideal DCG > 0).
    binary_labels : labels must lie in [0, 1].
    example_hyper : hyperparameters under which the loss accepts graded labels 0..2 (tests,
        examples).
    separable : one term per item: the exact Hessian diagonal is the second derivative of each
        term (double autograd in the torch reference).
    pair_form : ``(batch, **hyper) -> (W, phi, valid)`` with the list's loss
        ``Σ_ij W_ij φ(s_i - s_j)`` (W detached, φ a :class:`~rankwise.losses.pairwise.PairPhi`),
        or None.
    fast_terms : ``(batch, **hyper) -> (value, grad or None, hess) | None``: a sort-based or
        closed form (None where these hyperparameters have none).
    hessian_diag : ``(s, y, mask, item_w, **hyper) -> h``: the exact diagonal of a listwise loss,
        or None.
    quadratic : ``hyper -> bool``: one list of length L costs O(L²) memory in the torch form.
    kernel : ``hyper -> engine kernel or None``: the compiled per-query kernel that computes
        value, gradient and Hessian diagonal on flat arrays (:mod:`rankwise.losses._engine`),
        None where these hyperparameters have none.
    regret : the Table 2 regret bound, or None.
    step_weights : ``hyper -> bool``: the pair weights depend continuously on the scores and are
        held constant in the step (LightGBM's ``norm``): the gradient is the step's (the weights
        frozen), not the derivative of the value, so finite differences of the value do not match it.
    labels_affine : ``hyper -> bool or None``: the gradient in the scores is affine in the labels, so an
        inverse-propensity-weighted risk is unbiased (:mod:`rankwise.clicks.ips`; the numerical check is
        :func:`rankwise.theory.ips.labels_enter_linearly`, which a registry-wide test holds every spec to);
        None where it depends on what rankwise cannot see (a callable utility). Called with the loss's
        defaults under the given hyperparameters (:meth:`affine_in_labels`).
    rank_weights : ``hyper -> bool``: the weights depend on the current ranking (ΔNDCG, rank
        distances, a top-k truncation) and are held constant in the step. The value then jumps
        where two scores cross, and at all-tied scores (every item equally ranked, as at a model's
        zero start) it differs from its value at scores 1e-8 apart: the gradient is a step
        direction, not the derivative of the value, wherever a step reorders the list.
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
    valid_when: tuple = ("item",)
    binary_labels: bool = False
    example_hyper: dict = field(default_factory=dict)
    separable: bool = False
    pair_form: Callable | None = None
    fast_terms: Callable | None = None
    hessian_diag: Callable | None = None
    quadratic: Callable[[dict], bool] = _never
    kernel: Callable[[dict], object] | None = None
    regret: RegretRule | None = None
    step_weights: Callable[[dict], bool] = _never
    rank_weights: Callable[[dict], bool] = _never
    labels_affine: Callable[[dict], bool | None] = _never

    def affine_in_labels(self, hyper: dict | None = None) -> bool | None:
        """``labels_affine`` under ``hyper`` over the loss's defaults (None: unknown, check numerically)."""
        return self.labels_affine({**self.defaults, **(hyper or {})})

    def line_search_safe(self, hyper: dict) -> bool:
        """Whether the value is an objective whose derivative is the gradient near any point, tied
        scores included -- what a line-search method (L-BFGS) needs. False for the losses whose
        weights are held constant in the step (``step_weights`` or ``rank_weights``): from an
        all-tied start the line search sees a cliff (lambdarank: 3.18 at tied scores, 7.67 at scores
        1e-8 apart on an MSLR excerpt, as issue 28 measured) and stops where it began; fixed-step methods (Adam, OGD,
        boosting) use the gradient as the step direction these losses define."""
        h = {**self.defaults, **(hyper or {})}
        return not (self.step_weights(h) or self.rank_weights(h))


# ---------------------------------------------------------------------------------- Table 2 helpers


def positive_param(h: dict, name: str, default=None) -> float:
    """A positive finite hyperparameter of a regret constant (``default`` when absent)."""
    v = h.get(name, default)
    if v is None:
        raise InputError(f"this regret constant needs the template's {name} (pass {name}=...)")
    try:
        ok = not isinstance(v, bool) and math.isfinite(float(v)) and float(v) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError(f"{name} must be a positive finite number; got {v!r}")
    return float(v)


def u_inf(U, loss: str) -> float:
    """‖U(Δ)‖_∞ for the constants that depend on the distribution."""
    import numpy as np

    if U is None:
        raise InputError(f"the constant of {loss!r} depends on U(Δ): pass U=expected_utility(metric, Δ)")
    U = np.asarray(U, dtype=np.float64)
    if U.ndim != 1 or U.size == 0 or not np.all(np.isfinite(U)) or np.any(U < 0):
        raise InputError(f"U must be a finite non-negative 1-d vector of expected utilities; got {U!r}")
    return float(U.max())


def pointwise_regret(constant, symbol: str) -> RegretRule:
    """A Table 2 pointwise constant ``constant(hyper)`` that does not depend on U(Δ)."""
    return RegretRule("pointwise", lambda h, U: constant(h), lambda h: symbol)


CT = "Calauzènes, Usunier & Gallinari, Machine Learning 93, 2013, Table 2"
