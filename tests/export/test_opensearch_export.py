"""Exports to the OpenSearch LTR plugin: parity with predict on MQ2008 Fold1 and adversarial rows, refusals."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rankwise.errors import InputError
from rankwise.export import ExportError, compare_scores, parity_report, to_opensearch, tree_ensemble
from rankwise.export._trees import adversarial_rows
from rankwise.export.reference.opensearch import parse_model

_TREE_FORMATS = [("xgboost+json", {}), ("ranklib", {"missing": "as_zero"}), ("xgboost+json", {"shift": "auto"})]


def _adversarial(model, base_row):
    rows = adversarial_rows(tree_ensemble(model), base_row)
    return rows, np.arange(len(rows)) // 20  # small groups: rankings are checked inside each


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
@pytest.mark.parametrize("fmt,kwargs", _TREE_FORMATS, ids=["xgboost+json", "ranklib", "xgboost+json-shift"])
def test_tree_parity_on_mq2008(gbdt_models, mq_fold1, mq_names, backend, fmt, kwargs, xgb_margin):
    model = gbdt_models[backend, False]
    test = mq_fold1[1]
    export = to_opensearch(model, fmt, feature_names=mq_names, **kwargs)
    report = parity_report(model, export, test.X, test.qid)
    assert report.n_queries == 156 and report.identical_rankings == 1.0 and report.top10_equal == 1.0
    assert report.max_rel_diff <= 1e-6 and report.passed, str(report)
    if backend == "xgboost" and not kwargs.get("shift"):  # float32 decisions and float32 sum: XGBoost's own margin
        np.testing.assert_array_equal(export.predict(test.X), xgb_margin(model, test.X))  # (predict sums in double)
    if kwargs.get("shift"):
        assert np.all(export.predict(test.X) >= 0)
    rows, groups = _adversarial(model, test.X[0])
    adv = parity_report(model, export, rows, groups)
    if fmt == "ranklib":  # absent (NaN) features are 0.0 there: only the rows with a NaN may differ
        assert all(np.isnan(rows[r["row"]]).any() for r in adv.differing_rows)
    else:
        assert adv.max_rel_diff <= 1e-6 and adv.differing_rows == [], str(adv)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_missing_branches_follow_the_booster(gbdt_models, mq_fold1, test_with_nan, mq_names, backend):
    """Trained with NaN: the ``missing`` child reproduces the booster's NaN rule (OpenSearch >= 3.8)."""
    model = gbdt_models[backend, True]
    export = to_opensearch(model, "xgboost+json", feature_names=mq_names)
    qid = mq_fold1[1].qid
    report = parity_report(model, export, test_with_nan, qid)
    assert report.passed and report.identical_rankings == 1.0, str(report)
    # OpenSearch 3.2-3.7 sends every NaN right: measurable differences, each explained by a leaf
    old = parity_report(model, export, test_with_nan, qid, missing="right")
    assert old.differing_rows and all("reaches another leaf" in r["reason"] for r in old.differing_rows)
    # RankLib cannot: refused, unless accepted
    with pytest.raises(ExportError, match="send a missing value .NaN. to another side than 0.0"):
        to_opensearch(model, "ranklib", feature_names=mq_names)


def test_xgboost_json_definition_shape(gbdt_models, mq_names):
    model = gbdt_models["lightgbm", False]
    export = to_opensearch(model, "xgboost+json", feature_names=mq_names)
    trees = json.loads(export.definition)
    root = trees[0]
    assert set(root) == {"nodeid", "depth", "split", "split_condition", "yes", "no", "missing", "children"}
    assert root["split"] in mq_names and [c["nodeid"] for c in root["children"]] == [root["yes"], root["no"]]
    # the threshold is the float32 just above floor32(t): x < t' iff x <= t for float32 x
    ens = tree_ensemble(model)
    t = ens.trees[0].threshold[0]
    t2 = np.float32(root["split_condition"])
    below = np.nextafter(t2, np.float32(-np.inf))
    assert float(below) <= t < float(t2)
    body = export.createmodel_body("mq_lambdamart")
    assert body["model"]["model"]["type"] == "model/xgboost+json"
    assert body["model"]["model"]["definition"] == export.definition


