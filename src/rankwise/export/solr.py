"""Models out to Apache Solr's LTR module: ``LinearModel``, ``MultipleAdditiveTreesModel``, ``NeuralNetworkModel``.

:func:`to_solr` writes a fitted model as a model-store document (``PUT /solr/<coll>/schema/model-store``)
over a feature store whose feature names are the model's columns in order:

- a :class:`~rankwise.models.GBDTRanker` (LightGBM or XGBoost) as ``MultipleAdditiveTreesModel``.
  Solr goes left iff ``x <= float(s) + 1e-6f`` (``NODE_SPLIT_SLACK``, added in float32), so each
  split's threshold string ``s`` is chosen so that ``float32(float32(s) + 1e-6f)`` is exactly the
  largest float32 the booster sends left; such an ``s`` does not always exist (near 0 the sum
  cannot land on every float32: LightGBM's splits at 1e-35 between 0 and positive values are
  the common case), and then the export is refused, naming the split and the values that would
  decide differently, unless ``accept_inexact=True``.
  ``isNullSameAsZero`` is false and each node's ``missing`` is the booster's NaN side. XGBoost's
  base margin is a first one-leaf tree; every tree has weight 1.
- a :class:`~rankwise.models.LinearRanker` as ``LinearModel`` with its standardiser as each
  feature's ``StandardNormalizer`` (no intercept: refused unless ``drop_intercept=True``).
- a :class:`~rankwise.models.NeuralRanker` with ``architecture="mlp"`` as ``NeuralNetworkModel``
  (ReLU hidden layers, identity output), the standardiser as ``StandardNormalizer``s or folded
  into the first layer; the attention scorer is refused (it scores a document with its list).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError
from rankwise.export._common import (ExportError, feature_names_for, left_max32, min_score, nan_goes_left,
                                     shift_value)
from rankwise.export._trees import next32, prev32, tree_ensemble
from rankwise.export.reference import solr as engine

__all__ = ["SolrExport", "to_solr", "slack_threshold"]


@dataclass
class SolrExport:
    """One model document for Solr's model store, with the feature store it needs.

    ``score_offset`` and ``notes`` as in :class:`~rankwise.export.opensearch.OpenSearchExport`.
    """

    document: dict
    feature_names: list
    store: str
    score_offset: float = 0.0
    notes: list = field(default_factory=list)

    def feature_store(self, features: dict) -> list:
        """The feature-store document: ``features`` maps each name to its ``{"class", "params"}``."""
        missing = [n for n in self.feature_names if n not in features]
        if missing:
            raise InputError(f"features: no Solr feature definition for {missing}; give one per feature, e.g. "
                             "{'title_bm25': {'class': 'org.apache.solr.ltr.feature.SolrFeature', "
                             "'params': {'q': '{!dismax qf=title}${user_query}'}}}")
        return [{"store": self.store, "name": n, **features[n]} for n in self.feature_names]

    def reference(self) -> engine.SolrModel:
        """The document as Solr's model store loads it (validated): ``.score(X)`` scores as Solr does."""
        return engine.ModelStore({self.store: self.feature_names}).add(self.document)

    def predict(self, X, *, missing=None) -> np.ndarray:
        return self.reference().score(X)


def slack_threshold(g) -> tuple[str, np.float32]:
    """A float32 ``s`` (as text) for Solr's ``x <= float32(s + 1e-6f)``, and that sum ``r``.

    ``r == g`` where some float32 ``s`` gives it; else ``r`` is the largest sum below ``g`` (the
    values in ``(r, g]`` then go right in Solr and left in the booster). ``s -> float32(s + 1e-6f)``
    is monotone, so the candidates are the float32 values around ``g - 1e-6``; where the grid of
    ``s`` is coarser than that of ``g`` (``|g|`` below about 1e-6) the sum can step over ``g``.
    """
    g = np.float32(g)
    if np.isinf(g):
        return ("Infinity" if g > 0 else "-Infinity"), g
    best = None
    with np.errstate(over="ignore"):
        lo = hi = np.float32(float(g) - float(engine.NODE_SPLIT_SLACK))
        cands = [lo]
        for _ in range(8):
            lo, hi = prev32(lo), next32(hi)
            cands += [lo, hi]
        for c in sorted(c for c in cands if np.isfinite(c)):
            r = np.float32(c + engine.NODE_SPLIT_SLACK)
            if r <= g and (best is None or r > best[1]):
                best = (c, r)
    return repr(float(best[0])), best[1]


