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
  ``dtype="double"``: one ``ai.onnx.ml`` ``TreeEnsemble`` (ml opset 5, default opset 21) with double
  thresholds, double leaf weights and a double output, so that onnxruntime sums the leaves in double,
  tree after tree, as ``predict`` does (XGBoost's float32 leaves too): equal to ``predict`` (rows read as
  float32 first, as ``predict`` reads them). LightGBM splits keep their double ``x <= t`` (exact on
  double inputs too) except where its ``|x| <= 1e-35`` band moves the decision; XGBoost's keep
  their float32 ``x < t``. A one-leaf tree is a split whose both sides reach its leaf.
  ``nodes_missing_value_tracks_true`` is the side the booster sends NaN to (LightGBM
  ``missing_type=None``: the side of 0.0). XGBoost's base margin is a first one-leaf tree, so that
  the sum runs in XGBoost's order (base first). The float32 graph keeps ml opset 3, which more
  runtimes read (opset 5 needs onnxruntime 1.20 or later).
- a :class:`~rankwise.models.LinearRanker` as ``MatMul`` + ``Add`` with the standardiser folded
  into the weights and the intercept (``w_j / s_j``, ``b - sum_j w_j m_j / s_j``, in double);
- a :class:`~rankwise.models.NeuralRanker` through ``torch.onnx.export``: the MLP scores each row,
  its standardiser computed in double and cast to float32 as ``predict`` does (float32 only:
  ``dtype="double"`` is refused, the network computing in float32); the attention
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
from rankwise.export._trees import TreeEnsemble, floor32, tree_ensemble

__all__ = ["OnnxExport", "to_onnx", "OnnxScorer", "INPUT", "OUTPUT"]

INPUT, OUTPUT = "features", "score"
_DTYPES = ("float32", "double")
#: the default-domain opset of the graphs written here, and of ai.onnx.ml (TreeEnsembleRegressor 3)
OPSET, ML_OPSET = 18, 3
#: the opsets of the double tree graph: ai.onnx.ml 5 (TreeEnsemble: double thresholds, leaves and output),
#: released with the default domain's opset 21
OPSET_DOUBLE_TREES, ML_OPSET_DOUBLE_TREES = 21, 5


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
def _tree_graph(ens: TreeEnsemble, names: list):
    """The float32 graph: ``TreeEnsembleRegressor`` (ml opset 3) on a float32 input, float32 thresholds and leaves
    (``dtype="double"`` is :func:`_tree_graph_double`)."""
    onnx = _need("onnx")
    from onnx import TensorProto, helper, numpy_helper

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
    node = helper.make_node(
        "TreeEnsembleRegressor", [INPUT], [OUTPUT], domain="ai.onnx.ml", name="rankwise_trees", n_targets=1,
        aggregate_function="SUM", post_transform="NONE",
        nodes_values_as_tensor=numpy_helper.from_array(np.array(values, dtype=np.float32), "nodes_values"),
        target_weights_as_tensor=numpy_helper.from_array(np.array(weights, dtype=np.float32), "target_weights"), **a)
    graph = helper.make_graph([node], "rankwise_gbdt",
                              [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [None, len(names)])],
                              [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [None, 1])])
    return _finish(onnx, graph, names, f"{ens.source} booster, {len(ens.trees)} trees")


#: BRANCH_LEQ and BRANCH_LT as ai.onnx.ml TreeEnsemble (ml opset 5) codes its ``nodes_modes``
_MODE5 = {"BRANCH_LEQ": 0, "BRANCH_LT": 1}


def _split_double(ens: TreeEnsemble, tree, ti: int, k: int) -> tuple[str, float]:
    """A split's mode and double threshold for a double input: XGBoost keeps its float32 ``x < t``;
    LightGBM keeps its own double ``x <= t`` (exact for every double input too) wherever that decides
    float32 values as the booster does -- else (its ``|x| <= 1e-35`` band moves the decision) the
    largest float32 it sends left, as the float32 graph has it."""
    if ens.source == "xgboost":
        return "BRANCH_LT", float(np.float32(tree.threshold[k]))
    t = float(tree.threshold[k])
    left = float(left_max32(ens, tree, ti, k, "ONNX TreeEnsemble"))
    return "BRANCH_LEQ", (t if left == float(floor32(t)) else left)


