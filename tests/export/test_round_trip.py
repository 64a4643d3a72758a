"""Issue 25's round trip: a feature log built from MQ2008 Fold1 with values removed -> read and joined with
the judgments -> trained with a rankwise loss -> exported -> scored by the engine's reference evaluator on
the logged test rows (absent features as that engine treats them) -> the same ranking as ``predict`` for
every query. Through the Python API and through ``rankwise train LOG`` + ``rankwise export --check``."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rankwise.cli import main
from rankwise.data import join_judgments, read_feature_log, write_feature_log, write_trec_qrels
from rankwise.export import ExportError, compare_scores, parity_report, to_opensearch, to_solr
from rankwise.models import GBDTRanker, LinearRanker

NAMES = [f"mq2008_{i + 1}" for i in range(46)]
REMOVED = 0.05  # share of the logged values the engine did not produce


@pytest.fixture(scope="module")
def logs(mq_fold1, tmp_path_factory):
    """Train and test logs of MQ2008 Fold1 as OpenSearch and Solr log them, and the qrels."""
    d = tmp_path_factory.mktemp("mq_logs")
    train, test = mq_fold1
    out = {}
    for part, ds, seed in (("train", train, 3), ("test", test, 4)):
        q = np.array([f"q{v}" for v in ds.qid])
        docs = np.array([f"{part}-{k}" for k in range(len(ds))])
        removed = np.random.default_rng(seed).random(ds.X.shape) < REMOVED
        X = np.asarray(ds.X, dtype=np.float64)
        order = write_feature_log(d / f"{part}.os.json", "opensearch", X, q, docs, feature_names=NAMES, remove=removed)
        (d / f"{part}.qids").write_text("\n".join(order) + "\n")
        write_feature_log(d / f"{part}.solr.ndjson", "solr", X, q, docs, feature_names=NAMES, remove=removed)
        qrels = {}
        for qq, dd, g in zip(q.tolist(), docs.tolist(), ds.labels.astype(int).tolist()):
            qrels.setdefault(qq, {})[dd] = g
        write_trec_qrels(qrels, d / f"{part}.qrels")
        out[part] = (order, removed)
    return d, out


def _joined(logs, part, fmt, **kw):
    d, parts = logs
    order, _ = parts[part]
    if fmt == "opensearch":
        log = read_feature_log(d / f"{part}.os.json", "opensearch", qid=order, **kw)
    else:
        log = read_feature_log(d / f"{part}.solr.ndjson", "solr", qid="responseHeader.params.qid", **kw)
    ds, report = join_judgments(log, d / f"{part}.qrels")
    assert report.n_rows == len(ds) and not report.unjudged  # every logged hit is judged
    return ds


@pytest.fixture(scope="module")
def joined(logs):
    """{(engine, reading, part): RankingDataset}: OpenSearch read with NaN for an absent feature
    ("nan") or the plugin's missing_as_zero ("zero"); Solr's dense log (an absent feature logged at
    its default, 0.0)."""
    return {(e, m, p): _joined(logs, p, e, **({"missing_as_zero": True} if m == "zero" else {}))
            for e, m in (("opensearch", "nan"), ("opensearch", "zero"), ("solr", "dense"))
            for p in ("train", "test")}


def _gbdt(backend, data):
    return GBDTRanker("lambdarank", backend=backend, n_estimators=20, n_jobs=1, random_state=0,
                      verbose=False).fit(data)


def _linear(data):
    return LinearRanker("listnet", max_iter=30, random_state=0).fit(data)


def _same_rankings(model, export, offline_X, served_X, qid, *, missing="branch"):
    """predict on the rows the model was trained like, the engine's reference on the rows as logged."""
    offline = model.predict(offline_X)
    served = export.reference().score(served_X, missing=missing)
    rep = compare_scores(offline, served, qid, score_offset=export.score_offset, notes=export.notes)
    assert rep.n_queries == len(np.unique(qid)) == 156
    assert rep.identical_rankings == 1.0, str(rep)
    assert rep.max_rel_diff <= 1e-6, str(rep)
    return rep


def test_log_keeps_names_and_missing_values(joined, logs, mq_fold1):
    _, parts = logs
    ds = joined["opensearch", "nan", "test"]
    assert ds.feature_names == NAMES
    removed = parts["test"][1]
    np.testing.assert_array_equal(np.isnan(ds.X), removed)  # each removed value is missing, nothing else
    np.testing.assert_array_equal(ds.X[~removed], np.asarray(mq_fold1[1].X, dtype=np.float32)[~removed])
    zero = joined["opensearch", "zero", "test"]
    assert not np.isnan(zero.X).any() and np.all(zero.X[removed] == 0)
    solr = joined["solr", "dense", "test"]
    np.testing.assert_array_equal(solr.X, zero.X)  # Solr logs an absent feature at its default, 0.0


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_opensearch_xgboost_json_round_trip(joined, backend):
    """Trees trained on the log with NaN; the plugin (OpenSearch >= 3.8, ES-LTR main) follows each
    node's missing branch; the names in the definition are the log's."""
    model = _gbdt(backend, joined["opensearch", "nan", "train"])
    assert model.feature_names_ == NAMES
    export = to_opensearch(model, "xgboost+json")  # names from the log, none given
    assert export.feature_names == NAMES
    assert set(NAMES) >= {s for s in _split_names(export.definition)}
    test = joined["opensearch", "nan", "test"]
    assert np.isnan(test.X).any()
    _same_rankings(model, export, test.X, test.X, test.qid)
    assert parity_report(model, export, test.X, test.qid).passed


