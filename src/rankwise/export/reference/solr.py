"""Apache Solr's LTR module (``org.apache.solr.ltr``) as rankwise reads it: model store and scorer.

Restated from ``SERVING.md`` and the fixtures' notes (``MultipleAdditiveTreesModel``,
``LinearModel``, ``NeuralNetworkModel``, ``ManagedModelStore`` at the Solr commits named in
``serving_fixtures/solr_ltr/README.md``); no Solr runs here.

- :class:`ModelStore` takes feature stores and model documents as ``PUT .../schema/model-store``
  does and raises :class:`~rankwise.export.reference.EngineRejection` with Solr's own message for
  what Solr rejects: a missing or empty feature store, a feature not in the store, no features,
  duplicated features, a model name already taken, and each model class's own checks.
- :meth:`SolrModel.score` scores feature vectors in the model's feature order as Solr does, in
  float32: ``LinearModel`` Σ w·x (no intercept); ``MultipleAdditiveTreesModel`` Σ weight·leaf, a
  split going left iff ``x <= float(threshold) + 1e-6f`` (``NODE_SPLIT_SLACK``, added in float32);
  NaN goes right when ``isNullSameAsZero`` is true (the default), else follows the node's
  ``missing`` (``"left"``; anything else right); ``NeuralNetworkModel``
  ``out_i = act(bias_i + Σ_j W[i][j]·in_j)``; normalisers (``MinMaxNormalizer``,
  ``StandardNormalizer``) before the model (skipping NaN when ``isNullSameAsZero`` is false).

Numbers given as strings are read as Java's ``Float.parseFloat`` reads them (a trailing
``f``/``F``/``d``/``D`` is allowed).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rankwise.errors import InputError
from rankwise.export._trees import MISSING_NAN, _flatten, leaf_nodes
from rankwise.export.reference import EngineRejection

__all__ = ["ModelStore", "SolrModel", "java_float", "NODE_SPLIT_SLACK", "LINEAR", "TREES", "NEURAL"]

LINEAR = "org.apache.solr.ltr.model.LinearModel"
TREES = "org.apache.solr.ltr.model.MultipleAdditiveTreesModel"
NEURAL = "org.apache.solr.ltr.model.NeuralNetworkModel"
MIN_MAX = "org.apache.solr.ltr.norm.MinMaxNormalizer"
STANDARD = "org.apache.solr.ltr.norm.StandardNormalizer"
NODE_SPLIT_SLACK = np.float32(1e-6)
DEFAULT_STORE = "_DEFAULT_"
_TREE_ERR = "MultipleAdditiveTreesModel tree"
_NOT_A_MODEL_FEATURE = -2  # a split on a feature outside the model's list: the tree contributes 0
_FLOAT_RE = re.compile(r"\s*[-+]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)[fFdD]?\s*\Z")


def java_float(v) -> np.float32:
    """A JSON number or string read as Java's ``Float.parseFloat`` (``"0.5f"`` included)."""
    if isinstance(v, bool):
        raise EngineRejection(f"expected a number, got {json.dumps(v)}")
    if isinstance(v, (int, float)):
        return np.float32(v)
    if not isinstance(v, str) or not _FLOAT_RE.match(v):
        raise EngineRejection(f"java.lang.NumberFormatException: For input string: \"{v}\"")
    return np.float32(float(v.strip().rstrip("fFdD")))


def _activation(name):
    return {"relu": lambda z: np.maximum(z, np.float32(0)),
            "leakyrelu": lambda z: np.where(z >= 0, z, np.float32(0.01) * z),
            "tanh": lambda z: np.tanh(z.astype(np.float64)).astype(np.float32),
            "sigmoid": lambda z: (1.0 / (1.0 + np.exp(-z.astype(np.float64)))).astype(np.float32),
            "identity": lambda z: z}.get(name)


