"""Feature logs of OpenSearch/Elasticsearch LTR, Solr and Vespa: read, joined with judgments, reported.

Two kinds of evidence: hand-written responses shaped as each engine writes them (the plugin's
``_ltrlog`` entries without ``value``, Solr's ``CSVFeatureLogger`` strings with Java floats,
Vespa's ``matchfeatures`` with ``vespa.summaryFeatures.cached``), and the MQ2008 Fold1 test rows
written as each engine's log with values removed, read back and compared with the rows
themselves (float64 bit for bit; Solr logs Java floats, so float32) and with rankwise's own
LETOR reader.
"""
from __future__ import annotations

import gzip
import json
import math
import re

import numpy as np
import pytest

from rankwise.data import join_judgments, read_feature_log, read_svmlight, write_feature_log, write_trec_qrels
from rankwise.data.feature_logs import _java_float
from rankwise.errors import InputError, ParseError


def _write(path, text, crlf=False):
    path.write_bytes((text.replace("\n", "\r\n") if crlf else text).encode("utf-8"))
    return path


# ------------------------------------------------------------------------------------------- OpenSearch
def _os_hit(doc, entries, qid=None):
    hit = {"_index": "tmdb", "_id": doc, "_score": 7.25, "fields": {"_ltrlog": [{"log_entry1": entries}]}}
    return hit if qid is None else {"qid": qid, **hit}


def test_opensearch_response_missing_values_and_order(tmp_path):
    # a feature without "value" is one the query did not produce (OpenSearch LTR logging docs)
    resp = {"took": 12, "hits": {"total": {"value": 3, "relation": "eq"}, "hits": [
        _os_hit("7555", [{"name": "title_query", "value": 9.510913}, {"name": "body_query"},
                         {"name": "popularity", "value": 1.2345678901234567e-07}]),
        _os_hit("1370", [{"name": "title_query", "value": 0.0}, {"name": "body_query", "value": 11.083446},
                         {"name": "popularity", "value": 3.0e+21}]),
        _os_hit("é-日本-1", [{"name": "title_query"}, {"name": "body_query"},
                            {"name": "popularity", "value": -0.0}]),
    ]}}
    p = _write(tmp_path / "rambo.json", json.dumps(resp, indent=2))
    log = read_feature_log(p, "opensearch", qid=["rambo"])
    assert log.feature_names == ["title_query", "body_query", "popularity"]
    assert log.doc_ids.tolist() == ["7555", "1370", "é-日本-1"]
    assert log.qids.tolist() == ["rambo"] * 3
    nan = math.nan
    expected = np.array([[9.510913, nan, 1.2345678901234567e-07], [0.0, 11.083446, 3.0e+21], [nan, nan, -0.0]])
    np.testing.assert_array_equal(log.values, expected)
    assert np.signbit(log.values[2, 2])
    zero = read_feature_log(p, "elasticsearch", qid=["rambo"], missing_as_zero=True)
    np.testing.assert_array_equal(zero.values, np.nan_to_num(expected, nan=0.0))
    # a fixed feature order (the feature set's) permutes the columns
    fs = {"featureset": {"features": [{"name": n, "params": ["keywords"], "template": {}}
                                      for n in ("popularity", "title_query", "body_query")]}}
    ordered = read_feature_log(p, "opensearch", qid=["rambo"], feature_names=fs)
    assert ordered.feature_names == ["popularity", "title_query", "body_query"]
    np.testing.assert_array_equal(ordered.values, expected[:, [2, 0, 1]])


def test_opensearch_msearch_ndjson_hits_and_log_names(tmp_path):
    entries = [{"name": "a", "value": 1.5}, {"name": "b"}]
    msearch = {"took": 5, "responses": [{"hits": {"hits": [_os_hit("d1", entries), _os_hit("d2", entries)]}},
                                        {"hits": {"hits": [_os_hit("d1", entries)]}}]}
    p = _write(tmp_path / "m.json", json.dumps(msearch))
    log = read_feature_log(p, "opensearch", qid=["101", "102"])
    assert log.qids.tolist() == ["101", "101", "102"] and log.doc_ids.tolist() == ["d1", "d2", "d1"]
    assert read_feature_log(p, "opensearch").qids.tolist() == ["0", "0", "1"]  # response order
    with pytest.raises(InputError, match=r"m.json: qid= lists 3 query ids but the log has 2 responses"):
        read_feature_log(p, "opensearch", qid=["101", "102", "103"])
    # NDJSON of hits with CRLF line ends, a blank line, and the query id carried beside each hit
    lines = [json.dumps(_os_hit("d1", entries, qid="q1")), json.dumps(_os_hit("d9", entries, qid="q2")), "",
             json.dumps(_os_hit("d2", entries, qid="q1"))]
    p = _write(tmp_path / "hits.ndjson", "\n".join(lines) + "\n", crlf=True)
    log = read_feature_log(p, "opensearch", qid="qid")
    assert log.qids.tolist() == ["q1", "q2", "q1"] and log.where[2] == f"{p}:4"
    with pytest.raises(ParseError, match=r"hits.ndjson:1: hit: a hit on its own line carries no query"):
        read_feature_log(p, "opensearch")
    # script features' extra_logging map (LoggingFetchSubPhase appends it to the entries) is not a feature
    extra = _os_hit("d1", entries + [{"name": "extra_logging", "value": {"terms": 3, "doc_freq": 1.5e4}}])
    p = _write(tmp_path / "extra.json", json.dumps({"hits": {"hits": [extra]}}))
    assert read_feature_log(p, "opensearch").feature_names == ["a", "b"]
    # two log specs (the plugin puts both in the one map of _ltrlog): choose one by name
    two = _os_hit("d1", entries)
    two["fields"]["_ltrlog"][0]["log_entry2"] = [{"name": "c", "value": 2.0}]
    p = _write(tmp_path / "two.json", json.dumps({"hits": {"hits": [two]}}))
    with pytest.raises(ParseError, match=r"two.json:1: response 1, hit 1: fields._ltrlog holds the logs "
                                         r"\['log_entry1', 'log_entry2'\]; pass log_name="):
        read_feature_log(p, "opensearch")
    assert read_feature_log(p, "opensearch", log_name="log_entry2").feature_names == ["c"]


