"""Exports to ONNX run by onnxruntime: parity with predict on MQ2008 Fold1 test and adversarial rows, refusals."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rankwise.errors import InputError
from rankwise.export import ExportError, parity_report, tree_ensemble
from rankwise.export._trees import adversarial_rows, floor32, next32

pytest.importorskip("onnxruntime", reason="onnxruntime absent: pip install 'rankwise[export]'")
pytest.importorskip("onnx", reason="onnx absent: pip install 'rankwise[export]'")

from rankwise.export.onnx import to_onnx  # noqa: E402


@pytest.fixture(scope="module")
def neural_models(mq_fold1):
    from rankwise.models.neural import NeuralRanker

    train = mq_fold1[0]
    return {arch: NeuralRanker("listnet", architecture=arch, hidden=(16, 8), max_iter=3, random_state=0,
                               n_jobs=1).fit(train) for arch in ("mlp", "attention")}


@pytest.mark.parametrize("dtype", ["float32", "double"])
@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_tree_parity_on_mq2008_and_adversarial_rows(gbdt_models, mq_fold1, mq_names, backend, dtype, xgb_margin):
    model = gbdt_models[backend, False]
    test = mq_fold1[1]
    export = to_onnx(model, feature_names=mq_names, dtype=dtype)
    report = parity_report(model, export, test.X, test.qid)
    print(f"\nONNX {backend} {dtype} MQ2008: {report.max_abs_diff:.3g} ({report.max_rel_diff:.3g} of range)")
    assert report.n_queries == 156 and report.identical_rankings == 1.0 and report.top10_equal == 1.0
    assert report.max_rel_diff <= 1e-6 and report.passed, str(report)
    if backend == "xgboost" and dtype == "float32":  # float32 decisions, float32 sum from the base: XGBoost's own
        np.testing.assert_array_equal(export.predict(test.X), xgb_margin(model, test.X))
    rows = adversarial_rows(tree_ensemble(model), test.X[0])
    adv = parity_report(model, export, rows, np.arange(len(rows)) // 20)
    print(f"ONNX {backend} {dtype} adversarial ({len(rows)} rows): {adv.max_abs_diff:.3g}")
    assert adv.max_rel_diff <= 1e-6 and adv.differing_rows == [] and adv.identical_rankings == 1.0, str(adv)
    if dtype == "double":  # a double target: the leaves summed in double, as predict sums them
        assert report.max_abs_diff <= 1e-12 and adv.max_abs_diff <= 1e-12, (str(report), str(adv))


@pytest.mark.parametrize("dtype", ["float32", "double"])
@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_tree_missing_values_follow_the_booster(gbdt_models, mq_fold1, test_with_nan, mq_names, backend, dtype):
    model = gbdt_models[backend, True]
    export = to_onnx(model, feature_names=mq_names, dtype=dtype)
    report = parity_report(model, export, test_with_nan, mq_fold1[1].qid)
    assert report.passed and report.identical_rankings == 1.0, str(report)
    rows = adversarial_rows(tree_ensemble(model), test_with_nan[3])  # a base row with NaN in it
    adv = parity_report(model, export, rows, np.arange(len(rows)) // 20)
    assert adv.passed and adv.differing_rows == [], str(adv)
    if dtype == "double":
        assert report.max_abs_diff <= 1e-12 and adv.max_abs_diff <= 1e-12, (str(report), str(adv))


def _tree_node(export):
    import onnx

    (node,) = export.model.graph.node
    return node, {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def test_double_tree_graph_is_an_opset5_tree_ensemble_with_double_splits_leaves_and_output(gbdt_models, mq_names):
    """dtype="double": ai.onnx.ml TreeEnsemble (ml opset 5) -- per-node modes (LightGBM x <= t with its own
    double threshold, XGBoost x < t with its float32 one), the booster's NaN side per node, double leaves."""
    from onnx import TensorProto, numpy_helper

    model = gbdt_models["lightgbm", True]
    export = to_onnx(model, feature_names=mq_names, dtype="double")
    node, attrs = _tree_node(export)
    assert node.op_type == "TreeEnsemble" and node.domain == "ai.onnx.ml"
    assert {o.domain: o.version for o in export.model.opset_import}["ai.onnx.ml"] == 5
    assert export.model.graph.output[0].type.tensor_type.elem_type == TensorProto.DOUBLE
    modes = numpy_helper.to_array(attrs["nodes_modes"])
    splits = numpy_helper.to_array(attrs["nodes_splits"])
    leaves = numpy_helper.to_array(attrs["leaf_weights"])
    assert modes.dtype == np.uint8 and set(modes.tolist()) == {0}  # BRANCH_LEQ
    assert splits.dtype == np.float64 and leaves.dtype == np.float64
    ens = tree_ensemble(model)
    assert len(attrs["tree_roots"]) == len(ens.trees)
    tree = ens.trees[0]
    assert splits[attrs["tree_roots"][0]] == tree.threshold[0]  # LightGBM's double threshold itself
    assert float(np.float32(tree.threshold[0])) != tree.threshold[0]  # (not a float32 value)
    assert sorted(leaves.tolist()) == sorted(v for t in ens.trees for v in t.value[t.feature < 0])
    tracks = np.array(attrs["nodes_missing_value_tracks_true"])
    assert 0 < tracks.sum() < len(tracks)  # trained with NaN: both sides occur
    xmodel = gbdt_models["xgboost", True]
    _, xattrs = _tree_node(to_onnx(xmodel, feature_names=mq_names, dtype="double"))
    xens = tree_ensemble(xmodel)
    xmodes = numpy_helper.to_array(xattrs["nodes_modes"])
    roots = xattrs["tree_roots"]
    assert xens.base_score == 0.0 and len(roots) == len(xens.trees)  # a rankwise loss: no base margin
    assert set(xmodes.tolist()) == {1}  # BRANCH_LT: XGBoost's own x < t
    assert numpy_helper.to_array(xattrs["nodes_splits"])[roots[0]] == xens.trees[0].threshold[0]


