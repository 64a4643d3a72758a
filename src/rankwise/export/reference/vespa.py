"""Vespa's model imports as rankwise reads them: the LightGBM / XGBoost JSON files and the linear expression.

No Vespa runs here. This restates, from ``SERVING.md``, how Vespa turns the model files of an
application package into ranking expressions and evaluates them:

- ``lightgbm("x.json")`` (:func:`parse_lightgbm`): ``json.dump(booster.dump_model())``. A numeric
  split ``<=`` becomes ``x < t``, or ``!(x >= t)`` when ``default_left`` (a NaN goes left); the
  ``missing_type`` is ignored; double precision; binary objectives (``binary``,
  ``cross_entropy``) are wrapped in ``sigmoid()``.
- ``xgboost("x.json")`` (:func:`parse_xgboost`): ``get_dump(dump_format="json")`` with the
  feature names; ``x < (float)t``, or ``!(x >= (float)t)`` when ``missing == yes``; the base score
  and the objective are not read (a one-leaf tree may carry the base margin).
- a linear ranking expression as :mod:`rankwise.export.vespa` writes it (:func:`parse_linear`):
  ``b + w * ((f - m) / s) + ...`` evaluated left to right in double.

Rank features are doubles in Vespa (a ``float`` attribute is a float32 widened); an unset value
reaches the expression as NaN, which these comparisons send as stated above. Leaves are summed
in double, in tree order. The semantics follow Vespa 8 (``model-integration``'s LightGBM and
XGBoost importers) as SERVING.md records them.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError
from rankwise.export._trees import MISSING_NAN, _flatten, descend
from rankwise.export.reference import EngineRejection

__all__ = ["EngineRejection", "VespaModel", "parse_lightgbm", "parse_xgboost", "parse_linear", "SIGMOID_OBJECTIVES"]

#: LightGBM objectives whose import Vespa wraps in sigmoid()
SIGMOID_OBJECTIVES = ("binary", "cross_entropy", "xentropy")
_NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|Infinity)"


@dataclass
class VespaModel:
    """A model file or expression as Vespa evaluates it; ``kind`` is ``"trees"`` or ``"linear"``."""

    kind: str
    features: tuple
    trees: list = field(default_factory=list)
    float_thresholds: bool = False          # xgboost: x < (float)t
    sigmoid: bool = False
    weights: np.ndarray | None = None       # linear: b + sum w * ((x - m) / s)
    means: np.ndarray | None = None
    scales: np.ndarray | None = None
    intercept: float = 0.0

    def _X(self, X) -> np.ndarray:
        X = np.array(X, dtype=np.float64, ndmin=2)
        if X.shape[1] != len(self.features):
            raise InputError(f"X: expected {len(self.features)} columns (the model's features), got {X.shape[1]}")
        return X

    def leaf_values(self, X, *, missing: str = "branch") -> np.ndarray:
        if self.kind != "trees":
            raise InputError("leaf_values: a linear expression has no trees")
        X = self._X(X)

        def go_left(tree, idx, x):
            t = tree.threshold[idx]
            if self.float_thresholds:
                t = t.astype(np.float32).astype(np.float64)
            with np.errstate(invalid="ignore"):
                return np.where(tree.default_left[idx], ~(x >= t), x < t)  # NaN: left iff default_left

        return descend(self.trees, X, go_left)

    def score(self, X, *, missing: str = "branch") -> np.ndarray:
        """Vespa's value of the expression for rows ``X`` (columns in ``features`` order, NaN = unset)."""
        if missing != "branch":
            raise InputError(f"missing: Vespa's imported trees decide a NaN by their comparisons; got {missing!r}")
        if self.kind == "linear":
            X = self._X(X)
            acc = np.full(X.shape[0], self.intercept)
            for j in range(len(self.features)):
                acc = acc + self.weights[j] * ((X[:, j] - self.means[j]) / self.scales[j])
            return acc
        leaves = self.leaf_values(X)
        acc = np.zeros(leaves.shape[0])
        for k in range(leaves.shape[1]):
            acc = acc + leaves[:, k]
        return 1.0 / (1.0 + np.exp(-acc)) if self.sigmoid else acc


def _index(name, features, where):
    if name not in features:
        raise EngineRejection(f"{where}: feature '{name}' is not one of the rank profile's features")
    return features.index(name)