@pytest.mark.parametrize("body, message", [
    ('{"hits": {"hits": [{"_id": "x", "_score": 1.0}]}}', r"hit 1: no fields._ltrlog: was the search sent with ext"),
    ('{"hits": {"hits": [{"_id": "x", "fields": {"_ltrlog": [{"l": [{"name": "a", "value": "9.5"}]}]}}]}}',
     r"hit 1: feature 'a': expected a number; got str \"9.5\""),
    ('{"hits": {"hits": [{"_id": "x", "fields": {"_ltrlog": [{"l": [{"name": "a", "value": 1e999}]}]}}]}}',
     r"feature 'a': value inf is infinite"),
    ('{"hits": {"hits": [{"_id": "x", "fields": {"_ltrlog": [{"l": [{"name": "a"}, {"name": "a"}]}]}}]}}',
     r"hit 1: feature 'a' is logged twice in one hit"),
    ('{"hits": {"hits": [{"fields": {"_ltrlog": [{"l": [{"name": "a"}]}]}}]}}', r"no document id at '_id'"),
    ('{"error": {"type": "parsing_exception"}, "status": 400}',
     r"bad.json:1: response 1: the search failed: \{\"type\": \"parsing_exception\"\}"),
    ('{"hits": {"hits": [\n  {"_id": "x",\n   "fields": }\n]}}', r"bad.json:3: not JSON \(Expecting value"),
])
def test_opensearch_errors_name_the_place(tmp_path, body, message):
    p = _write(tmp_path / "bad.json", body)
    with pytest.raises(ParseError, match=message) as info:
        read_feature_log(p, "opensearch", qid=["q"])
    assert str(info.value).startswith(str(p))


def test_ndjson_error_names_the_line(tmp_path):
    good = json.dumps(_os_hit("d1", [{"name": "a", "value": 1.0}], qid="q"))
    p = _write(tmp_path / "h.ndjson", "\n".join([good, good.replace('"d1"', '"d2"'), good[:-9]]) + "\n", crlf=True)
    with pytest.raises(ParseError, match=r"h.ndjson:3: not JSON"):
        read_feature_log(p, "opensearch", qid="qid")
    p = _write(tmp_path / "u.ndjson", good.replace('"name": "a"', '"name": "zz"') + "\n")
    with pytest.raises(ParseError, match=r"u.ndjson:1: hit: feature 'zz' is not in feature_names \(1 names"):
        read_feature_log(p, "opensearch", qid="qid", feature_names=["a"])
    ignored = read_feature_log(p, "opensearch", qid="qid", feature_names=["a"], unknown_features="ignore",
                               absent_features="nan")
    assert ignored.feature_names == ["a"] and np.isnan(ignored.values).tolist() == [[True]]


