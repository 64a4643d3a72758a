"""Exports to Elasticsearch's native learning_to_rank and to Vespa: parity on MQ2008 Fold1 test and adversarial rows,
the reference parsers' rejections, and the refusals."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from rankwise.errors import InputError
from rankwise.export import ExportError, parity_report, tree_ensemble
from rankwise.export._trees import adversarial_rows, floor32, next32, prev32
from rankwise.export.elasticsearch import to_elasticsearch
from rankwise.export.reference import EngineRejection
from rankwise.export.reference.elasticsearch import parse_trained_model
from rankwise.export.reference.vespa import parse_lightgbm, parse_xgboost
from rankwise.export.vespa import to_vespa, vespa_threshold


def _adversarial(model, base_row):
    rows = adversarial_rows(tree_ensemble(model), base_row)
    return rows, np.arange(len(rows)) // 20


def _check(model, export, X, qid, tol, label):
    report = parity_report(model, export, X, qid)
    print(f"\n{label}: max |d| {report.max_abs_diff:.3g} ({report.max_rel_diff:.3g} of range)")
    assert report.identical_rankings == 1.0 and report.top10_equal == 1.0, str(report)
    assert report.max_rel_diff <= tol and report.differing_rows == [], str(report)
    if tol == 1e-12:  # a double target: within 1e-12 in absolute terms too
        assert report.max_abs_diff <= 1e-12, str(report)
    return report


# -- Elasticsearch -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_elasticsearch_parity(gbdt_models, mq_fold1, test_with_nan, mq_names, backend):
    test = mq_fold1[1]
    # double target: predict's double sum is reproduced (LightGBM's own; XGBoost's float32 leaves added in double)
    tol = 1e-12
    for with_nan, X in ((False, test.X), (True, test_with_nan)):
        model = gbdt_models[backend, with_nan]
        export = to_elasticsearch(model, feature_names=mq_names)
        _check(model, export, X, test.qid, tol, f"Elasticsearch {backend} MQ2008 (NaN {with_nan})")
        rows, groups = _adversarial(model, X[3])
        _check(model, export, rows, groups, tol, f"Elasticsearch {backend} adversarial ({len(rows)} rows)")


def test_elasticsearch_definition_and_request_body(gbdt_models, mq_names):
    export = to_elasticsearch(gbdt_models["lightgbm", True], feature_names=mq_names)
    ens = export.trained_model["ensemble"]
    assert ens["feature_names"] == mq_names and ens["aggregate_output"] == {"weighted_sum": {}}
    nodes = ens["trained_models"][0]["tree"]["tree_structure"]
    splits = [n for t in ens["trained_models"] for n in t["tree"]["tree_structure"] if "split_feature" in n]
    assert {n["decision_type"] for n in splits} == {"lte"} and {n["default_left"] for n in splits} == {True, False}
    assert [n["node_index"] for n in nodes] == list(range(len(nodes)))
    tree = tree_ensemble(gbdt_models["lightgbm", True]).trees[0]
    assert nodes[0]["threshold"] == tree.threshold[0]  # LightGBM's double threshold, kept
    xgb = to_elasticsearch(gbdt_models["xgboost", False], feature_names=mq_names).trained_model["ensemble"]
    assert {n["decision_type"] for t in xgb["trained_models"] for n in t["tree"]["tree_structure"]
            if "split_feature" in n} == {"lt"}
    body = export.put_body({n: {"match": {"body": "{{query}}"}} for n in mq_names}, default_scores={"mq_1": 0.0})
    ex = body["inference_config"]["learning_to_rank"]["feature_extractors"]
    assert [e["query_extractor"]["feature_name"] for e in ex] == mq_names
    assert ex[0]["query_extractor"]["default_score"] == 0
    assert body["definition"]["trained_model"] == export.trained_model
    parse_trained_model(json.dumps(body["definition"]), mq_names)
    with pytest.raises(InputError, match=r"no query for features \['mq_46'\]"):
        export.put_body({n: {} for n in mq_names[:-1]})


def test_elasticsearch_parser_rejects_what_elasticsearch_rejects(gbdt_models, mq_names):
    good = to_elasticsearch(gbdt_models["lightgbm", False], feature_names=mq_names).trained_model

    def bad(edit, match):
        doc = copy.deepcopy(good)
        edit(doc["ensemble"])
        with pytest.raises(EngineRejection, match=match):
            parse_trained_model(doc, mq_names)

    first = lambda e: e["trained_models"][0]["tree"]["tree_structure"]  # noqa: E731
    bad(lambda e: e.update(gain=1), r"\[ensemble\] unknown field \[gain\]")
    bad(lambda e: first(e)[0].update(split_gain=1, cover=2), r"unknown field \[cover\]")
    bad(lambda e: e.update(target_type="classification"), "a learning_to_rank model is a regression")
    bad(lambda e: e.update(aggregate_output={"logistic_regression": {}}), "sums its trees")
    bad(lambda e: e.update(aggregate_output={"weighted_sum": {"weights": [1.0]}}), "1 weights for 60 trained_models")
    bad(lambda e: first(e)[0].update(decision_type="eq"), r"unknown decision_type \[eq\]")
    bad(lambda e: first(e)[0].update(split_feature=46), r"split_feature \[46\] is not an index")
    bad(lambda e: first(e).reverse(), "must be listed by their index")
    bad(lambda e: first(e)[0].update(right_child=first(e)[0]["left_child"]), "reached twice")
    bad(lambda e: first(e)[0].pop("threshold"), r"neither a leaf \(leaf_value\) nor a split")
    with pytest.raises(EngineRejection, match="feature_names differ"):
        parse_trained_model(good, list(reversed(mq_names)))


# -- Vespa -----------------------------------------------------------------------------------------------------
def test_vespa_threshold_decides_as_float32_rounding():
    """x < t'  <=>  float32(x) <= g, for the doubles around t' (the midpoint of g and next32(g))."""
    rng = np.random.default_rng(0)
    gs = np.concatenate([rng.normal(size=300) * 10.0 ** rng.integers(-30, 30, 300), [0.0, -0.0, 1.0, 0.5, 3.0]])
    for g in gs.astype(np.float32):
        t = vespa_threshold(g)
        up = float(next32(g))
        mid = (float(g) + up) / 2
        for x in (mid, np.nextafter(mid, -np.inf), np.nextafter(mid, np.inf), float(g), up, t,
                  np.nextafter(t, -np.inf)):
            assert (x < t) == (np.float32(x) <= g), (g, x, t)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_vespa_native_parity(gbdt_models, mq_fold1, test_with_nan, mq_names, backend):
    test = mq_fold1[1]
    tol = 1e-12  # a double target, and predict sums in double on both backends
    names = [f"attribute({n})" for n in mq_names]
    for with_nan, X in ((False, test.X), (True, test_with_nan)):
        model = gbdt_models[backend, with_nan]
        export = to_vespa(model, feature_names=names)
        assert export.expression == f'{backend}("rankwise.json")' and list(export.files) == ["models/rankwise.json"]
        # features as float attributes hold them; LightGBM's thresholds are exact for double features too
        X32 = X.astype(np.float32).astype(np.float64)
        _check(model, export, X32, test.qid, tol, f"Vespa {backend} MQ2008 (NaN {with_nan})")
        if backend == "lightgbm":
            _check(model, export, X, test.qid, tol, "Vespa lightgbm MQ2008, double features")
        rows, groups = _adversarial(model, X[3])
        _check(model, export, rows, groups, tol, f"Vespa {backend} adversarial ({len(rows)} rows)")


def test_vespa_needs_the_threshold_rewrite(gbdt_models, mq_fold1, mq_names):
    """The booster's own dump_model() read by Vespa (x < t, default_left as LightGBM has it) decides otherwise at
    the thresholds: the rewrite is what makes the export exact."""
    model = gbdt_models["lightgbm", False]
    raw = parse_lightgbm(json.dumps(model.booster_.dump_model()), [f"Column_{i}" for i in range(46)])
    rows, _ = _adversarial(model, mq_fold1[1].X[0])
    offline = model.predict(rows)
    assert np.abs(raw.score(rows) - offline).max() > 1e-3
    export = to_vespa(model, feature_names=mq_names)
    np.testing.assert_allclose(export.predict(rows), offline, rtol=0, atol=1e-12 * np.ptp(offline))


def test_vespa_linear_onnx_and_mlp(linear_model, gbdt_models, mq_fold1, mq_names, tmp_path):
    pytest.importorskip("onnxruntime")
    from rankwise.models.neural import NeuralRanker

    test = mq_fold1[1]
    lin = to_vespa(linear_model, feature_names=mq_names)
    assert lin.files == {} and lin.expression.startswith(repr(float(linear_model.intercept_)))
    _check(linear_model, lin, test.X, test.qid, 1e-12, "Vespa linear expression")
    trees = to_vespa(gbdt_models["xgboost", False], feature_names=mq_names, format="onnx", name="lambdamart")
    assert 'onnx-model lambdamart {' in trees.rank_profile and trees.expression == "sum(onnx(lambdamart).score)"
    assert "tensor<float>(d0[1],d1[46]):[[mq_1, mq_2," in trees.rank_profile
    _check(gbdt_models["xgboost", False], trees, test.X, test.qid, 1e-6, "Vespa xgboost via ONNX")
    mlp = NeuralRanker("listnet", hidden=(16, 8), max_iter=3, random_state=0, n_jobs=1).fit(mq_fold1[0])
    served = to_vespa(mlp, feature_names=mq_names, feature_expressions={"mq_1": "bm25(title)"})
    assert "expression: bm25(title)" in served.rank_profile and served.kind == "onnx"
    _check(mlp, served, test.X, test.qid, 1e-6, "Vespa MLP via ONNX")
    paths = served.write(tmp_path, "doc")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in paths) == ["files/rankwise.onnx",
                                                                         "schemas/doc/rankwise.profile"]
    assert (tmp_path / "files/rankwise.onnx").read_bytes() == served.onnx.model_bytes


def test_vespa_parsers_reject(gbdt_models, mq_names):
    lgb_export = to_vespa(gbdt_models["lightgbm", False], feature_names=mq_names)
    text = lgb_export.files["models/rankwise.json"]
    with pytest.raises(EngineRejection, match=r"feature 'mq_\d+' is not one of the rank profile's features"):
        parse_lightgbm(text, [n.upper() for n in mq_names])
    xgb = json.loads(to_vespa(gbdt_models["xgboost", False], feature_names=mq_names).files["models/rankwise.json"])
    xgb[0]["children"][0]["nodeid"] = 999
    with pytest.raises(EngineRejection, match="children are not the yes/no nodes"):
        parse_xgboost(xgb, mq_names)


def test_refusals_each_with_its_message(mq_fold1, linear_model, gbdt_models, mq_names):
    from rankwise.models.linear import LinearRanker
    from rankwise.models.neural import NeuralRanker

    train = mq_fold1[0]
    att = NeuralRanker("listnet", architecture="attention", hidden=(8,), n_heads=2, max_iter=1, random_state=0,
                       n_jobs=1).fit(train)
    for export in (to_elasticsearch, to_vespa):
        with pytest.raises(ExportError, match="list-dependent scorer.*scores one document at a time"):
            export(att, feature_names=mq_names)
    with pytest.raises(ExportError, match=r"linear models \(LinearRanker\): Elasticsearch's learning_to_rank "
                                          r"trained model \(a tree ensemble\) takes tree ensembles"):
        to_elasticsearch(linear_model, feature_names=mq_names)
    poly = LinearRanker("listnet", feature_map="poly2", max_iter=1, random_state=0).fit(train)
    with pytest.raises(ExportError, match="non-linear map of the features"):
        to_vespa(poly, feature_names=mq_names)
    with pytest.raises(InputError, match="neither a Vespa rank feature"):
        to_vespa(linear_model, feature_names=["bm25(title"] + mq_names[1:])
    with pytest.raises(InputError, match="format: expected one of"):
        to_vespa(linear_model, feature_names=mq_names, format="ranklib")


def test_zero_band_threshold_in_elasticsearch_and_vespa():
    """LightGBM reads |x| <= 1e-35 as 0.0: a split at a threshold inside that band is rewritten to the largest
    float32 the booster sends left (checked on the band's edges, the zeros and their neighbours)."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    x = np.concatenate([np.zeros(200), rng.random(200) + 1.0, -rng.random(200) - 1.0])
    y = np.concatenate([np.zeros(200), np.ones(200), np.full(200, 2.0)])
    booster = lgb.train({"objective": "regression", "verbosity": -1, "min_data_in_leaf": 5, "num_leaves": 3},
                        lgb.Dataset(x[:, None], y), 2)

    class Fitted:
        booster_ = booster

    z = float(np.float32(1e-35))
    probe = np.array([0.0, -0.0, z, -z, float(next32(z)), float(prev32(-z)), 1e-36, -1e-36, 1e-30, -1e-30, 1.0, -1.0,
                      np.nan])[:, None]
    offline = booster.predict(probe.astype(np.float32).astype(np.float64), raw_score=True)
    for export in (to_elasticsearch(Fitted(), feature_names=["x"]), to_vespa(Fitted(), feature_names=["x"])):
        np.testing.assert_array_equal(export.predict(probe), offline)
    assert any(abs(t) < 1e-30 for t in tree_ensemble(booster).trees[0].threshold if not np.isnan(t))


@pytest.mark.parametrize("target", ["elasticsearch", "vespa", "onnx"])
def test_categorical_splits_refused(target):
    import lightgbm as lgb

    from rankwise.export import to_onnx

    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 6, 500), rng.random(500)])
    booster = lgb.train({"objective": "regression", "verbosity": -1, "min_data_per_group": 5, "cat_smooth": 1},
                        lgb.Dataset(X, X[:, 0] % 2 + X[:, 1], categorical_feature=[0]), 3)

    class Fitted:
        booster_ = booster

    if target == "onnx":
        pytest.importorskip("onnx")
    write = {"elasticsearch": to_elasticsearch, "vespa": to_vespa, "onnx": to_onnx}[target]
    with pytest.raises(InputError, match=r"categorical.*represents numerical splits of single-output tree ensembles"):
        write(Fitted(), feature_names=["a", "b"])