def test_double_tree_graph_decides_double_inputs_as_lightgbm(gbdt_models, mq_fold1, mq_names):
    """Fed double rows directly (not read as float32 first), the LightGBM graph still gives LightGBM's own raw
    score: its double thresholds are LightGBM's, so values between floor32(t) and t go left as in LightGBM."""
    model = gbdt_models["lightgbm", True]
    export = to_onnx(model, feature_names=mq_names, dtype="double")
    rows = np.vstack([mq_fold1[1].X[:300], adversarial_rows(tree_ensemble(model), mq_fold1[1].X[0])])
    got = export.reference().session.run(["score"], {"features": np.ascontiguousarray(rows, np.float64)})[0]
    np.testing.assert_array_equal(got.ravel(), model.booster_.predict(rows, raw_score=True))


def test_tree_graph_nodes_thresholds_and_missing_tracking(gbdt_models, mq_names):
    import onnx
    from onnx import numpy_helper

    model = gbdt_models["lightgbm", True]
    export = to_onnx(model, feature_names=mq_names)
    graph = export.model.graph
    (node,) = graph.node
    assert node.op_type == "TreeEnsembleRegressor" and node.domain == "ai.onnx.ml"
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert set(attrs["nodes_modes"]) == {b"BRANCH_LEQ", b"LEAF"}
    values = numpy_helper.to_array(attrs["nodes_values_as_tensor"])
    assert values.dtype == np.float32
    ens = tree_ensemble(model)
    tree = ens.trees[0]
    k = 0  # the root of the first tree: the largest float32 x with x <= t (t a double)
    assert values[0] == floor32(tree.threshold[k]) and float(next32(values[0])) > tree.threshold[k]
    tracks = np.array(attrs["nodes_missing_value_tracks_true"])[np.array(attrs["nodes_modes"]) != b"LEAF"]
    assert 0 < tracks.sum() < len(tracks)  # trained with NaN: both sides occur
    assert dict((p.key, p.value) for p in export.model.metadata_props)["rankwise_feature_names"] == ",".join(mq_names)
    assert export.model.graph.input[0].name == "features" and export.model.graph.output[0].name == "score"
    xgb_model = gbdt_models["xgboost", True]
    (xnode,) = to_onnx(xgb_model, feature_names=mq_names).model.graph.node
    xattrs = {a.name: onnx.helper.get_attribute_value(a) for a in xnode.attribute}
    assert set(xattrs["nodes_modes"]) == {b"BRANCH_LT", b"LEAF"}  # XGBoost's own x < t, threshold unchanged
    assert numpy_helper.to_array(xattrs["nodes_values_as_tensor"])[0] == tree_ensemble(xgb_model).trees[0].threshold[0]