def _tree_graph_double(ens: TreeEnsemble, names: list):
    """The trees as one ``ai.onnx.ml`` ``TreeEnsemble`` (ml opset 5): double thresholds, double leaf weights
    and a double output, so that onnxruntime sums the leaves in double -- as ``predict`` does -- tree after
    tree (XGBoost's base margin as a first tree, as in the float32 graph)."""
    onnx = _need("onnx")
    from onnx import TensorProto, helper, numpy_helper

    feat, modes, splits, tracks, t_ids, t_leaf, f_ids, f_leaf, roots, weights = ([] for _ in range(10))

    def add_leaf(v) -> int:
        weights.append(float(v))
        return len(weights) - 1

    def add_node(f, mode, split, track) -> int:
        feat.append(f), modes.append(_MODE5[mode]), splits.append(split), tracks.append(track)
        t_ids.append(0), t_leaf.append(0), f_ids.append(0), f_leaf.append(0)
        return len(feat) - 1

    def link(node, side_ids, side_leaf, tree, child, node_of):
        if tree.feature[child] < 0:
            side_ids[node], side_leaf[node] = add_leaf(tree.value[child]), 1
        else:
            side_ids[node], side_leaf[node] = node_of[child], 0

    def one_leaf_tree(v):  # a split whose both sides reach the one leaf
        roots.append(add_node(0, "BRANCH_LEQ", 0.0, 0))
        leaf = add_leaf(v)
        t_ids[-1], t_leaf[-1], f_ids[-1], f_leaf[-1] = leaf, 1, leaf, 1

    if ens.base_score != 0.0:  # the base margin, as a first tree
        one_leaf_tree(ens.base_score)
    for ti, tree in enumerate(ens.trees):
        if tree.feature[0] < 0:  # a tree of one leaf
            one_leaf_tree(tree.value[0])
            continue
        node_of = {}
        for k in np.flatnonzero(tree.feature >= 0):  # split nodes first (pre-order: the root is node 0)
            mode, split = _split_double(ens, tree, ti, int(k))
            node_of[int(k)] = add_node(int(tree.feature[k]), mode, split, int(nan_goes_left(ens, tree, int(k))))
        roots.append(node_of[0])
        for k, n in node_of.items():
            link(n, t_ids, t_leaf, tree, int(tree.left[k]), node_of)
            link(n, f_ids, f_leaf, tree, int(tree.right[k]), node_of)
    node = helper.make_node(
        "TreeEnsemble", [INPUT], [OUTPUT], domain="ai.onnx.ml", name="rankwise_trees", n_targets=1,
        aggregate_function=1, post_transform=0, tree_roots=roots, nodes_featureids=feat,
        nodes_modes=numpy_helper.from_array(np.array(modes, dtype=np.uint8), "nodes_modes"),
        nodes_splits=numpy_helper.from_array(np.array(splits, dtype=np.float64), "nodes_splits"),
        nodes_truenodeids=t_ids, nodes_trueleafs=t_leaf, nodes_falsenodeids=f_ids, nodes_falseleafs=f_leaf,
        nodes_missing_value_tracks_true=tracks, leaf_targetids=[0] * len(weights),
        leaf_weights=numpy_helper.from_array(np.array(weights, dtype=np.float64), "leaf_weights"))
    graph = helper.make_graph([node], "rankwise_gbdt",
                              [helper.make_tensor_value_info(INPUT, TensorProto.DOUBLE, [None, len(names)])],
                              [helper.make_tensor_value_info(OUTPUT, TensorProto.DOUBLE, [None, 1])])
    return _finish(onnx, graph, names, f"{ens.source} booster, {len(ens.trees)} trees", OPSET_DOUBLE_TREES,
                   ML_OPSET_DOUBLE_TREES)


def _finish(onnx, graph, names, what, opset=OPSET, ml_opset=ML_OPSET):
    from onnx import helper

    model = helper.make_model(graph, producer_name="rankwise", opset_imports=[
        helper.make_opsetid("", opset), helper.make_opsetid("ai.onnx.ml", ml_opset)])
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
        Element type of the input (and, for tree and linear graphs, of the output): ``"double"`` is a
        double-precision target (trees and linear models computed in double, equal to ``predict`` within
        1e-12); refused for a NeuralRanker, whose arithmetic is float32.

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
        graph = _tree_graph(ens, names) if dtype == "float32" else _tree_graph_double(ens, names)
        out = OnnxExport(graph, names, dtype, False, "trees")
    elif hasattr(model, "coef_") and hasattr(model, "scaler_mean_"):
        if getattr(model, "feature_map", None) not in (None, "none"):
            raise ExportError(f"LinearRanker(feature_map={model.feature_map!r}): the ONNX export writes a linear model "
                              "on the features themselves (retrain with feature_map=None)")
        names = _names(model, len(model.coef_), feature_names)
        out = OnnxExport(_linear_graph(model, names, dtype), names, dtype, False, "linear")
    elif hasattr(model, "module_") and getattr(model, "architecture", None) in ("mlp", "attention"):
        if dtype == "double":
            raise ExportError(f"NeuralRanker[{model.architecture}] with dtype='double': the network's weights and "
                              "predict's arithmetic are float32, so a graph that matches predict computes in float32 "
                              "whatever its input type -- it is not a double target (and a graph computing in double "
                              "would differ from predict by float32 rounding, not by 1e-12). Export with "
                              "dtype='float32' (parity within 1e-6 of the score range)")
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
    try:
        out.reference()  # onnxruntime must load what was written
    except Exception as exc:
        if out.family != "trees" or dtype != "double":
            raise
        version = getattr(_need("onnxruntime"), "__version__", "?")
        raise ExportError(f"dtype='double': the trees are an ai.onnx.ml opset 5 TreeEnsemble, which this onnxruntime "
                          f"({version}) cannot load ({type(exc).__name__}); upgrade onnxruntime (tested with 1.32) or "
                          "export with dtype='float32'") from None
    return out


def _names(model, n: int, given) -> list:
    if given is None and model_feature_names(model) is None:
        return [f"f{i}" for i in range(n)]
    return feature_names_for(model, n, given, rename=True)
