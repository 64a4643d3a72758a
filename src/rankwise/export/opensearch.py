"""Models out to the OpenSearch / Elasticsearch LTR plugin (``sltr`` rescoring).

:func:`to_opensearch` writes a fitted rankwise model as one of the plugin's model types, with the
feature-set JSON and the whole ``POST _ltr/_featureset/<set>/_createmodel`` body:

- ``"xgboost+json"`` (``model/xgboost+json``) from a :class:`~rankwise.models.GBDTRanker` on
  LightGBM *or* XGBoost. The plugin compares float32 features with float32 thresholds and goes to
  the ``yes`` child iff ``x < t``. LightGBM goes left iff ``x <= t`` with ``t`` a double, so each
  threshold is rewritten to ``t' = next32(floor32(t))``: for every float32 ``x``, ``x < t'`` iff
  ``x <= t`` (XGBoost's float32 ``x < t`` is kept as it is). The ``missing`` child is the side
  the booster sends NaN to (LightGBM ``missing_type=None``: the side of 0.0). XGBoost's base
  margin, which the plugin does not add, becomes a first one-leaf tree.
- ``"xgboost+json+raw"`` (``model/xgboost+json+raw``) from a GBDTRanker on XGBoost: the booster's
  own ``save_model`` JSON (the rounds ``predict`` uses), which the plugin reads as XGBoost does
  (``x < t`` in float32, NaN to ``default_left``, leaves from ``base_weights``, set here to the
  leaf values) but without ``base_score`` and with its own list of objectives: the base margin
  becomes a first one-leaf tree (``base_score`` 0), the objective ``rank:pairwise`` (a margin,
  no transform), the feature names the feature set's and every feature type ``"float"``. XGBoost
  reads the file too and gives the same float32 margin. A LightGBM model is refused (use
  ``"xgboost+json"``).
- ``"ranklib"`` (``model/ranklib``): a tree ensemble as ``## LambdaMART`` text (tree weight 1,
  features as 1-based ordinals into the feature set, left iff ``x <= t'`` in float32 with
  ``t' = floor32(t)`` for LightGBM and ``prev32(t)`` for XGBoost); a
  :class:`~rankwise.models.LinearRanker` as ``## Linear Regression`` with its intercept.
- ``"linear"`` (``model/linear``): a LinearRanker's weights with its standardiser as the plugin's
  ``feature_normalizers`` (``standard``: ``(x - mean) / standard_deviation``).

Where the target cannot decide exactly as the model does, :class:`ExportError` says why: RankLib
and ``model/linear`` see an absent feature as 0.0, so a split that sends NaN elsewhere than 0.0 is
refused unless ``missing="as_zero"`` accepts the difference; LightGBM's ``missing_type=Zero``
band ``|x| <= 1e-35`` must fall on the default side; ``model/linear`` has no intercept (refused
unless ``drop_intercept=True``: a constant shift, the ranking is unchanged); feature maps
(``poly2``, ``rff``) are not linear in the features. Categorical splits and linear trees are
refused when the ensemble is read (:mod:`rankwise.export._trees`).

``shift="auto"`` adds the constant that makes every score non-negative (Lucene rejects negative
scores) as a last one-leaf tree or in the intercept: float32 addition is monotone, so the ranking
is kept (two scores may at worst become equal; the parity report counts it).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError
from rankwise.export._common import (ExportError, feature_names_for, left_max32, min_score, missing_mismatches,
                                     nan_goes_left, shift_value)
from rankwise.export._trees import TreeEnsemble, next32, tree_ensemble
from rankwise.export.reference import opensearch as plugin

__all__ = ["ExportError", "OpenSearchExport", "to_opensearch", "featureset_body", "FORMATS"]

FORMATS = ("xgboost+json", "xgboost+json+raw", "ranklib", "linear")


@dataclass
class OpenSearchExport:
    """One model written for the plugin.

    Attributes
    ----------
    model_type : str
        ``model/xgboost+json``, ``model/xgboost+json+raw``, ``model/ranklib`` or ``model/linear``.
    definition : str
        The model definition as the plugin reads it (JSON text or RankLib text).
    feature_names : list of str
        The feature set, in order (RankLib ordinals count from 1 in this order).
    feature_normalizers : dict
    score_offset : float
        What the served score adds to ``model.predict`` by construction (``shift``, or minus a
        dropped intercept); the ranking is the same.
    notes : list of str
        Differences accepted on request (``missing="as_zero"``).
    """

    model_type: str
    definition: str
    feature_names: list
    feature_normalizers: dict = field(default_factory=dict)
    score_offset: float = 0.0
    notes: list = field(default_factory=list)

    def createmodel_body(self, name: str) -> dict:
        """The body of ``POST _ltr/_featureset/<set>/_createmodel``."""
        model = {"type": self.model_type, "definition": self.definition}
        if self.feature_normalizers:
            model["feature_normalizers"] = self.feature_normalizers
        return {"model": {"name": name, "model": model}}

    def reference(self) -> plugin.PluginModel:
        """The definition as the plugin parses it (validated): ``.score(X)`` scores as the plugin does."""
        return plugin.parse_model(self.model_type, self.definition, self.feature_names,
                                  feature_normalizers=self.feature_normalizers)

    def predict(self, X, *, missing: str = "branch") -> np.ndarray:
        """The plugin's scores of rows ``X`` (columns in feature-set order, NaN = feature absent)."""
        return self.reference().score(X, missing=missing)


