"""Exports to Solr LTR: parity with predict on MQ2008 Fold1 and adversarial rows, the slack, refusals."""
from __future__ import annotations

import numpy as np
import pytest

from rankwise.export import ExportError, parity_report, tree_ensemble
from rankwise.export._trees import LIGHTGBM_ZERO_THRESHOLD, adversarial_rows
from rankwise.export.reference.solr import NODE_SPLIT_SLACK
from rankwise.export.solr import slack_threshold, to_solr


def test_slack_threshold_lands_on_the_float32_or_says_how_near():
    rng = np.random.default_rng(0)
    for g in np.concatenate([rng.random(200).astype(np.float32), -rng.random(50).astype(np.float32) * 100,
                             np.float32([3.0, 1e6, 0.5])]):
        s, r = slack_threshold(g)
        assert r == g and np.float32(np.float32(float(s)) + NODE_SPLIT_SLACK) == g
    s, r = slack_threshold(np.float32(LIGHTGBM_ZERO_THRESHOLD))  # no float32 s: the nearest sum below is 0
    assert r == 0.0 and np.float32(np.float32(float(s)) + NODE_SPLIT_SLACK) == 0.0


def test_xgboost_trees_exact_in_solr(gbdt_models, mq_fold1, mq_names, xgb_margin):
    model = gbdt_models["xgboost", False]
    export = to_solr(model, feature_names=mq_names)
    doc = export.document
    assert doc["class"] == "org.apache.solr.ltr.model.MultipleAdditiveTreesModel"
    assert doc["params"]["isNullSameAsZero"] is False and [f["name"] for f in doc["features"]] == mq_names
    test = mq_fold1[1]
    report = parity_report(model, export, test.X, test.qid)
    assert report.passed and report.identical_rankings == 1.0, str(report)
    # Solr's float32 sum is XGBoost's own margin, bit for bit (predict sums the same leaves in double)
    np.testing.assert_array_equal(export.predict(test.X), xgb_margin(model, test.X))
    rows = adversarial_rows(tree_ensemble(model), test.X[0])
    adv = parity_report(model, export, rows, np.arange(len(rows)) // 20)
    assert adv.passed and not adv.differing_rows, str(adv)


def test_xgboost_missing_branches_in_solr(gbdt_models, mq_fold1, test_with_nan, mq_names, xgb_margin):
    model = gbdt_models["xgboost", True]
    export = to_solr(model, feature_names=mq_names)
    report = parity_report(model, export, test_with_nan, mq_fold1[1].qid)
    assert report.passed and report.identical_rankings == 1.0, str(report)
    np.testing.assert_array_equal(export.predict(test_with_nan), xgb_margin(model, test_with_nan))


def test_lightgbm_zero_splits_refused_or_accepted_with_the_measured_difference(gbdt_models, mq_fold1, mq_names):
    model = gbdt_models["lightgbm", False]
    with pytest.raises(ExportError, match=r"cannot be written exactly for Solr .* values in \(0.0, 1.00000001"):
        to_solr(model, feature_names=mq_names)
    export = to_solr(model, feature_names=mq_names, accept_inexact=True)
    assert export.notes and "(accepted)" in export.notes[0]
    test = mq_fold1[1]
    report = parity_report(model, export, test.X, test.qid)  # MQ2008 has no value in (0, 1e-35]
    assert report.passed and report.identical_rankings == 1.0, str(report)
    rows = adversarial_rows(tree_ensemble(model), test.X[0])
    adv = parity_report(model, export, rows, np.arange(len(rows)) // 20)
    assert adv.differing_rows  # the rows with a value in (0, 1e-35] differ, and only they
    for r in adv.differing_rows:
        x = rows[r["row"]]
        assert np.any((x > 0) & (x <= LIGHTGBM_ZERO_THRESHOLD)), r


def test_linear_model_in_solr(linear_model, mq_fold1, mq_names):
    test = mq_fold1[1]
    if linear_model.intercept_ != 0.0:
        with pytest.raises(ExportError, match="LinearModel has no intercept"):
            to_solr(linear_model, feature_names=mq_names)
    export = to_solr(linear_model, feature_names=mq_names, drop_intercept=True)
    norm = export.document["features"][0]["norm"]
    assert norm["class"] == "org.apache.solr.ltr.norm.StandardNormalizer"
    report = parity_report(linear_model, export, test.X, test.qid)
    assert report.passed and report.identical_rankings == 1.0, str(report)
    with pytest.raises(ExportError, match="no constant can be added"):
        to_solr(linear_model, feature_names=mq_names, shift="auto")
    store = export.feature_store({n: {"class": "org.apache.solr.ltr.feature.ValueFeature", "params": {"value": 0}}
                                  for n in mq_names})
    assert [f["name"] for f in store] == mq_names and {f["store"] for f in store} == {export.store}


def test_mlp_as_neural_network_model(mq_fold1, mq_names):
    """The MLP (ReLU layers) as NeuralNetworkModel, the standardiser as normalisers or folded into layer 0."""
    import torch

    from rankwise.models.neural import NeuralRanker

    torch.set_num_threads(1)
    train, test = mq_fold1
    mlp = NeuralRanker("listnet", hidden=(16, 8), max_iter=3, random_state=0).fit(train)
    for standardizer in ("normalizer", "fold"):
        export = to_solr(mlp, feature_names=mq_names, standardizer=standardizer)
        layers = export.document["params"]["layers"]
        assert [layer["activation"] for layer in layers] == ["relu", "relu", "identity"]
        assert ("norm" in export.document["features"][0]) == (standardizer == "normalizer")
        report = parity_report(mlp, export, test.X, test.qid)
        # torch sums in its own order, Solr sequentially, both in float32: scores agree to 1e-6 of the range;
        # a query may order a near-tie differently, and then only pairs closer than the float32 error swap
        assert report.max_rel_diff <= 1e-6 and report.top10_equal == 1.0, str(report)
        assert all(r["max_gap"] <= 2 * report.max_abs_diff for r in report.reordered), str(report)
        assert report.identical_rankings >= 0.99
    attention = NeuralRanker("listnet", architecture="attention", hidden=(8,), max_iter=1, random_state=0)
    attention.fit(train.X[:300], train.labels[:300], qid=train.qid[:300])
    with pytest.raises(ExportError, match="in the context of the other documents"):
        to_solr(attention, feature_names=mq_names)


def test_inexact_note_names_every_value_that_decides_otherwise(gbdt_models, mq_fold1, mq_names):
    """Each adversarial row Solr scores otherwise holds a value in an interval the note names (here also
    a split near 3.5e-6, where the float32 grid of the threshold is coarser than that of the sum)."""
    import re

    model = gbdt_models["lightgbm", True]
    export = to_solr(model, feature_names=mq_names, accept_inexact=True)
    listed = re.search(r"every value that decides otherwise: (.*)\) \(accepted\)", export.notes[0]).group(1)
    assert not listed.endswith("...")
    intervals = [(mq_names.index(f), float(lo), float(hi))
                 for lo, hi, fs in re.findall(r"\(([^,]+), ([^\]]+)\] of ([^;]+)", listed) for f in fs.split(", ")]
    assert any(hi > 1e-30 for _, _, hi in intervals)  # not only the (0, 1e-35] band
    rows = adversarial_rows(tree_ensemble(model), mq_fold1[1].X[0])
    adv = parity_report(model, export, rows, np.arange(len(rows)) // 20)
    assert adv.differing_rows
    for r in adv.differing_rows:
        x = rows[r["row"]].astype(np.float32)
        assert any(lo < x[j] <= hi for j, lo, hi in intervals), r
