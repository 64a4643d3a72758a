"""The loss registry: snake_case name -> loss function, and each loss's :class:`LossSpec`, collected
from the ``SPECS`` list that each loss module declares beside its functions.

Lipschitz constants are *valid upper bounds* on sup ‖∇_s ℓ‖ in the dual norm (ℓ1 for the
ℓ∞ constant, ℓ2 for the ℓ2 constant) over scores and labels, for unit item weights and the
default hyperparameters, as a function of the list length m (``None`` where the loss has no
finite constant, e.g. squared or exponential losses, or where none is known in closed form).
Those marked *tight* in ``notes`` are attained (or approached) by some scores and labels.
"""
from __future__ import annotations

import inspect
from typing import Callable

from rankwise.errors import InputError
from rankwise.losses import listwise, pairwise, pointwise
from rankwise.losses._spec import LossSpec


_SPECS = [*pointwise.SPECS, *pairwise.SPECS, *listwise.SPECS]

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


def register(loss_spec: LossSpec) -> LossSpec:
    """Add a loss to the registry: from then on the GBDT objective, the models, theory and the
    tests that iterate the registry use it like any built-in loss. Returns the spec."""
    if not isinstance(loss_spec, LossSpec):
        raise InputError(f"register takes a LossSpec; got {type(loss_spec).__name__}")
    if loss_spec.name in REGISTRY:
        raise InputError(f"a loss named {loss_spec.name!r} is already registered")
    REGISTRY[loss_spec.name] = loss_spec.fn
    _BY_NAME[loss_spec.name] = loss_spec
    _BY_FN[loss_spec.fn] = loss_spec
    return loss_spec


def unregister(name: str) -> None:
    """Remove a loss added by :func:`register`."""
    sp = spec(name)
    del REGISTRY[sp.name], _BY_NAME[sp.name], _BY_FN[sp.fn]


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