def test_duplicate_hits(tmp_path):
    a = _os_hit("d1", [{"name": "a", "value": 0.1}, {"name": "b"}], qid="q")
    b = _os_hit("d1", [{"name": "a", "value": 0.2}, {"name": "b"}], qid="q")
    p = _write(tmp_path / "dup.ndjson", "\n".join(json.dumps(h) for h in (a, a, b)) + "\n")
    with pytest.raises(ParseError, match=r"dup.ndjson:3: hit: document 'd1' of query 'q' is logged again with other "
                                         r"values \(first at .*dup.ndjson:1\); pass duplicates="):
        read_feature_log(p, "opensearch", qid="qid")
    first = read_feature_log(p, "opensearch", qid="qid", duplicates="first")
    last = read_feature_log(p, "opensearch", qid="qid", duplicates="last")
    assert first.values[0, 0] == 0.1 and last.values[0, 0] == 0.2 and len(first) == len(last) == 1
    assert [d[3] for d in first.duplicates] == [f"{p}:1", f"{p}:1"]
    # the kept hit is the one whose place an error names
    c = _os_hit("d1", [{"name": "a", "value": 0.3}], qid="q")
    p = _write(tmp_path / "last.ndjson", "\n".join(json.dumps(h) for h in (a, c)) + "\n")
    with pytest.raises(ParseError, match=r"last.ndjson:2: hit: \['b'\] is not logged for this hit"):
        read_feature_log(p, "opensearch", qid="qid", duplicates="last")
    p = _write(tmp_path / "same.ndjson", "\n".join(json.dumps(h) for h in (a, a)) + "\n")
    same = read_feature_log(p, "opensearch", qid="qid")  # identical repeats are dropped and listed
    assert len(same) == 1 and same.duplicates == [("q", "d1", f"{p}:2", f"{p}:1")]


# ------------------------------------------------------------------------------------------------- Solr
def _solr(docs, qid="q1"):
    return {"responseHeader": {"status": 0, "QTime": 4, "params": {"q": "test", "qid": qid,
                                                                   "fl": "id,score,[features store=s1]"}},
            "response": {"numFound": len(docs), "start": 0, "docs": docs}}


def test_java_float_strings():
    # Float.toString: decimal in [1e-3, 1e7), else computerized scientific notation; shortest digits
    cases = [(1e-4, "1.0E-4"), (0.001, "0.001"), (1e7, "1.0E7"), (123456.7, "123456.7"), (5.0, "5.0"),
             (-2.5e-5, "-2.5E-5"), (3.4028234663852886e38, "3.4028235E38"), (9999999.0, "9999999.0"), (0.0, "0.0"),
             (-0.0, "-0.0")]
    for v, s in cases:
        assert _java_float(v) == s
    assert _java_float(math.nan) == "NaN" and _java_float(1e39) == "Infinity" and _java_float(-1e39) == "-Infinity"
    with pytest.raises(InputError, match=r"beyond float32's range; Solr logs Java floats"):
        write_feature_log("never-written", "solr", [[1e39]], ["q"], ["d"])
    f32 = np.random.default_rng(3).standard_normal(2000).astype(np.float32) * np.float32(10.0) ** \
        np.random.default_rng(4).integers(-30, 30, 2000).astype(np.float32)
    assert all(np.float32(float(_java_float(float(v)))) == v for v in f32)


def test_solr_dense_sparse_and_separators(tmp_path):
    docs = [{"id": "GX001", "score": 3.5, "[features]": "matchedTitle=1.0,origScore=4.1234565E-5,popularity=NaN"},
            {"id": "GX002", "score": 2.0, "[features]": "matchedTitle=0.0,origScore=123456.7,popularity=7.0"}]
    p = _write(tmp_path / "solr.json", json.dumps(_solr(docs), indent=1), crlf=True)
    log = read_feature_log(p, "solr", qid="responseHeader.params.qid")
    assert log.feature_names == ["matchedTitle", "origScore", "popularity"] and log.qids.tolist() == ["q1", "q1"]
    expected = np.array([[1.0, np.float32(4.1234565e-5), np.nan], [0.0, np.float32(123456.7), 7.0]])
    np.testing.assert_array_equal(log.values, expected)
    # sparse: features at their default value are left out (CSVFeatureLogger)
    sparse = [{"id": "a", "[features]": "origScore=2.5"}, {"id": "b", "[features]": ""}]
    p = _write(tmp_path / "sparse.json", json.dumps(_solr(sparse)))
    names = ["matchedTitle", "origScore"]
    log = read_feature_log(p, "solr", qid=["q"], features_format="sparse", feature_names=names)
    np.testing.assert_array_equal(log.values, [[0.0, 2.5], [0.0, 0.0]])
    log = read_feature_log(p, "solr", qid=["q"], features_format="sparse", feature_names=names,
                           default={"matchedTitle": -1.0})
    np.testing.assert_array_equal(log.values, [[-1.0, 2.5], [-1.0, 0.0]])
    with pytest.raises(ParseError, match=r"sparse.json:1: response 1, hit 2: a dense Solr log lists every feature, "
                                         r"but \['origScore'\] is absent; pass features_format='sparse'"):
        read_feature_log(p, "solr", qid=["q"])
    failed = {"responseHeader": {"status": 400}, "error": {"msg": "Missing feature store: s9", "code": 400}}
    p = _write(tmp_path / "failed.json", json.dumps(failed))
    with pytest.raises(ParseError, match=r"failed.json:1: response 1: the Solr request failed: .*Missing feature"):
        read_feature_log(p, "solr", qid=["q"])
    grouped = {"responseHeader": {"status": 0}, "grouped": {"site": {"matches": 2, "groups": []}}}
    p = _write(tmp_path / "grouped.json", json.dumps(grouped))
    with pytest.raises(ParseError, match=r"grouped.json:1: response 1: a grouped Solr response \(group=true\)"):
        read_feature_log(p, "solr", qid=["q"])
    # a transformer configured with csvKeyValueDelimiter=":" csvFeatureSeparator=" "
    other = [{"id": "a", "fv": "a:0.1 b:0.2"}]
    p = _write(tmp_path / "colon.json", json.dumps(_solr(other)))
    with pytest.raises(ParseError, match=r"colon.json:1: response 1, hit 1: no '\[features\]' field"):
        read_feature_log(p, "solr", qid=["q"])
    with pytest.raises(ParseError, match=r"'fv': expected name=value pairs separated by ','; got 'a:0.1 b:0.2'"):
        read_feature_log(p, "solr", qid=["q"], field="fv")
    log = read_feature_log(p, "solr", qid=["q"], field="fv", key_value_sep=":", feature_sep=" ")
    np.testing.assert_array_equal(log.values, [[np.float32(0.1), np.float32(0.2)]])