def test_linear_parity_and_normalizers(linear_model, mq_fold1, mq_names):
    test = mq_fold1[1]
    for fmt, kwargs in (("linear", {"drop_intercept": True}), ("ranklib", {})):
        export = to_opensearch(linear_model, fmt, feature_names=mq_names, **kwargs)
        report = parity_report(linear_model, export, test.X, test.qid)
        assert report.passed and report.identical_rankings == 1.0 and report.max_rel_diff <= 1e-6, str(report)
        norm = export.feature_normalizers[mq_names[0]]["standard"]
        assert norm == {"mean": float(linear_model.scaler_mean_[0]),
                        "standard_deviation": float(linear_model.scaler_scale_[0])}
    assert export.definition.startswith("## Linear Regression\n")
    assert export.definition.splitlines()[-1].split()[0] == f"0:{float(linear_model.intercept_)!r}"


def test_refusals_each_with_its_message(gbdt_models, linear_model, mq_names, mq_fold1):
    from rankwise.models.gbdt import GBDTRanker
    from rankwise.models.linear import LinearRanker

    gbdt = gbdt_models["lightgbm", False]
    with pytest.raises(InputError, match="give the 46 names"):
        to_opensearch(gbdt, "xgboost+json")
    with pytest.raises(InputError, match="expected 46 distinct names"):
        to_opensearch(gbdt, "xgboost+json", feature_names=mq_names[:-1] + mq_names[:1])
    with pytest.raises(ExportError, match="format 'linear' takes a LinearRanker"):
        to_opensearch(gbdt, "linear", feature_names=mq_names)
    with pytest.raises(ExportError, match="format 'xgboost\\+json' takes a tree ensemble"):
        to_opensearch(linear_model, "xgboost+json", feature_names=mq_names)
    with pytest.raises(InputError, match="format: expected one of"):
        to_opensearch(gbdt, "onnx", feature_names=mq_names)
    if linear_model.intercept_ != 0.0:
        with pytest.raises(ExportError, match="model/linear has no intercept and the model's is"):
            to_opensearch(linear_model, "linear", feature_names=mq_names)
    with pytest.raises(ExportError, match="no constant can be added"):
        to_opensearch(linear_model, "linear", feature_names=mq_names, shift="auto", drop_intercept=True)
    with pytest.raises(ExportError, match="have no lower bound"):
        to_opensearch(linear_model, "ranklib", feature_names=mq_names, shift="auto")
    train = mq_fold1[0]
    rff = LinearRanker("listnet", feature_map="rff", n_components=8, max_iter=2, random_state=0).fit(train)
    with pytest.raises(ExportError, match="non-linear map"):
        to_opensearch(rff, "linear", feature_names=mq_names)
    from rankwise.models.neural import NeuralRanker

    mlp = NeuralRanker(max_iter=1, random_state=0).fit(train.X[:200], train.labels[:200], qid=train.qid[:200])
    with pytest.raises(ExportError, match="no other rankwise model has a plugin format"):
        to_opensearch(mlp, "ranklib", feature_names=mq_names)