def _trees_document(model, names, name, store, shift, accept_inexact):
    ens = tree_ensemble(model)
    names = feature_names_for(model, ens.n_features, names)
    s = shift_value(shift, min_score(ens))
    trees, inexact, notes = [], [], []
    if ens.base_score != 0.0:
        trees.append({"weight": "1", "root": {"value": repr(float(np.float32(ens.base_score)))}})
    for ti, tree in enumerate(ens.trees):
        def node(k, tree=tree, ti=ti):
            if tree.feature[k] < 0:
                return {"value": repr(float(np.float32(tree.value[k])))}
            g = left_max32(ens, tree, ti, k, "Solr's MultipleAdditiveTreesModel")
            thr, r = slack_threshold(g)
            if r != g:
                inexact.append((ti, int(k), float(r), float(g), names[tree.feature[k]]))
            return {"feature": names[tree.feature[k]], "threshold": thr,
                    "missing": "left" if nan_goes_left(ens, tree, k) else "right",
                    "left": node(tree.left[k]), "right": node(tree.right[k])}

        trees.append({"weight": "1", "root": node(0)})
    if inexact:
        t, k, r, g, _ = inexact[0]
        by_range = {}
        for _, _, r2, g2, f in inexact:
            by_range.setdefault((r2, g2), {})[f] = None
        ranges = [f"({r2!r}, {g2!r}] of {', '.join(fs)}" for (r2, g2), fs in by_range.items()]
        msg = (f"{len(inexact)} split(s) cannot be written exactly for Solr (first: tree {t} node {k}): Solr goes left "
               f"iff x <= threshold + 1e-6f in float32, and no float32 threshold makes that sum {g!r}, the largest "
               f"value the booster sends left; the nearest is {r!r}, so values in ({r!r}, {g!r}] would go right "
               f"(every value that decides otherwise: {'; '.join(ranges[:12])}{'; ...' if len(ranges) > 12 else ''})")
        if not accept_inexact:
            raise ExportError(msg + ". Use the OpenSearch target (no slack), or pass accept_inexact=True "
                                    "(--accept-inexact) if no feature takes such values, and check the parity")
        notes.append(msg + " (accepted)")
    if s:
        trees.append({"weight": "1", "root": {"value": repr(float(np.float32(s)))}})
    doc = {"class": engine.TREES, "name": name, "store": store, "features": [{"name": n} for n in names],
           "params": {"isNullSameAsZero": False, "trees": trees}}
    return SolrExport(doc, names, store, score_offset=s, notes=notes)


def _linear_document(model, names, name, store, drop_intercept):
    if getattr(model, "feature_map", None) not in (None, "none"):
        raise ExportError(f"LinearRanker(feature_map={model.feature_map!r}) scores a non-linear map of the features; "
                          "Solr's LinearModel takes the features themselves (retrain with feature_map=None)")
    coef = np.asarray(model.coef_, dtype=np.float64)
    names = feature_names_for(model, len(coef), names)
    b = float(model.intercept_)
    if b != 0.0 and not drop_intercept:
        raise ExportError(f"Solr's LinearModel has no intercept and the model's is {b!r}: every served score would be "
                          f"{-b!r} off predict (the ranking is unchanged). Pass drop_intercept=True (--drop-intercept) "
                          "to accept it")
    feats = []
    for n, m, sd in zip(names, model.scaler_mean_, model.scaler_scale_):
        f = {"name": n}
        if (float(m), float(sd)) != (0.0, 1.0):
            f["norm"] = {"class": engine.STANDARD, "params": {"avg": repr(float(m)), "std": repr(float(sd))}}
        feats.append(f)
    doc = {"class": engine.LINEAR, "name": name, "store": store, "features": feats,
           "params": {"weights": {n: float(w) for n, w in zip(names, coef)}}}
    return SolrExport(doc, names, store, score_offset=-b,
                      notes=[f"intercept {b!r} dropped: served score = predict - ({b!r})"] if b else [])