def test_vespa_wraps_binary_lightgbm_objectives_in_sigmoid():
    """SERVING.md: Vespa wraps binary LightGBM objectives in sigmoid(); the export says so, the reference does it."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = rng.random((300, 2))
    booster = lgb.train({"objective": "binary", "verbosity": -1, "num_leaves": 4}, lgb.Dataset(X, X[:, 0] > 0.5), 5)

    class Fitted:
        booster_ = booster

    export = to_vespa(Fitted(), feature_names=["a", "b"])
    assert any("sigmoid" in n for n in export.notes)
    raw = booster.predict(X.astype(np.float32).astype(np.float64), raw_score=True)
    np.testing.assert_allclose(export.predict(X), 1 / (1 + np.exp(-raw)), rtol=1e-15)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_reference_evaluators_against_the_boosters_and_onnxruntime(gbdt_models, test_with_nan, mq_names, backend):
    """Differential: each reference evaluator and onnxruntime against the booster's own raw margin, same rows."""
    pytest.importorskip("onnxruntime")
    from rankwise.export import to_onnx

    model = gbdt_models[backend, True]
    rows = np.vstack([test_with_nan[:500], adversarial_rows(tree_ensemble(model), test_with_nan[3])])
    X32 = rows.astype(np.float32)
    if backend == "lightgbm":
        margin = model.booster_.predict(X32.astype(np.float64), raw_score=True)
    else:
        import xgboost as xgb

        margin = model.booster_.predict(xgb.DMatrix(X32, missing=np.nan), output_margin=True).astype(np.float64)
    es = to_elasticsearch(model, feature_names=mq_names).predict(rows)
    vespa = to_vespa(model, feature_names=mq_names).predict(X32)
    ort = to_onnx(model, feature_names=mq_names).predict(rows)
    scale = np.ptp(margin)
    if backend == "lightgbm":  # double targets, LightGBM's double sum: equal
        np.testing.assert_array_equal(es, margin)
        np.testing.assert_array_equal(vespa, margin)
        assert np.abs(ort - margin).max() <= 1e-6 * scale
    else:  # XGBoost's float32 sum: onnxruntime's float32 sum is the same; the double targets round differently
        np.testing.assert_array_equal(ort, margin)
        assert np.abs(es - margin).max() <= 1e-6 * scale and np.abs(vespa - margin).max() <= 1e-6 * scale
        # ... as predict does: the same float32 leaves added in double, in the same order
        np.testing.assert_array_equal(es, model.predict(rows))
        np.testing.assert_array_equal(vespa, model.predict(X32))
