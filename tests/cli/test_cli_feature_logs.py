"""``rankwise train LOG --format opensearch|elasticsearch|solr|vespa --judgments QRELS``: the model equals the
Python API's on the same join, the join report is printed, and wrong option sets fail before any reading."""
from __future__ import annotations

import json

import numpy as np
import pytest

import rankwise
from rankwise.cli import main
from rankwise.cli.inputs import build_model
from rankwise.data import join_judgments, make_synthetic, read_feature_log, write_feature_log, write_trec_qrels
from rankwise.models import LinearRanker


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("logs")
    full = make_synthetic(40, n_features=6, list_length=(4, 12), seed=11)
    X = full.X.astype(np.float64) * np.float64(1.000000001)  # full-precision values
    removed = np.random.default_rng(5).random(X.shape) < 0.1
    q = np.array([f"q{v}" for v in np.repeat(full.query_ids, full.query_sizes)])
    docs = np.array([f"doc-{k}-ü" for k in range(len(X))])
    names = ["title_bm25", "body_bm25", "popularity", "recency", "clicks", "length"]
    qrels = {}
    for qq, dd, g in zip(q.tolist(), docs.tolist(), full.labels.astype(int).tolist()):
        qrels.setdefault(qq, {})[dd] = g
    for dd in list(qrels["q1"])[:2]:
        del qrels["q1"][dd]  # two unjudged hits
    write_trec_qrels(qrels, d / "qrels.txt")
    train_rows = q != "q40"
    order = write_feature_log(d / "train.json", "opensearch", X[train_rows], q[train_rows], docs[train_rows],
                              feature_names=names, remove=removed[train_rows])
    (d / "train.qids").write_text("\n".join(order) + "\n")
    write_feature_log(d / "valid.ndjson", "opensearch", X[~train_rows], q[~train_rows], docs[~train_rows],
                      feature_names=names, remove=removed[~train_rows], layout="hits", crlf=True)
    write_feature_log(d / "solr.ndjson", "solr", X, q, docs, feature_names=names, remove=removed,
                      features_format="sparse")
    write_feature_log(d / "vespa.ndjson", "vespa", X, q, docs, feature_names=names, remove=removed)
    (d / "vespa.qids").write_text("\n".join(dict.fromkeys(q.tolist())) + "\n")
    (d / "names.txt").write_text("\n".join(names) + "\n")
    last = q == "q40"
    write_feature_log(d / "valid_reversed.ndjson", "solr", X[last][:, ::-1], q[last], docs[last],
                      feature_names=names[::-1], remove=removed[last][:, ::-1])
    return d, order


def test_train_on_an_opensearch_log_equals_the_api(logs, capsys, tmp_path):
    d, order = logs
    model = tmp_path / "m.npz"
    code, out, err = run_cli(capsys, "train", str(d / "train.json"), "--format", "opensearch", "--judgments",
                             str(d / "qrels.txt"), "--qids", str(d / "train.qids"), "--valid",
                             str(d / "valid.ndjson"), "--qid", "qid", "--param", "max_iter=30", "--out", str(model))
    # --qids and --qid together are refused (one source of query ids)
    assert code == 2 and "--qid and --qids both name the query ids" in err
    common = ["train", str(d / "train.json"), "--format", "opensearch", "--judgments", str(d / "qrels.txt"),
              "--qids", str(d / "train.qids"), "--out", str(model)]
    # a linear model cannot take the log's missing values: the model's error and a note on what to do
    code, out, err = run_cli(capsys, *common, "--param", "max_iter=30")
    assert code == 2 and "X contains NaN values" in err and "--model gbdt handles them" in err
    code, out, err = run_cli(capsys, *common, "--model", "gbdt", "--param", "n_estimators=5",
                             "--valid", str(d / "valid.ndjson"), "--qid", "qid")
    assert code == 2 and "--qid and --qids both name the query ids; pass one" in err
    code, out, err = run_cli(capsys, *common, "--model", "gbdt", "--param", "n_estimators=5")
    assert code == 0, err
    assert "unjudged hits: 2 (dropped)" in err and "judged documents never logged: 11" in err
    log = read_feature_log(d / "train.json", "opensearch", qid=order)
    ds, _ = join_judgments(log, d / "qrels.txt")
    api = build_model("gbdt", None, {"n_estimators": 5}, 0).fit(ds)
    np.testing.assert_array_equal(rankwise.load(model).predict(ds.X, qid=ds.qid), api.predict(ds.X, qid=ds.qid))
    # OpenSearch's missing_as_zero: a linear model trains, and equals the API's on the same join
    code, out, err = run_cli(capsys, *common, "--missing-as-zero", "--param", "max_iter=30")
    assert code == 0, err
    log = read_feature_log(d / "train.json", "opensearch", qid=order, missing_as_zero=True)
    ds, _ = join_judgments(log, d / "qrels.txt")
    api = LinearRanker(max_iter=30).fit(ds)
    np.testing.assert_array_equal(rankwise.load(model).predict(ds.X, qid=ds.qid), api.predict(ds.X, qid=ds.qid))