def featureset_body(name: str, feature_names, templates: dict, *, params=("keywords",)) -> dict:
    """The body of ``PUT _ltr/_featureset/<name>``: one mustache template per feature, in model order."""
    missing = [f for f in feature_names if f not in templates]
    if missing:
        raise InputError(f"templates: no query template for features {missing}; give one per feature, e.g. "
                         "{'title_bm25': {'match': {'title': '{{keywords}}'}}}")
    return {"featureset": {"name": name, "features": [
        {"name": f, "params": list(params), "template_language": "mustache", "template": templates[f]}
        for f in feature_names]}}


# -- number formats --------------------------------------------------------------------------------
def _json_float(v) -> float | str:
    """A float32 value as a JSON number that reads back (as double, then float) exactly; +-1e39 for +-inf."""
    v = float(v)
    if np.isinf(v):
        return 1e39 if v > 0 else -1e39  # (float)1e39 is Infinity in Java, as numpy's float32(1e39)
    return v


def _text_float(v) -> str:
    v = float(v)
    return ("Infinity" if v > 0 else "-Infinity") if np.isinf(v) else repr(v)


# -- trees ----------------------------------------------------------------------------------------
def _split_threshold(ens: TreeEnsemble, tree, t: int, k: int, rule: str, target: str) -> np.float32:
    """The float32 threshold that decides, for every float32 x, as the booster does on x."""
    g = left_max32(ens, tree, t, k, target)
    return next32(g) if rule == "<" else g


def _xgboost_json(ens: TreeEnsemble, names: list, shift: float, missing_as_zero: bool) -> tuple[str, list]:
    trees = []
    if ens.base_score != 0.0:
        trees.append({"nodeid": 0, "leaf": _json_float(np.float32(ens.base_score))})
    for ti, tree in enumerate(ens.trees):
        def node(k, depth, tree=tree, ti=ti):
            if tree.feature[k] < 0:
                return {"nodeid": int(k), "leaf": _json_float(np.float32(tree.value[k]))}
            yes, no = int(tree.left[k]), int(tree.right[k])
            return {"nodeid": int(k), "depth": depth, "split": names[tree.feature[k]],
                    "split_condition": _json_float(_split_threshold(ens, tree, ti, k, "<", "model/xgboost+json")),
                    "yes": yes, "no": no, "missing": yes if nan_goes_left(ens, tree, k) else no,
                    "children": [node(yes, depth + 1), node(no, depth + 1)]}

        trees.append(node(0, 0))
    if shift:
        trees.append({"nodeid": 0, "leaf": _json_float(np.float32(shift))})
    notes = []
    if missing_as_zero:
        notes.append("missing_as_zero: an absent feature is 0.0 (OpenSearch main only), not the booster's NaN rule")
        return json.dumps({"missing_as_zero": True, "splits": trees}), notes
    return json.dumps(trees), notes


