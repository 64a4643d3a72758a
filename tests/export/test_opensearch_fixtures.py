"""The OpenSearch LTR plugin's own unit-test cases, reproduced by rankwise's reference parser and scorer.

Every record of ``serving_fixtures/opensearch_ltr/expected_cases.json`` (the plugin's tests at
opensearch-learning-to-rank-base@af2d983) is one test: each definition the plugin rejects is
rejected (with the message the plugin's test asserts, where it asserts one), each definition it
accepts parses, and every expected score is reproduced within the test's own tolerance.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from rankwise.export._trees import _flatten, MISSING_NAN
from rankwise.export.reference.opensearch import (EngineRejection, PluginModel, feature_vectors, parse_model)

_DATA = Path(os.environ.get("RANKWISE_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
_DIR = _DATA / "serving_fixtures" / "opensearch_ltr"
_CASES = json.loads((_DIR / "expected_cases.json").read_text()) if (_DIR / "expected_cases.json").exists() else None
_SKIP = pytest.mark.skipif(_CASES is None, reason=f"serving fixtures absent: expected {_DIR}/expected_cases.json "
                                                  "(set RANKWISE_DATA)")
_RANDOM_SET = ("alpha", "beta", "gamma")


def _ids(records):
    return [r["id"] for r in records]


_RECORDS = _CASES["cases"] if _CASES else []
_PARSER_TYPES = ("model/xgboost+json", "model/xgboost+json+raw", "model/linear")


def _weighted_trees(definition_json, feature_set, transform):
    """NaiveAdditiveDecisionTreeTests' trees (simple_tree.txt restated): left iff threshold > value."""
    index = {n: i for i, n in enumerate(feature_set)}
    trees = [_flatten(t["root"], is_leaf=lambda n: "output" in n,
                      read_split=lambda n: (index[n["feature"]], float(np.float32(n["threshold"])), False, MISSING_NAN),
                      read_leaf=lambda n: float(np.float32(n["output"])), children=lambda n: (n["left"], n["right"]))
             for t in definition_json["trees"]]
    weights = np.array([t["weight"] for t in definition_json["trees"]], dtype=np.float32)
    return PluginModel("NaiveAdditiveDecisionTree", tuple(feature_set), "trees", trees, weights, rule="<",
                       transform=transform)


def _model_of(record):
    feature_set = record["feature_set"] or _RANDOM_SET
    if record["model_type"] in _PARSER_TYPES:
        definition = record["definition"]
        if record.get("definition_file"):
            definition = (_DIR / record["definition_file"]).read_text()
        return parse_model(record["model_type"], definition, feature_set)
    if record["test"] == "testScore" and record["test_file"].endswith("LinearRankerTests.java"):
        return parse_model("model/linear", {"f0": 1, "f1": 2, "f2": 3}, feature_set)
    transform = "sigmoid" if record["test"] == "testSigmoidScore" else "identity"
    return _weighted_trees(record["definition_json"], feature_set, transform)


@_SKIP
def test_every_record_is_covered():
    assert len(_RECORDS) == 47
    assert sum(len(r["evaluations"]) for r in _RECORDS) == 41


@_SKIP
@pytest.mark.parametrize("record", [r for r in _RECORDS if r["expect"] == "reject"], ids=lambda r: r["id"])
def test_rejected_definitions_are_rejected(record):
    feature_set = record["feature_set"] or _RANDOM_SET
    with pytest.raises(EngineRejection) as info:
        parse_model(record["model_type"], record["definition"], feature_set)
    err = record["error"]
    for key in ("message_contains", "cause_message_contains", "root_cause_message_contains"):
        if err.get(key):
            assert err[key] in str(info.value)


@_SKIP
@pytest.mark.parametrize("record", [r for r in _RECORDS if r["expect"] == "parse" and not (
    r["model_type"] in _PARSER_TYPES and r["definition"] is None and not r["definition_file"])], ids=lambda r: r["id"])
def test_accepted_definitions_score_as_the_plugin(record):
    model = _model_of(record)
    for ev in record["evaluations"]:
        X = feature_vectors(model.feature_set, [ev["features"]])
        got = model.score(X)[0]
        assert abs(got - ev["expected_score"]) <= ev["tolerance"], (ev, got)
        if ev["unset_features_are"] == "0.0":  # the unset feature scores as an explicit 0.0
            assert model.missing_as_zero
            zero = {k: (0.0 if v is None else v) for k, v in ev["features"].items()}
            assert model.score(feature_vectors(model.feature_set, [zero]))[0] == got


