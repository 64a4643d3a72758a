"""``rankwise export``: the request body written, the parity printed, refusals as one-line errors."""
from __future__ import annotations

import gzip
import json

import numpy as np

from rankwise.cli.main import main
from rankwise.export.reference.opensearch import parse_model


def _small_files(mq2008_dir, tmp_path):
    for part, n in (("train", 1200), ("test", 400)):
        with gzip.open(mq2008_dir / "Fold1" / f"{part}.txt.gz", "rt") as fh:
            lines = [next(fh) for _ in range(n)]
        lines = lines[: max(i for i, ln in enumerate(lines) if ln.split()[1] != lines[-1].split()[1]) + 1]
        (tmp_path / f"{part}.txt").write_text("".join(lines))
    return tmp_path / "train.txt", tmp_path / "test.txt"


def test_export_cli(mq2008_dir, tmp_path, capsys):
    train, test = _small_files(mq2008_dir, tmp_path)
    names = ",".join(f"mq_{i}" for i in range(1, 47))
    assert main(["train", str(train), "--model", "gbdt", "--param", "n_estimators=15", "--out",
                 str(tmp_path / "gbdt.rw")]) == 0
    body = tmp_path / "body.json"
    assert main(["export", str(tmp_path / "gbdt.rw"), "--target", "opensearch", "--format", "xgboost+json",
                 "--feature-names", names, "--out", str(body), "--check", str(test), "--shift", "auto"]) == 0
    out = capsys.readouterr().out
    assert "identical rankings      100.00% of queries" in out and "PASSED" in out
    # a tolerance of 0 cannot hold for LightGBM's double sum served in float32: the report says so, exit 1
    assert main(["export", str(tmp_path / "gbdt.rw"), "--feature-names", names, "--out", str(body), "--check",
                 str(test), "--rel-tol", "0"]) == 1
    assert "NOT PASSED" in capsys.readouterr().out
    assert main(["export", str(tmp_path / "gbdt.rw"), "--target", "opensearch", "--format", "xgboost+json",
                 "--feature-names", names, "--out", str(body), "--check", str(test), "--shift", "auto"]) == 0
    capsys.readouterr()
    model = json.loads(body.read_text())["model"]
    assert model["name"] == "rankwise_model" and model["model"]["type"] == "model/xgboost+json"
    plugin = parse_model(model["model"]["type"], model["model"]["definition"], names.split(","))
    assert np.all(plugin.score(np.zeros((1, 46))) >= 0)
    # a feature set file gives the names; RankLib text alone
    fs = tmp_path / "fs.json"
    fs.write_text(json.dumps({"featureset": {"name": "mq", "features": [
        {"name": n, "params": ["keywords"], "template_language": "mustache", "template": {"match_all": {}}}
        for n in names.split(",")]}}))
    assert main(["export", str(tmp_path / "gbdt.rw"), "--format", "ranklib", "--featureset", str(fs),
                 "--definition-only", "--out", str(tmp_path / "m.txt")]) == 0
    assert (tmp_path / "m.txt").read_text().startswith("## LambdaMART\n")
    # Solr: LightGBM's splits at 1e-35 need --accept-inexact; the parity on MQ2008 rows still passes
    assert main(["export", str(tmp_path / "gbdt.rw"), "--target", "solr", "--feature-names", names,
                 "--out", str(tmp_path / "solr.json")]) == 2
    assert "cannot be written exactly for Solr" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "gbdt.rw"), "--target", "solr", "--feature-names", names, "--accept-inexact",
                 "--store", "mq", "--out", str(tmp_path / "solr.json"), "--check", str(test)]) == 0
    assert "PASSED" in capsys.readouterr().out
    doc = json.loads((tmp_path / "solr.json").read_text())
    assert doc["store"] == "mq" and doc["class"].endswith("MultipleAdditiveTreesModel")
    # refusals: one line on stderr, exit code 2
    assert main(["train", str(train), "--model", "linear", "--out", str(tmp_path / "lin.rw")]) == 0
    capsys.readouterr()
    assert main(["export", str(tmp_path / "lin.rw"), "--format", "xgboost+json", "--feature-names", names,
                 "--out", str(tmp_path / "x.json")]) == 2
    assert "format 'xgboost+json' takes a tree ensemble" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "lin.rw"), "--format", "linear", "--out", str(tmp_path / "x.json")]) == 2
    assert "give the 46 names" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "lin.rw"), "--format", "linear", "--feature-names", names,
                 "--drop-intercept", "--out", str(tmp_path / "l.json"), "--check", str(test)]) == 0
    assert "PASSED" in capsys.readouterr().out


def test_export_cli_xgboost_json_raw(mq2008_dir, tmp_path, capsys):
    """``--format xgboost+json+raw``: an XGBoost model's own JSON in the request body, the plugin's parity
    checked on MQ2008 rows; a LightGBM model refused in one line."""
    train, test = _small_files(mq2008_dir, tmp_path)
    names = ",".join(f"mq_{i}" for i in range(1, 47))
    assert main(["train", str(train), "--model", "gbdt", "--param", "n_estimators=15", "--param", "backend=xgboost",
                 "--out", str(tmp_path / "xgb.rw")]) == 0
    body = tmp_path / "raw.json"
    assert main(["export", str(tmp_path / "xgb.rw"), "--target", "opensearch", "--format", "xgboost+json+raw",
                 "--feature-names", names, "--out", str(body), "--check", str(test)]) == 0
    out = capsys.readouterr().out
    assert "identical rankings      100.00% of queries" in out and "PASSED" in out
    model = json.loads(body.read_text())["model"]
    assert model["model"]["type"] == "model/xgboost+json+raw"
    raw = json.loads(model["model"]["definition"])  # XGBoost's own model JSON, as a string in the body
    assert raw["learner"]["feature_names"] == names.split(",")
    assert main(["train", str(train), "--model", "gbdt", "--param", "n_estimators=5", "--out",
                 str(tmp_path / "lgb.rw")]) == 0
    capsys.readouterr()
    assert main(["export", str(tmp_path / "lgb.rw"), "--format", "xgboost+json+raw", "--feature-names", names,
                 "--out", str(tmp_path / "x.json")]) == 2
    assert "format 'xgboost+json+raw' is XGBoost's own model JSON" in capsys.readouterr().err