def parse_lightgbm(text, features) -> VespaModel:
    """A ``lightgbm("x.json")`` file (``dump_model()`` JSON) as Vespa imports it; ``features``: the rank features
    the profile provides, in the order of the rows to score."""
    doc = json.loads(text) if isinstance(text, str) else text
    features = tuple(features)
    try:
        names, infos = doc["feature_names"], doc["tree_info"]
    except (KeyError, TypeError):
        raise EngineRejection("LightGBM model: expected the JSON of booster.dump_model() (feature_names, tree_info)") \
            from None

    def read_split(node):
        if node.get("decision_type") != "<=":
            raise EngineRejection(f"LightGBM model: decision_type {node.get('decision_type')!r} (categorical) is not "
                                  "imported as a numeric split")
        f = _index(names[node["split_feature"]], features, "LightGBM model")
        return f, float(node["threshold"]), bool(node.get("default_left", False)), MISSING_NAN

    trees = [_flatten(info["tree_structure"], is_leaf=lambda n: "split_feature" not in n, read_split=read_split,
                      read_leaf=lambda n: float(n["leaf_value"]),
                      children=lambda n: (n["left_child"], n["right_child"])) for info in infos]
    objective = str(doc.get("objective", "")).split(" ")[0]
    return VespaModel("trees", features, trees, sigmoid=objective in SIGMOID_OBJECTIVES)


def parse_xgboost(text, features) -> VespaModel:
    """An ``xgboost("x.json")`` file (``get_dump(dump_format="json")`` with feature names) as Vespa imports it."""
    doc = json.loads(text) if isinstance(text, str) else text
    features = tuple(features)
    if not isinstance(doc, list):
        raise EngineRejection("XGBoost model: expected a JSON array of trees (get_dump(dump_format='json'))")

    def read_split(node):
        missing = node.get("missing", node["no"])
        if missing not in (node["yes"], node["no"]):
            raise EngineRejection(f"XGBoost model: node {node['nodeid']}: 'missing' is neither child")
        return (_index(node["split"], features, "XGBoost model"), float(node["split_condition"]),
                missing == node["yes"], MISSING_NAN)

    def children(node):
        by_id = {c["nodeid"]: c for c in node.get("children", [])}
        if set(by_id) != {node["yes"], node["no"]}:
            raise EngineRejection(f"XGBoost model: node {node['nodeid']}: children are not the yes/no nodes")
        return by_id[node["yes"]], by_id[node["no"]]

    trees = [_flatten(t, is_leaf=lambda n: "leaf" in n, read_split=read_split, read_leaf=lambda n: float(n["leaf"]),
                      children=children) for t in doc]
    return VespaModel("trees", features, trees, float_thresholds=True)


def parse_linear(expression: str, features) -> VespaModel:
    """A linear expression ``b + w * ((f - m) / s) - ...`` (the form :mod:`rankwise.export.vespa` writes)."""
    features = tuple(features)
    text = " ".join(expression.split())
    head = re.match(rf"({_NUMBER})", text)
    if head is None:
        raise EngineRejection(f"linear expression: expected the intercept first, got {text[:40]!r}")
    pos, b = head.end(), float(head.group(1))
    term = re.compile(rf" ([-+]) ({_NUMBER}) \* \(\((.+?) - \(({_NUMBER})\)\) / ({_NUMBER})\)")
    w = np.zeros(len(features))
    m, s = np.zeros(len(features)), np.ones(len(features))
    seen = set()
    while pos < len(text):
        t = term.match(text, pos)
        if t is None:
            raise EngineRejection(f"linear expression: cannot read the term at {text[pos:pos + 40]!r}")
        j = _index(t.group(3), features, "linear expression")
        if j in seen:
            raise EngineRejection(f"linear expression: feature '{t.group(3)}' appears twice")
        seen.add(j)
        sign = -1.0 if t.group(1) == "-" else 1.0
        w[j], m[j], s[j] = sign * float(t.group(2)), float(t.group(4)), float(t.group(5))
        if not (math.isfinite(s[j]) and s[j] > 0):
            raise EngineRejection(f"linear expression: scale of '{t.group(3)}' must be positive, got {s[j]}")
        pos = t.end()
    return VespaModel("linear", features, weights=w, means=m, scales=s, intercept=b)
