"""Apache Solr LTR's own test cases, reproduced by rankwise's reference model store and scorer.

Every record of ``serving_fixtures/solr_ltr/expected_cases.json`` is one test: each model document
Solr rejects is rejected with Solr's exact message, each one it accepts loads, and every asserted
score is reproduced within the test's tolerance.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from rankwise.export.reference import EngineRejection
from rankwise.export.reference.solr import ModelStore, java_float

_DATA = Path(os.environ.get("RANKWISE_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
_DIR = _DATA / "serving_fixtures" / "solr_ltr"
_CASES = json.loads((_DIR / "expected_cases.json").read_text()) if (_DIR / "expected_cases.json").exists() else None
_SKIP = pytest.mark.skipif(_CASES is None, reason=f"serving fixtures absent: expected {_DIR}/expected_cases.json "
                                                  "(set RANKWISE_DATA)")
_RECORDS = _CASES["cases"] if _CASES else []
_CONSTANTS = ["constantOne", "constantTwo", "constantThree", "constantFour", "constantFive"]


def _store_for(record) -> tuple[ModelStore, dict]:
    """The feature stores the test loads, and the model document (restated for models built in code)."""
    store = ModelStore(activations={"answer": lambda z: z * np.float32(42)})  # the test's custom activation
    for f in record.get("feature_files") or []:
        store.add_feature_file(_DIR / f["path"])
    doc = json.loads(json.dumps(record["model_json"]))
    if str(record.get("feature_store") or "").startswith("feature store 'test'"):
        store.add_feature_file(_DIR / "featureExamples" / "features-store-test-model.json")
    if record["id"] == "TestNeuralNetworkModel.testLinearAlgebra":  # a random subset of four constants
        store.feature_stores["test_score"] = _CONSTANTS
        doc["features"] = [{"name": n} for n in _CONSTANTS[:4]]
    return store, doc


@_SKIP
def test_every_record_is_covered():
    assert len(_RECORDS) == 30
    assert sum(1 for r in _RECORDS for e in r["evaluations"] if e.get("expected_score") is not None) == 8


@_SKIP
@pytest.mark.parametrize("record", [r for r in _RECORDS if r["expect"] == "reject"], ids=lambda r: r["id"])
def test_rejected_models_are_rejected_with_solrs_message(record):
    store, doc = _store_for(record)
    if record["id"] == "TestLinearModel.existingNameTest":  # the second add of the same model fails
        store.add(doc)
    with pytest.raises(EngineRejection) as info:
        store.add(doc)
    assert str(info.value) == record["error"]["message"]


@_SKIP
@pytest.mark.parametrize("record", [r for r in _RECORDS if r["expect"] == "parse"], ids=lambda r: r["id"])
def test_accepted_models_score_as_solr(record):
    store, doc = _store_for(record)
    model = store.add(doc)
    for ev in record["evaluations"]:
        if "vector" in ev:
            x = np.array([ev["vector"]])
        else:
            x = np.array([[np.nan if ev["features"][f] is None else ev["features"][f] for f in model.features]])
        got = model.score(x)[0]
        expected = ev["expected_score"] if ev.get("expected_score") is not None else ev["score_computed_by_extractor"]
        assert abs(got - expected) <= ev.get("tolerance", 0.0), (ev, got)


@_SKIP
def test_null_handling_depends_on_is_null_same_as_zero():
    """SOLR-16596: with isNullSameAsZero left at true a NaN goes right (65 - 20 = 45), not missing=left (30)."""
    record = next(r for r in _RECORDS if r["id"] == "TestMultipleAdditiveTreesModel.testMultipleAdditiveTreesWithNulls")
    store, doc = _store_for(record)
    del doc["params"]["isNullSameAsZero"]
    model = store.add(doc)
    assert model.score([[1.0, 1.0, np.nan]])[0] == 45.0


def test_java_float_strings():
    assert java_float("0.5f") == np.float32(0.5) and java_float("1F") == 1.0 and java_float(" -10 ") == -10.0
    with pytest.raises(EngineRejection, match="NumberFormatException"):
        java_float("0.5x")