@_SKIP
def test_property_cases():
    """The records whose test asserts a property instead of numbers (random models), with the property checked."""
    rng = np.random.default_rng(25)
    by_id = {r["id"]: r for r in _RECORDS}
    # LinearRankerParserTests.testParse: random weights; score = float32 sum of w_i * v_i
    names = [f"feature_{i}" for i in range(rng.integers(1, 21))]
    w = rng.random(len(names)).astype(np.float32)
    model = parse_model("model/linear", json.dumps({n: float(x) for n, x in zip(names, w)}), names)
    v = (rng.integers(1, 100000, (50, len(names))) / rng.integers(1, 100000, (50, len(names)))).astype(np.float32)
    expected = np.zeros(50, dtype=np.float32)
    for j in range(len(names)):
        expected = expected + w[j] * v[:, j]
    np.testing.assert_array_equal(model.score(v), expected.astype(np.float64))
    # testEmptyModelOK: every vector scores 0
    empty = parse_model("model/linear", by_id["LinearRankerParserTests.testEmptyModelOK"]["definition"], names)
    assert np.all(empty.score(v) == 0.0)
    # testComplexModel: the Wikimedia model never scores NaN on random vectors
    rec = by_id["XGBoostJsonParserTests.testComplexModel"]
    wmf = parse_model(rec["model_type"], (_DIR / rec["definition_file"]).read_text(), rec["feature_set"])
    assert len(wmf.trees) == 10
    vecs = rng.integers(1, 100000, (2000, 8)) / rng.integers(1, 100000, (2000, 8))
    assert not np.any(np.isnan(wmf.score(vecs.astype(np.float32))))


@_SKIP
@pytest.mark.parametrize("case", _CASES["normalizer_cases"] if _CASES else [], ids=lambda c: c["normalizer"])
def test_normalizer_cases(case):
    kind = case["normalizer"]
    if kind in ("noop", "sigmoid"):  # the objective's transform on a one-leaf model whose leaf is the input
        objective = "reg:linear" if kind == "noop" else "reg:logistic"
        model = parse_model("model/xgboost+json", {"objective": objective,
                                                   "splits": [{"nodeid": 0, "leaf": case["input"]}]}, ["x"])
        got = model.score([[np.nan]])[0]
        assert abs(got - case["expected"]) <= abs(np.spacing(np.float32(case["expected"])))
        return
    (name, spec), = case["json"].items()
    model = parse_model("model/linear", {name: 1.0}, [name], feature_normalizers=case["json"])
    x = np.random.default_rng(3).random(100)
    p = case["params"]
    if "mean" in p:
        expected = (x - p["mean"]) / p["standard_deviation"]
    else:
        expected = (x - p["minimum"]) / (p["maximum"] - p["minimum"])
    np.testing.assert_allclose(model.score(x[:, None]), expected, atol=case["tolerance"])


@_SKIP
@pytest.mark.parametrize("name", ["coord_ascent.txt", "linRegression.txt", "lambdaMART.txt", "mart.txt",
                                  "randomForest.txt"])
def test_ranklib_sample_models_parse(name):
    text = (_DIR / "sample_models" / name).read_text()
    model = parse_model("model/ranklib", text, [f"f{i}" for i in range(1, 3)])
    expected = {"lambdaMART.txt": 1000, "mart.txt": 1000, "randomForest.txt": 300}
    if name in expected:
        assert len(model.trees) == expected[name]
    scores = model.score(np.array([[0.0, 0.0], [10.0, 20.0], [np.nan, 3.0]]))
    assert np.all(np.isfinite(scores))
    if name == "linRegression.txt":  # 0:b 1:w1 2:w2, scored in double and cast to float
        b, w1, w2 = 0.30545402144173783, 0.30545402144173783, 0.13565247758049973
        assert scores[1] == float(np.float32(b + w1 * 10.0 + w2 * 20.0))
        assert scores[2] == float(np.float32(b + w1 * 0.0 + w2 * 3.0))  # an absent feature is 0.0


def test_plugin_validations_beyond_the_fixtures():
    with pytest.raises(EngineRejection, match="Standard Deviation"):
        parse_model("model/linear", {"a": 1.0}, ["a"],
                    feature_normalizers={"a": {"standard": {"mean": 0.0, "standard_deviation": 0.0}}})
    with pytest.raises(EngineRejection, match="minimum < maximum"):
        parse_model("model/linear", {"a": 1.0}, ["a"], feature_normalizers={"a": {"min_max": {"minimum": -1.0,
                                                                                              "maximum": 1.0}}})
    with pytest.raises(EngineRejection, match="not a valid XGBoost objective"):
        parse_model("model/xgboost+json", {"objective": "reg:squarederror", "splits": []}, ["a"])
    with pytest.raises(EngineRejection, match="unknown field"):  # a dump with statistics is refused
        parse_model("model/xgboost+json", [{"nodeid": 0, "leaf": 1.0, "cover": 3.0}], ["a"])
    with pytest.raises(EngineRejection, match="outside the feature set"):
        parse_model("model/ranklib", "## LambdaMART\n<ensemble><tree id=\"1\" weight=\"1.0\"><split>"
                    "<feature> 3 </feature><threshold> 1.0 </threshold><split><output> 1 </output></split>"
                    "<split><output> 2 </output></split></split></tree></ensemble>", ["a", "b"])
    with pytest.raises(EngineRejection, match="Unknown model type"):
        parse_model("model/lightgbm", "{}", ["a"])


def test_absent_features_are_zero_before_normalising():
    """Linear models see an absent feature as 0.0 in the vector; the normaliser then maps that 0.0."""
    model = parse_model("model/linear", {"a": 2.0}, ["a"],
                        feature_normalizers={"a": {"standard": {"mean": 1.0, "standard_deviation": 4.0}}})
    assert model.score([[np.nan]])[0] == model.score([[0.0]])[0] == float(np.float32(2.0) * np.float32(-0.25))