def _one_leaf_tree(value: float, n_features: int) -> dict:
    """A tree of XGBoost's model JSON with a single (leaf) node of value ``value`` (a float32)."""
    v = _json_float(np.float32(value))
    return {"base_weights": [v], "categories": [], "categories_nodes": [], "categories_segments": [],
            "categories_sizes": [], "default_left": [0], "id": 0, "left_children": [-1], "loss_changes": [0.0],
            "parents": [2147483647], "right_children": [-1], "split_conditions": [v], "split_indices": [0],
            "split_type": [0], "sum_hessian": [0.0],
            "tree_param": {"num_deleted": "0", "num_feature": str(n_features), "num_nodes": "1",
                           "size_leaf_vector": "1"}}


def _pairwise_objective(xgb) -> dict:
    """XGBoost's own config of ``rank:pairwise`` (with its parameters, which XGBoost needs to load a model)."""
    dm = xgb.DMatrix(np.zeros((2, 1)), label=[0.0, 1.0])
    dm.set_group([2])
    return json.loads(xgb.train({"objective": "rank:pairwise", "nthread": 1}, dm, 0).save_config())["learner"][
        "objective"]


def _xgboost_raw(model, ens: TreeEnsemble, names: list, shift: float, missing_as_zero: bool) -> tuple[str, list]:
    """XGBoost's own model JSON of the trees ``predict`` uses, as the plugin's raw parser needs it."""
    import xgboost as xgb

    booster = getattr(model, "booster_", model)
    best = getattr(model, "best_iteration_", None)
    if best is not None:
        booster = booster[: int(best) + 1]
    doc = json.loads(bytes(booster.save_raw("json")))
    learner = doc["learner"]
    forest = learner["gradient_booster"]["model"]
    trees = forest["trees"]
    for tree in trees:  # the plugin reads a leaf from base_weights: the leaf value itself
        for k, child in enumerate(tree["left_children"]):
            if child == -1:
                tree["base_weights"][k] = tree["split_conditions"][k]
    head = [_one_leaf_tree(ens.base_score, len(names))] if ens.base_score != 0.0 else []
    tail = [_one_leaf_tree(shift, len(names))] if shift else []
    forest["trees"] = head + trees + tail
    for i, tree in enumerate(forest["trees"]):
        tree["id"] = i
    forest["tree_info"] = [0] * len(forest["trees"])
    indptr = [0] + ([1] if head else []) + [p + len(head) for p in forest["iteration_indptr"][1:]]
    forest["iteration_indptr"] = indptr + ([indptr[-1] + 1] if tail else [])
    forest["gbtree_model_param"]["num_trees"] = str(len(forest["trees"]))
    base = learner["learner_model_param"]["base_score"]
    learner["learner_model_param"]["base_score"] = "[0E0]" if base.startswith("[") else "0E0"
    # a margin with no transform, under an objective name the plugin knows (its config as XGBoost writes it)
    learner["objective"] = _pairwise_objective(xgb)
    learner["feature_names"] = list(names)
    learner["feature_types"] = ["float"] * len(names)
    notes = []
    if missing_as_zero:
        doc["missing_as_zero"] = True
        notes.append("missing_as_zero: an absent feature is 0.0 (OpenSearch main only), not the booster's NaN rule")
    return json.dumps(doc), notes