# ------------------------------------------------------------------------------------------------ Vespa
def _vespa(children):
    return {"root": {"id": "toplevel", "relevance": 1.0, "fields": {"totalCount": len(children)},
                     "coverage": {"coverage": 100, "documents": 1000, "full": True, "nodes": 2, "results": 1,
                                  "resultsFull": 1}, "children": children}}


def test_vespa_matchfeatures_and_summaryfeatures(tmp_path):
    kids = [{"id": "id:msmarco:passage::D1", "relevance": 21.2, "source": "msmarco",
             "fields": {"matchfeatures": {"bm25(title)": 4.561234567890123, "attribute(popularity)": "NaN",
                                          "nativeRank(body)": 2.2250738585072014e-308}}},
            {"id": "id:msmarco:passage::D2", "relevance": 20.0, "source": "msmarco",
             "fields": {"matchfeatures": {"bm25(title)": 0, "attribute(popularity)": None,
                                          "nativeRank(body)": 1e-300}}}]
    p = _write(tmp_path / "v.json", json.dumps(_vespa(kids)))
    log = read_feature_log(p, "vespa", qid=["q7"], doc_id=lambda h: h["id"].split("::", 1)[1])
    assert log.doc_ids.tolist() == ["D1", "D2"] and log.feature_names[0] == "bm25(title)"
    np.testing.assert_array_equal(log.values, [[4.561234567890123, np.nan, 2.2250738585072014e-308],
                                               [0.0, np.nan, 1e-300]])
    summ = [{"id": "id:a:b::X", "fields": {"summaryfeatures": {"fieldMatch(title)": 0.5,
                                                               "vespa.summaryFeatures.cached": 0.0}}}]
    p = _write(tmp_path / "s.json", json.dumps(_vespa(summ)))
    log = read_feature_log(p, "vespa", qid=["q"])
    assert log.feature_names == ["fieldMatch(title)"] and log.doc_ids.tolist() == ["X"]
    assert read_feature_log(p, "vespa", qid=["q"], doc_id="id").doc_ids.tolist() == ["id:a:b::X"]
    with pytest.raises(ParseError, match=r"s.json:1: response 1, hit 1: doc_id= \(<lambda>\) failed on this hit: "
                                         r"KeyError: 'docid'"):
        read_feature_log(p, "vespa", qid=["q"], doc_id=lambda hit: hit["fields"]["docid"])
    tensor = [{"id": "id:a:b::X", "fields": {"matchfeatures": {"t": {"type": "tensor(x[2])", "values": [1, 2]}}}}]
    p = _write(tmp_path / "t.json", json.dumps(_vespa(tensor)))
    with pytest.raises(ParseError, match=r"t.json:1: response 1, hit 1: feature 't' is a tensor"):
        read_feature_log(p, "vespa", qid=["q"])
    p = _write(tmp_path / "e.json", json.dumps({"root": {"id": "toplevel", "errors": [
        {"code": 4, "summary": "Invalid query parameter", "message": "Could not resolve rank profile 'ltr'"}]}}))
    with pytest.raises(ParseError, match=r"e.json:1: response 1: the Vespa response reports errors: .*rank profile"):
        read_feature_log(p, "vespa", qid=["q"])


# --------------------------------------------------------------------------------------------- joining
def _small_log(tmp_path):
    hits = [_os_hit(d, [{"name": "a", "value": v}, {"name": "b"}], qid=q)
            for q, d, v in [("q1", "d1", 0.5), ("q2", "x", 0.25), ("q1", "d2", 1.5), ("q1", "d3", 2.5),
                            ("q3", "z", 0.0)]]
    return read_feature_log(_write(tmp_path / "h.ndjson", "\n".join(json.dumps(h) for h in hits)), "opensearch",
                            qid="qid")


