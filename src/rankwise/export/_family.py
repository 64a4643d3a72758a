"""Which model family a fitted rankwise model is, and the refusal when a target has no form for it."""
from __future__ import annotations

from rankwise.export._common import ExportError

__all__ = ["model_family", "require_family"]

_NAMES = {"trees": "tree ensembles (GBDTRanker)", "linear": "linear models (LinearRanker)",
          "mlp": "MLPs (NeuralRanker(architecture='mlp'))", "attention": "the attention scorer"}


def model_family(model) -> str | None:
    """``"trees"``, ``"linear"``, ``"mlp"``, ``"attention"`` or None."""
    if hasattr(model, "booster_"):
        return "trees"
    if hasattr(model, "coef_") and hasattr(model, "scaler_mean_"):
        return "linear"
    arch = getattr(model, "architecture", None)
    if hasattr(model, "module_") and arch in ("mlp", "attention"):
        return arch
    return None


def require_family(model, target: str, supported: tuple, hint: str) -> str:
    """The model's family when ``target`` represents it; else :class:`ExportError` saying why and what to do."""
    fam = model_family(model)
    if fam in supported:
        return fam
    takes = ", ".join(_NAMES[f] for f in supported)
    if fam == "attention":
        raise ExportError(f"NeuralRanker(architecture='attention') scores each document with the other documents of "
                          f"its query (a list-dependent scorer); {target} scores one document at a time and cannot "
                          f"represent it. {hint}")
    what = type(model).__name__ if fam is None else _NAMES[fam]
    raise ExportError(f"{what}: {target} takes {takes} only. {hint}")