def test_xgboost_base_margin_is_a_first_one_leaf_tree():
    """XGBoost adds its base margin first and sums in float32: a first one-leaf tree keeps that order (bit for bit)."""
    import onnx
    import xgboost as xgb

    rng = np.random.default_rng(0)
    X = rng.random((400, 3)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = np.nan_to_num(X[:, 0]) * 2 + rng.random(400)
    booster = xgb.train({"objective": "reg:squarederror", "base_score": 0.7, "max_depth": 3, "nthread": 1},
                        xgb.DMatrix(X, y), 15)

    class Fitted:
        booster_ = booster

    ens = tree_ensemble(booster)
    assert ens.base_score == float(np.float32(0.7))
    export = to_onnx(Fitted())
    (node,) = export.model.graph.node
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["nodes_treeids"][0] == 0 and attrs["nodes_modes"][0] == b"LEAF"
    assert attrs["nodes_treeids"][1] == 1 and len(set(attrs["nodes_treeids"])) == len(ens.trees) + 1
    assert "base_values" not in attrs
    rows = np.vstack([X, adversarial_rows(ens, X[0])])
    margin = booster.predict(xgb.DMatrix(rows.astype(np.float32)), output_margin=True)
    np.testing.assert_array_equal(export.predict(rows), margin.astype(np.float64))
    # double: the same leaves from the same base margin, summed in double (what GBDTRanker.predict gives)
    double = to_onnx(Fitted(), dtype="double")
    _, dattrs = _tree_node(double)
    root = dattrs["tree_roots"][0]  # the base margin: a first tree whose split reaches one leaf on both sides
    assert len(dattrs["tree_roots"]) == len(ens.trees) + 1 and dattrs["nodes_trueleafs"][root] == 1
    assert dattrs["nodes_falseleafs"][root] == 1
    assert dattrs["nodes_truenodeids"][root] == dattrs["nodes_falsenodeids"][root]
    assert onnx.numpy_helper.to_array(dattrs["leaf_weights"])[dattrs["nodes_truenodeids"][root]] == ens.base_score
    np.testing.assert_array_equal(double.predict(rows), ens.raw_score(rows.astype(np.float32), sum_dtype=np.float64))


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-6), ("double", 1e-12)])
def test_linear_parity(linear_model, mq_fold1, mq_names, dtype, tol):
    test = mq_fold1[1]
    export = to_onnx(linear_model, feature_names=mq_names, dtype=dtype)
    report = parity_report(linear_model, export, test.X, test.qid)
    print(f"\nONNX linear {dtype}: {report.max_abs_diff:.3g} ({report.max_rel_diff:.3g} of range)")
    assert report.identical_rankings == 1.0 and report.max_rel_diff <= tol and report.passed, str(report)
    assert [n.op_type for n in export.model.graph.node] == ["MatMul", "Add"]  # the standardiser is folded in


@pytest.mark.parametrize("arch", ["mlp", "attention"])
def test_neural_parity(neural_models, mq_fold1, mq_names, arch):
    model = neural_models[arch]
    test = mq_fold1[1]
    export = to_onnx(model, feature_names=mq_names)
    assert export.per_query == (arch == "attention")
    report = parity_report(model, export, test.X, test.qid)
    print(f"\nONNX {arch}: {report.max_abs_diff:.3g} ({report.max_rel_diff:.3g} of range)")
    assert report.identical_rankings == 1.0 and report.max_rel_diff <= 1e-6 and report.passed, str(report)
    if arch == "attention":  # the documents attend to each other: a query scored in parts scores otherwise
        rows = np.flatnonzero(test.qid == test.qid[0])
        whole = export.predict(test.X[rows], qid=test.qid[rows])
        alone = export.predict(test.X[rows[:1]], qid=test.qid[rows[:1]])
        assert alone[0] != whole[0]
        with pytest.raises(InputError, match="scores one query's documents together"):
            export.predict(test.X)


def test_refusals_each_with_its_message(mq_fold1, linear_model, mq_names):
    from rankwise.models.linear import LinearRanker

    train = mq_fold1[0]
    poly = LinearRanker("listnet", feature_map="poly2", max_iter=1, random_state=0).fit(train)
    with pytest.raises(ExportError, match=r"feature_map='poly2'.*retrain with feature_map=None"):
        to_onnx(poly, feature_names=mq_names)
    with pytest.raises(InputError, match="dtype: expected one of"):
        to_onnx(linear_model, dtype="float16")
    with pytest.raises(ExportError, match="the ONNX export takes GBDTRanker, LinearRanker and NeuralRanker"):
        to_onnx(object())
    with pytest.raises(InputError, match="expected 46 distinct names"):
        to_onnx(linear_model, feature_names=mq_names[:-1])


@pytest.mark.parametrize("arch", ["mlp", "attention"])
def test_neural_double_is_refused_float32_arithmetic_is_no_double_target(neural_models, mq_names, arch):
    with pytest.raises(ExportError, match=rf"NeuralRanker\[{arch}\] with dtype='double': the network's weights and "
                                          r"predict's arithmetic are float32.*not a double target.*Export with "
                                          r"dtype='float32'"):
        to_onnx(neural_models[arch], feature_names=mq_names, dtype="double")


def test_import_rankwise_loads_no_onnx():
    code = ("import sys, rankwise, rankwise.export\n"
            "print(sorted(m for m in ('onnx', 'onnxruntime') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_double_trees_on_an_onnxruntime_without_ml_opset5_are_refused_with_the_reason(gbdt_models, mq_names,
                                                                                     monkeypatch):
    from rankwise.export import onnx as onnx_export

    def cannot_load(self, *args, **kwargs):
        raise RuntimeError("Could not find an implementation for TreeEnsemble(5) node")

    monkeypatch.setattr(onnx_export.OnnxScorer, "__init__", cannot_load)
    with pytest.raises(ExportError, match=r"ai.onnx.ml opset 5 TreeEnsemble, which this onnxruntime .* cannot load "
                                          r"\(RuntimeError\); upgrade onnxruntime .* or export with dtype='float32'"):
        to_onnx(gbdt_models["lightgbm", False], feature_names=mq_names, dtype="double")
    with pytest.raises(RuntimeError):  # other graphs: the runtime's own error, as before
        to_onnx(gbdt_models["lightgbm", False], feature_names=mq_names)