def test_valid_log_is_read_in_the_training_order(logs, capsys, tmp_path):
    d, _ = logs
    model = tmp_path / "m.npz"
    # the validation log lists the features in the reverse order: its columns follow the training log's
    code, out, err = run_cli(capsys, "train", str(d / "solr.ndjson"), "--format", "solr", "--judgments",
                             str(d / "qrels.txt"), "--features-format", "sparse", "--feature-set",
                             str(d / "names.txt"), "--qid", "responseHeader.params.qid", "--model", "gbdt",
                             "--param", "n_estimators=4", "--valid", str(d / "valid_reversed.ndjson"), "--out",
                             str(model))
    assert code == 0, err
    names = (d / "names.txt").read_text().split()
    train, _ = join_judgments(read_feature_log(d / "solr.ndjson", "solr", qid="responseHeader.params.qid",
                                               features_format="sparse", feature_names=names), d / "qrels.txt")
    valid, _ = join_judgments(read_feature_log(d / "valid_reversed.ndjson", "solr", qid="responseHeader.params.qid",
                                               feature_names=names), d / "qrels.txt")
    reversed_log = read_feature_log(d / "valid_reversed.ndjson", "solr", qid="responseHeader.params.qid")
    assert reversed_log.feature_names == names[::-1]
    api = build_model("gbdt", None, {"n_estimators": 4}, 0).fit(train, eval_set=valid)
    assert f"validation ndcg@10 = {api.score(valid):.4f}" in out
    np.testing.assert_array_equal(rankwise.load(model).predict(valid.X, qid=valid.qid),
                                  api.predict(valid.X, qid=valid.qid))
    code, out, err = run_cli(capsys, "train", str(d / "vespa.ndjson"), "--format", "vespa", "--judgments",
                             str(d / "qrels.txt"), "--qids", str(d / "vespa.qids"), "--model", "gbdt",
                             "--valid", str(d / "valid.ndjson"), "--out", str(model))
    assert code == 2 and "--qids names the training log's responses" in err


@pytest.mark.parametrize("fmt, extra", [("solr", ["--qid", "responseHeader.params.qid", "--features-format", "sparse",
                                                  "--feature-set", "names.txt"]),
                                        ("vespa", ["--qids", "vespa.qids", "--unjudged", "0"])])
def test_train_on_solr_and_vespa_logs(logs, capsys, tmp_path, fmt, extra):
    d, _ = logs
    extra = [str(d / e) if e.endswith((".txt", ".qids")) else e for e in extra]
    code, out, err = run_cli(capsys, "train", str(d / f"{fmt}.ndjson"), "--format", fmt, "--judgments",
                             str(d / "qrels.txt"), "--model", "gbdt", "--param", "n_estimators=3", "--out",
                             str(tmp_path / "m.npz"), *extra)
    assert code == 0, err
    kept = "kept with grade 0" if fmt == "vespa" else "dropped"
    assert f"unjudged hits: 2 ({kept})" in err and "40 queries" in err


@pytest.mark.parametrize("argv, message", [
    (["--format", "opensearch"], "--format opensearch reads a feature log, which holds no grades: pass --judgments"),
    (["--judgments", "q.txt"], "--judgments go with a feature log: --format opensearch|elasticsearch|solr|vespa"),
    (["--format", "vespa", "--judgments", "q.txt", "--unjudged", "zero"], "--unjudged must be 'drop' or a grade"),
])
def test_option_errors(capsys, tmp_path, argv, message):
    code, _, err = run_cli(capsys, "train", "log.json", "--out", str(tmp_path / "m.npz"), *argv)
    assert code == 2 and message in err


def test_log_errors_name_the_file(logs, capsys, tmp_path):
    d, _ = logs
    code, _, err = run_cli(capsys, "train", str(d / "valid.ndjson"), "--format", "opensearch", "--judgments",
                           str(d / "qrels.txt"), "--out", str(tmp_path / "m.npz"))
    assert code == 2 and f"{d / 'valid.ndjson'}:1: hit: a hit on its own line carries no query" in err


def test_solr_separators_and_store_options(capsys, tmp_path):
    docs = [{"id": f"d{k}", "fv": f"title:{k / 7!r} body:{k * 1e-5!r}"} for k in range(6)]
    resp = {"responseHeader": {"params": {"qid": "q1"}}, "response": {"numFound": 6, "docs": docs}}
    (tmp_path / "log.json").write_text(json.dumps(resp))
    (tmp_path / "qrels").write_text("".join(f"q1 0 d{k} {k % 3}\n" for k in range(6)))
    (tmp_path / "store.json").write_text(json.dumps([{"store": "s1", "name": "body", "class": "x", "params": {}},
                                                     {"store": "s1", "name": "title", "class": "x", "params": {}},
                                                     {"store": "s2", "name": "other", "class": "x", "params": {}}]))
    base = ["train", str(tmp_path / "log.json"), "--format", "solr", "--judgments", str(tmp_path / "qrels"),
            "--qid", "responseHeader.params.qid", "--out", str(tmp_path / "m.npz"), "--param", "max_iter=3"]
    code, _, err = run_cli(capsys, *base, "--feature-store", "s1", "--feature-set", str(tmp_path / "store.json"),
                           "--key-value-sep", ":", "--feature-sep", " ")
    assert code == 2 and "no '[features]' field in the document" in err
    code, _, err = run_cli(capsys, *base, "--feature-set", str(tmp_path / "store.json"), "--key-value-sep", ":",
                           "--feature-sep", " ")
    assert code == 2 and "holds the stores ['s1', 's2']; pass feature_store=" in err
    code, _, err = run_cli(capsys, *base, "--feature-store", "s1", "--feature-set", str(tmp_path / "store.json"),
                           "--key-value-sep", ":", "--feature-sep", " ", "--field", "fv")
    assert code == 0, err
    assert rankwise.load(tmp_path / "m.npz").n_features_in_ == 2