def test_join_every_judgment_source_agrees(tmp_path):
    pd = pytest.importorskip("pandas")
    log = _small_log(tmp_path)
    judg = {"q1": {"d1": 2, "d3": 0, "d9": 1}, "q2": {"x": 1}, "q4": {"w": 3}}
    write_trec_qrels(judg, tmp_path / "qrels.txt")
    _write(tmp_path / "j.csv", "qid,docid,grade\nq1,d1,2\nq1,d3,0\nq1,d9,1\nq2,x,1\nq4,w,3\n", crlf=True)
    frame = pd.DataFrame([(q, d, g) for q, ds in judg.items() for d, g in ds.items()],
                         columns=["qid", "docno", "rel"])
    results = [join_judgments(log, j) for j in (judg, tmp_path / "qrels.txt", tmp_path / "j.csv", frame)]
    for ds, rep in results:
        assert ds.query_ids.tolist() == ["q1", "q2"]
        assert ds.doc_ids.tolist() == ["d1", "d3", "x"] and ds.labels.tolist() == [2.0, 0.0, 1.0]
        np.testing.assert_array_equal(ds.X, np.array([[0.5, np.nan], [2.5, np.nan], [0.25, np.nan]], np.float32))
        assert ds.feature_names == ["a", "b"]
        assert [u[:2] for u in rep.unjudged] == [("q1", "d2"), ("q3", "z")]
        assert rep.unjudged[0][2] == f"{tmp_path / 'h.ndjson'}:3"
        assert rep.unlogged == [("q1", "d9", 1), ("q4", "w", 3)]
        assert rep.queries_not_logged == ["q4"] and rep.queries_dropped == ["q3"]
        assert rep.missing_per_feature == {"a": 0, "b": 3}
        assert "unjudged hits: 2 (dropped)" in str(rep) and "judged documents never logged: 2" in str(rep)
    ds, rep = join_judgments(log, judg, unjudged=0)
    assert ds.doc_ids.tolist() == ["d1", "d2", "d3", "x", "z"] and ds.labels.tolist() == [2, 0, 0, 1, 0]
    assert rep.unjudged_action == "kept with grade 0" and rep.queries_dropped == []


def test_join_trec_negative_grade_is_unjudged_and_errors(tmp_path):
    log = _small_log(tmp_path)
    _write(tmp_path / "q.txt", "q1 0 d1 -1\nq1 0 d2 1\n")
    ds, rep = join_judgments(log, tmp_path / "q.txt")
    assert ds.doc_ids.tolist() == ["d2"] and ("q1", "d1", f"{tmp_path / 'h.ndjson'}:1") in rep.unjudged
    _write(tmp_path / "bad.csv", "qid,docid,grade\nq1,d1,2\nq1,d1,1\n")
    with pytest.raises(ParseError, match=r"bad.csv:3: document 'd1' of query 'q1' is judged twice"):
        join_judgments(log, tmp_path / "bad.csv")
    _write(tmp_path / "cols.csv", "query,doc\nq1,d1\n")
    with pytest.raises(InputError, match=r"cols.csv: needs columns qid, docid, grade"):
        join_judgments(log, tmp_path / "cols.csv")
    with pytest.raises(InputError, match=r"no logged hit has a judgment .* do the query and document ids"):
        join_judgments(log, {"Q1": {"D1": 1}})
    with pytest.raises(InputError, match=r"unjudged must be 'drop' or a finite grade; got 'zero'"):
        join_judgments(log, {"q1": {"d1": 1}}, unjudged="zero")


# ------------------------------------------------------------------------ MQ2008 Fold1 test, every engine
@pytest.fixture(scope="module")
def mq_rows(mq2008_dir):
    """Fold1 test as float64 rows (scikit-learn's reader), doc ids, and a few ids made unicode."""
    from sklearn.datasets import load_svmlight_file

    path = mq2008_dir / "Fold1" / "test.txt.gz"
    X, y, q = load_svmlight_file(str(path), query_id=True, dtype=np.float64)
    with gzip.open(path, "rt") as f:
        docs = np.array([re.search(r"#docid = (\S+)", line).group(1) for line in f])
    docs[::97] = [f"{d}-é日本" for d in docs[::97]]
    X = X.toarray()
    rng = np.random.default_rng(2508)
    # full-precision and scientific-notation values beside MQ2008's six decimals
    X[:, 0] = X[:, 0] * rng.random(len(X)) / 3.0
    X[:, 1] = X[:, 1] * 10.0 ** rng.integers(-30, 30, len(X))
    return X, y, q.astype(str), docs, rng.random(X.shape) < 0.07, read_svmlight(path)


@pytest.mark.realdata
@pytest.mark.parametrize("fmt, kwargs", [("opensearch", {}), ("opensearch", {"layout": "hits", "crlf": True}),
                                         ("elasticsearch", {"layout": "responses", "missing_as_zero": True}),
                                         ("solr", {}), ("solr", {"features_format": "sparse", "crlf": True}),
                                         ("vespa", {})])