def _ranklib_trees(ens: TreeEnsemble, shift: float) -> str:
    out = []

    def node(tree, k, indent, ti):
        pad = "\t" * indent
        if tree.feature[k] < 0:
            out.append(f"{pad}<output> {_text_float(np.float32(tree.value[k]))} </output>")
            return
        out.append(f"{pad}<feature> {int(tree.feature[k]) + 1} </feature>")
        thr = _split_threshold(ens, tree, ti, k, "<=", "model/ranklib")
        out.append(f"{pad}<threshold> {_text_float(thr)} </threshold>")
        for side, child in (("left", tree.left[k]), ("right", tree.right[k])):
            out.append(f"{pad}<split pos=\"{side}\">")
            node(tree, child, indent + 1, ti)
            out.append(f"{pad}</split>")

    def constant_tree(value):
        out.append(f"\t<tree id=\"{len_trees[0] + 1}\" weight=\"1.0\">")
        out.append(f"\t\t<split>\n\t\t\t<output> {_text_float(np.float32(value))} </output>\n\t\t</split>")
        out.append("\t</tree>")
        len_trees[0] += 1

    len_trees = [0]
    n_trees = len(ens.trees) + (ens.base_score != 0.0) + bool(shift)
    out += ["## LambdaMART", f"## No. of trees = {n_trees}", "## Learning rate = 1.0",
            f"## exported by rankwise from {ens.source} (tree weights 1: the leaves carry the shrinkage)", "",
            "<ensemble>"]
    if ens.base_score != 0.0:
        constant_tree(ens.base_score)
    for ti, tree in enumerate(ens.trees):
        len_trees[0] += 1
        out.append(f"\t<tree id=\"{len_trees[0]}\" weight=\"1.0\">")
        out.append("\t\t<split>")
        node(tree, 0, 3, ti)
        out.append("\t\t</split>")
        out.append("\t</tree>")
    if shift:
        constant_tree(shift)
    out.append("</ensemble>")
    return "\n".join(out) + "\n"


def _export_trees(model, fmt, names, shift, missing, missing_as_zero) -> OpenSearchExport:
    ens = tree_ensemble(model)
    names = feature_names_for(model, ens.n_features, names)
    s = shift_value(shift, min_score(ens))
    if fmt == "xgboost+json":
        definition, notes = _xgboost_json(ens, names, s, missing_as_zero)
        return OpenSearchExport("model/xgboost+json", definition, names, score_offset=s, notes=notes)
    if fmt == "xgboost+json+raw":
        if ens.source != "xgboost":
            raise ExportError(f"format 'xgboost+json+raw' is XGBoost's own model JSON (save_model) and this model's "
                              f"trees are {ens.source}'s: use format 'xgboost+json' (the thresholds rewritten for the "
                              "plugin's float32 x < t)")
        definition, notes = _xgboost_raw(model, ens, names, s, missing_as_zero)
        return OpenSearchExport("model/xgboost+json+raw", definition, names, score_offset=s, notes=notes)
    notes = []
    bad = missing_mismatches(ens)
    if bad:
        msg = (f"{len(bad)} split(s) send a missing value (NaN) to another side than 0.0 (first: tree {bad[0][0]} "
               f"node {bad[0][1]}); model/ranklib sees an absent feature as 0.0")
        if missing != "as_zero":
            raise ExportError(msg + ": use format 'xgboost+json' (it keeps the missing branches), or pass "
                                    "missing='as_zero' (--missing as_zero) if every feature is always present when "
                                    "serving")
        notes.append(msg + " (accepted: missing='as_zero')")
    return OpenSearchExport("model/ranklib", _ranklib_trees(ens, s), names, score_offset=s, notes=notes)


