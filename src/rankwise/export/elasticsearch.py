"""Models out to Elasticsearch's native learning-to-rank (``learning_to_rank`` trained models, 8.12+).

:func:`to_elasticsearch` writes a :class:`~rankwise.models.GBDTRanker` -- LightGBM as well as
XGBoost, where eland exports XGBRanker only -- as the trained-model ``ensemble`` of ``tree``
models that eland writes, with the whole ``PUT _ml/trained_models/<id>`` body
(``inference_config.learning_to_rank.feature_extractors``):

- Elasticsearch compares the feature (a Lucene score: a float32 widened to double) with a double
  threshold by the node's ``decision_type``. LightGBM splits keep their exact double threshold
  with ``lte`` (its own ``x <= t``); XGBoost splits keep their float32 threshold with ``lt``. Where
  LightGBM's reading of ``|x| <= 1e-35`` as 0.0 moves a decision (a threshold inside that band),
  the threshold is the largest float32 the booster sends left, with ``lte``.
- ``default_left`` is the side the booster sends a missing value to (LightGBM
  ``missing_type=None``: the side of 0.0).
- the leaves (shrinkage included) are summed in double by ``weighted_sum``; XGBoost's base margin
  is a first one-leaf tree (as eland writes ``base_score``).

Linear models, MLPs and the attention scorer are refused: the ensemble holds trees only.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError
from rankwise.export._common import feature_names_for, left_max32, nan_goes_left
from rankwise.export._family import require_family
from rankwise.export._trees import TreeEnsemble, floor32, tree_ensemble
from rankwise.export.reference import elasticsearch as engine

__all__ = ["ElasticsearchExport", "to_elasticsearch"]


@dataclass
class ElasticsearchExport:
    """One trained-model definition (``{"ensemble": ...}``) and the features it reads, in order."""

    trained_model: dict
    feature_names: list
    score_offset: float = 0.0
    notes: list = field(default_factory=list)

    def put_body(self, queries: dict, *, default_scores: dict | None = None) -> dict:
        """The body of ``PUT _ml/trained_models/<id>``: ``queries`` maps each feature to its query (which may use
        ``{{params}}``); ``default_scores`` the value of a feature for a document its query does not match."""
        missing = [n for n in self.feature_names if n not in queries]
        if missing:
            raise InputError(f"queries: no query for features {missing}; give one per feature, e.g. "
                             "{'title_bm25': {'match': {'title': '{{query}}'}}}")
        extractors = []
        for n in self.feature_names:
            ex = {"feature_name": n, "query": queries[n]}
            if default_scores and n in default_scores:
                ex["default_score"] = float(default_scores[n])
            extractors.append({"query_extractor": ex})
        return {"input": {"field_names": list(self.feature_names)},
                "inference_config": {"learning_to_rank": {"feature_extractors": extractors}},
                "definition": {"trained_model": self.trained_model}}

    def reference(self) -> engine.TrainedModel:
        """The definition as Elasticsearch parses it (validated): ``.score(X)`` scores as it does."""
        return engine.parse_trained_model(self.trained_model, self.feature_names)

    def predict(self, X, *, missing: str = "branch") -> np.ndarray:
        return self.reference().score(X, missing=missing)


def _split(ens: TreeEnsemble, tree, t: int, k: int) -> tuple[float, str]:
    if ens.source != "lightgbm":
        return float(tree.threshold[k]), "lt"  # XGBoost: float32(x) < t, t a float32
    g = left_max32(ens, tree, t, k, "Elasticsearch's learning_to_rank trees")
    thr = float(tree.threshold[k])
    return (thr, "lte") if g == floor32(thr) else (float(g), "lte")


def _tree(ens: TreeEnsemble, tree, t: int) -> dict:
    nodes = []
    for k in range(tree.n_nodes):
        if tree.feature[k] < 0:
            nodes.append({"node_index": k, "leaf_value": [float(tree.value[k])]})
            continue
        thr, op = _split(ens, tree, t, k)
        nodes.append({"node_index": k, "split_feature": int(tree.feature[k]), "threshold": thr, "decision_type": op,
                      "default_left": bool(nan_goes_left(ens, tree, k)), "left_child": int(tree.left[k]),
                      "right_child": int(tree.right[k])})
    return nodes


def to_elasticsearch(model, *, feature_names=None) -> ElasticsearchExport:
    """Write a fitted GBDTRanker as an Elasticsearch ``learning_to_rank`` trained model (see the module docstring).

    ``feature_names``: one per model column, in order (default ``model.feature_names_in_``): the
    feature extractors' names. Returns an :class:`ElasticsearchExport` validated by the reference parser.
    """
    require_family(model, "Elasticsearch's learning_to_rank trained model (a tree ensemble)", ("trees",),
                   "Use the OpenSearch/Elasticsearch LTR plugin (to_opensearch) for linear models, or ONNX (to_onnx).")
    ens = tree_ensemble(model)
    names = feature_names_for(model, ens.n_features, feature_names, rename=True)
    tree_docs = [_tree(ens, tree, t) for t, tree in enumerate(ens.trees)]
    if ens.base_score != 0.0:
        tree_docs.insert(0, [{"node_index": 0, "leaf_value": [float(ens.base_score)]}])
    ensemble = {"feature_names": names, "target_type": "regression", "aggregate_output": {"weighted_sum": {}},
                "trained_models": [{"tree": {"feature_names": names, "target_type": "regression",
                                             "tree_structure": nodes}} for nodes in tree_docs]}
    out = ElasticsearchExport({"ensemble": ensemble}, names)
    if ens.source == "xgboost":
        out.notes.append("XGBoost sums its leaves in float32, Elasticsearch in double: the scores differ by float32 "
                         "rounding of the sum")
    out.reference()
    return out