def _zero_as_missing_booster(zero_label):
    """LightGBM with zero_as_missing on x: 0 -> ``zero_label``, [0.5, 1] -> 0, [2, 3] -> 2."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    x = np.concatenate([np.zeros(300), rng.random(300) * 0.5 + 0.5, rng.random(300) + 2.0])
    y = np.concatenate([np.full(300, zero_label), np.zeros(300), np.full(300, 2.0)])
    X = np.column_stack([x, rng.random(900)])
    booster = lgb.train({"objective": "regression", "verbosity": -1, "zero_as_missing": True, "min_data_in_leaf": 5,
                         "num_leaves": 2}, lgb.Dataset(X, y), 3)

    class Fitted:  # a bare booster as a fitted model
        booster_ = booster
    return Fitted(), X


def test_zero_as_missing_exported_where_exact_refused_where_not():
    # zeros behave like [2, 3]: LightGBM sends the band right with the large values, and values just
    # below the band (negative) go left by the threshold: left, right, left -- no threshold test does that
    fitted, _ = _zero_as_missing_booster(2.0)
    ens = tree_ensemble(fitted.booster_)
    root = ens.trees[0]
    assert root.missing_type[0] == 1 and not root.default_left[0] and root.threshold[0] > 1.0
    for fmt in ("xgboost+json", "ranklib"):
        with pytest.raises(ExportError, match="missing_type=Zero sends every .x. <= 1e-35 to the right child"):
            to_opensearch(fitted, fmt, feature_names=["a", "b"], missing="as_zero")
    # zeros behave like [0.5, 1]: the band goes left with them, a threshold test reproduces it exactly
    fitted, X = _zero_as_missing_booster(0.0)
    export = to_opensearch(fitted, "xgboost+json", feature_names=["a", "b"])
    X[::5, 0] = np.nan
    X[1::5, 0] = -1e-35
    X[2::5, 0] = -0.0
    ens = tree_ensemble(fitted.booster_)
    np.testing.assert_array_equal(ens.raw_score(X.astype(np.float32)),
                                  fitted.booster_.predict(X.astype(np.float32).astype(np.float64), raw_score=True))
    report = compare_scores(ens.raw_score(X.astype(np.float32)), export.predict(X), np.arange(len(X)) // 10)
    assert report.passed, str(report)


def test_exports_pass_the_plugin_parser_and_validators_catch_tampering(gbdt_models, mq_names):
    export = to_opensearch(gbdt_models["xgboost", False], "xgboost+json", feature_names=mq_names)
    trees = json.loads(export.definition)
    parse_model("model/xgboost+json", trees, mq_names)
    trees[0]["children"].reverse()  # children out of order: the plugin rejects it
    with pytest.raises(InputError, match="Split structure is invalid"):
        parse_model("model/xgboost+json", trees, mq_names)
    with pytest.raises(InputError, match="Unknown feature"):
        parse_model("model/xgboost+json", json.loads(export.definition), [n.upper() for n in mq_names])


def test_compare_scores_counts_rankings_and_ties():
    qid = np.array([1, 1, 1, 2, 2])
    offline = np.array([3.0, 2.0, 1.0, 0.5, 0.25])
    same = compare_scores(offline, offline + 10.0, qid, score_offset=10.0)
    assert same.passed and same.max_abs_diff == 0.0
    swapped = compare_scores(offline, np.array([3.0, 1.0, 2.0, 0.5, 0.25]), qid)
    assert swapped.identical_rankings == 0.5 and swapped.top10_equal == 0.5 and not swapped.passed
    assert [r["row"] for r in swapped.differing_rows] == [1, 2]
    assert swapped.reordered == [{"qid": 1, "max_gap": 1.0}]
    tie = compare_scores(offline, np.array([3.0, 2.0, 1.0, 0.5, 0.5]), qid)
    assert tie.identical_rankings == 0.5  # a tie that was not one changes the ranking
    with pytest.raises(InputError, match="finite"):
        compare_scores(offline, offline * np.nan, qid)


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
@pytest.mark.parametrize("fmt", ["xgboost+json", "ranklib"])
def test_parity_with_negative_features_and_adversarial_rows(backend, fmt):
    """Features of both signs (MQ2008's are all in [0, 1]): negative thresholds, NaN, +-0 and the float32
    neighbours of every threshold, for both boosters and both tree formats."""
    from rankwise.data import make_synthetic
    from rankwise.models.gbdt import GBDTRanker

    data = make_synthetic(80, n_features=6, list_length=(5, 20), seed=0)
    X = np.array(data.X, dtype=np.float64)
    X[np.random.default_rng(0).random(X.shape) < 0.05] = np.nan
    model = GBDTRanker("lambdarank", backend=backend, n_estimators=25, n_jobs=1, random_state=0,
                       verbose=False).fit(X, data.labels, qid=data.qid)
    export = to_opensearch(model, fmt, feature_names=list("abcdef"), missing="as_zero")
    present = np.nan_to_num(X, nan=0.5)
    assert parity_report(model, export, present, data.qid).passed
    rows, groups = _adversarial(model, present[0])
    report = parity_report(model, export, rows, groups)
    if fmt == "ranklib":
        assert all(np.isnan(rows[r["row"]]).any() for r in report.differing_rows)
    else:
        assert report.passed and not report.differing_rows, str(report)
        assert parity_report(model, export, X, data.qid).passed


def test_missing_as_zero_flag(gbdt_models, mq_fold1, test_with_nan, mq_names):
    """``missing_as_zero`` (OpenSearch main): absent features are 0.0 -- a declared difference from the booster."""
    model = gbdt_models["xgboost", True]
    export = to_opensearch(model, "xgboost+json", feature_names=mq_names, missing_as_zero=True)
    assert json.loads(export.definition)["missing_as_zero"] is True and export.notes
    assert export.reference().missing_as_zero
    qid = mq_fold1[1].qid
    zero_filled = np.nan_to_num(test_with_nan, nan=0.0)
    np.testing.assert_array_equal(export.predict(test_with_nan), export.predict(zero_filled))
    assert parity_report(model, export, zero_filled, qid).passed  # with every feature present it is exact
    assert not parity_report(model, export, test_with_nan, qid).passed  # NaN rows follow 0.0, not the booster


# -- model/xgboost+json+raw -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("with_nan", [False, True])
def test_xgboost_raw_json_scores_as_xgboost_and_xgboost_reads_it(gbdt_models, mq_fold1, test_with_nan, mq_names,
                                                                xgb_margin, with_nan):
    """XGBoost's own model JSON for the plugin's raw parser: the plugin's float32 score is XGBoost's own margin bit
    for bit (NaN down each node's default_left), within float32 rounding of predict with every ranking the same,
    on MQ2008 and the adversarial rows; the file passes rankwise's booster check and XGBoost reads it back."""
    import xgboost as xgb
    from rankwise.models._booster_text import check_xgboost_json

    model = gbdt_models["xgboost", with_nan]
    X = test_with_nan if with_nan else mq_fold1[1].X
    export = to_opensearch(model, "xgboost+json+raw", feature_names=mq_names)
    assert export.model_type == "model/xgboost+json+raw"
    doc = json.loads(export.definition)
    assert doc["learner"]["feature_names"] == mq_names and set(doc["learner"]["feature_types"]) == {"float"}
    assert doc["learner"]["objective"]["name"] == "rank:pairwise"  # a margin: no transform in the plugin
    report = parity_report(model, export, X, mq_fold1[1].qid)
    assert report.passed and report.identical_rankings == 1.0 and report.top10_equal == 1.0, str(report)
    np.testing.assert_array_equal(export.predict(X), xgb_margin(model, X))
    rows, groups = _adversarial(model, X[3])
    adv = parity_report(model, export, rows, groups)
    assert adv.max_rel_diff <= 1e-6 and adv.differing_rows == [], str(adv)
    check_xgboost_json(export.definition, n_features=46)
    booster = xgb.Booster()
    booster.load_model(bytearray(export.definition.encode("utf-8")))
    theirs = booster.predict(xgb.DMatrix(X.astype(np.float32), missing=np.nan, feature_names=mq_names),
                             output_margin=True)
    np.testing.assert_array_equal(theirs, xgb_margin(model, X))


def test_xgboost_raw_json_base_margin_shift_and_missing_as_zero(mq_fold1, mq_names, xgb_margin):
    """The plugin adds no base_score: XGBoost's base margin is a first one-leaf tree (base_score 0 in the file);
    shift="auto" is a last one; missing_as_zero is written and noted."""
    from rankwise.models.gbdt import GBDTRanker

    train, test = mq_fold1
    model = GBDTRanker("native:rank:pairwise", backend="xgboost", n_estimators=8, n_jobs=1, random_state=0,
                       verbose=False, loss_params={"base_score": 0.3}).fit(train)
    export = to_opensearch(model, "xgboost+json+raw", feature_names=mq_names)
    forest = json.loads(export.definition)["learner"]["gradient_booster"]["model"]
    assert len(forest["trees"]) == 9 and forest["trees"][0]["base_weights"] == [float(np.float32(0.3))]
    assert forest["iteration_indptr"] == list(range(10))
    np.testing.assert_array_equal(export.predict(test.X), xgb_margin(model, test.X))
    shifted = to_opensearch(model, "xgboost+json+raw", feature_names=mq_names, shift="auto")
    assert shifted.score_offset > 0 and np.all(shifted.predict(test.X) >= 0)
    assert parity_report(model, shifted, test.X, test.qid).identical_rankings == 1.0
    zero = to_opensearch(model, "xgboost+json+raw", feature_names=mq_names, missing_as_zero=True)
    assert json.loads(zero.definition)["missing_as_zero"] is True and "missing_as_zero" in zero.notes[0]


def test_xgboost_raw_json_refusals(gbdt_models, linear_model, mq_names):
    with pytest.raises(ExportError, match=r"'xgboost\+json\+raw' is XGBoost's own model JSON .* trees are "
                                          r"lightgbm's: use format 'xgboost\+json'"):
        to_opensearch(gbdt_models["lightgbm", False], "xgboost+json+raw", feature_names=mq_names)
    with pytest.raises(ExportError, match=r"format 'xgboost\+json\+raw' takes a tree ensemble"):
        to_opensearch(linear_model, "xgboost+json+raw", feature_names=mq_names)