def _split_names(definition):
    out = set()

    def walk(node):
        if "split" in node:
            out.add(node["split"])
            for c in node["children"]:
                walk(c)

    for tree in json.loads(definition):
        walk(tree)
    return out


@pytest.mark.parametrize("backend", ["lightgbm", "xgboost"])
def test_opensearch_ranklib_round_trip(joined, backend):
    """RankLib sees an absent feature as 0.0: trained on the log read with missing_as_zero, the
    plugin scores the rows as logged (absent features unset) as predict scores them with 0.0."""
    model = _gbdt(backend, joined["opensearch", "zero", "train"])
    if backend == "lightgbm":  # no NaN in training: LightGBM's NaN rule is 0.0's, nothing to accept
        export = to_opensearch(model, "ranklib")
        assert not export.notes
    else:  # XGBoost's default branches are not 0.0's side; the rows never hold NaN, so accepted
        with pytest.raises(ExportError, match="model/ranklib sees an absent feature as 0.0"):
            to_opensearch(model, "ranklib")
        export = to_opensearch(model, "ranklib", missing="as_zero")
    logged, zero = joined["opensearch", "nan", "test"], joined["opensearch", "zero", "test"]
    _same_rankings(model, export, zero.X, logged.X, logged.qid)


@pytest.mark.parametrize("fmt", ["linear", "ranklib"])
def test_opensearch_linear_round_trip(joined, fmt):
    model = _linear(joined["opensearch", "zero", "train"])
    assert model.feature_names_ == NAMES
    export = to_opensearch(model, fmt, drop_intercept=True) if fmt == "linear" else to_opensearch(model, fmt)
    assert export.feature_names == NAMES
    logged, zero = joined["opensearch", "nan", "test"], joined["opensearch", "zero", "test"]
    _same_rankings(model, export, zero.X, logged.X, logged.qid)


@pytest.mark.parametrize("family", ["lightgbm", "xgboost", "linear"])
def test_solr_round_trip(joined, family):
    train, test = joined["solr", "dense", "train"], joined["solr", "dense", "test"]
    if family == "linear":
        model = _linear(train)
        export = to_solr(model, drop_intercept=True)
    else:
        model = _gbdt(family, train)
        export = to_solr(model, accept_inexact=True)  # splits at 0.0 / 1e-35 (logged defaults): values never logged
    assert export.feature_names == NAMES
    _same_rankings(model, export, test.X, test.X, test.qid)


def test_a_feature_set_that_differs_from_the_log_is_refused(joined):
    model = _linear(joined["opensearch", "zero", "train"])
    with pytest.raises(ExportError, match=r"2 name\(s\) the model was not trained on: \['title', 'body'\].*"
                                          r"2 model feature\(s\) missing: \['mq2008_1', 'mq2008_2'\]"):
        to_opensearch(model, "ranklib", feature_names=["title", "body"] + NAMES[2:])
    swapped = [NAMES[1], NAMES[0]] + NAMES[2:]
    with pytest.raises(ExportError, match="the same names in another order .column 0 of the model is 'mq2008_1', "
                                          "the feature set has 'mq2008_2' there"):
        to_solr(model, feature_names=swapped, drop_intercept=True)
    assert to_opensearch(model, "ranklib", feature_names=NAMES).feature_names == NAMES


def test_cli_train_on_the_log_then_export_with_check(logs, capsys, tmp_path):
    d, _ = logs
    model = tmp_path / "m.npz"
    code = main(["train", str(d / "train.os.json"), "--format", "opensearch", "--judgments", str(d / "train.qrels"),
                 "--qids", str(d / "train.qids"), "--model", "gbdt", "--param", "n_estimators=20",
                 "--seed", "0", "--out", str(model)])
    err = capsys.readouterr().err
    assert code == 0, err
    out = tmp_path / "createmodel.json"
    check = ["--check", str(d / "test.os.json"), "--data-format", "opensearch", "--judgments",
             str(d / "test.qrels"), "--qids", str(d / "test.qids")]
    code = main(["export", str(model), "--target", "opensearch", "--format", "xgboost+json", "--out", str(out),
                 *check])
    res = capsys.readouterr()
    assert code == 0, res.out + res.err
    assert "queries 156" in res.out and "identical rankings      100.00% of queries" in res.out
    definition = json.loads(out.read_text())["model"]["model"]["definition"]
    assert "PASSED" in res.out and _split_names(definition) <= set(NAMES)  # the log's names, none given
    # the plugin before OpenSearch 3.8 sends an absent feature right: the model's NaN branches are lost
    code = main(["export", str(model), "--target", "opensearch", "--out", str(out), *check,
                 "--plugin-missing", "right"])
    res = capsys.readouterr()
    assert code == 1 and "NOT PASSED" in res.out
    # a feature set in another order than the log's is refused by name
    names = tmp_path / "names.txt"
    names.write_text("\n".join([NAMES[1], NAMES[0]] + NAMES[2:]) + "\n")
    code = main(["export", str(model), "--target", "solr", "--out", str(out), "--feature-names", str(names)])
    res = capsys.readouterr()
    assert code == 2 and "the same names in another order" in res.err