@dataclass
class SolrModel:
    """A model as Solr holds it; ``features`` is the model's feature order (the vector slots)."""

    model_class: str
    name: str
    store: str
    features: tuple
    kind: str
    normalizers: dict = field(default_factory=dict)   # slot -> ("min_max", min, max) | ("standard", avg, std)
    weights: np.ndarray | None = None
    trees: list = field(default_factory=list)
    tree_weights: np.ndarray | None = None
    null_same_as_zero: bool = True
    layers: list = field(default_factory=list)        # (W float32 [rows, cols], bias float32, activation fn)

    def _inputs(self, X):
        X = np.array(X, dtype=np.float64, ndmin=2)
        if X.shape[1] != len(self.features):
            raise InputError(f"X: expected {len(self.features)} columns (the model's features), got {X.shape[1]}")
        with np.errstate(over="ignore"):
            X32 = X.astype(np.float32)
        if self.kind != "trees":  # an absent feature has its default value, 0, and is normalised as such
            X32 = np.nan_to_num(X32, nan=0.0)
        for slot, (kind, a, b) in self.normalizers.items():
            col = X32[:, slot]
            out = (col - a) / (b - a) if kind == "min_max" else (col - a) / b
            X32[:, slot] = np.where(np.isnan(col) & (not self.null_same_as_zero), col, out)
        return X32

    def leaf_values(self, X, *, missing=None) -> np.ndarray:
        """``(n_rows, n_trees)`` weight × leaf (float32) each row reaches (tree models)."""
        X32 = self._inputs(X)

        def go_left(tree, idx, x):
            thr = tree.threshold[idx].astype(np.float32)  # already float(t) + 1e-6f
            with np.errstate(invalid="ignore"):
                left = x <= thr
            if not self.null_same_as_zero:
                left = np.where(np.isnan(x), tree.default_left[idx], left)
            return left

        nodes = leaf_nodes(self.trees, X32, go_left)
        out = np.empty(nodes.shape, dtype=np.float32)
        for k, tree in enumerate(self.trees):
            node = nodes[:, k]
            value = np.where(tree.feature[node] == _NOT_A_MODEL_FEATURE, 0.0, tree.value[node])
            out[:, k] = value.astype(np.float32) * self.tree_weights[k]
        return out

    def score(self, X, *, missing=None) -> np.ndarray:
        """Solr's scores (float32 values as float64) of rows ``X`` in the model's feature order; NaN = absent."""
        if self.kind == "trees":
            leaves = self.leaf_values(X)
            acc = np.zeros(leaves.shape[0], dtype=np.float32)
            for k in range(leaves.shape[1]):
                acc = acc + leaves[:, k]
            return acc.astype(np.float64)
        X32 = self._inputs(X)
        if self.kind == "linear":
            acc = np.zeros(X32.shape[0], dtype=np.float32)
            for j, w in enumerate(self.weights):
                acc = acc + w * X32[:, j]
            return acc.astype(np.float64)
        h = X32
        for W, b, act in self.layers:
            z = np.tile(b, (h.shape[0], 1))
            for j in range(W.shape[1]):
                z = z + W[:, j][None, :] * h[:, j:j + 1]
            h = act(z).astype(np.float32)
        return h[:, 0].astype(np.float64)


class ModelStore:
    """Solr's feature and model stores: ``add`` validates a model document as Solr does.

    Parameters
    ----------
    feature_stores : dict, optional
        ``{store name: [feature names]}``.
    activations : dict, optional
        Extra ``NeuralNetworkModel`` activations (name -> float32 function), as a subclass adds them.
    """

    def __init__(self, feature_stores=None, *, activations=None):
        self.feature_stores = {k: list(v) for k, v in (feature_stores or {}).items()}
        self.models: dict = {}
        self.activations = dict(activations or {})

    def add_feature_file(self, path) -> None:
        """Add the features of a feature-store JSON document (``[{"name", "class", "store"?, "params"}]``)."""
        for f in json.loads(Path(path).read_text(encoding="utf-8")):
            self.feature_stores.setdefault(f.get("store", DEFAULT_STORE), []).append(f["name"])

    def add(self, doc: dict) -> SolrModel:
        if not isinstance(doc, dict):
            raise EngineRejection("a model document must be a JSON object")
        name, cls = doc.get("name"), doc.get("class")
        store = doc.get("store", DEFAULT_STORE)
        if not self.feature_stores.get(store):
            raise EngineRejection(f"Missing or empty feature store: {store}")
        feats = doc.get("features") or []
        for f in feats:
            if f.get("name") not in self.feature_stores[store]:
                raise EngineRejection(f"Feature: {f.get('name')} not found in store: {store}")
        if not feats:
            raise EngineRejection(f"no features declared for model {name}")
        names = [f["name"] for f in feats]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise EngineRejection(f"duplicated feature {n} in model {name}")
        params = doc.get("params") or {}
        model = SolrModel(cls, name, store, tuple(names), "", _normalizers(feats))
        if cls == LINEAR:
            _linear(model, params)
        elif cls == TREES:
            _trees(model, params)
        elif cls == NEURAL or (isinstance(cls, str) and cls.endswith("NeuralNetworkModel")):
            _neural(model, params, self.activations)
        else:
            raise EngineRejection(f"Model type does not exist {cls}")
        if name in self.models:
            raise EngineRejection(f"org.apache.solr.ltr.model.ModelException: model '{name}' already exists. "
                                  "Please use a different name")
        self.models[name] = model
        return model


