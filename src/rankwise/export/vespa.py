"""Models out to Vespa: the model files its application package imports, and a rank profile that uses them.

:func:`to_vespa` writes a fitted model with the rank features it reads (``feature_names``: Vespa rank
features such as ``attribute(price)`` or ``bm25(title)``; a plain identifier becomes a rank-profile
function ``name() = attribute(name)`` unless ``feature_expressions`` says otherwise):

- a LightGBM :class:`~rankwise.models.GBDTRanker` as ``models/<name>.json`` in the
  ``dump_model()`` format, used as ``lightgbm("<name>.json")``. Vespa turns ``x <= t`` into
  ``x < t'`` (``!(x >= t')`` when ``default_left``) in double, and ignores ``missing_type``; so
  each threshold is rewritten to ``t'`` with ``x < t' <=> float32(x) <= g`` for every double ``x``
  (``g`` the largest float32 the booster sends left: ``t'`` is the midpoint of ``g`` and the next
  float32, one double above it where float32 rounding of the midpoint goes to ``g``), which is how
  ``predict`` sees the feature, and ``default_left`` is the booster's NaN side.
- an XGBoost GBDTRanker as ``models/<name>.json`` in the ``get_dump(dump_format="json")`` format
  with the feature names, used as ``xgboost("<name>.json")``: Vespa compares ``x < (float)t``, the
  booster's own float32 test for float32-valued features (``float`` attributes), and takes the
  ``missing`` child's side for NaN through ``!(x >= t)``. The base margin Vespa would drop is a
  first one-leaf tree.
- a :class:`~rankwise.models.LinearRanker` as the ranking expression
  ``b + w_1 * ((f_1 - m_1) / s_1) + ...`` (the standardiser written out, in double).
- with ``format="onnx"``, or for an MLP: ``files/<name>.onnx`` from :func:`~rankwise.export.to_onnx`
  and an ``onnx-model`` block fed by a ``tensor<float>(d0[1],d1[n])`` of the features (Vespa runs
  one hit per batch); the score is ``sum(onnx(<name>).score)``.

The attention scorer is refused (Vespa scores each hit alone). The model is used in the
second phase over ``rerank_count`` hits of the first phase.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rankwise.errors import InputError
from rankwise.export._common import feature_names_for, left_max32, nan_goes_left
from rankwise.export._family import require_family
from rankwise.export._trees import MISSING_NAMES, TreeEnsemble, next32, tree_ensemble
from rankwise.export.reference import vespa as engine

__all__ = ["VespaExport", "to_vespa", "vespa_threshold", "FORMATS"]

FORMATS = ("native", "onnx")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FEATURE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\([^()]*\))?(\.[A-Za-z0-9_]+)*$")


@dataclass
class VespaExport:
    """Files of an application package and the rank profile that scores with them.

    Attributes
    ----------
    files : dict
        Path inside the application package -> content (str, or bytes for ONNX).
    rank_profile : str
        ``rank-profile <name> { ... }`` (place it in a schema, or as ``schemas/<schema>/<name>.profile``).
    expression : str
        The second-phase expression (``lightgbm(...)``, ``xgboost(...)``, ``sum(onnx(...).score)`` or the linear sum).
    feature_names : list of str
        The rank features (or functions) the model reads, in the model's column order.
    """

    name: str
    files: dict
    rank_profile: str
    expression: str
    feature_names: list
    kind: str
    onnx: object = None
    score_offset: float = 0.0
    notes: list = field(default_factory=list)

    def write(self, app_dir, schema: str) -> list:
        """Write the files and ``schemas/<schema>/<name>.profile`` under an application package; returns the paths."""
        root = Path(app_dir)
        out = []
        for rel, content in {**self.files, f"schemas/{schema}/{self.name}.profile": self.rank_profile}.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            (p.write_bytes if isinstance(content, bytes) else p.write_text)(content)
            out.append(p)
        return out

    def reference(self):
        """The model as Vespa evaluates it (validated): ``.score(X)``."""
        if self.kind == "onnx":
            return self.onnx.reference()
        if self.kind == "linear":
            return engine.parse_linear(self.expression, self.feature_names)
        (path, text), = self.files.items()
        parse = engine.parse_lightgbm if self.kind == "lightgbm" else engine.parse_xgboost
        return parse(text, self.feature_names)

    def predict(self, X) -> np.ndarray:
        return self.reference().score(X)


def vespa_threshold(g) -> float:
    """The double ``t'`` with ``x < t' <=> float32(x) <= g`` for every double ``x`` (``g`` a float32)."""
    g = np.float32(g)
    up = next32(g)
    if np.isinf(g) or np.isinf(up):
        return float(up) if np.isinf(up) and not np.isinf(g) else float(g if g < 0 else np.inf)
    mid = (float(g) + float(up)) / 2  # exact: one bit more than a float32 mantissa
    rounds_to_g = float(np.float32(mid)) == float(g)  # ties to even
    return float(np.nextafter(mid, np.inf)) if rounds_to_g else mid


def _lightgbm_file(ens: TreeEnsemble, names: list) -> str:
    def node(tree, t, k, counter):
        if tree.feature[k] < 0:
            counter[1] += 1
            return {"leaf_index": counter[1] - 1, "leaf_value": float(tree.value[k])}
        counter[0] += 1
        g = left_max32(ens, tree, t, k, "Vespa's lightgbm() import")
        return {"split_index": counter[0] - 1, "split_feature": int(tree.feature[k]),
                "threshold": vespa_threshold(g), "decision_type": "<=",
                "default_left": bool(nan_goes_left(ens, tree, k)),
                "missing_type": MISSING_NAMES[int(tree.missing_type[k])],
                "left_child": node(tree, t, int(tree.left[k]), counter),
                "right_child": node(tree, t, int(tree.right[k]), counter)}

    infos = []
    for t, tree in enumerate(ens.trees):
        counter = [0, 0]
        structure = node(tree, t, 0, counter)
        infos.append({"tree_index": t, "num_leaves": counter[1], "num_cat": 0, "shrinkage": 1,
                      "tree_structure": structure})
    doc = {"name": "tree", "version": "v4", "num_class": 1, "num_tree_per_iteration": 1, "label_index": 0,
           "max_feature_idx": ens.n_features - 1, "objective": ens.objective, "feature_names": names,
           "tree_info": infos}
    return json.dumps(doc)


def _xgboost_file(ens: TreeEnsemble, names: list) -> str:
    trees = [{"nodeid": 0, "leaf": float(ens.base_score)}] if ens.base_score != 0.0 else []
    for t, tree in enumerate(ens.trees):
        def node(k, depth, tree=tree, t=t):
            if tree.feature[k] < 0:
                return {"nodeid": int(k), "leaf": float(tree.value[k])}
            yes, no = int(tree.left[k]), int(tree.right[k])
            # x < (float)t' <=> x <= g for float32 x: t' = next32(g)
            thr = next32(left_max32(ens, tree, t, k, "Vespa's xgboost() import"))
            return {"nodeid": int(k), "depth": depth, "split": names[tree.feature[k]], "split_condition": float(thr),
                    "yes": yes, "no": no, "missing": yes if nan_goes_left(ens, tree, k) else no,
                    "children": [node(yes, depth + 1), node(no, depth + 1)]}
        trees.append(node(0, 0))
    return json.dumps(trees)


def _linear_expression(model, names: list) -> str:
    coef = np.asarray(model.coef_, dtype=np.float64)
    parts = [repr(float(model.intercept_))]
    for n, w, m, s in zip(names, coef, model.scaler_mean_, model.scaler_scale_):
        parts.append(f"{'-' if w < 0 else '+'} {abs(float(w))!r} * (({n} - ({float(m)!r})) / {float(s)!r})")
    return " ".join(parts)


def _functions(names: list, feature_expressions: dict) -> list:
    out = []
    for n in names:
        if n in feature_expressions:
            if not _IDENT.match(n):
                raise InputError(f"feature_expressions: {n!r} is a rank feature; only plain names (functions) take an "
                                 "expression")
            out.append((n, feature_expressions[n]))
        elif _IDENT.match(n):
            out.append((n, f"attribute({n})"))
        elif not _FEATURE.match(n):
            raise InputError(f"feature_names: {n!r} is neither a Vespa rank feature (name(args).output) nor a plain "
                             "name for a function")
    return out


def _profile(name, expression, names, functions, first_phase, rerank_count, onnx_block="") -> str:
    lines = [f"rank-profile {name} {{"]
    if onnx_block:
        lines.append(onnx_block)
    for fn, expr in functions:
        lines += [f"    function {fn}() {{", f"        expression: {expr}", "    }"]
    lines += ["    first-phase {", f"        expression: {first_phase}", "    }",
              "    second-phase {", f"        rerank-count: {int(rerank_count)}", f"        expression: {expression}",
              "    }", f"    match-features: {' '.join(names)}", "}"]
    return "\n".join(lines) + "\n"


def to_vespa(model, *, feature_names=None, name: str = "rankwise", format: str = "native", feature_expressions=None,
             first_phase: str = "nativeRank", rerank_count: int = 100) -> VespaExport:
    """Write a fitted model for Vespa (see the module docstring).

    Parameters
    ----------
    model : GBDTRanker, LinearRanker or NeuralRanker(architecture="mlp") (fitted)
    feature_names : list of str, optional
        The rank features the model reads, one per model column (default ``model.feature_names_in_``).
    name : str
        The rank profile's name, and the model file's.
    format : {"native", "onnx"}
        ``native``: ``lightgbm()``/``xgboost()`` files, or the linear expression; ``onnx``: an ONNX model
        (always for an MLP).
    feature_expressions : dict, optional
        For plain names: the expression of the function (default ``attribute(name)``).
    first_phase, rerank_count : the first-phase expression and how many hits the model re-ranks.
    """
    if format not in FORMATS:
        raise InputError(f"format: expected one of {FORMATS}, got {format!r}")
    if not _IDENT.match(name):
        raise InputError(f"name: a rank profile and model name is an identifier, got {name!r}")
    fam = require_family(model, "Vespa", ("trees", "linear", "mlp"),
                         "Serve it through ONNX outside Vespa (to_onnx: one run per query), or train an MLP.")
    feature_expressions = dict(feature_expressions or {})
    if fam == "mlp" or format == "onnx":
        from rankwise.export.onnx import to_onnx

        onnx_export = to_onnx(model, feature_names=feature_names)
        names = onnx_export.feature_names
        functions = _functions(names, feature_expressions)
        n = len(names)
        functions.append(("rankwise_features", f"tensor<float>(d0[1],d1[{n}]):[[{', '.join(names)}]]"))
        block = "\n".join([f"    onnx-model {name} {{", f"        file: files/{name}.onnx",
                           "        input \"features\": rankwise_features", "        output \"score\": score", "    }"])
        expression = f"sum(onnx({name}).score)"
        return VespaExport(name, {f"files/{name}.onnx": onnx_export.model_bytes},
                           _profile(name, expression, names, functions, first_phase, rerank_count, block), expression,
                           names, "onnx", onnx=onnx_export, notes=list(onnx_export.notes))
    if fam == "linear":
        if getattr(model, "feature_map", None) not in (None, "none"):
            from rankwise.export._common import ExportError

            raise ExportError(f"LinearRanker(feature_map={model.feature_map!r}) scores a non-linear map of the "
                              "features; Vespa's linear expression takes the features themselves (retrain with "
                              "feature_map=None)")
        names = feature_names_for(model, len(model.coef_), feature_names, rename=True)
        expression = _linear_expression(model, names)
        out = VespaExport(name, {}, _profile(name, expression, names, _functions(names, feature_expressions),
                                             first_phase, rerank_count), expression, names, "linear")
    else:
        ens = tree_ensemble(model)
        names = feature_names_for(model, ens.n_features, feature_names, rename=True)
        kind = ens.source
        text = _lightgbm_file(ens, names) if kind == "lightgbm" else _xgboost_file(ens, names)
        expression = f'{kind}("{name}.json")'
        out = VespaExport(name, {f"models/{name}.json": text},
                          _profile(name, expression, names, _functions(names, feature_expressions), first_phase,
                                   rerank_count), expression, names, kind)
        if kind == "lightgbm" and ens.objective in engine.SIGMOID_OBJECTIVES:
            out.notes.append(f"objective {ens.objective!r}: Vespa wraps the model in sigmoid(); served = "
                             "sigmoid(predict), the same ranking")
        if kind == "xgboost":
            out.notes.append("xgboost(): thresholds compared as float32 values: exact for float32-valued features "
                             "(float attributes); leaves summed in double (XGBoost: float32)")
    out.reference()
    return out