def test_mq2008_round_trip(tmp_path, mq_rows, fmt, kwargs):
    X, y, q, docs, removed, letor = mq_rows
    names = [f"mq_{k + 1}" for k in range(X.shape[1])]
    order = write_feature_log(tmp_path / "log", fmt, X, q, docs, feature_names=names, remove=removed, **kwargs)
    read_kw = {"qid": order}
    if kwargs.get("layout") == "hits":
        read_kw = {"qid": "qid"}
    if fmt == "solr":
        read_kw = {"qid": "responseHeader.params.qid", "feature_names": names,
                   "features_format": kwargs.get("features_format", "dense")}
    if fmt == "vespa":
        read_kw["doc_id"] = lambda hit: hit["id"].split("::", 1)[1]
    log = read_feature_log(tmp_path / "log", fmt, missing_as_zero=kwargs.get("missing_as_zero", False), **read_kw)
    if fmt == "solr":  # Solr logs Java floats and has no missing value: the feature's default, 0.0
        expected = np.where(removed, 0.0, X.astype(np.float32).astype(np.float64))
    else:
        expected = np.where(removed, 0.0 if kwargs.get("missing_as_zero") else np.nan, X)
    assert log.values.dtype == np.float64 and log.feature_names == names
    np.testing.assert_array_equal(log.values, expected)  # bit for bit (NaN where removed)
    assert log.qids.tolist() == q.tolist() and log.doc_ids.tolist() == docs.tolist()
    if kwargs.get("layout") == "hits":  # the same hits logged again (a retried batch) are listed, not doubled
        lines = (tmp_path / "log").read_bytes().split(b"\r\n")
        with open(tmp_path / "log", "ab") as fh:
            fh.write(b"\r\n".join([lines[4], lines[100], lines[4]]) + b"\r\n")
        log = read_feature_log(tmp_path / "log", fmt, missing_as_zero=kwargs.get("missing_as_zero", False),
                               **read_kw)
        np.testing.assert_array_equal(log.values, expected)
        n = len(X)
        assert [(d[0], d[1], d[3]) for d in log.duplicates] == [(q[4], docs[4], f"{tmp_path / 'log'}:5"),
                                                                 (q[100], docs[100], f"{tmp_path / 'log'}:101"),
                                                                 (q[4], docs[4], f"{tmp_path / 'log'}:5")]
        assert [d[2] for d in log.duplicates] == [f"{tmp_path / 'log'}:{n + k}" for k in (1, 2, 3)]

    # judgments written as TREC qrels, with a third of query 1's judgments dropped and two documents never logged
    qrels = {}
    for qq, d, g in zip(q.tolist(), docs.tolist(), y.astype(int).tolist()):
        qrels.setdefault(qq, {})[d] = g
    first = q[0]
    dropped = list(qrels[first])[::3]
    for d in dropped:
        del qrels[first][d]
    qrels[first]["never-logged-1"] = 2
    qrels.setdefault("9999", {})["never-logged-2"] = 1
    write_trec_qrels(qrels, tmp_path / "qrels")
    ds, rep = join_judgments(log, tmp_path / "qrels")
    keep = ~((q == first) & np.isin(docs, dropped))
    np.testing.assert_array_equal(ds.X, expected[keep].astype(np.float32))
    assert ds.labels.tolist() == y[keep].tolist() and ds.doc_ids.tolist() == docs[keep].tolist()
    assert ds.query_ids.tolist() == [str(v) for v in letor.query_ids.tolist()]
    assert [u[:2] for u in rep.unjudged] == [(first, d) for d in dropped]
    assert sorted(rep.unlogged) == [(first, "never-logged-1", 2), ("9999", "never-logged-2", 1)]
    assert rep.queries_not_logged == ["9999"] and rep.n_hits == len(X) and rep.n_rows == keep.sum()
    missing = np.isnan(expected[keep]).sum(axis=0)
    assert list(rep.missing_per_feature.values()) == missing.tolist()
    if missing.any():
        top = np.argsort(-missing, kind="stable")[:5]
        assert (f"missing values: {missing.sum()} in {(missing > 0).sum()} features (most: "
                + ", ".join(f"{names[k]}={missing[k]}" for k in top)) in str(rep)
    if fmt != "solr":  # the data set holds what rankwise's LETOR reader reads, NaN where removed
        full = letor.X.copy()
        full[removed] = 0.0 if kwargs.get("missing_as_zero") else np.nan
        np.testing.assert_array_equal(ds.X[:, 2:], full[keep][:, 2:])


