"""A neutral representation of a boosted tree ensemble, read from the booster that trained it.

:func:`tree_ensemble` reads a LightGBM or XGBoost booster (as :class:`~rankwise.models.GBDTRanker`
holds it, or bare) through the libraries' own dumps -- ``Booster.dump_model()`` for LightGBM,
``Booster.get_dump(dump_format="json")`` for XGBoost -- into flat per-tree arrays that keep
everything a serving target needs to decide exactly as the booster does:

- the threshold as the library holds it (LightGBM: a double, printed with 17 significant digits;
  XGBoost: a float32, printed with 9), stored as float64 without rounding;
- the comparison (``"<="``: LightGBM goes left iff ``x <= t`` in double; ``"<"``: XGBoost goes
  left iff ``float32(x) < t``) and the precision features are compared in;
- the node's default direction and LightGBM's ``missing_type`` (``None``: NaN counts as 0;
  ``Zero``: NaN and ``|x| <= 1e-35f`` take the default side; ``NaN``: NaN takes the default side);
  LightGBM's ``predict`` also reads ``|x| <= 1e-35f`` as 0.0 (dense rows become sparse pairs);
- the leaf values (shrinkage included) and the base margin XGBoost adds (LightGBM folds its
  initial score into the first tree's leaves).

:meth:`TreeEnsemble.raw_score` is the reference scorer: the booster's decision rule at each node,
the leaves summed in the booster's precision and order (double for LightGBM, float32 from the
base margin for XGBoost); tests hold it equal, row for row, to LightGBM's
``predict(raw_score=True)`` and XGBoost's ``predict(output_margin=True)``, and, with the sum in
double (``raw_score(X, sum_dtype=np.float64)``), to ``GBDTRanker.predict``.

Categorical splits, linear trees and multi-output boosters are refused (no serving target here
represents them exactly, and rankwise never trains them).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError
from rankwise.models._xgb_sum import xgb_base_margin

__all__ = ["ExportError", "Tree", "TreeEnsemble", "tree_ensemble", "floor32", "next32", "prev32", "LIGHTGBM_ZERO_THRESHOLD",
           "adversarial_rows"]

#: LightGBM's ``kZeroThreshold`` (``1e-35f``, a float widened to double): ``missing_type=Zero``
#: sends ``|x| <= kZeroThreshold`` to the default side.
LIGHTGBM_ZERO_THRESHOLD = float(np.float32(1e-35))

MISSING_NONE, MISSING_ZERO, MISSING_NAN = 0, 1, 2
_MISSING_CODES = {"None": MISSING_NONE, "Zero": MISSING_ZERO, "NaN": MISSING_NAN}
MISSING_NAMES = {v: k for k, v in _MISSING_CODES.items()}


class ExportError(InputError):
    """The target cannot represent the model exactly (the message says why and what to do)."""


# -- float32 neighbours of a double -----------------------------------------------------------------
_F32_MAX = float(np.finfo(np.float32).max)


def floor32(t: float) -> np.float32:
    """The largest float32 ``<= t`` (``-inf`` below the float32 range, ``FLT_MAX`` above it)."""
    if t > _F32_MAX:
        return np.float32(_F32_MAX)
    if t < -_F32_MAX:
        return np.float32(-np.inf)
    with np.errstate(over="ignore"):
        f = np.float32(t)
        if float(f) > t:
            f = np.nextafter(f, np.float32(-np.inf))
    return np.float32(f)


def next32(f) -> np.float32:
    """The next float32 above ``f`` (``inf`` above ``FLT_MAX``)."""
    with np.errstate(over="ignore"):
        return np.nextafter(np.float32(f), np.float32(np.inf))


def prev32(f) -> np.float32:
    """The next float32 below ``f``."""
    with np.errstate(over="ignore"):
        return np.nextafter(np.float32(f), np.float32(-np.inf))


@dataclass(frozen=True)
class Tree:
    """One tree as flat node arrays (node 0 is the root; ``feature == -1`` marks a leaf)."""

    feature: np.ndarray        # int64, -1 at leaves
    threshold: np.ndarray      # float64 (exact library value), NaN at leaves
    left: np.ndarray           # int64 child taken when the comparison holds, -1 at leaves
    right: np.ndarray          # int64
    default_left: np.ndarray   # bool: the side of a missing value (per missing_type)
    missing_type: np.ndarray   # int8: 0 None, 1 Zero, 2 NaN
    value: np.ndarray          # float64 leaf value, NaN at splits

    @property
    def n_nodes(self) -> int:
        return len(self.feature)

    def is_leaf(self, node: int) -> bool:
        return self.feature[node] < 0


@dataclass(frozen=True)
class TreeEnsemble:
    """A boosted ensemble of binary trees on numerical features (see the module docstring).

    Attributes
    ----------
    trees : tuple of Tree
    n_features : int
    feature_names : tuple of str
        The booster's own names (LightGBM ``Column_i`` unless given; XGBoost ``f<i>``).
    decision : {"<=", "<"}
        The booster goes left iff ``x <= t`` (LightGBM) or ``x < t`` (XGBoost).
    feature_dtype, sum_dtype : numpy dtype
        Precision of the comparison and of the sum of leaves: float64 for LightGBM, float32 for
        XGBoost.
    base_score : float
        Margin added before the trees (XGBoost's base score as a margin; 0 for LightGBM).
    source : {"lightgbm", "xgboost"}
    objective : str
        The library's objective name (``"none"``/``"custom"`` for a rankwise loss).
    """

    trees: tuple
    n_features: int
    feature_names: tuple
    decision: str
    feature_dtype: type
    sum_dtype: type
    base_score: float
    source: str
    objective: str
    meta: dict = field(default_factory=dict)

    # -- the reference scorer --------------------------------------------------------------------
    def go_left(self, tree: Tree, nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The booster's decision at ``nodes`` (split nodes) for feature values ``x`` (float64 array)."""
        t = tree.threshold[nodes]
        dl = tree.default_left[nodes]
        mt = tree.missing_type[nodes]
        nan = np.isnan(x)
        if self.feature_dtype == np.float32:
            xv = x.astype(np.float32)
            with np.errstate(invalid="ignore"):
                cmp = xv < t.astype(np.float32)
            return np.where(nan, dl, cmp)
        xv = np.where(nan & (mt != MISSING_NAN), 0.0, x)  # LightGBM: NaN counts as 0 unless missing_type=NaN
        # LightGBM's predict reads dense rows as sparse pairs and drops |x| <= kZeroThreshold: those are 0.0
        xv = np.where(np.abs(xv) <= LIGHTGBM_ZERO_THRESHOLD, 0.0, xv)
        with np.errstate(invalid="ignore"):
            cmp = xv <= t if self.decision == "<=" else xv < t
        to_default = ((mt == MISSING_ZERO) & (np.abs(xv) <= LIGHTGBM_ZERO_THRESHOLD)) | ((mt == MISSING_NAN) & nan)
        return np.where(to_default, dl, cmp)

    def leaf_values(self, X) -> np.ndarray:
        """``(n_rows, n_trees)`` leaf value reached by each row in each tree (float64)."""
        return descend(self.trees, self._check_X(X), self.go_left)

    def raw_score(self, X, *, sum_dtype=None) -> np.ndarray:
        """The booster's raw score (margin) of each row of ``X`` (float64 array, NaN = missing).

        Sums the leaves in the booster's order and precision (``sum_dtype``, default the booster's own),
        so that the result equals LightGBM's ``predict(raw_score=True)`` and XGBoost's
        ``predict(output_margin=True)``. ``sum_dtype=np.float64`` on rows read as float32 is
        ``GBDTRanker.predict``: it sums XGBoost's float32 leaves in double, from the base margin.
        """
        dtype = self.sum_dtype if sum_dtype is None else sum_dtype
        leaves = self.leaf_values(X)
        acc = np.full(leaves.shape[0], self.base_score, dtype=dtype)
        for k in range(leaves.shape[1]):
            acc = acc + leaves[:, k].astype(dtype)
        return acc.astype(np.float64)

    def thresholds_by_feature(self) -> dict:
        """``{feature index: sorted unique thresholds}`` over every split of the ensemble."""
        out: dict = {}
        for tree in self.trees:
            split = tree.feature >= 0
            for f, t in zip(tree.feature[split], tree.threshold[split]):
                out.setdefault(int(f), set()).add(float(t))
        return {f: np.array(sorted(v)) for f, v in sorted(out.items())}

    def _check_X(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] < self.n_features:
            raise InputError(f"X: expected a 2-d array with {self.n_features} feature columns, got shape {X.shape}")
        return X


# -- reading the boosters ---------------------------------------------------------------------------
def _refuse(what: str) -> None:
    raise ExportError(f"{what}: rankwise.export represents numerical splits of single-output tree ensembles only "
                     "(retrain with the feature numerical / without linear trees)")


def _flatten(root, *, is_leaf, read_split, read_leaf, children) -> Tree:
    feats, thr, left, right, dl, mt, val = [], [], [], [], [], [], []
    stack = [(root, None, None)]
    while stack:  # pre-order; children's slots are filled in when they are numbered
        node, parent, side = stack.pop()
        k = len(feats)
        if parent is not None:
            (left if side == 0 else right)[parent] = k
        if is_leaf(node):
            feats.append(-1), thr.append(np.nan), left.append(-1), right.append(-1)
            dl.append(False), mt.append(MISSING_NONE), val.append(read_leaf(node))
            continue
        f, t, d, m = read_split(node)
        feats.append(f), thr.append(t), left.append(-1), right.append(-1), dl.append(d), mt.append(m)
        val.append(np.nan)
        lo, hi = children(node)
        stack.append((hi, k, 1))
        stack.append((lo, k, 0))
    return Tree(np.array(feats, dtype=np.int64), np.array(thr, dtype=np.float64), np.array(left, dtype=np.int64),
                np.array(right, dtype=np.int64), np.array(dl, dtype=bool), np.array(mt, dtype=np.int8),
                np.array(val, dtype=np.float64))


def _from_lightgbm(booster, n_trees: int | None) -> TreeEnsemble:
    d = booster.dump_model(num_iteration=n_trees)
    if int(d.get("num_class", 1)) != 1 or int(d.get("num_tree_per_iteration", 1)) != 1:
        _refuse(f"LightGBM model with {d.get('num_tree_per_iteration')} trees per iteration")
    if d.get("average_output"):
        _refuse("LightGBM random-forest model (average_output)")
    names = tuple(d["feature_names"])

    def read_split(node):
        if node["decision_type"] != "<=":
            _refuse(f"LightGBM split on feature {node['split_feature']} with decision_type "
                    f"{node['decision_type']!r} (categorical)")
        return (int(node["split_feature"]), float(node["threshold"]), bool(node["default_left"]),
                _MISSING_CODES[node["missing_type"]])

    def read_leaf(node):
        if "leaf_coeff" in node:
            _refuse("LightGBM linear tree (leaf_coeff)")
        return float(node["leaf_value"])

    trees = []
    for info in d["tree_info"]:
        if int(info.get("num_cat", 0)):
            _refuse(f"LightGBM tree {info['tree_index']} with {info['num_cat']} categorical splits")
        trees.append(_flatten(info["tree_structure"], is_leaf=lambda n: "split_index" not in n, read_split=read_split,
                              read_leaf=read_leaf, children=lambda n: (n["left_child"], n["right_child"])))
    objective = str(d.get("objective", "none")).split(" ")[0]
    return TreeEnsemble(tuple(trees), int(d["max_feature_idx"]) + 1, names, "<=", np.float64, np.float64, 0.0,
                        "lightgbm", objective)


def _from_xgboost(booster, n_trees: int | None) -> TreeEnsemble:
    config = json.loads(booster.save_config())
    learner = config["learner"]
    objective = learner["objective"]["name"]
    gb = learner["gradient_booster"]
    if gb.get("name") != "gbtree":
        _refuse(f"XGBoost booster {gb.get('name')!r} (only gbtree)")
    per_round = int(gb["gbtree_model_param"].get("num_parallel_tree", "1"))
    n_features = int(learner["learner_model_param"]["num_feature"])
    names = tuple(booster.feature_names) if booster.feature_names else tuple(f"f{i}" for i in range(n_features))
    index = {n: i for i, n in enumerate(names)}
    dumps = booster.get_dump(dump_format="json")
    if n_trees is not None:
        dumps = dumps[: n_trees * per_round]

    def read_split(node):
        if "split_condition" not in node or "categories" in node:
            _refuse(f"XGBoost categorical split on {node.get('split')!r}")
        f = index[node["split"]] if node["split"] in index else int(node["split"].lstrip("f"))
        # the dump prints the float32 threshold with enough digits to read it back exactly
        return f, float(np.float32(node["split_condition"])), node["missing"] == node["yes"], MISSING_NAN

    def children(node):
        by_id = {c["nodeid"]: c for c in node["children"]}
        return by_id[node["yes"]], by_id[node["no"]]

    trees = [_flatten(json.loads(text), is_leaf=lambda n: "leaf" in n, read_split=read_split,
                      read_leaf=lambda n: float(np.float32(n["leaf"])), children=children) for text in dumps]
    return TreeEnsemble(tuple(trees), n_features, names, "<", np.float32, np.float32,
                        xgb_base_margin(learner["learner_model_param"]["base_score"], objective, _refuse), "xgboost",
                        objective,
                        {"trees_per_round": per_round})


def tree_ensemble(model) -> TreeEnsemble:
    """The :class:`TreeEnsemble` of a fitted :class:`~rankwise.models.GBDTRanker` or a bare booster.

    A GBDTRanker stopped early (``best_iteration_``) gives the trees its ``predict`` uses.
    """
    booster = getattr(model, "booster_", model)
    best = getattr(model, "best_iteration_", None)
    n_trees = None if best is None else int(best) + 1
    kind = type(booster).__module__.split(".")[0]
    if kind == "lightgbm":
        return _from_lightgbm(booster, n_trees)
    if kind == "xgboost":
        return _from_xgboost(booster, n_trees)
    raise InputError(f"model: expected a fitted GBDTRanker or a lightgbm/xgboost Booster, got {type(model).__name__}")


# -- rows that probe every split --------------------------------------------------------------------
def adversarial_rows(ensemble: TreeEnsemble, base_row, *, max_rows: int | None = None) -> np.ndarray:
    """Rows built from the model's own thresholds: each split feature of ``base_row`` set to each
    threshold ``t`` exactly, to ``float32(t)``, to the float32 neighbours of ``floor32(t)`` and
    ``float32(t)``, and to ``+0.0``, ``-0.0``, ``NaN``, ``±1e-35`` and a float64 value between
    ``floor32(t)`` and ``t`` (one that rounds across the threshold in float32).

    Every row differs from ``base_row`` in one feature only, so a wrong decision at one node
    shows as a wrong score.
    """
    base = np.asarray(base_row, dtype=np.float64).ravel()
    rows = []
    specials = [0.0, -0.0, np.nan, LIGHTGBM_ZERO_THRESHOLD, -LIGHTGBM_ZERO_THRESHOLD]
    for f, ts in ensemble.thresholds_by_feature().items():
        values = list(specials)
        for t in ts:  # float32 arithmetic at the edge of its range overflows to inf: those are dropped
            with np.errstate(over="ignore"):
                lo = floor32(t)
                cands = [t, float(np.float32(t)), float(lo), float(next32(lo)), float(prev32(lo)),
                         float(next32(np.float32(t))), float(prev32(np.float32(t)))]
            if float(lo) < t:
                cands.append(float(lo) + (t - float(lo)) / 2)  # a double strictly between floor32(t) and t
            values.extend(c for c in cands if abs(c) <= _F32_MAX)
        for v in values:
            r = base.copy()
            r[f] = v
            rows.append(r)
    out = np.array(rows) if rows else np.empty((0, len(base)))
    return out if max_rows is None else out[:max_rows]


def leaf_nodes(trees, X: np.ndarray, go_left) -> np.ndarray:
    """``(n_rows, n_trees)`` int64: the leaf node each row of ``X`` reaches in each tree (arrays with
    ``feature`` (< 0 at a leaf), ``left``, ``right``), all rows at once, level by level.
    ``go_left(tree, idx, x)`` is the target's split rule: for the nodes ``idx`` the active rows
    stand at and their feature values ``x``, whether each goes left."""
    n = X.shape[0]
    rows = np.arange(n)
    out = np.empty((n, len(trees)), dtype=np.int64)
    for k, tree in enumerate(trees):
        node = np.zeros(n, dtype=np.int64)
        active = tree.feature[node] >= 0
        while active.any():
            idx = node[active]
            x = X[rows[active], tree.feature[idx]]
            node[active] = np.where(go_left(tree, idx, x), tree.left[idx], tree.right[idx])
            active = tree.feature[node] >= 0
        out[:, k] = node
    return out


def descend(trees, X: np.ndarray, go_left) -> np.ndarray:
    """``(n_rows, n_trees)`` float64: the leaf value each row reaches in each tree (:func:`leaf_nodes`)."""
    nodes = leaf_nodes(trees, X, go_left)
    out = np.empty(nodes.shape)
    for k, tree in enumerate(trees):
        out[:, k] = tree.value[nodes[:, k]]
    return out
