"""Models out to ONNX, run by onnxruntime (and by Vespa's ``onnx-model``).

:func:`to_onnx` writes a fitted rankwise model as a self-contained ONNX graph with one input,
``features`` (``[n_docs, n_features]``, columns in the model's order, NaN = missing) and one
output, ``score`` (``[n_docs, 1]``):

- a :class:`~rankwise.models.GBDTRanker` (LightGBM or XGBoost) as one ``ai.onnx.ml``
  ``TreeEnsembleRegressor`` (ml opset 3), written node by node with ``onnx.helper``. onnxruntime
  compares the input in its own type with thresholds of that type. ``dtype="float32"`` (the
  default): a LightGBM split becomes ``BRANCH_LEQ`` with the largest float32 the booster sends
  left, so that ``x <= t'`` decides for every float32 ``x`` as LightGBM's double ``x <= t`` (and
  its reading of ``|x| <= 1e-35`` as 0.0) does; an XGBoost split keeps its float32 threshold with
  ``BRANCH_LT`` (XGBoost's own ``x < t``); the leaves are summed in float32.
  ``dtype="double"``: the same thresholds on a double input (rows read as float32 first, as
  ``predict`` reads them); onnxruntime then sums the leaves in double and rounds the total to
  float32 (the operator's output is float). ``nodes_missing_value_tracks_true`` is the side the
  booster sends NaN to (LightGBM ``missing_type=None``: the side of 0.0). XGBoost's base margin
  is a first one-leaf tree, so that the float32 sum runs in XGBoost's order (base first).
- a :class:`~rankwise.models.LinearRanker` as ``MatMul`` + ``Add`` with the standardiser folded
  into the weights and the intercept (``w_j / s_j``, ``b - sum_j w_j m_j / s_j``, in double);
- a :class:`~rankwise.models.NeuralRanker` through ``torch.onnx.export``: the MLP scores each row,
  its standardiser computed in double and cast to float32 as ``predict`` does; the attention
  scorer takes one query's documents per call (``[n_docs, n_features]``, the documents attend to
  each other), so a serving engine must pass a whole query at once.

:meth:`OnnxExport.reference` is onnxruntime itself (one thread, CPU), which
:func:`~rankwise.export.parity_report` compares with ``predict``. onnx, onnxruntime and torch are
imported when a function here runs, never by ``import rankwise`` (``pip install rankwise[export]``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rankwise.errors import InputError
from rankwise.export._common import ExportError, feature_names_for, left_max32, model_feature_names, nan_goes_left
from rankwise.export._trees import TreeEnsemble, tree_ensemble

__all__ = ["OnnxExport", "to_onnx", "OnnxScorer", "INPUT", "OUTPUT"]

INPUT, OUTPUT = "features", "score"
_DTYPES = ("float32", "double")
#: the default-domain opset of the graphs written here, and of ai.onnx.ml (TreeEnsembleRegressor 3)
OPSET, ML_OPSET = 18, 3


def _need(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"the ONNX export needs the {module.split('.')[0]!r} package: pip install "
                         "'rankwise[export]' (onnx, onnxruntime)") from None


@dataclass
class OnnxExport:
    """One model written as ONNX.

    Attributes
    ----------
    model_bytes : bytes
        The serialized ``ModelProto`` (self-contained: no external data).
    feature_names : list of str
        The input's columns, in order.
    dtype : {"float32", "double"}
        Element type of the ``features`` input.
    per_query : bool
        True for the attention scorer: one call scores one query's documents together.
    family : str
        ``"trees"``, ``"linear"``, ``"mlp"`` or ``"attention"``.
    """

    model_bytes: bytes
    feature_names: list
    dtype: str = "float32"
    per_query: bool = False
    family: str = "trees"
    score_offset: float = 0.0
    notes: list = field(default_factory=list)

    @property
    def model(self):
        """The ``onnx.ModelProto``."""
        return _need("onnx").load_from_string(self.model_bytes)

    def save(self, path) -> None:
        with open(path, "wb") as fh:
            fh.write(self.model_bytes)

    def reference(self, *, threads: int = 1) -> OnnxScorer:
        """onnxruntime on this graph: ``.score(X)`` (or ``.score(X, qid=qid)`` for the attention scorer)."""
        return OnnxScorer(self.model_bytes, np.float32 if self.dtype == "float32" else np.float64, self.per_query,
                          threads)

    def predict(self, X, *, qid=None) -> np.ndarray:
        return self.reference().score(X, qid=qid)


class OnnxScorer:
    """An onnxruntime session on an exported graph (CPU, ``threads`` intra-op threads)."""

    kind = "onnx"

    def __init__(self, model_bytes: bytes, dtype, per_query: bool, threads: int = 1):
        ort = _need("onnxruntime")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])
        self.dtype, self.per_query = dtype, per_query

    def _run(self, X) -> np.ndarray:
        return self.session.run([OUTPUT], {INPUT: X})[0].reshape(-1).astype(np.float64)

    def score(self, X, *, qid=None, missing: str = "branch") -> np.ndarray:
        """Scores of rows ``X`` (NaN = missing). The rows are read as float32 first, as ``predict`` reads
        them; ``qid`` groups the rows of the attention scorer (one run per query)."""
        if missing != "branch":
            raise InputError(f"missing: onnxruntime follows the graph's missing-value branches; got {missing!r}")
        X = np.asarray(X, dtype=np.float64).astype(np.float32).astype(self.dtype)
        if not self.per_query:
            return self._run(np.ascontiguousarray(X))
        if qid is None:
            raise InputError("qid: the attention scorer's graph scores one query's documents together; give one query "
                             "id per row")
        qid = np.asarray(qid)
        out = np.empty(X.shape[0])
        for q in np.unique(qid):
            rows = np.flatnonzero(qid == q)
            out[rows] = self._run(np.ascontiguousarray(X[rows]))
        return out


# -- trees ----------------------------------------------------------------------------------------
def _tree_graph(ens: TreeEnsemble, names: list, dtype: str):
    onnx = _need("onnx")
    from onnx import TensorProto, helper, numpy_helper

    npt = np.float32 if dtype == "float32" else np.float64
    a: dict = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                               "nodes_truenodeids", "nodes_falsenodeids", "nodes_missing_value_tracks_true",
                               "target_treeids", "target_nodeids", "target_ids")}
    values, weights = [], []

    def leaf(tid, nid, v):
        a["nodes_treeids"].append(tid), a["nodes_nodeids"].append(nid), a["nodes_featureids"].append(0)
        a["nodes_modes"].append("LEAF"), a["nodes_truenodeids"].append(0), a["nodes_falsenodeids"].append(0)
        a["nodes_missing_value_tracks_true"].append(0), values.append(0.0)
        a["target_treeids"].append(tid), a["target_nodeids"].append(nid), a["target_ids"].append(0)
        weights.append(v)

    tid = 0
    if ens.base_score != 0.0:  # XGBoost adds its base margin first: a first one-leaf tree keeps that order
        leaf(0, 0, ens.base_score)
        tid = 1
    for ti, tree in enumerate(ens.trees):
        for k in range(tree.n_nodes):
            if tree.feature[k] < 0:
                leaf(tid, k, float(tree.value[k]))
                continue
            a["nodes_treeids"].append(tid), a["nodes_nodeids"].append(k)
            a["nodes_featureids"].append(int(tree.feature[k]))
            a["nodes_truenodeids"].append(int(tree.left[k])), a["nodes_falsenodeids"].append(int(tree.right[k]))
            a["nodes_missing_value_tracks_true"].append(int(nan_goes_left(ens, tree, k)))
            if ens.source == "xgboost":  # its own float32 test, threshold unchanged
                a["nodes_modes"].append("BRANCH_LT"), values.append(float(np.float32(tree.threshold[k])))
            else:
                a["nodes_modes"].append("BRANCH_LEQ")
                values.append(float(left_max32(ens, tree, ti, k, "ONNX TreeEnsembleRegressor")))
        tid += 1
    leaf_dtype = np.float64 if dtype == "double" else np.float32
    node = helper.make_node(
        "TreeEnsembleRegressor", [INPUT], [OUTPUT], domain="ai.onnx.ml", name="rankwise_trees", n_targets=1,
        aggregate_function="SUM", post_transform="NONE",
        nodes_values_as_tensor=numpy_helper.from_array(np.array(values, dtype=npt), "nodes_values"),
        target_weights_as_tensor=numpy_helper.from_array(np.array(weights, dtype=leaf_dtype), "target_weights"), **a)
    elem = TensorProto.FLOAT if dtype == "float32" else TensorProto.DOUBLE
    graph = helper.make_graph([node], "rankwise_gbdt", [helper.make_tensor_value_info(INPUT, elem, [None, len(names)])],
                              [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [None, 1])])
    return _finish(onnx, graph, names, f"{ens.source} booster, {len(ens.trees)} trees")


def _finish(onnx, graph, names, what, opset=OPSET):
    from onnx import helper

    model = helper.make_model(graph, producer_name="rankwise", opset_imports=[
        helper.make_opsetid("", opset), helper.make_opsetid("ai.onnx.ml", ML_OPSET)])
    model.ir_version = min(model.ir_version, 10)  # readable by onnxruntime releases of the last two years
    helper.set_model_props(model, {"rankwise_feature_names": ",".join(names), "rankwise_model": what})
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


# -- linear ---------------------------------------------------------------------------------------
def _linear_graph(model, names: list, dtype: str):
    onnx = _need("onnx")
    from onnx import TensorProto, helper, numpy_helper

    coef = np.asarray(model.coef_, dtype=np.float64)
    scale = np.asarray(model.scaler_scale_, dtype=np.float64)
    mean = np.asarray(model.scaler_mean_, dtype=np.float64)
    w = coef / scale
    b = float(model.intercept_) - float(np.dot(coef, mean / scale))
    npt = np.float32 if dtype == "float32" else np.float64
    elem = TensorProto.FLOAT if dtype == "float32" else TensorProto.DOUBLE
    inits = [numpy_helper.from_array(w.astype(npt)[:, None], "weights"),
             numpy_helper.from_array(np.array([b], dtype=npt), "intercept")]
    nodes = [helper.make_node("MatMul", [INPUT, "weights"], ["dot"]),
             helper.make_node("Add", ["dot", "intercept"], [OUTPUT])]
    graph = helper.make_graph(nodes, "rankwise_linear", [helper.make_tensor_value_info(INPUT, elem, [None, len(w)])],
                              [helper.make_tensor_value_info(OUTPUT, elem, [None, 1])], initializer=inits)
    return _finish(onnx, graph, names, "LinearRanker (standardiser folded in)")


# -- neural ---------------------------------------------------------------------------------------
def _neural_graph(model, names: list, dtype: str):
    onnx = _need("onnx")
    _need("onnxruntime")
    _need("onnxscript")
    import torch

    mean = torch.from_numpy(np.asarray(model.scaler_mean_, dtype=np.float64))
    scale = torch.from_numpy(np.asarray(model.scaler_scale_, dtype=np.float64))
    scorer = model.module_
    attention = model.architecture == "attention"
    in_dtype = torch.float32 if dtype == "float32" else torch.float64

    class Served(torch.nn.Module):
        """predict's path: (x - mean) / scale in double, cast to float32, then the scorer."""

        def __init__(self):
            super().__init__()
            self.scorer = scorer
            self.register_buffer("mean", mean)
            self.register_buffer("scale", scale)

        def forward(self, x):
            z = ((x.to(torch.float64) - self.mean) / self.scale).to(torch.float32)
            if attention:  # one query: a batch of one list, every position real
                z = z.unsqueeze(0)
                where = torch.ones(z.shape[:2], dtype=torch.bool)
                return self.scorer(z, where).reshape(-1, 1)
            return self.scorer(z, None).reshape(-1, 1)

    served = Served().eval()
    example = torch.zeros((3, len(names)), dtype=in_dtype)
    was_training = scorer.training
    scorer.eval()
    n_docs = torch.export.Dim("n_docs", min=1)
    try:  # with gradients on: torch's fused transformer fast path (no ONNX form) is not taken
        program = torch.onnx.export(served, (example,), input_names=[INPUT], output_names=[OUTPUT],
                                    dynamic_shapes=({0: n_docs},), opset_version=OPSET, dynamo=True, verbose=False)
    finally:
        scorer.train(was_training)
    proto = program.model_proto
    from onnx import helper

    helper.set_model_props(proto, {"rankwise_feature_names": ",".join(names),
                                   "rankwise_model": f"NeuralRanker[{model.architecture}]"})
    onnx.checker.check_model(proto, full_check=True)
    return proto.SerializeToString()