def test_solr_feature_store_fixture_gives_the_order(data_dir, tmp_path):
    """Solr's own feature-store test files (serving_fixtures/solr_ltr) name the columns."""
    stores = data_dir / "serving_fixtures" / "solr_ltr" / "featureExamples"
    if not stores.is_dir():
        pytest.skip(f"Solr fixtures absent: expected {stores}")
    names = [f["name"] for f in json.loads((stores / "multipleadditivetreesmodel_features.json").read_text())]
    docs = [{"id": "1", "[features]": "userDevice=0.0,matchedTitle=1.0"}]
    p = _write(tmp_path / "s.json", json.dumps(_solr(docs)))
    log = read_feature_log(p, "solr", qid=["q"], feature_names=stores / "multipleadditivetreesmodel_features.json",
                           features_format="sparse")
    assert log.feature_names == names and names[0] == "matchedTitle"
    np.testing.assert_array_equal(log.values, [[1.0, 0.0, 0.0]])
    mixed = stores / "featurevectorcache_features.json"
    with pytest.raises(InputError, match=r"holds the stores \['_DEFAULT_', 'store1'\]; pass feature_store="):
        read_feature_log(p, "solr", qid=["q"], feature_names=mixed)
    entries = json.loads(mixed.read_text())
    log = read_feature_log(p, "solr", qid=["q"], feature_names=mixed, feature_store="_DEFAULT_",
                           features_format="sparse", unknown_features="ignore")
    assert log.feature_names == [f["name"] for f in entries if "store" not in f]


def test_ids_from_paths_long_lists_and_gzip(tmp_path):
    n = 3000  # one long result list, as a deep logging search returns it
    rng = np.random.default_rng(7)
    vals = rng.standard_normal(n) * 10.0 ** rng.integers(-12, 12, n)
    hits = [{"_id": f"doc-{k}", "fields": {"qid": ["topic-1"], "_ltrlog": [{"l": [{"name": "x", "value": v}]}]}}
            for k, v in enumerate(vals.tolist())]
    text = json.dumps({"hits": {"hits": hits}}, indent=1)
    p = tmp_path / "deep.json.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        fh.write(text)
    for path in ("fields.qid.0", "fields.qid"):
        log = read_feature_log(p, "opensearch", qid=path)
        assert log.qids.tolist() == ["topic-1"] * n
        np.testing.assert_array_equal(log.values[:, 0], vals)
    with pytest.raises(ParseError, match=r"deep.json.gz: response 1, hit 1: no query id at 'fields.topic'"):
        read_feature_log(p, "opensearch", qid="fields.topic")


def test_a_feature_absent_from_a_hit_is_a_mismatched_feature_set(tmp_path):
    hits = [_os_hit("d1", [{"name": "a", "value": 1.0}, {"name": "b"}]), _os_hit("d2", [{"name": "a", "value": 2.0}])]
    p = _write(tmp_path / "a.json", json.dumps({"hits": {"hits": hits}}, indent=2))
    with pytest.raises(ParseError, match=r"a.json: response 1, hit 2: \['b'\] is not logged for this hit \(the plugin "
                                         r"lists every feature of the set, a missing one without value\)"):
        read_feature_log(p, "opensearch", qid=["q"])
    with pytest.raises(ParseError, match=r"response 1, hit 1: \['c'\] is not logged for this hit"):
        read_feature_log(p, "opensearch", qid=["q"], feature_names=["a", "b", "c"])
    log = read_feature_log(p, "opensearch", qid=["q"], absent_features="nan")
    np.testing.assert_array_equal(log.values, [[1.0, np.nan], [2.0, np.nan]])
    kids = [{"id": "id:a:b::1", "fields": {"matchfeatures": {"x": 1.0, "y": 2.0}}},
            {"id": "id:a:b::2", "fields": {"matchfeatures": {"y": 2.5}}}]
    p = _write(tmp_path / "v.json", json.dumps(_vespa(kids)))
    with pytest.raises(ParseError, match=r"v.json:1: response 1, hit 2: \['x'\] is not logged for this hit \(a rank "
                                         r"profile's match-features are the same for every hit\)"):
        read_feature_log(p, "vespa", qid=["q"])


# --------------------------------------------------------------------------------- property and mutation tests
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rankwise.errors import RankwiseError  # noqa: E402

_JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=True)
                     | st.text(max_size=8), lambda kids: st.lists(kids, max_size=3)
                     | st.dictionaries(st.text(max_size=6), kids, max_size=3), max_leaves=6)
_READ = {"opensearch": dict(qid=["q1", "q2"]), "solr": dict(qid="responseHeader.params.qid"),
         "vespa": dict(qid=["q1", "q2"])}


def _valid_log(fmt, tmp_path):
    X = np.array([[0.5, 1e-7, 3.0], [2.0, 0.0, -1.25], [7.0, 8.5, 1e300 if fmt != "solr" else 1e30]])
    write_feature_log(tmp_path / "base", fmt, X, ["q1", "q1", "q2"], ["a", "b", "c"],
                      remove=np.array([[False, True, False], [False, False, False], [True, False, False]]))
    return (tmp_path / "base").read_text(encoding="utf-8")