# -- linear ---------------------------------------------------------------------------------------
def _export_linear(model, fmt, names, shift, drop_intercept) -> OpenSearchExport:
    if getattr(model, "feature_map", None) not in (None, "none"):
        raise ExportError(f"LinearRanker(feature_map={model.feature_map!r}) scores a non-linear map of the features; "
                          "the plugin's linear models take the features themselves (retrain with feature_map=None)")
    coef = np.asarray(model.coef_, dtype=np.float64)
    names = feature_names_for(model, len(coef), names)
    mean, scale = np.asarray(model.scaler_mean_, dtype=np.float64), np.asarray(model.scaler_scale_, dtype=np.float64)
    normalizers = {n: {"standard": {"mean": float(m), "standard_deviation": float(s)}}
                   for n, m, s in zip(names, mean, scale) if (m, s) != (0.0, 1.0)}
    b = float(model.intercept_)
    if fmt == "ranklib":
        s = shift_value(shift, None)
        pairs = [f"0:{b + s!r}"] + [f"{j + 1}:{float(w)!r}" for j, w in enumerate(coef)]
        text = "## Linear Regression\n## exported by rankwise (0: intercept; features: ordinals in the feature set)\n"
        return OpenSearchExport("model/ranklib", text + " ".join(pairs) + "\n", names, normalizers, score_offset=s)
    if shift is not None:
        raise ExportError("model/linear has no intercept, so no constant can be added to make scores non-negative: "
                          "use format 'ranklib' (Linear Regression carries an intercept)")
    if b != 0.0 and not drop_intercept:
        raise ExportError(f"model/linear has no intercept and the model's is {b!r}: every served score would be "
                          f"{-b!r} off predict (the ranking is unchanged). Pass drop_intercept=True (--drop-intercept) "
                          "to accept it, or use format 'ranklib' (Linear Regression carries the intercept)")
    weights = {n: float(w) for n, w in zip(names, coef)}
    return OpenSearchExport("model/linear", json.dumps(weights), names, normalizers, score_offset=-b,
                            notes=[f"intercept {b!r} dropped: served score = predict - ({b!r})"] if b else [])


def to_opensearch(model, format: str = "xgboost+json", *, feature_names=None, shift=None, missing: str = "refuse",
                  missing_as_zero: bool = False, drop_intercept: bool = False) -> OpenSearchExport:
    """Write a fitted model for the OpenSearch / Elasticsearch LTR plugin.

    Parameters
    ----------
    model : GBDTRanker or LinearRanker (fitted)
    format : {"xgboost+json", "xgboost+json+raw", "ranklib", "linear"}
        Trees: ``xgboost+json`` or ``ranklib`` (``xgboost+json+raw``: XGBoost models only); linear models:
        ``linear`` or ``ranklib``.
    feature_names : list of str, optional
        The feature set, one name per model column in order (default: ``model.feature_names_in_``).
    shift : None, "auto" or float
        A constant added to every score (``"auto"``: the least one that makes every tree-model score
        non-negative, as Lucene requires).
    missing : {"refuse", "as_zero"}
        RankLib sees an absent feature as 0.0: refuse a model that treats NaN otherwise, or accept it.
    missing_as_zero : bool
        ``xgboost+json`` and ``xgboost+json+raw`` only: write ``"missing_as_zero": true`` (OpenSearch main).
    drop_intercept : bool
        ``linear`` only: accept that ``model/linear`` has no intercept (a constant offset).

    Returns
    -------
    OpenSearchExport
        Validated by the plugin's reference parser before it is returned.
    """
    if format not in FORMATS:
        raise InputError(f"format: expected one of {FORMATS}, got {format!r}")
    if missing not in ("refuse", "as_zero"):
        raise InputError(f"missing: expected 'refuse' or 'as_zero', got {missing!r}")
    if hasattr(model, "booster_"):
        if format == "linear":
            raise ExportError("format 'linear' takes a LinearRanker; a tree ensemble goes out as 'xgboost+json' or "
                              "'ranklib'")
        out = _export_trees(model, format, feature_names, shift, missing, missing_as_zero)
    elif hasattr(model, "coef_") and hasattr(model, "scaler_mean_"):
        if format.startswith("xgboost+json"):
            raise ExportError(f"format {format!r} takes a tree ensemble; a LinearRanker goes out as 'linear' or "
                              "'ranklib'")
        out = _export_linear(model, format, feature_names, shift, drop_intercept)
    else:
        raise ExportError(f"{type(model).__name__}: the OpenSearch LTR plugin takes tree ensembles (GBDTRanker) and "
                          "linear models (LinearRanker); no other rankwise model has a plugin format")
    out.reference()  # the plugin's parser must accept what was written
    return out
