"""The OpenSearch / Elasticsearch LTR plugin (``com.o19s.es.ltr``) as rankwise reads it: parser and scorer.

No search engine runs here. This module restates, from ``SERVING.md`` (the plugin's parsers
``XGBoostJsonParser``, ``XGBoostRawJsonParser``, ``LinearRankerParser``, the RankLib text read by
``o19s/RankyMcRankFace``, and ``NaiveAdditiveDecisionTree``), what the plugin accepts and how it
scores, so that an exported model can be checked before it is uploaded:

- :func:`parse_model` accepts exactly the definitions the plugin's parser accepts and raises
  :class:`EngineRejection` (with the plugin's own message) for the ones it rejects: unknown fields
  of the object form, objectives outside the plugin's list, split nodes without all of
  ``nodeid, depth, split, split_condition, yes, no, children``, children out of order, a
  ``missing`` that is neither child, unknown feature names, non-float feature types;
- :meth:`PluginModel.score` scores rows as the plugin does: features and thresholds in float32,
  trees go left iff ``x < t`` (XGBoost JSON) or ``x <= t`` (RankLib), a sequential float32 sum,
  then the objective's transform (``(float)(1/(1+Math.exp(-x)))`` for the logistic objectives);
  ``feature_normalizers`` first; linear models as a float32 dot product without intercept; RankLib
  linear regression in double with its intercept, returned as float32.

Missing features follow the plugin version (``missing=``): ``"branch"`` (OpenSearch >= 3.8 and
ES-LTR main: a NaN takes the node's ``missing`` child, the ``no`` child where there is none),
``"right"`` (OpenSearch 3.2-3.7: always the ``no`` child), ``"zero"`` (OpenSearch <= 3.1 and
ES-LTR before PR #482: an absent feature is 0.0). ``"missing_as_zero": true`` in the definition
(OpenSearch main) makes it ``"zero"``. RankLib and linear models always see 0.0.

The fixtures of ``serving_fixtures/opensearch_ltr`` (the plugin's own unit-test models, at
``opensearch-learning-to-rank-base@af2d983``) are reproduced by ``tests/export``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError
from rankwise.export._trees import MISSING_NAN, Tree, _flatten, leaf_nodes
from rankwise.export.reference import EngineRejection

__all__ = ["EngineRejection", "PluginModel", "parse_model", "MODEL_TYPES", "OBJECTIVES", "feature_vectors",
           "check_normalizers"]

MODEL_TYPES = ("model/ranklib", "model/xgboost+json", "model/xgboost+json+raw", "model/linear")
#: objective -> transform of the float32 sum (``XGBoostJsonParser``)
OBJECTIVES = {"binary:logitraw": "identity", "rank:ndcg": "identity", "rank:map": "identity",
              "rank:pairwise": "identity", "reg:linear": "identity", "binary:logistic": "sigmoid",
              "reg:logistic": "sigmoid"}
MISSING_MODES = ("branch", "right", "zero")

_SPLIT_FIELDS = {"nodeid", "depth", "split", "split_condition", "yes", "no", "children"}
_NODE_FIELDS = _SPLIT_FIELDS | {"missing", "leaf"}
_OBJECT_FIELDS = {"objective", "splits", "missing_as_zero"}
_BAD_STRUCT = "Split structure is invalid, yes, no and/or missing branches does not point to the proper children."
_PARSE_FAILED = "Unable to parse XGBoost object"


@dataclass
class PluginModel:
    """A parsed plugin model: ``kind`` is ``"trees"`` (XGBoost JSON, RankLib ensembles), ``"linear"``
    (``model/linear``, RankLib Coordinate Ascent) or ``"linreg"`` (RankLib Linear Regression)."""

    model_type: str
    feature_set: tuple
    kind: str
    trees: list = field(default_factory=list)          # Tree objects, features as feature-set ordinals
    tree_weights: np.ndarray | None = None              # float32 (RankLib); None = 1
    rule: str = "<"                                     # left iff x < t (XGBoost JSON) or x <= t (RankLib)
    bags: int = 1                                       # RankLib Random Forests: trees averaged over bags
    transform: str = "identity"
    missing_as_zero: bool = False
    weights: np.ndarray | None = None                   # linear: per feature-set slot
    intercept: float = 0.0
    normalizers: dict = field(default_factory=dict)     # slot -> ("standard", mean, std) | ("min_max", lo, hi)

    def score(self, X, *, missing: str = "branch") -> np.ndarray:
        """Scores (float32 values as float64) of rows ``X`` in feature-set order; NaN = feature unset."""
        X32 = self._features(X, missing)
        if self.kind == "linear":  # LinearRanker.score: float32 products summed in feature-set order
            acc = np.zeros(X32.shape[0], dtype=np.float32)
            for j, w in enumerate(self.weights):
                acc = acc + np.float32(w) * X32[:, j]
            return acc.astype(np.float64)
        if self.kind == "linreg":  # RankLib LinearRegRank.eval: double, the intercept first, cast to float
            acc = np.full(X32.shape[0], self.intercept)
            for j, w in enumerate(self.weights):
                acc = acc + w * X32[:, j].astype(np.float64)
            return acc.astype(np.float32).astype(np.float64)
        return self._score_trees(X32, missing)

    def _features(self, X, missing):
        """Float32 feature vectors as the model sees them: normalised, unset features as the version has them."""
        if missing not in MISSING_MODES:
            raise InputError(f"missing: expected one of {MISSING_MODES}, got {missing!r}")
        X = np.array(X, dtype=np.float64, ndmin=2)
        if X.shape[1] != len(self.feature_set):
            raise InputError(f"X: expected {len(self.feature_set)} columns (the feature set), got {X.shape[1]}")
        with np.errstate(over="ignore"):
            X32 = X.astype(np.float32)
        # an absent feature is 0.0 in the vector (linear, RankLib, older versions, missing_as_zero), and the
        # normalisers then see that 0.0; a NaN left for the trees' missing branch stays NaN through them
        if self.kind != "trees" or self.model_type == "model/ranklib" or self.missing_as_zero or missing == "zero":
            X32 = np.where(np.isnan(X32), np.float32(0.0), X32)
        for slot, (kind, a, b) in self.normalizers.items():
            a32, b32 = np.float32(a), np.float32(b)
            X32[:, slot] = (X32[:, slot] - a32) / (b32 if kind == "standard" else b32 - a32)
        return X32

    def leaf_values(self, X, *, missing: str = "branch") -> np.ndarray:
        """``(n_rows, n_trees)`` float32 leaf (times its tree weight) each row reaches (tree models)."""
        if self.kind != "trees":
            raise InputError(f"leaf_values: {self.model_type} is not a tree model")
        X32 = self._features(X, missing)
        return self._leaves(X32, missing)

    def _leaves(self, X32, missing):
        def go_left(tree, idx, x):
            t = tree.threshold[idx].astype(np.float32)
            with np.errstate(invalid="ignore"):
                cmp = x < t if self.rule == "<" else x <= t
            if missing == "branch":
                cmp = np.where(np.isnan(x), tree.default_left[idx], cmp)
            return cmp  # NaN compares false: right

        nodes = leaf_nodes(self.trees, X32, go_left)
        out = np.empty(nodes.shape, dtype=np.float32)
        for k, tree in enumerate(self.trees):
            leaf = tree.value[nodes[:, k]].astype(np.float32)
            out[:, k] = leaf if self.tree_weights is None else leaf * self.tree_weights[k]
        return out

    def _score_trees(self, X32, missing):
        leaves = self._leaves(X32, missing)
        n = X32.shape[0]
        per_bag = len(self.trees) // self.bags
        total = np.zeros(n, dtype=np.float32)
        acc = np.zeros(n, dtype=np.float32)
        for k in range(leaves.shape[1]):
            acc = acc + leaves[:, k]
            if (k + 1) % per_bag == 0 and self.bags > 1:
                total, acc = total + acc, np.zeros(n, dtype=np.float32)
        if self.bags > 1:
            acc = total / np.float32(self.bags)
        if self.transform == "sigmoid":
            return (1.0 / (1.0 + np.exp(-acc.astype(np.float64)))).astype(np.float32).astype(np.float64)
        return acc.astype(np.float64)


# -- model/xgboost+json ---------------------------------------------------------------------------
def _xgb_node(node, index):
    if not isinstance(node, dict):
        raise EngineRejection(f"{_PARSE_FAILED}: a node must be an object, got {json.dumps(node)[:60]}")
    unknown = set(node) - _NODE_FIELDS
    if unknown:
        raise EngineRejection(f"[xgboost_split] unknown field [{sorted(unknown)[0]}]")
    if "leaf" in node:
        if "nodeid" not in node:
            raise EngineRejection("This leaf does not have all the required fields")
        return
    if not _SPLIT_FIELDS <= set(node):
        raise EngineRejection("This split does not have all the required fields")
    kids = node["children"]
    if not isinstance(kids, list) or len(kids) != 2 or not all(isinstance(c, dict) for c in kids) \
            or kids[0].get("nodeid") != node["yes"] or kids[1].get("nodeid") != node["no"] \
            or node.get("missing", node["no"]) not in (node["yes"], node["no"]):
        for c in kids if isinstance(kids, list) else []:  # a child without its fields is reported as such
            _xgb_node(c, index)
        raise EngineRejection(_BAD_STRUCT)
    if node["split"] not in index:
        raise EngineRejection(f"Unknown feature [{node['split']}]")
    for c in kids:
        _xgb_node(c, index)


def _number(v, what):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise EngineRejection(f"{what}: expected a number, got {json.dumps(v)}")
    return float(v)


def _parse_xgboost_json(d, feature_set):
    index = {n: i for i, n in enumerate(feature_set)}
    objective, missing_as_zero = "reg:linear", False
    if isinstance(d, dict):
        unknown = set(d) - _OBJECT_FIELDS
        if unknown:
            raise EngineRejection(f"{_PARSE_FAILED}: [xgboost] unknown field [{sorted(unknown)[0]}]")
        objective = d.get("objective", objective)
        if objective not in OBJECTIVES:
            raise EngineRejection(f"{_PARSE_FAILED}: Objective [{objective}] is not a valid XGBoost objective")
        missing_as_zero = bool(d.get("missing_as_zero", False))
        d = d.get("splits")
    if not isinstance(d, list):
        raise EngineRejection(f"{_PARSE_FAILED}: expected an array of trees or an object with \"splits\"")
    for root in d:
        _xgb_node(root, index)

    def children(node):
        return node["children"][0], node["children"][1]

    def read_split(node):
        with np.errstate(over="ignore"):  # a threshold beyond float32 is +-Infinity for the plugin too
            t = float(np.float32(_number(node["split_condition"], "split_condition")))
        return index[node["split"]], t, node.get("missing", node["no"]) == node["yes"], MISSING_NAN

    trees = [_flatten(root, is_leaf=lambda n: "leaf" in n, read_split=read_split,
                      read_leaf=lambda n: float(np.float32(_number(n["leaf"], "leaf"))), children=children)
             for root in d]
    return PluginModel("model/xgboost+json", tuple(feature_set), "trees", trees, rule="<",
                       transform=OBJECTIVES[objective], missing_as_zero=missing_as_zero)


# -- model/xgboost+json+raw -----------------------------------------------------------------------
def _parse_xgboost_raw(d, feature_set):
    if not isinstance(d, dict):
        raise EngineRejection("Expected [START_OBJECT] but got [START_ARRAY]")
    missing_as_zero = bool(d.get("missing_as_zero", False))
    try:
        learner = d["learner"]
        objective = learner["objective"]["name"]
        if objective not in OBJECTIVES:
            raise EngineRejection(f"{_PARSE_FAILED}: Objective [{objective}] is not a valid XGBoost objective")
        raw_trees = learner["gradient_booster"]["model"]["trees"]
        for t in raw_trees:
            n = len(t["base_weights"])
            for ref in list(t["left_children"]) + list(t["right_children"]):
                if ref != -1 and not 0 <= ref < n:
                    raise EngineRejection(f"{_PARSE_FAILED}: Child node reference ID [{ref}] is invalid")
        names, types = list(learner["feature_names"]), list(learner["feature_types"])
    except (KeyError, TypeError) as e:
        raise EngineRejection(f"{_PARSE_FAILED}: missing or malformed field {e}") from None
    for ty in types:
        if ty != "float":
            raise EngineRejection("The LTR plugin only supports float feature types because Elasticsearch scores "
                                  f"are always float32. Found feature type [{ty}] in model")
    if len(names) != len(types):
        raise EngineRejection("Feature names list and feature types list must have the same length")
    unknown = [n for n in names if n not in feature_set]
    if unknown:
        raise EngineRejection(f"Unknown features in model: [{', '.join(unknown)}]")
    slot = [list(feature_set).index(n) for n in names]
    trees = []
    for t in raw_trees:
        left, right = np.asarray(t["left_children"], dtype=np.int64), np.asarray(t["right_children"], dtype=np.int64)
        split = left >= 0
        fidx = np.asarray(t["split_indices"], dtype=np.int64)
        if np.any(fidx[split] >= len(names)):
            raise EngineRejection(f"{_PARSE_FAILED}: split index beyond the model's {len(names)} features")
        feat = np.where(split, np.array([slot[i] if i < len(slot) else -1 for i in fidx]), -1)
        trees.append(Tree(feat, np.where(split, np.asarray(t["split_conditions"], dtype=np.float32), np.nan),
                          left, right, np.asarray(t["default_left"], dtype=bool) & split,
                          np.full(len(left), MISSING_NAN, dtype=np.int8),
                          np.where(split, np.nan, np.asarray(t["base_weights"], dtype=np.float32))))
    # learner_model_param.base_score is ignored by the plugin (its tests expect 0.0 and 10.0, not 0.5 and 10.5)
    return PluginModel("model/xgboost+json+raw", tuple(feature_set), "trees", trees, rule="<",
                       transform=OBJECTIVES[objective], missing_as_zero=missing_as_zero)


# -- model/linear ---------------------------------------------------------------------------------
_JSON_TOKEN = {dict: "START_OBJECT", list: "START_ARRAY", str: "VALUE_STRING", type(None): "VALUE_NULL",
               bool: "VALUE_BOOLEAN"}


def _parse_linear(d, feature_set):
    if not isinstance(d, dict):
        raise EngineRejection(f"Expected start object but found [{_JSON_TOKEN.get(type(d), 'VALUE_NUMBER')}]")
    weights = np.zeros(len(feature_set), dtype=np.float32)
    for name, w in d.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)):
            raise EngineRejection(f"Expected a float but found [{_JSON_TOKEN[type(w)]}]")
        if name not in feature_set:
            raise EngineRejection(f"Feature [{name}] is unknown.")
        weights[list(feature_set).index(name)] = np.float32(w)
    return PluginModel("model/linear", tuple(feature_set), "linear", weights=weights)


# -- model/ranklib --------------------------------------------------------------------------------
_TREE_RE = re.compile(r"<tree\b[^>]*\bweight=\"([^\"]+)\"[^>]*>(.*?)</tree>", re.S)
_TOKEN_RE = re.compile(r"<(/?)(split|feature|threshold|output)\b[^>]*>|([^<]+)")


def _ranklib_tree(body: str, n_features: int) -> Tree:
    tokens = [(m.group(1), m.group(2), (m.group(3) or "").strip()) for m in _TOKEN_RE.finditer(body)]
    tokens = [t for t in tokens if t[1] or t[2]]
    pos = 0

    def text(tag):
        nonlocal pos
        if tokens[pos][:2] != ("", tag):
            raise EngineRejection(f"Error in RankLib tree: expected <{tag}>")
        value = tokens[pos + 1][2]
        if tokens[pos + 2][:2] != ("/", tag):
            raise EngineRejection(f"Error in RankLib tree: unclosed <{tag}>")
        pos += 3
        return value

    def node():
        nonlocal pos
        if tokens[pos][:2] != ("", "split"):
            raise EngineRejection("Error in RankLib tree: expected <split>")
        pos += 1
        if tokens[pos][1] == "output":
            out = {"leaf": float(np.float32(text("output")))}
        else:
            fid = int(text("feature"))
            if not 1 <= fid <= n_features:
                raise EngineRejection(f"Error in RankLib model: feature ordinal {fid} is outside the feature set "
                                      f"(1..{n_features})")
            thr = float(np.float32(text("threshold")))
            out = {"f": fid - 1, "t": thr, "l": node(), "r": node()}
        if tokens[pos][:2] != ("/", "split"):
            raise EngineRejection("Error in RankLib tree: unclosed <split>")
        pos += 1
        return out

    root = node()
    return _flatten(root, is_leaf=lambda n: "leaf" in n, read_split=lambda n: (n["f"], n["t"], False, MISSING_NAN),
                    read_leaf=lambda n: n["leaf"], children=lambda n: (n["l"], n["r"]))


def _parse_ranklib(text, feature_set):
    if not isinstance(text, str):
        raise EngineRejection("model/ranklib: the definition must be a string of RankLib text")
    lines = text.strip().splitlines()
    if not lines or not lines[0].startswith("## "):
        raise EngineRejection("RankLib model: the first line must be '## <ranker name>'")
    name = lines[0][3:].strip()
    n = len(feature_set)
    if name in ("LambdaMART", "MART", "Random Forests"):
        trees, weights = [], []
        for m in _TREE_RE.finditer(text):
            weights.append(np.float32(m.group(1)))
            trees.append(_ranklib_tree(m.group(2), n))
        bags = text.count("<ensemble>") if name == "Random Forests" else 1
        if not trees or len(trees) % bags:
            raise EngineRejection(f"RankLib {name} model without trees")
        return PluginModel("model/ranklib", tuple(feature_set), "trees", trees, np.array(weights, dtype=np.float32),
                           rule="<=", bags=bags)
    if name in ("Coordinate Ascent", "Linear Regression"):
        body = [ln.strip() for ln in lines[1:] if ln.strip() and not ln.strip().startswith("##")]
        if len(body) != 1:
            raise EngineRejection(f"RankLib {name} model: expected one line of 'ordinal:weight' pairs")
        pairs = [p.split(":") for p in body[0].split()]
        weights = np.zeros(n)
        intercept = 0.0
        for k, v in pairs:
            fid = int(k)
            if fid == 0 and name == "Linear Regression":
                intercept = float(v)
                continue
            if not 1 <= fid <= n:
                raise EngineRejection(f"Error in RankLib model: feature ordinal {fid} is outside the feature set "
                                      f"(1..{n})")
            weights[fid - 1] = float(v)
        if name == "Coordinate Ascent":  # CoorAscent.eval: double sum of weight x feature, no intercept
            return PluginModel("model/ranklib", tuple(feature_set), "linreg", weights=weights)
        return PluginModel("model/ranklib", tuple(feature_set), "linreg", weights=weights, intercept=intercept)
    raise EngineRejection(f"RankLib ranker [{name}] is not one rankwise models (LambdaMART, MART, Random Forests, "
                          "Coordinate Ascent, Linear Regression)")


# -- normalisers ----------------------------------------------------------------------------------
def check_normalizers(normalizers, feature_set) -> dict:
    """``feature_normalizers`` as the plugin validates them; returns ``{slot: (kind, a, b)}``."""
    out = {}
    for name, spec in (normalizers or {}).items():
        if name not in feature_set:
            raise EngineRejection(f"Feature [{name}] of feature_normalizers is not in the feature set")
        if not isinstance(spec, dict) or len(spec) != 1:
            raise EngineRejection(f"feature_normalizers[{name}]: expected one of {{standard, min_max}}")
        (kind, p), = spec.items()
        if kind == "standard":
            mean, std = float(p["mean"]), float(p["standard_deviation"])
            if not std > 0:
                raise EngineRejection(f"Standard Deviation for [{name}] must be a positive number")
            out[list(feature_set).index(name)] = ("standard", mean, std)
        elif kind == "min_max":
            lo, hi = float(p["minimum"]), float(p["maximum"])
            if not 0 <= lo < hi:
                raise EngineRejection(f"min_max for [{name}]: expected 0 <= minimum < maximum, got {lo}, {hi}")
            out[list(feature_set).index(name)] = ("min_max", lo, hi)
        else:
            raise EngineRejection(f"feature_normalizers[{name}]: unknown normalizer [{kind}]")
    return out


# -- entry points ---------------------------------------------------------------------------------
def parse_model(model_type: str, definition, feature_set, *, feature_normalizers=None) -> PluginModel:
    """Parse a model definition as the plugin does (``definition`` as a string, or parsed JSON).

    Raises :class:`EngineRejection` where the plugin's parser rejects it.
    """
    feature_set = tuple(feature_set)
    if model_type not in MODEL_TYPES:
        raise EngineRejection(f"Unknown model type [{model_type}]; the plugin accepts {', '.join(MODEL_TYPES)}")
    if model_type != "model/ranklib" and isinstance(definition, str):
        try:
            definition = json.loads(definition, parse_constant=_no_constant)
        except json.JSONDecodeError as e:
            raise EngineRejection(f"{model_type}: the definition is not valid JSON ({e})") from None
    parser = {"model/xgboost+json": _parse_xgboost_json, "model/xgboost+json+raw": _parse_xgboost_raw,
              "model/linear": _parse_linear, "model/ranklib": _parse_ranklib}[model_type]
    model = parser(definition, feature_set)
    model.normalizers = check_normalizers(feature_normalizers, feature_set)
    return model


def _no_constant(name):
    raise EngineRejection(f"the definition has {name}, which is not JSON")


def feature_vectors(feature_set, rows) -> np.ndarray:
    """Rows given as ``{name: value or None}`` as a float array in feature-set order (NaN = unset)."""
    index = {n: i for i, n in enumerate(feature_set)}
    X = np.full((len(rows), len(index)), np.nan)
    for r, row in enumerate(rows):
        for name, v in row.items():
            if name not in index:
                raise InputError(f"row {r}: feature {name!r} is not in the feature set {list(index)}")
            if v is not None:
                X[r, index[name]] = v
    return X