def _nodes(obj, path=()):
    yield path
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        yield from _nodes(v, path + (k,))


@pytest.mark.parametrize("fmt", ["opensearch", "solr", "vespa"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_logs_are_read_or_refused_with_a_rankwise_error(tmp_path, fmt, data):
    """Any node of a valid log replaced by any JSON value (or the text cut anywhere): a FeatureLog or a
    RankwiseError with the file's name, never another exception."""
    text = _valid_log(fmt, tmp_path)
    docs = [json.loads(line) for line in text.splitlines()]
    k = data.draw(st.integers(0, len(docs) - 1))
    if data.draw(st.booleans()):
        paths = list(_nodes(docs[k]))
        target = data.draw(st.sampled_from(paths[1:]))
        parent = docs[k]
        for key in target[:-1]:
            parent = parent[key]
        parent[target[-1]] = data.draw(_JSON)
        out = "\n".join(json.dumps(d) for d in docs)
    else:
        out = text[:data.draw(st.integers(0, len(text) - 1))]
    p = tmp_path / "mutated.ndjson"
    p.write_text(out, encoding="utf-8")
    try:
        log = read_feature_log(p, fmt, **_READ[fmt])
    except RankwiseError as exc:
        assert str(p) in str(exc)
        return
    assert log.values.shape[1] == len(log.feature_names) and not np.isinf(log.values).any()
    assert len(log.qids) == len(log.doc_ids) == len(log.values) == len(log.where)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_rows=st.integers(1, 30), n_features=st.integers(1, 6), seed=st.integers(0, 2**31 - 1),
       fmt=st.sampled_from(["opensearch", "solr", "vespa"]), crlf=st.booleans())
def test_round_trip_random_rows(tmp_path, n_rows, n_features, seed, fmt, crlf):
    """Random rows with NaN removals, ragged queries and tiny/huge magnitudes read back exactly."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, n_features)) * 10.0 ** rng.integers(-300, 300, (n_rows, n_features))
    if fmt == "solr":
        X = rng.standard_normal((n_rows, n_features)) * 10.0 ** rng.integers(-30, 30, (n_rows, n_features))
    q = np.sort(rng.integers(0, 4, n_rows)).astype(str)
    docs = np.array([f"d{k}-ü" for k in range(n_rows)])
    removed = rng.random(X.shape) < 0.3
    kw = {"layout": "hits"} if fmt == "opensearch" and seed % 2 else {}
    order = write_feature_log(tmp_path / "r", fmt, X, q, docs, remove=removed, crlf=crlf, **kw)
    qid = "qid" if kw else ("responseHeader.params.qid" if fmt == "solr" else order)
    log = read_feature_log(tmp_path / "r", fmt, qid=qid)
    if fmt == "solr":
        expected = np.where(removed, 0.0, X.astype(np.float32).astype(np.float64))
    else:
        expected = np.where(removed, np.nan, X)
    cols = [int(n[1:]) - 1 for n in log.feature_names]  # a feature removed everywhere is not seen at all
    np.testing.assert_array_equal(log.values, expected[:, cols])
    assert log.qids.tolist() == q.tolist() and log.doc_ids.tolist() == docs.tolist()


def test_write_from_a_dataset_with_a_share_removed(tmp_path):
    from rankwise.data import make_synthetic

    ds = make_synthetic(12, n_features=4, list_length=(3, 9), seed=5)
    ds.feature_names = ["w", "x", "y", "z"]
    order = write_feature_log(tmp_path / "a.json", "opensearch", ds, remove=0.25, seed=9)
    mask = np.random.default_rng(9).random(ds.X.shape) < 0.25
    write_feature_log(tmp_path / "b.json", "opensearch", ds.X, ds.qid, [f"e{k}" for k in range(len(ds))],
                      feature_names=ds.feature_names, remove=mask)
    a = read_feature_log(tmp_path / "a.json", "opensearch", qid=order)
    b = read_feature_log(tmp_path / "b.json", "opensearch", qid=order)
    np.testing.assert_array_equal(a.values, b.values)
    assert a.feature_names == ["w", "x", "y", "z"] and np.isnan(a.values).sum() == mask.sum() > 0
    np.testing.assert_array_equal(a.values, np.where(mask, np.nan, ds.X.astype(np.float64)))
    within = np.arange(len(ds)) - np.repeat(ds.query_offsets[:-1], ds.query_sizes)
    assert a.doc_ids.tolist() == [f"d{k}" for k in within.tolist()]
    with pytest.raises(InputError, match=r"remove as a share of the values must be in \[0, 1\); got 1.5"):
        write_feature_log(tmp_path / "c.json", "opensearch", ds, remove=1.5)
    with pytest.raises(InputError, match=r"needs qid= and doc_ids="):
        write_feature_log(tmp_path / "c.json", "opensearch", ds.X)