def _normalizers(feats) -> dict:
    out = {}
    for slot, f in enumerate(feats):
        norm = f.get("norm")
        if not norm:
            continue
        p = norm.get("params", {})
        if norm.get("class") == MIN_MAX:
            lo, hi = java_float(p["min"]), java_float(p["max"])
            if not lo < hi:
                raise EngineRejection(f"MinMax Normalizer delta must not be zero | min = {lo},max = {hi}")
            out[slot] = ("min_max", lo, hi)
        elif norm.get("class") == STANDARD:
            avg, std = java_float(p.get("avg", 0)), java_float(p.get("std", 1))
            if not std > 0:
                raise EngineRejection(f"Standard Normalizer standard deviation must be positive | avg = {avg},"
                                      f"std = {std}")
            out[slot] = ("standard", avg, std)
        else:
            raise EngineRejection(f"Normalizer type does not exist {norm.get('class')}")
    return out


def _linear(model: SolrModel, params: dict) -> None:
    weights = params.get("weights")
    if weights is None:
        raise EngineRejection(f"Model {model.name} doesn't contain any weights")
    lacking = [f for f in model.features if f not in weights]
    if lacking:
        raise EngineRejection(f"Model {model.name} lacks weight(s) for [{', '.join(lacking)}]")
    model.kind = "linear"
    model.weights = np.array([java_float(weights[f]) for f in model.features], dtype=np.float32)


def _tree_node_str(node) -> str:
    return repr(float(java_float(node["value"]))) if isinstance(node, dict) and "value" in node else str(node)


def _check_node(node) -> None:
    if "feature" not in node:  # a leaf
        if "left" in node or "right" in node:
            raise EngineRejection(f"{_TREE_ERR} node is leaf with left={_tree_node_str(node.get('left'))} and "
                                  f"right={_tree_node_str(node.get('right'))}")
        if "value" not in node:
            raise EngineRejection(f"{_TREE_ERR} node is missing value")
        return
    for key in ("threshold", "left", "right"):
        if key not in node:
            raise EngineRejection(f"{_TREE_ERR} node is missing {key}")
    _check_node(node["left"])
    _check_node(node["right"])


def _trees(model: SolrModel, params: dict) -> None:
    trees = params.get("trees")
    if not trees:
        raise EngineRejection(f"no trees declared for model {model.name}")
    index = {n: i for i, n in enumerate(model.features)}
    flat, weights = [], []
    for t in trees:
        if "weight" not in t:
            raise EngineRejection(f"{_TREE_ERR} doesn't contain a weight")
        if "root" not in t:
            raise EngineRejection(f"{_TREE_ERR} doesn't contain a tree")
        _check_node(t["root"])
        weights.append(java_float(t["weight"]))

        def read_split(n):
            thr = np.float32(java_float(n["threshold"]) + NODE_SPLIT_SLACK)  # float + float: float32
            # a feature outside the model's list: Solr's tree contributes 0 there (a 0-valued leaf below)
            return index.get(n["feature"], _NOT_A_MODEL_FEATURE), float(thr), n.get("missing") == "left", MISSING_NAN

        flat.append(_flatten(t["root"], is_leaf=lambda n: "feature" not in n, read_split=read_split,
                             read_leaf=lambda n: float(java_float(n["value"])),
                             children=lambda n: (n["left"], n["right"])))
    model.kind = "trees"
    model.trees = flat
    model.tree_weights = np.array(weights, dtype=np.float32)
    nz = params.get("isNullSameAsZero", True)
    model.null_same_as_zero = nz if isinstance(nz, bool) else str(nz).lower() != "false"


def _neural(model: SolrModel, params: dict, extra) -> None:
    layers = params.get("layers")
    if not layers:
        raise EngineRejection(f"Model {model.name} doesn't contain any layers")
    built = []
    n_in = len(model.features)
    for i, layer in enumerate(layers):
        W = np.array(layer.get("matrix", []), dtype=np.float64)
        b = np.array(layer.get("bias", []), dtype=np.float64)
        rows = W.shape[0] if W.ndim == 2 else 0
        cols = W.shape[1] if W.ndim == 2 else 0
        if len(b) != rows:
            raise EngineRejection(f"Dimension mismatch in model \"{model.name}\". Layer {i} has {len(b)} bias weights "
                                  f"but {rows} weight matrix rows.")
        act_name = layer.get("activation")
        act = extra.get(act_name) or _activation(act_name)
        if act is None:
            raise EngineRejection(f"Invalid activation function (\"{act_name}\") in layer {i} of model "
                                  f"\"{model.name}\".")
        if cols != n_in:
            if i == 0:
                raise EngineRejection(f"Dimension mismatch in model \"{model.name}\". The input has {n_in} features, "
                                      f"but the weight matrix for layer 0 has {cols} columns.")
            raise EngineRejection(f"Dimension mismatch in model \"{model.name}\". The weight matrix for layer {i - 1} "
                                  f"has {n_in} rows, but the weight matrix for layer {i} has {cols} columns.")
        built.append((W.astype(np.float32), b.astype(np.float32), act))
        n_in = rows
    if n_in != 1:
        raise EngineRejection(f"Dimension mismatch in model \"{model.name}\". The output layer has {n_in} rows, "
                              "but it must have exactly one.")
    model.kind = "neural"
    model.layers = built
