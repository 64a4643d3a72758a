"""What the writers of every target share: the refusal error, feature names, the booster's decisions.

The decision helpers answer, for one split of a :class:`~rankwise.export._trees.TreeEnsemble`, what
the booster does with a value on float32 inputs: the side of NaN, the side of 0.0, and the largest
float32 it sends left -- from which each target derives its own threshold.
"""
from __future__ import annotations

import numpy as np

from rankwise.errors import InputError
from rankwise.export._trees import (LIGHTGBM_ZERO_THRESHOLD, MISSING_NONE, MISSING_ZERO, ExportError, TreeEnsemble,
                                    floor32, next32, prev32)

__all__ = ["ExportError", "feature_names_for", "model_feature_names", "names_mismatch", "nan_goes_left",
           "zero_goes_left", "left_max32", "missing_mismatches",
           "min_score", "shift_value"]


# -- shared by the writers --------------------------------------------------------------------------------------
def model_feature_names(model):
    """The names the model's training data gave its columns (``feature_names_in_``, else ``feature_names_``)."""
    for attr in ("feature_names_in_", "feature_names_"):
        names = getattr(model, attr, None)
        if names is not None:
            return [str(n) for n in names]
    return None


def feature_names_for(model, n_features: int, feature_names, *, rename: bool = False) -> list:
    """The engine's feature names for the model's columns, in column order.

    Default: the names the training data gave (a feature log's, a data set's ``feature_names``, a
    DataFrame's columns). Given names must be those same names in the same order when the model
    knows its own: a feature set whose names or order differ from the training columns would
    feed each tree split, weight or RankLib ordinal another feature (ES-LTR #104, #414), and is
    refused with the names that differ. ``rename=True`` (targets whose names are the engine's
    expressions for each column, such as Vespa's rank features): given names replace the model's.
    """
    known = model_feature_names(model)
    if feature_names is None and known is None:
        raise InputError("feature_names: the engine addresses features by their names in its feature set/store, and "
                         "this model was trained on unnamed columns; give the "
                         f"{n_features} names in the model's column order (feature_names=[...])")
    names = [str(n) for n in (feature_names if feature_names is not None else known)]
    if len(names) != n_features or len(set(names)) != len(names):
        raise InputError(f"feature_names: expected {n_features} distinct names (one per model column), got "
                         f"{len(names)} ({len(set(names))} distinct)")
    if known is not None and names != known and not rename:
        raise ExportError("feature_names: " + names_mismatch(known, names) + "; the model's columns are "
                          f"{_listing(known)}. Give the feature set in the model's column order (or leave "
                          "feature_names out: the model's own names are used)")
    return names


def _listing(names, k: int = 8) -> str:
    return "[" + ", ".join(map(repr, names[:k])) + (", ...]" if len(names) > k else "]")


def names_mismatch(known: list, given: list) -> str:
    """What differs between the model's column names and a given feature set, by name."""
    unknown = [n for n in given if n not in set(known)]
    absent = [n for n in known if n not in set(given)]
    parts = []
    if unknown:
        parts.append(f"{len(unknown)} name(s) the model was not trained on: {_listing(unknown)}")
    if absent:
        parts.append(f"{len(absent)} model feature(s) missing: {_listing(absent)}")
    if not parts:
        k = next(i for i, (a, b) in enumerate(zip(known, given)) if a != b)
        parts.append(f"the same names in another order (column {k} of the model is {known[k]!r}, the feature set "
                     f"has {given[k]!r} there)")
    return "the given feature names differ from the model's: " + "; ".join(parts)


def nan_goes_left(ens: TreeEnsemble, tree, k: int) -> bool:
    """The side the booster sends NaN to at split ``k``."""
    if ens.source == "lightgbm" and tree.missing_type[k] == MISSING_NONE:
        return 0.0 <= tree.threshold[k]  # NaN counts as 0.0
    return bool(tree.default_left[k])


def zero_goes_left(ens: TreeEnsemble, tree, k: int) -> bool:
    """The side the booster sends an explicit 0.0 to at split ``k``."""
    if ens.source == "lightgbm":
        if tree.missing_type[k] == MISSING_ZERO:
            return bool(tree.default_left[k])
        return 0.0 <= tree.threshold[k]
    return 0.0 < tree.threshold[k]


def left_max32(ens: TreeEnsemble, tree, t: int, k: int, target: str) -> np.float32:
    """The largest float32 the booster sends left at split ``k`` (every smaller one goes left too).

    XGBoost: ``prev32(t)``. LightGBM reads ``|x| <= 1e-35f`` as 0.0 (and with ``missing_type=Zero``
    sends that band to the default side), so its decision on float32 values is ``x <= t`` outside
    the band and one fixed side inside it; that is a threshold test only when the sides agree in
    order, which is checked here.
    """
    thr = float(tree.threshold[k])
    if ens.source != "lightgbm":
        return prev32(np.float32(thr))
    zero = np.float32(LIGHTGBM_ZERO_THRESHOLD)
    band = bool(tree.default_left[k]) if tree.missing_type[k] == MISSING_ZERO else 0.0 <= thr
    below, above = float(prev32(-zero)) <= thr, float(next32(zero)) <= thr
    if (band and not below) or (above and not band):
        raise ExportError(
            f"tree {t} node {k}: LightGBM missing_type=Zero sends every |x| <= 1e-35 to the "
            f"{'left' if band else 'right'} child, but the threshold {thr!r} sends the values just outside that band "
            f"the other way; {target} decides by one threshold and cannot represent it (retrain with "
            "zero_as_missing=False)")
    if above:
        return floor32(thr)
    if band:
        return zero
    return min(floor32(thr), prev32(-zero))  # outside the band x <= t; the band goes right


def missing_mismatches(ens: TreeEnsemble) -> list:
    """Splits where NaN and 0.0 take different sides (targets that see an absent feature as 0.0)."""
    return [(t, k) for t, tree in enumerate(ens.trees) for k in np.flatnonzero(tree.feature >= 0)
            if nan_goes_left(ens, tree, k) != zero_goes_left(ens, tree, k)]


def min_score(ens: TreeEnsemble) -> float:
    return ens.base_score + sum(float(np.nanmin(np.where(tr.feature < 0, tr.value, np.nan))) for tr in ens.trees)


def shift_value(shift, lower_bound) -> float:
    if shift is None:
        return 0.0
    if shift == "auto":
        if lower_bound is None:
            raise ExportError("shift='auto': the scores of a linear model have no lower bound; give shift=<float> "
                              "(at least minus the lowest score you expect)")
        # margin so that float32 rounding of the shifted sum cannot go below 0
        return 0.0 if lower_bound >= 0 else float(np.float32(-lower_bound * (1 + 1e-5)))
    return float(shift)