def to_onnx(model, *, feature_names=None, dtype: str = "float32") -> OnnxExport:
    """Write a fitted rankwise model as ONNX (see the module docstring for what each family becomes).

    Parameters
    ----------
    model : GBDTRanker, LinearRanker or NeuralRanker (fitted)
    feature_names : list of str, optional
        Names of the input's columns (default: ``model.feature_names_in_``, else ``f0..``); kept in the
        graph's metadata (``rankwise_feature_names``).
    dtype : {"float32", "double"}
        Element type of the input (and, for linear and neural graphs, of the output).

    Returns
    -------
    OnnxExport
        Checked by ``onnx.checker`` and loaded once by onnxruntime before it is returned.
    """
    if dtype not in _DTYPES:
        raise InputError(f"dtype: expected one of {_DTYPES}, got {dtype!r}")
    notes = []
    if hasattr(model, "booster_"):
        ens = tree_ensemble(model)
        names = _names(model, ens.n_features, feature_names)
        out = OnnxExport(_tree_graph(ens, names, dtype), names, dtype, False, "trees")
        if dtype == "double":
            notes.append("TreeEnsembleRegressor's output is float: the double sum of the leaves is rounded to float32")
    elif hasattr(model, "coef_") and hasattr(model, "scaler_mean_"):
        if getattr(model, "feature_map", None) not in (None, "none"):
            raise ExportError(f"LinearRanker(feature_map={model.feature_map!r}): the ONNX export writes a linear model "
                              "on the features themselves (retrain with feature_map=None)")
        names = _names(model, len(model.coef_), feature_names)
        out = OnnxExport(_linear_graph(model, names, dtype), names, dtype, False, "linear")
    elif hasattr(model, "module_") and getattr(model, "architecture", None) in ("mlp", "attention"):
        names = _names(model, int(model.n_features_in_), feature_names)
        attention = model.architecture == "attention"
        out = OnnxExport(_neural_graph(model, names, dtype), names, dtype, attention, model.architecture)
        if attention:
            notes.append("attention scorer: one run scores one query's documents together (input [n_docs, "
                         "n_features] of one query)")
    else:
        raise ExportError(f"{type(model).__name__}: the ONNX export takes GBDTRanker, LinearRanker and NeuralRanker "
                          "models")
    out.notes = notes
    out.reference()  # onnxruntime must load what was written
    return out


def _names(model, n: int, given) -> list:
    if given is None and model_feature_names(model) is None:
        return [f"f{i}" for i in range(n)]
    return feature_names_for(model, n, given, rename=True)
