"""Elasticsearch's native learning-to-rank trained models (>= 8.12) as rankwise reads them: parser and scorer.

No Elasticsearch runs here. This restates, from ``SERVING.md`` (the ``ensemble`` / ``tree``
trained-model definition as ``elastic/eland``'s ``_model_serializer.py`` writes it, and the ML
plugin's tree inference), what the ``PUT _ml/trained_models/<id>`` parser accepts and how an
``ensemble`` of ``tree`` models scores a document:

- :func:`parse_trained_model` takes ``{"ensemble": {...}}`` (or the whole ``definition`` /
  ``trained_model`` wrapper) and raises :class:`EngineRejection` for what the parser rejects:
  unknown fields, a ``target_type`` other than ``regression``, an ``aggregate_output`` other than
  ``weighted_sum``, weights not one per tree, nodes whose ``node_index`` is not their position,
  children that do not exist, a ``split_feature`` outside ``feature_names``, a ``decision_type``
  outside ``lt``/``lte``/``gt``/``gte``, a node that is neither a split nor a leaf, a node no path reaches;
- :meth:`TrainedModel.score`: features as double -- the feature values are Lucene scores
  (float32), widened, so rows are read as float32 first; a missing (NaN) feature takes the node's
  ``default_left`` side, any other value goes left iff ``x <op> threshold`` in double; each tree's
  leaf times its weight summed in double, in tree order.

What is restated follows Elasticsearch 8.12-8.x (``x-pack/plugin/core``, ``inference.trainedmodel.tree``
and ``ensemble``); a query extractor's ``default_score`` is what a document that does not match
the feature's query brings to the model (give NaN rows to follow the tree's missing branches).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from rankwise.errors import InputError
from rankwise.export._trees import descend
from rankwise.export.reference import EngineRejection

__all__ = ["EngineRejection", "TrainedModel", "parse_trained_model", "DECISION_TYPES"]

DECISION_TYPES = ("lt", "lte", "gt", "gte")
_ENSEMBLE_FIELDS = {"feature_names", "trained_models", "aggregate_output", "target_type", "classification_labels",
                    "classification_weights"}
_TREE_FIELDS = {"feature_names", "tree_structure", "target_type", "classification_labels"}
_NODE_FIELDS = {"node_index", "split_feature", "threshold", "decision_type", "default_left", "left_child",
                "right_child", "leaf_value", "split_gain", "number_samples"}


@dataclass
class _EsTree:
    feature: np.ndarray    # -1 at leaves
    threshold: np.ndarray
    op: np.ndarray         # index into DECISION_TYPES
    default_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray


@dataclass
class TrainedModel:
    """A parsed ensemble: ``.score(X)`` scores rows (columns in ``feature_names`` order) as Elasticsearch does."""

    feature_names: tuple
    trees: list
    weights: np.ndarray
    kind: str = "trees"

    def leaf_values(self, X, *, missing: str = "branch") -> np.ndarray:
        """``(n_rows, n_trees)`` leaf (times its tree weight) each row reaches, in double."""
        if missing != "branch":
            raise InputError(f"missing: Elasticsearch's trees follow default_left for a missing value; got {missing!r}")
        X = np.array(X, dtype=np.float64, ndmin=2)
        if X.shape[1] != len(self.feature_names):
            raise InputError(f"X: expected {len(self.feature_names)} columns (feature_names), got {X.shape[1]}")
        with np.errstate(over="ignore"):
            X = X.astype(np.float32).astype(np.float64)  # Lucene scores are float, widened to double
        return descend(self.trees, X, _go_left) * self.weights

    def score(self, X, *, missing: str = "branch") -> np.ndarray:
        leaves = self.leaf_values(X, missing=missing)
        acc = np.zeros(leaves.shape[0])
        for k in range(leaves.shape[1]):  # weighted_sum, in tree order
            acc = acc + leaves[:, k]
        return acc


def _reject(msg: str):
    raise EngineRejection(msg)


def _fields(obj, allowed, where):
    if not isinstance(obj, dict):
        _reject(f"[{where}] expected an object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        _reject(f"[{where}] unknown field [{unknown[0]}]")


def _parse_tree(doc, ensemble_names, t) -> _EsTree:
    _fields(doc, _TREE_FIELDS, f"tree {t}")
    names = doc.get("feature_names", ensemble_names)
    if list(names) != list(ensemble_names):
        _reject(f"[tree {t}] feature_names differ from the ensemble's")
    if doc.get("target_type", "regression") != "regression":
        _reject(f"[tree {t}] target_type [{doc.get('target_type')}]: a learning_to_rank model is a regression")
    nodes = doc.get("tree_structure")
    if not isinstance(nodes, list) or not nodes:
        _reject(f"[tree {t}] [tree_structure] must not be empty")
    n = len(nodes)
    feat, thr, op, dl, left, right, val = (np.full(n, -1), np.full(n, np.nan), np.zeros(n, dtype=np.int8),
                                           np.zeros(n, dtype=bool), np.full(n, -1), np.full(n, -1), np.full(n, np.nan))
    for i, node in enumerate(nodes):
        _fields(node, _NODE_FIELDS, f"tree {t} node {i}")
        if node.get("node_index") != i:
            _reject(f"[tree {t}] node at position {i} has node_index [{node.get('node_index')}]: nodes must be listed "
                    "by their index")
        if "leaf_value" in node:
            if "left_child" in node or "right_child" in node:
                _reject(f"[tree {t}] node {i} has both a leaf_value and children")
            lv = node["leaf_value"]
            lv = lv if isinstance(lv, list) else [lv]
            if len(lv) != 1:
                _reject(f"[tree {t}] leaf {i}: a regression leaf has one value, got {len(lv)}")
            val[i] = float(lv[0])
            continue
        for key in ("split_feature", "threshold", "left_child", "right_child"):
            if key not in node:
                _reject(f"[tree {t}] node {i} is neither a leaf (leaf_value) nor a split: no [{key}]")
        f = node["split_feature"]
        if not isinstance(f, int) or not 0 <= f < len(names):
            _reject(f"[tree {t}] node {i}: split_feature [{f}] is not an index into the {len(names)} feature_names")
        d = node.get("decision_type", "lte")
        if d not in DECISION_TYPES:
            _reject(f"[tree {t}] node {i}: unknown decision_type [{d}]")
        for c in (node["left_child"], node["right_child"]):
            if not isinstance(c, int) or not 0 < c < n or c == i:
                _reject(f"[tree {t}] node {i}: child [{c}] is not a node of the tree")
        feat[i], thr[i], op[i] = f, float(node["threshold"]), DECISION_TYPES.index(d)
        dl[i], left[i], right[i] = bool(node.get("default_left", False)), node["left_child"], node["right_child"]
    seen, stack = set(), [0]
    while stack:
        k = stack.pop()
        if k in seen:
            _reject(f"[tree {t}] node {k} is reached twice (the nodes do not form a tree)")
        seen.add(k)
        if feat[k] >= 0:
            stack += [int(left[k]), int(right[k])]
    if len(seen) != n:
        _reject(f"[tree {t}] {n - len(seen)} node(s) cannot be reached from the root")
    return _EsTree(feat, thr, op, dl, left, right, val)


def parse_trained_model(definition, feature_names=None) -> TrainedModel:
    """Parse an ensemble definition as Elasticsearch would (see the module docstring).

    ``feature_names``, when given, must be the ensemble's (the learning_to_rank extractors' order).
    """
    doc = json.loads(definition) if isinstance(definition, str) else definition
    for key in ("definition", "trained_model"):
        if isinstance(doc, dict) and set(doc) - {"preprocessors"} == {key}:
            doc = doc[key]
    if not isinstance(doc, dict) or set(doc) != {"ensemble"}:
        _reject("[trained_model] expected exactly one of [ensemble, tree]; rankwise writes an ensemble")
    ens = doc["ensemble"]
    _fields(ens, _ENSEMBLE_FIELDS, "ensemble")
    names = ens.get("feature_names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        _reject("[ensemble] [feature_names] must be a list of strings")
    if feature_names is not None and list(feature_names) != names:
        _reject("[ensemble] feature_names differ from the feature extractors' names")
    if ens.get("target_type", "regression") != "regression":
        _reject(f"[ensemble] target_type [{ens.get('target_type')}]: a learning_to_rank model is a regression")
    models = ens.get("trained_models")
    if not isinstance(models, list) or not models:
        _reject("[ensemble] [trained_models] must not be empty")
    agg = ens.get("aggregate_output", {"weighted_sum": {}})
    if not isinstance(agg, dict) or list(agg) != ["weighted_sum"]:
        _reject(f"[ensemble] aggregate_output {list(agg) if isinstance(agg, dict) else agg}: a regression ensemble "
                "here sums its trees (weighted_sum)")
    weights = agg["weighted_sum"].get("weights")
    if weights is not None and len(weights) != len(models):
        _reject(f"[ensemble] aggregate_output has {len(weights)} weights for {len(models)} trained_models")
    trees = []
    for t, m in enumerate(models):
        if not isinstance(m, dict) or set(m) != {"tree"}:
            _reject(f"[ensemble] trained_models[{t}]: expected a tree")
        trees.append(_parse_tree(m["tree"], names, t))
    w = np.ones(len(trees)) if weights is None else np.asarray(weights, dtype=np.float64)
    return TrainedModel(tuple(names), trees, w)


def _go_left(tree, idx, x):
    """Elasticsearch's split: the node's operator (lt, lte, gt, gte); a missing value follows default_left."""
    t, op = tree.threshold[idx], tree.op[idx]
    with np.errstate(invalid="ignore"):
        go = np.select([op == 0, op == 1, op == 2], [x < t, x <= t, x > t], x >= t)
    return np.where(np.isnan(x), tree.default_left[idx], go)