def _neural_document(model, names, name, store, standardizer):
    if getattr(model, "architecture", "mlp") != "mlp":
        raise ExportError(f"NeuralRanker(architecture={model.architecture!r}) scores a document in the context of the "
                          "other documents of its query; Solr scores each document alone (NeuralNetworkModel is a "
                          "per-document MLP): export architecture='mlp' models, or use ONNX")
    linears = [m for m in model.module_.net if type(m).__name__ == "Linear"]
    acts = [type(m).__name__ for m in model.module_.net if type(m).__name__ not in ("Linear", "Dropout")]
    if set(acts) - {"ReLU"}:
        raise ExportError(f"NeuralRanker layers {sorted(set(acts))}: only ReLU maps to a Solr activation here")
    mats = [lin.weight.detach().double().numpy() for lin in linears]
    biases = [lin.bias.detach().double().numpy() for lin in linears]
    names = feature_names_for(model, mats[0].shape[1], names)
    mean = np.asarray(model.scaler_mean_, dtype=np.float64)
    scale = np.asarray(model.scaler_scale_, dtype=np.float64)
    feats = [{"name": n} for n in names]
    if standardizer == "fold":  # W (x - m) / s + b = (W / s) x + (b - W (m / s))
        biases[0] = biases[0] - mats[0] @ (mean / scale)
        mats[0] = mats[0] / scale[None, :]
    elif standardizer == "normalizer":
        for f, m, sd in zip(feats, mean, scale):
            if (float(m), float(sd)) != (0.0, 1.0):
                f["norm"] = {"class": engine.STANDARD, "params": {"avg": repr(float(m)), "std": repr(float(sd))}}
    else:
        raise InputError(f"standardizer: expected 'normalizer' or 'fold', got {standardizer!r}")
    layers = [{"matrix": W.tolist(), "bias": b.tolist(), "activation": "relu" if i < len(mats) - 1 else "identity"}
              for i, (W, b) in enumerate(zip(mats, biases))]
    doc = {"class": engine.NEURAL, "name": name, "store": store, "features": feats, "params": {"layers": layers}}
    return SolrExport(doc, names, store)


def to_solr(model, *, feature_names=None, name: str = "rankwise_model", store: str = "rankwise",
            shift=None, drop_intercept: bool = False, accept_inexact: bool = False,
            standardizer: str = "normalizer") -> SolrExport:
    """Write a fitted GBDTRanker or LinearRanker as a Solr LTR model document (validated before it is returned).

    ``shift`` (trees only): ``"auto"`` or a constant added as a last one-leaf tree. ``accept_inexact``
    (trees only): write splits whose threshold Solr's slack cannot reproduce exactly, with a note
    giving the values that decide differently. ``standardizer`` (NeuralRanker): the standardiser as
    per-feature ``StandardNormalizer``s, or ``"fold"``ed into the first layer's weights and bias.
    """
    if hasattr(model, "booster_"):
        out = _trees_document(model, feature_names, name, store, shift, accept_inexact)
    elif hasattr(model, "coef_") and hasattr(model, "scaler_mean_"):
        if shift is not None:
            raise ExportError("Solr's LinearModel has no intercept, so no constant can be added")
        out = _linear_document(model, feature_names, name, store, drop_intercept)
    elif hasattr(model, "module_") and hasattr(model, "architecture"):
        if shift is not None:
            raise ExportError("shift: the NeuralNetworkModel export takes no shift (add it to the last bias yourself)")
        out = _neural_document(model, feature_names, name, store, standardizer)
    else:
        raise ExportError(f"{type(model).__name__}: rankwise writes Solr models for GBDTRanker "
                          "(MultipleAdditiveTreesModel), LinearRanker (LinearModel) and NeuralRanker with "
                          "architecture='mlp' (NeuralNetworkModel) only")
    out.reference()
    return out
