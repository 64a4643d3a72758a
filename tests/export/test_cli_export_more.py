"""``rankwise export --target elasticsearch|vespa|onnx``: the files written, the parity printed, refusals."""
from __future__ import annotations

import json

import pytest

from rankwise.cli.main import main
from rankwise.export.reference.elasticsearch import parse_trained_model
from rankwise.export.reference.vespa import parse_lightgbm


def test_export_cli_elasticsearch_vespa_onnx(mq2008_dir, tmp_path, capsys):
    from tests.export.test_cli_export import _small_files

    train, test = _small_files(mq2008_dir, tmp_path)
    names = [f"mq_{i}" for i in range(1, 47)]
    model = tmp_path / "gbdt.rw"
    assert main(["train", str(train), "--model", "gbdt", "--param", "n_estimators=15", "--out", str(model)]) == 0
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps({n: {"match": {"body": "{{query}}"}} for n in names}))
    es = tmp_path / "es.json"
    assert main(["export", str(model), "--target", "elasticsearch", "--feature-names", ",".join(names), "--queries",
                 str(queries), "--out", str(es), "--check", str(test)]) == 0
    out = capsys.readouterr().out
    assert "Elasticsearch learning_to_rank" in out and "identical rankings      100.00% of queries" in out
    parse_trained_model(json.loads(es.read_text())["definition"], names)
    app = tmp_path / "app"
    assert main(["export", str(model), "--target", "vespa", "--feature-names", ",".join(names), "--name", "lambdamart",
                 "--out", str(app), "--check", str(test)]) == 0
    assert "PASSED" in capsys.readouterr().out
    parse_lightgbm((app / "models" / "lambdamart.json").read_text(), names)
    assert 'lightgbm("lambdamart.json")' in (app / "schemas" / "doc" / "lambdamart.profile").read_text()
    assert main(["train", str(train), "--model", "linear", "--out", str(tmp_path / "lin.rw")]) == 0
    capsys.readouterr()
    assert main(["export", str(tmp_path / "lin.rw"), "--target", "elasticsearch", "--feature-names", ",".join(names),
                 "--out", str(es)]) == 2
    assert "takes tree ensembles (GBDTRanker) only" in capsys.readouterr().err
    pytest.importorskip("onnxruntime")
    assert main(["export", str(model), "--target", "onnx", "--feature-names", ",".join(names),
                 "--out", str(tmp_path / "m.onnx"), "--check", str(test)]) == 0
    assert "onnxruntime" in capsys.readouterr().out and (tmp_path / "m.onnx").stat().st_size > 1000
