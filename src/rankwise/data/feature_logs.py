"""Feature logs from search engines, joined with judgments into a :class:`RankingDataset`.

Three producers, read as their own sources write them:

- **OpenSearch / Elasticsearch LTR plugin** (``format="opensearch"``, alias ``"elasticsearch"``):
  each hit of a search logged with ``ext.ltr_log`` carries
  ``fields._ltrlog = [{"<log name>": [{"name": f, "value": v}, {"name": g}, ...]}]`` with one
  entry per feature of the set, in its order (``LoggingFetchSubPhase``); the values are float32
  scores; an entry without ``value`` is a feature the query did not produce (missing, NaN here;
  the logging option ``missing_as_zero`` makes the plugin write 0 instead, and
  ``missing_as_zero=True`` here reads a value-less entry as 0). The ``extra_logging`` entry that
  script features may add (a map, not a feature) is left out. Input: one search response, an ``_msearch`` response
  (``{"responses": [...]}``), or NDJSON of responses or of hits.
- **Solr** ``[features]`` transformer (``format="solr"``): each document of ``response.docs``
  carries a string ``name=value,name=value`` (``CSVFeatureLogger``: the key-value and feature
  separators are the transformer's ``csvKeyValueDelimiter`` / ``csvFeatureSeparator``, default
  ``=`` and ``,``). ``format=dense`` (the default) lists every feature of the store;
  ``format=sparse`` leaves out the features at their default value. Values are Java floats
  (``Float.toString``: ``0.25``, ``1.0E-4``, ``NaN``) and are kept as float32 values.
- **Vespa** (``format="vespa"``): ``root.children[].fields.matchfeatures`` (or
  ``summaryfeatures``) ``{"feature name": number}``, double precision; ``"NaN"`` and ``null``
  are missing values; Vespa's own ``vespa.*`` entries (``vespa.summaryFeatures.cached``) are
  left out.

:func:`read_feature_log` gives a :class:`FeatureLog` (float64 values, query and document ids,
feature names in a fixed order); :func:`join_judgments` joins it with a judgment list (TREC
qrels, a CSV ``qid,docid,grade``, a DataFrame, a dict or a :class:`Qrels`) into a
:class:`RankingDataset` and a :class:`JoinReport` (unjudged hits, judged documents never logged,
duplicates, missing values per feature). :func:`write_feature_log` writes rows in each
producer's format (the inverse, for tests and the documentation's round trip).
"""
from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rankwise.data.dataset import RankingDataset
from rankwise.errors import InputError, ParseError

__all__ = ["FeatureLog", "JoinReport", "read_feature_log", "join_judgments", "write_feature_log",
           "FEATURE_LOG_FORMATS"]

FEATURE_LOG_FORMATS = ("opensearch", "elasticsearch", "solr", "vespa")
_MEMORY = "<in-memory log>"


# ---------------------------------------------------------------------------------------------- reading
@dataclass
class FeatureLog:
    """Feature vectors logged by a search engine, one row per (query, document).

    Attributes
    ----------
    values : ndarray of float64, shape (n_hits, n_features)
        NaN where the engine logged no value (or logged NaN).
    qids, doc_ids : ndarray of str, shape (n_hits,)
    feature_names : list of str
        Column order: the ``feature_names`` given to :func:`read_feature_log`, else the order of
        first appearance in the log (the feature set's order for the plugin and Solr's dense log).
    where : list of str
        Per row, where it was read (``path:line`` or ``path: response 2, hit 5``).
    duplicates : list of (qid, doc_id, where, where_of_the_kept_row)
        Hits of a (query, document) logged again and left out.
    format, path : str
    """

    values: np.ndarray
    qids: np.ndarray
    doc_ids: np.ndarray
    feature_names: list
    where: list
    duplicates: list = field(default_factory=list)
    format: str = ""
    path: str = _MEMORY

    def __len__(self) -> int:
        return len(self.qids)

    def __repr__(self) -> str:
        nq = len(dict.fromkeys(self.qids.tolist()))
        return (f"FeatureLog({self.format}, {len(self)} hits, {nq} queries, {len(self.feature_names)} features, "
                f"{int(np.isnan(self.values).sum())} missing values, from {self.path})")


def _lookup(obj, path):
    """``obj`` at a dotted ``path`` (list positions as numbers); a key holding dots is tried whole first."""
    if isinstance(obj, dict) and path in obj:
        return obj[path]
    cur = obj
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise KeyError(path)
    return cur


def _call(fn, hit, what, fail):
    try:
        return fn(hit)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        fail(f"{what}= ({getattr(fn, '__name__', 'a callable')}) failed on this hit: {type(exc).__name__}: {exc}")


def _vespa_doc_id(hit):
    """The user part of a Vespa document id: ``id:<namespace>:<type>::<key>`` -> ``<key>``."""
    full = hit["id"]
    if isinstance(full, str) and full.startswith("id:") and "::" in full:
        return full.split("::", 1)[1]
    return full


def _id_text(value, what: str, fail) -> str:
    if isinstance(value, list) and len(value) == 1:  # OpenSearch `fields` values are lists
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and not value.strip()):
        fail(f"{what} must be a non-empty string or an integer; got {value!r:.60}")
    text = str(value)
    if any(c.isspace() for c in text):
        fail(f"{what} {text!r:.60} contains white space; TREC qrels cannot hold it")
    return text


def _load_documents(source):
    """``(path, [(line or None, document)])``: one JSON document, NDJSON (CRLF too), or objects."""
    if not isinstance(source, (str, Path)):
        docs = source if isinstance(source, list) and all(isinstance(d, dict) for d in source) else [source]
        return _MEMORY, [(None, d) for d in docs]
    path = Path(source)
    try:
        raw = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the feature log ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ParseError(path, line, f"not UTF-8 (byte {raw[exc.start]:#04x}); JSON logs are UTF-8") from None
    try:
        return str(path), [(1 if "\n" not in text.strip() else None, json.loads(text))]
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data" and not _first_line_is_object(text):
            raise ParseError(path, exc.lineno, f"not JSON ({exc.msg} at column {exc.colno}); expected a JSON "
                             "response, or NDJSON with one JSON object per line") from None
    docs = []
    for k, line in enumerate(text.split("\n"), start=1):
        line = line.strip()  # CRLF and blank lines
        if not line:
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ParseError(path, k, f"not JSON ({exc.msg} at column {exc.colno}): {line[:60]!r}; NDJSON "
                             "expects one JSON object per line") from None
        if not isinstance(doc, dict):
            raise ParseError(path, k, f"expected a JSON object (a response or a hit); got {type(doc).__name__}")
        docs.append((k, doc))
    if not docs:
        raise InputError(f"{path}: the feature log is empty")
    return str(path), docs


def _first_line_is_object(text: str) -> bool:
    first = next((ln for ln in text.split("\n") if ln.strip()), "")
    try:
        return isinstance(json.loads(first), dict)
    except json.JSONDecodeError:
        return False


def _number(value, name: str, fail, *, java: bool = False) -> float:
    """A logged value of feature ``name`` as float64; NaN for null/"NaN"; strings only where the producer
    writes them."""
    if type(value) is float and value - value == 0.0:  # the common case: a finite JSON number
        return value
    what = f"feature {name!r}"
    if value is None:
        return math.nan
    if isinstance(value, bool):
        fail(f"{what}: expected a number; got {value!r}")
    if isinstance(value, (int, float)):
        v = float(value)
    elif isinstance(value, str) and (java or value in ("NaN", "Infinity", "-Infinity")):
        try:
            v = float(value)
        except ValueError:
            fail(f"{what}: expected a number; got {value!r:.40}")
    else:
        fail(f"{what}: expected a number; got {type(value).__name__} {json.dumps(value)[:60]}")
    if math.isinf(v):
        fail(f"{what}: value {value!r} is infinite; features must be finite (NaN for a missing value)")
    return v


class _Reader:
    """What one format's responses and hits look like: their hits, ids and (name, value) pairs."""

    def __init__(self, fmt, path, qid, doc_id, options):
        self.fmt, self.path, self.qid, self.doc_id, self.o = fmt, path, qid, doc_id, options
        self.n_responses = 0

    def fail(self, line, where, message):
        raise ParseError(self.path, line, f"{where}: {message}" if where else message)

    # -- the structure of each format
    def hits_of(self, doc):
        """``(response or None, hits)`` of one document, or ``(None, None)`` when the document is a hit."""
        if self.fmt == "opensearch":
            if "responses" in doc and isinstance(doc["responses"], list):
                return [(r, self._os_hits(r)) for r in doc["responses"]]
            if "hits" in doc or ("error" in doc and "_id" not in doc):
                return [(doc, self._os_hits(doc))]
            return None
        if self.fmt == "solr":
            if "error" in doc and "id" not in doc:
                raise _Bad(f"the Solr request failed: {json.dumps(doc['error'])[:200]}")
            if "grouped" in doc and "response" not in doc:
                raise _Bad("a grouped Solr response (group=true) holds no response.docs; log without grouping")
            if "response" in doc:
                resp = doc["response"]
                docs = resp.get("docs") if isinstance(resp, dict) else None
                if not isinstance(docs, list):
                    raise _Bad("a Solr response needs response.docs (a list)")
                return [(doc, docs)]
            return None
        root = doc.get("root")
        if isinstance(root, dict):
            if root.get("errors"):
                raise _Bad(f"the Vespa response reports errors: {json.dumps(root['errors'])[:200]}")
            children = root.get("children", [])
            if not isinstance(children, list):
                raise _Bad("root.children must be a list of hits")
            return [(doc, children)]
        return None

    @staticmethod
    def _os_hits(resp):
        if not isinstance(resp, dict):
            raise _Bad(f"expected a search response object; got {type(resp).__name__}")
        if "error" in resp:
            raise _Bad(f"the search failed: {json.dumps(resp['error'])[:200]}")
        hits = resp.get("hits")
        hits = hits.get("hits") if isinstance(hits, dict) else None
        if not isinstance(hits, list):
            raise _Bad("a search response needs hits.hits (a list)")
        return hits

    # -- ids
    def ids(self, hit, resp, n_resp, line, where):
        def fail(msg):
            self.fail(line, where, msg)

        qid = self.qid
        if callable(qid):
            q = _call(qid, hit, "qid", fail)
        elif isinstance(qid, str):
            try:
                q = _lookup(hit, qid)
            except KeyError:
                try:
                    if resp is None:
                        raise KeyError(qid) from None
                    q = _lookup(resp, qid)
                except KeyError:
                    fail(f"no query id at {qid!r} (looked in the hit{'' if resp is None else ' and its response'})")
        elif qid is None:
            if resp is None:
                fail("a hit on its own line carries no query: pass qid= (a field path such as 'qid', or a callable)")
            q = n_resp
        else:
            if n_resp is None or resp is None:
                fail("qid= given as a list names one query per response, but this line is a hit; pass a field path")
            if n_resp >= len(qid):
                fail(f"qid= lists {len(qid)} query ids but the log has more responses")
            q = qid[n_resp]
        doc = _call(self.doc_id, hit, "doc_id", fail) if callable(self.doc_id) else None
        if not callable(self.doc_id):
            try:
                doc = _lookup(hit, self.doc_id)
            except KeyError:
                fail(f"no document id at {self.doc_id!r}; keys of the hit: {sorted(hit)[:8]}")
        return _id_text(q, "query id", fail), _id_text(doc, "document id", fail)

    # -- features
    def pairs(self, hit, line, where):
        def fail(msg):
            self.fail(line, where, msg)

        if self.fmt == "opensearch":
            return self._os_pairs(hit, fail)
        if self.fmt == "solr":
            return self._solr_pairs(hit, fail)
        return self._vespa_pairs(hit, fail)

    def _os_pairs(self, hit, fail):
        try:
            logs = hit["fields"]["_ltrlog"]
        except (KeyError, TypeError):
            fail("no fields._ltrlog: was the search sent with ext.ltr_log and a named sltr query?")
        if not isinstance(logs, list) or not all(isinstance(x, dict) for x in logs):
            fail(f"fields._ltrlog must be a list of objects; got {json.dumps(logs)[:80]}")
        names = [k for x in logs for k in x]
        want = self.o["log_name"]
        if want is None:
            if len(set(names)) != 1:
                fail(f"fields._ltrlog holds the logs {names}; pass log_name= to choose one")
            want = names[0]
        entries = [x[want] for x in logs if want in x]
        if not entries:
            fail(f"no log named {want!r} in fields._ltrlog; it holds {names}")
        entries = entries[0]
        if not isinstance(entries, list):
            fail(f"log {want!r} must be a list of {{name, value}} entries; got {json.dumps(entries)[:80]}")
        out = []
        for k, e in enumerate(entries):
            if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                fail(f"log {want!r} entry {k}: expected {{\"name\": ..., \"value\": ...}}; got {json.dumps(e)[:80]}")
            if e["name"] == "extra_logging" and isinstance(e.get("value"), dict):
                continue  # what script features add with their extra-logging map: not a feature
            if "value" not in e or e["value"] is None:
                out.append((e["name"], 0.0 if self.o["missing_as_zero"] else math.nan))
            else:
                out.append((e["name"], _number(e["value"], e["name"], fail)))
        return out

    def _solr_pairs(self, hit, fail):
        fld = self.o["field"] or "[features]"
        if fld not in hit:
            fail(f"no {fld!r} field in the document (keys: {sorted(hit)[:8]}); was it requested with "
                 f"fl=...,[features ...]? pass field= if the transformer has another name")
        text = hit[fld]
        if not isinstance(text, str):
            fail(f"{fld!r} must be a string 'name=value,...'; got {json.dumps(text)[:80]}")
        kv, sep = self.o["key_value_sep"], self.o["feature_sep"]
        out = []
        if not text.strip():
            return out
        for item in text.split(sep):
            name, eq, value = item.rpartition(kv)
            if not eq or not name:
                fail(f"{fld!r}: expected name{kv}value pairs separated by {sep!r}; got {item[:60]!r} in "
                     f"{text[:80]!r} (key_value_sep= and feature_sep= are the transformer's csvKeyValueDelimiter "
                     "and csvFeatureSeparator)")
            v = _number(value.strip(), name, fail, java=True)
            out.append((name.strip(), float(np.float32(v))))  # Solr logs Java floats
        return out

    def _vespa_pairs(self, hit, fail):
        fields = hit.get("fields")
        if not isinstance(fields, dict):
            fail("the hit has no fields object")
        fld = self.o["field"]
        if fld is None:
            fld = "matchfeatures" if "matchfeatures" in fields else "summaryfeatures"
        feats = fields.get(fld)
        if not isinstance(feats, dict):
            fail(f"no fields.{fld} object in the hit (fields: {sorted(fields)[:8]}); list the features under "
                 "match-features (or summary-features) in the rank profile")
        out = []
        for name, value in feats.items():
            if name.startswith("vespa."):
                continue
            if isinstance(value, dict):
                fail(f"feature {name!r} is a tensor ({json.dumps(value)[:60]}); log a scalar (reduce it in the "
                     "rank profile)")
            out.append((name, _number(value, name, fail)))
        return out


class _Bad(Exception):
    """A structural problem found while walking one document (turned into a ParseError)."""


def _hits(reader: _Reader, documents):
    for line, doc in documents:
        try:
            groups = reader.hits_of(doc)
        except _Bad as exc:
            reader.fail(line, f"response {reader.n_responses + 1}", str(exc))
        if groups is None:  # a hit on its own line
            if not isinstance(doc, dict):
                reader.fail(line, None, f"expected a hit object; got {type(doc).__name__}")
            yield doc, None, None, line, "hit"
            continue
        for resp, hits in groups:
            n = reader.n_responses
            reader.n_responses += 1
            for k, hit in enumerate(hits):
                where = f"response {n + 1}, hit {k + 1}"
                if not isinstance(hit, dict):
                    reader.fail(line, where, f"expected a hit object; got {json.dumps(hit)[:60]}")
                yield hit, resp, n, line, where


def _feature_names_from(spec, store=None):
    """A list of names, or a feature-set / feature-store JSON (OpenSearch ``_featureset``, Solr store)."""
    if spec is None or isinstance(spec, (list, tuple)):
        return None if spec is None else [str(s) for s in spec]
    obj = spec
    if isinstance(spec, (str, Path)):
        p = Path(spec)
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"{p}: cannot read the feature set ({exc.strerror})") from None
        except json.JSONDecodeError as exc:
            raise ParseError(p, exc.lineno, f"not JSON ({exc.msg}); expected a feature set") from None
    if isinstance(obj, dict):
        obj = obj.get("featureset", obj)
        obj = obj.get("features", obj) if isinstance(obj, dict) else obj
    if isinstance(obj, list) and all(isinstance(f, str) for f in obj):
        return list(obj)
    if isinstance(obj, list) and all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in obj):
        # a Solr feature-store upload may hold several stores; a feature without "store" is in _DEFAULT_
        stores = list(dict.fromkeys(f.get("store", "_DEFAULT_") for f in obj))
        if store is None and len(stores) > 1:
            raise InputError(f"feature_names: the feature store JSON holds the stores {stores}; pass feature_store= "
                             "(the [features store=...] of the logging request)")
        if store is not None and store not in stores:
            raise InputError(f"feature_store={store!r} is not in the feature store JSON; it holds {stores}")
        return [f["name"] for f in obj if store is None or f.get("store", "_DEFAULT_") == store]
    raise InputError(f"feature_names: expected a list of names, an OpenSearch feature set "
                     f"({{\"featureset\": {{\"features\": [{{\"name\": ...}}]}}}}) or a Solr feature store "
                     f"([{{\"name\": ...}}]); got {json.dumps(obj)[:80] if not callable(obj) else obj}")


def read_feature_log(source, format: str, *, qid=None, doc_id=None, feature_names=None, log_name=None,
                     missing_as_zero: bool = False, field: str | None = None, features_format: str = "dense",
                     default=0.0, key_value_sep: str = "=", feature_sep: str = ",",
                     unknown_features: str = "error", duplicates: str = "error",
                     feature_store: str | None = None, absent_features: str = "error") -> FeatureLog:
    """Read a search engine's feature log.

    Parameters
    ----------
    source : path or dict or list of dicts
        A JSON file (one response; for OpenSearch also an ``_msearch`` response), an NDJSON file
        (one response or one hit per line; CRLF and ``.gz`` are fine), or the parsed objects.
    format : {"opensearch", "elasticsearch", "solr", "vespa"}
    qid : str, callable, sequence or None
        Where the query id is: a dotted path into each hit (``"qid"``, ``"_source.query_id"``,
        ``"fields.qid.0"``), tried in the hit's response when the hit lacks it (Solr's echoed
        ``"responseHeader.params.qid"``); a callable ``hit -> id``; a sequence with one id per
        response in file order; ``None``: the response's position (0, 1, ...).
    doc_id : str or callable, optional
        Path of the document id in a hit, or a callable ``hit -> id``: default ``"_id"``
        (OpenSearch), ``"id"`` (Solr); Vespa: the key of the hit's ``id:namespace:type::key``
        (``doc_id="id"`` keeps the whole id).
    feature_names : list of str, or feature-set JSON (path or object), optional
        The column order (use the feature set's); default: order of first appearance.
    feature_store : str, optional
        Solr: which store of a feature-store JSON holding several gives ``feature_names``
        (features without ``"store"`` are in ``"_DEFAULT_"``).
    log_name : str, optional
        OpenSearch: which ``_ltrlog`` entry (the ``log_specs.name``); needed when there are several.
    missing_as_zero : bool
        OpenSearch: read an entry without ``value`` as 0.0 (the plugin's ``missing_as_zero``)
        instead of NaN.
    field : str, optional
        Solr: the transformer's field (default ``"[features]"``); Vespa: ``"matchfeatures"``
        (default when present) or ``"summaryfeatures"``.
    features_format : {"dense", "sparse"}
        Solr: the transformer's ``format``. Dense documents must list every feature; in sparse
        ones an absent feature has its default value ``default`` (a number or ``{name: number}``;
        Solr features default to 0.0).
    key_value_sep, feature_sep : str
        Solr: the transformer's ``csvKeyValueDelimiter`` and ``csvFeatureSeparator``.
    unknown_features : {"error", "ignore"}
        What to do with a logged name outside ``feature_names``.
    absent_features : {"error", "nan"}
        A column name that a hit does not list at all (the plugin lists every feature of its set,
        a missing one without ``value``; a dense Solr log and Vespa's match-features list every
        feature too) is an error, a sign of a log made with another feature set; ``"nan"`` reads
        it as missing. Sparse Solr logs leave features out by design (``default``).
    duplicates : {"error", "first", "last"}
        A (query, document) logged twice with the same values keeps one row (listed in
        ``FeatureLog.duplicates``); with different values it is an error unless ``"first"`` or
        ``"last"`` says which to keep.

    Returns
    -------
    FeatureLog
    """
    fmt = {"elasticsearch": "opensearch"}.get(format, format)
    if fmt not in ("opensearch", "solr", "vespa"):
        raise InputError(f"format must be one of {', '.join(FEATURE_LOG_FORMATS)}; got {format!r}")
    for name, value, allowed in (("features_format", features_format, ("dense", "sparse")),
                                 ("unknown_features", unknown_features, ("error", "ignore")),
                                 ("duplicates", duplicates, ("error", "first", "last")),
                                 ("absent_features", absent_features, ("error", "nan"))):
        if value not in allowed:
            raise InputError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    if features_format == "sparse" and fmt != "solr":
        raise InputError("features_format='sparse' is Solr's transformer option; the other logs list every feature")
    if not (qid is None or isinstance(qid, str) or callable(qid) or isinstance(qid, (list, tuple, np.ndarray))):
        raise InputError(f"qid must be a field path, a callable, a list of ids or None; got {qid!r:.60}")
    if doc_id is None:
        doc_id = {"opensearch": "_id", "solr": "id", "vespa": _vespa_doc_id}[fmt]
    names_given = _feature_names_from(feature_names, feature_store)
    path, documents = _load_documents(source)
    options = dict(log_name=log_name, missing_as_zero=missing_as_zero, field=field, key_value_sep=key_value_sep,
                   feature_sep=feature_sep)
    reader = _Reader(fmt, path, list(qid) if isinstance(qid, (tuple, np.ndarray)) else qid, doc_id, options)

    index = {} if names_given is None else {n: k for k, n in enumerate(names_given)}
    if names_given is not None and len(index) != len(names_given):
        dup = next(n for n in names_given if names_given.count(n) > 1)
        raise InputError(f"feature_names lists {dup!r} twice")
    sparse = features_format == "sparse"
    rows, qids, docs, where, lines, seen, dups = [], [], [], [], [], {}, []
    for hit, resp, n_resp, line, w in _hits(reader, documents):
        q, d = reader.ids(hit, resp, n_resp, line, w)
        pairs = reader.pairs(hit, line, w)
        row = {}
        for name, v in pairs:
            if name in row:
                reader.fail(line, w, f"feature {name!r} is logged twice in one hit")
            if name not in index:
                if names_given is not None:
                    if unknown_features == "ignore":
                        continue
                    reader.fail(line, w, f"feature {name!r} is not in feature_names ({len(names_given)} names: "
                                f"{names_given[:5]}...); pass unknown_features='ignore' to leave it out")
                index[name] = len(index)
            row[name] = v
        loc = f"{path}:{line}" if line is not None and w == "hit" else (
            f"{path}:{line}: {w}" if line is not None else f"{path}: {w}")
        key = (q, d)
        if key in seen:
            k = seen[key]
            same = rows[k].keys() == row.keys() and all(
                (a == b) or (a != a and b != b) for a, b in zip((rows[k][n] for n in row), row.values()))
            if not same and duplicates == "error":
                reader.fail(line, w, f"document {d!r} of query {q!r} is logged again with other values (first at "
                            f"{where[k]}); pass duplicates='first' or 'last' to keep one")
            dups.append((q, d, loc if duplicates != "last" else where[k], where[k] if duplicates != "last" else loc))
            if duplicates == "last":
                rows[k], where[k], lines[k] = row, loc, (line, w)
            continue
        seen[key] = len(rows)
        rows.append(row)
        qids.append(q)
        docs.append(d)
        where.append(loc)
        lines.append((line, w))
    if isinstance(reader.qid, list) and reader.n_responses != len(reader.qid):
        raise InputError(f"{path}: qid= lists {len(reader.qid)} query ids but the log has {reader.n_responses} "
                         "responses; one id per response, in order")
    if not rows:
        raise InputError(f"{path}: the feature log holds no hits")
    names = list(index)
    if sparse:
        if isinstance(default, dict):
            unknown = sorted(set(default) - set(names))
            if unknown:
                raise InputError(f"default names features that are not in the log or feature_names: {unknown[:5]}")
            fill = np.array([float(default.get(n, 0.0)) for n in names])
        else:
            fill = np.full(len(names), float(default))
    else:
        fill = np.full(len(names), np.nan)
    values = np.tile(fill, (len(rows), 1))
    for r, row in enumerate(rows):
        if not sparse and len(row) != len(names) and absent_features == "error":
            absent = [n for n in names if n not in row]
            line, w = lines[r]
            verb = "is" if len(absent) == 1 else "are"
            if fmt == "solr":
                reader.fail(line, w, f"a dense Solr log lists every feature, but {absent[:5]} {verb} absent; pass "
                            "features_format='sparse' for [features format=sparse]")
            what = "the plugin lists every feature of the set, a missing one without value" if fmt == "opensearch" \
                else "a rank profile's match-features are the same for every hit"
            reader.fail(line, w, f"{absent[:5]}{'...' if len(absent) > 5 else ''} {verb} not logged for this hit "
                        f"({what}): was it logged with another feature set? absent_features='nan' reads absent "
                        "names as missing")
        for name, v in row.items():
            values[r, index[name]] = v
    return FeatureLog(values, np.asarray(qids, dtype=str), np.asarray(docs, dtype=str), names, where, dups,
                      format=fmt, path=path)


# ---------------------------------------------------------------------------------------------- joining
@dataclass
class JoinReport:
    """What :func:`join_judgments` did with each logged hit and each judgment.

    Attributes
    ----------
    n_hits : int
        Rows of the log.
    n_rows, n_queries : int
        Rows and queries of the data set.
    unjudged : list of (qid, doc_id, where)
        Logged hits with no judgment (dropped, or kept with the ``unjudged`` grade).
    unjudged_action : str
        ``"dropped"`` or ``"kept with grade g"``.
    unlogged : list of (qid, doc_id, grade)
        Judged documents the log never holds (their query may be logged or not).
    queries_not_logged : list of str
        Judged queries with no logged hit.
    queries_dropped : list of str
        Logged queries left with no row (every hit unjudged and dropped).
    duplicates : list
        The log's ``duplicates``.
    missing_per_feature : dict
        Feature name → rows of the data set with a missing (NaN) value.
    """

    n_hits: int
    n_rows: int
    n_queries: int
    unjudged: list
    unjudged_action: str
    unlogged: list
    queries_not_logged: list
    queries_dropped: list
    duplicates: list
    missing_per_feature: dict

    def __str__(self) -> str:
        miss = {k: v for k, v in self.missing_per_feature.items() if v}
        lines = [f"{self.n_hits} logged hits -> {self.n_rows} rows in {self.n_queries} queries",
                 f"unjudged hits: {len(self.unjudged)} ({self.unjudged_action})",
                 f"judged documents never logged: {len(self.unlogged)} "
                 f"({len(self.queries_not_logged)} judged queries with no logged hit)"]
        if self.queries_dropped:
            lines.append(f"queries left without rows: {len(self.queries_dropped)}")
        if self.duplicates:
            lines.append(f"duplicate hits left out: {len(self.duplicates)}")
        if len(miss) > 8:  # a long feature set: the total and the five features missing most often
            top = sorted(miss.items(), key=lambda kv: -kv[1])[:5]
            lines.append(f"missing values: {sum(miss.values())} in {len(miss)} features (most: "
                         + ", ".join(f"{k}={v}" for k, v in top) + "; all in missing_per_feature)")
        else:
            lines.append("missing values: " + (", ".join(f"{k}={v}" for k, v in miss.items()) if miss else "none"))
        return "\n".join(lines)


def _judgments(judgments):
    """``{qid: {doc: grade}}`` (insertion order kept) from any accepted judgment source."""
    from rankwise.data.trec import Qrels

    if isinstance(judgments, Qrels):
        return judgments.to_dict(), False
    if isinstance(judgments, dict):
        out = {}
        for q, docs in judgments.items():
            if not isinstance(docs, dict):
                raise InputError(f"judgments: expected {{qid: {{docid: grade}}}}; query {q!r} maps to "
                                 f"{type(docs).__name__}")
            out[str(q)] = {str(d): _grade(g, f"judgments[{q!r}][{d!r}]") for d, g in docs.items()}
        return out, False
    if hasattr(judgments, "columns") and hasattr(judgments, "itertuples"):
        return _from_frame(judgments, "judgments frame"), False
    if isinstance(judgments, (str, Path)):
        p = Path(judgments)
        if not p.exists():
            raise InputError(f"{p}: no such judgments file")
        if p.suffix.lower() in (".csv", ".tsv") or p.name.lower().endswith((".csv.gz", ".tsv.gz")):
            return _read_csv(p), False
        return Qrels.read(p).to_dict(), True
    raise InputError(f"judgments must be a TREC qrels or CSV path, a Qrels, a DataFrame or a dict; "
                     f"got {type(judgments).__name__}")


def _grade(value, what: str) -> float:
    try:
        g = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}: grade {value!r:.40} is not a number") from None
    if not math.isfinite(g):
        raise InputError(f"{what}: grade {value!r} is not finite")
    return g


_COLUMNS = (("qid", "query_id", "q_id", "query"), ("docid", "doc_id", "docno", "_id", "id"),
            ("grade", "rel", "relevance", "label", "score"))


def _pick_columns(columns, what):
    cols = [str(c).strip() for c in columns]
    low = [c.lower() for c in cols]
    picked = []
    for names in _COLUMNS:
        hit = next((cols[low.index(n)] for n in names if n in low), None)
        if hit is None:
            raise InputError(f"{what}: needs columns qid, docid, grade (or {', '.join(names[1:])}); got {cols}")
        picked.append(hit)
    return picked


def _from_frame(frame, what):
    q, d, g = _pick_columns(frame.columns, what)
    out = {}
    for k, (qq, dd, gg) in enumerate(zip(frame[q].tolist(), frame[d].tolist(), frame[g].tolist())):
        docs = out.setdefault(str(qq), {})
        if str(dd) in docs:
            raise InputError(f"{what}: row {k + 1}: document {str(dd)!r} of query {str(qq)!r} is judged twice")
        docs[str(dd)] = _grade(gg, f"{what} row {k + 1}")
    return out


def _read_csv(path: Path):
    import csv
    import io

    raw = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    text = raw.decode("utf-8-sig")
    delim = "\t" if ".tsv" in path.name.lower() else ","
    rows = csv.reader(io.StringIO(text, newline=""), delimiter=delim)
    header = next(rows, None)
    if header is None:
        raise InputError(f"{path}: the judgments file is empty")
    cols = _pick_columns(header, str(path))
    pos = [[c.strip() for c in header].index(c) for c in cols]
    out = {}
    for k, row in enumerate(rows, start=2):
        if not row or not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise ParseError(path, k, f"expected {len(header)} fields ({', '.join(header)}); got {len(row)}")
        q, d, g = (row[i].strip() for i in pos)
        if not q or not d:
            raise ParseError(path, k, "empty query or document id")
        try:
            grade = float(g)
        except ValueError:
            raise ParseError(path, k, f"grade {g!r:.40} is not a number") from None
        if not math.isfinite(grade):
            raise ParseError(path, k, f"grade {g!r} is not finite")
        docs = out.setdefault(q, {})
        if d in docs:
            raise ParseError(path, k, f"document {d!r} of query {q!r} is judged twice")
        docs[d] = grade
    return out


def join_judgments(log: FeatureLog, judgments, *, unjudged="drop"):
    """Join a :class:`FeatureLog` with judgments into a :class:`RankingDataset` and a :class:`JoinReport`.

    Parameters
    ----------
    log : FeatureLog
    judgments : path, Qrels, DataFrame or dict
        TREC qrels (``qid iter docno rel``; a negative grade is trec_eval's "pooled but not
        judged" and counts as unjudged here), a CSV/TSV file with a header naming ``qid``,
        ``docid``, ``grade`` (``docno``/``rel``/``label`` too; grades may be fractional), a
        DataFrame with those columns, or ``{qid: {docid: grade}}``.
    unjudged : "drop" or number
        Logged hits without a judgment: left out (default) or kept with this grade.

    Returns
    -------
    (RankingDataset, JoinReport)
        Rows in log order, grouped by query (queries in order of first appearance); string query
        ids and document ids; the log's feature names; X is float32 with NaN for a missing value.
    """
    if not isinstance(log, FeatureLog):
        raise InputError(f"log must be a FeatureLog (from read_feature_log); got {type(log).__name__}")
    if not (unjudged == "drop" or (isinstance(unjudged, (int, float)) and not isinstance(unjudged, bool)
                                   and math.isfinite(unjudged))):
        raise InputError(f"unjudged must be 'drop' or a finite grade; got {unjudged!r}")
    qrels, trec = _judgments(judgments)
    keep, labels, missing_rel = [], [], []
    logged = set()
    for r, (q, d) in enumerate(zip(log.qids.tolist(), log.doc_ids.tolist())):
        logged.add((q, d))
        g = qrels.get(q, {}).get(d)
        if g is None or (trec and g < 0):
            missing_rel.append((q, d, log.where[r]))
            if unjudged == "drop":
                continue
            g = unjudged
        keep.append(r)
        labels.append(float(g))
    logged_q = set(log.qids.tolist())
    unlogged = [(q, d, g) for q, docs in qrels.items() for d, g in docs.items()
                if (q, d) not in logged and not (trec and g < 0)]
    not_logged_q = [q for q in qrels if q not in logged_q]
    if not keep:
        raise InputError(f"{log.path}: no logged hit has a judgment ({len(log)} hits, {len(qrels)} judged queries; "
                         f"first hit: query {log.qids[0]!r}, document {log.doc_ids[0]!r}); do the query and "
                         "document ids of the log and the judgments match?")
    keep = np.asarray(keep, dtype=np.int64)
    qk = log.qids[keep]
    first = {}
    for q in qk.tolist():
        first.setdefault(q, len(first))
    order = np.argsort(np.fromiter((first[q] for q in qk.tolist()), dtype=np.int64, count=len(qk)), kind="stable")
    rows = keep[order]
    sizes = np.bincount(np.fromiter((first[q] for q in qk.tolist()), dtype=np.int64, count=len(qk)))
    X = log.values[rows]
    ds = RankingDataset(X, np.asarray(labels)[order], np.concatenate(([0], np.cumsum(sizes))),
                        query_ids=np.asarray(list(first), dtype=str), doc_ids=log.doc_ids[rows],
                        feature_names=list(log.feature_names))
    action = "dropped" if unjudged == "drop" else f"kept with grade {unjudged:g}"
    report = JoinReport(len(log), len(rows), len(first), missing_rel, action, unlogged, not_logged_q,
                        [q for q in dict.fromkeys(log.qids.tolist()) if q not in first], list(log.duplicates),
                        dict(zip(log.feature_names, np.isnan(X).sum(axis=0).tolist())))
    return ds, report


# ---------------------------------------------------------------------------------------------- writing
def _java_float(v: float) -> str:
    """``Float.toString`` of the float32 nearest ``v`` (shortest digits; ``1.0E-4`` outside [1e-3, 1e7))."""
    with np.errstate(over="ignore"):
        f = np.float32(v)
    if np.isnan(f):
        return "NaN"
    if np.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    if f == 0:
        return "-0.0" if np.signbit(f) else "0.0"
    a = abs(float(f))
    if 1e-3 <= a < 1e7:
        s = np.format_float_positional(f, unique=True, trim="0")
        return s if "." in s else s + ".0"
    m, e = np.format_float_scientific(f, unique=True, trim="0").split("e")
    m = m if "." in m and not m.endswith(".") else m.rstrip(".") + ".0"
    return f"{m}E{int(e)}"


def _value_json(v: float, fmt: str):
    if math.isnan(v):
        return "NaN" if fmt == "vespa" else None
    return float(v)


def write_feature_log(path, format: str, X, qid=None, doc_ids=None, *, feature_names=None, remove=None,
                      layout=None, missing_as_zero: bool = False, features_format: str = "dense",
                      crlf: bool = False, log_name: str = "log_entry1", scores=None, seed=0) -> list:
    """Write rows as a search engine's feature log (the inverse of :func:`read_feature_log`).

    Parameters
    ----------
    path : path
    format : {"opensearch", "elasticsearch", "solr", "vespa"}
    X : array (n_rows, n_features) or RankingDataset
        float64 values (written with full precision: ``repr``; Solr as Java floats). A data set
        (dense) gives its ``qid``, ``doc_ids`` (``d0, d1, ...`` per query without them) and
        ``feature_names`` too.
    qid, doc_ids : array-like (n_rows,)
        Rows of a query must be contiguous; ids are written as strings. Required with an array.
    feature_names : list of str, optional
        Default: the data set's, else ``f1 .. fn``.
    remove : bool array (n_rows, n_features) or float, optional
        Values the engine did not log (a float: that share of the values, drawn with ``seed``):
        OpenSearch writes the entry without ``value`` (0 with ``missing_as_zero``), Vespa writes
        ``"NaN"``, a sparse Solr log leaves the feature out and a dense one writes its default,
        0.0. NaN values of ``X`` are written as missing too.
    layout : str, optional
        OpenSearch: ``"msearch"`` (one ``_msearch`` response, the default), ``"responses"``
        (NDJSON, one search response per line) or ``"hits"`` (NDJSON, one hit per line with its
        query id in ``"qid"``). Solr and Vespa: ``"responses"`` (the default; NDJSON, one response
        per query; Solr echoes the query id in ``responseHeader.params.qid``).
    features_format : {"dense", "sparse"}
        Solr; sparse also leaves out values equal to 0.0, Solr's default.
    crlf : bool
        End NDJSON lines with CRLF.
    scores : array (n_rows,), optional
        The hits' scores (default: descending within a query).

    Returns
    -------
    list of str
        The query ids in the order written (what ``qid=`` takes when the ids are not in the file).
    """
    fmt = {"elasticsearch": "opensearch"}.get(format, format)
    if fmt not in ("opensearch", "solr", "vespa"):
        raise InputError(f"format must be one of {', '.join(FEATURE_LOG_FORMATS)}; got {format!r}")
    if isinstance(X, RankingDataset):
        ds = X
        if ds.X.__class__ is not np.ndarray:
            raise InputError("write_feature_log takes a dense data set (a search engine logs every feature)")
        from rankwise.data.trec import _doc_names

        qid = ds.qid if qid is None else qid
        doc_ids = _doc_names(ds) if doc_ids is None else doc_ids
        feature_names = ds.feature_names if feature_names is None else feature_names
        X = ds.X
    if qid is None or doc_ids is None:
        raise InputError("write_feature_log needs qid= and doc_ids= (one per row) with an array X")
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise InputError(f"X must be 2-d (rows, features); got shape {X.shape}")
    n, m = X.shape
    q = np.asarray(qid).astype(str)
    docs = np.asarray(doc_ids).astype(str)
    if q.shape != (n,) or docs.shape != (n,):
        raise InputError(f"qid and doc_ids need one entry per row ({n}); got {q.shape} and {docs.shape}")
    names = [f"f{k + 1}" for k in range(m)] if feature_names is None else [str(f) for f in feature_names]
    if len(names) != m:
        raise InputError(f"feature_names has {len(names)} names but X has {m} columns")
    if np.isinf(X).any():
        raise InputError("X holds inf; a feature log holds finite values (NaN for a missing one)")
    if fmt == "solr" and np.any(np.abs(X[np.isfinite(X)]) > np.finfo(np.float32).max):
        raise InputError("X holds values beyond float32's range; Solr logs Java floats (they would be Infinity)")
    if isinstance(remove, float):
        if not 0.0 <= remove < 1.0:
            raise InputError(f"remove as a share of the values must be in [0, 1); got {remove!r}")
        remove = np.random.default_rng(seed).random((n, m)) < remove
    rm = np.zeros((n, m), dtype=bool) if remove is None else np.asarray(remove, dtype=bool)
    if rm.shape != (n, m):
        raise InputError(f"remove must have X's shape {X.shape}; got {rm.shape}")
    rm = rm | np.isnan(X)
    layout = layout or ("msearch" if fmt == "opensearch" else "responses")
    allowed = ("msearch", "responses", "hits") if fmt == "opensearch" else ("responses",)
    if layout not in allowed:
        raise InputError(f"layout for {fmt} must be one of {', '.join(allowed)}; got {layout!r}")
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    bounds = list(zip(starts.tolist(), np.r_[starts[1:], n].tolist()))
    order = [q[a] for a, _ in bounds]
    if len(set(order)) != len(order):
        raise InputError("rows of a query must be contiguous in write_feature_log")
    sc = np.asarray(scores, dtype=np.float64) if scores is not None else None

    def score(r, a):
        return float(sc[r]) if sc is not None else float(np.float32(10.0 / (1 + r - a)))

    out = []
    for a, b in bounds:
        if fmt == "opensearch":
            hits = []
            for r in range(a, b):
                entries = []
                for k, name in enumerate(names):
                    if rm[r, k]:
                        entries.append({"name": name, "value": 0.0} if missing_as_zero else {"name": name})
                    else:
                        entries.append({"name": name, "value": _value_json(X[r, k], fmt)})
                hit = {"_index": "mq2008", "_id": docs[r], "_score": score(r, a),
                       "fields": {"_ltrlog": [{log_name: entries}]}}
                hits.append({"qid": q[a], **hit} if layout == "hits" else hit)
            if layout == "hits":
                out.extend(hits)
            else:
                out.append({"took": 3 + (b - a), "timed_out": False,
                            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
                            "hits": {"total": {"value": b - a, "relation": "eq"}, "max_score": score(a, a),
                                     "hits": hits}})
        elif fmt == "solr":
            solr_docs = []
            for r in range(a, b):
                parts = []
                for k, name in enumerate(names):
                    v = 0.0 if rm[r, k] else X[r, k]
                    if features_format == "sparse" and (rm[r, k] or v == 0.0):
                        continue
                    parts.append(f"{name}={_java_float(v)}")
                solr_docs.append({"id": docs[r], "score": float(np.float32(score(r, a))),
                                  "[features]": ",".join(parts)})
            fl = f"id,score,[features store=mq2008 format={features_format}]"
            out.append({"responseHeader": {"status": 0, "QTime": 2 + (b - a),
                                           "params": {"q": f"query {q[a]}", "qid": q[a], "fl": fl}},
                        "response": {"numFound": b - a, "start": 0, "numFoundExact": True, "docs": solr_docs}})
        else:
            children = []
            for r in range(a, b):
                mf = {name: ("NaN" if rm[r, k] else _value_json(X[r, k], fmt)) for k, name in enumerate(names)}
                children.append({"id": f"id:mq2008:doc::{docs[r]}", "relevance": score(r, a), "source": "mq2008",
                                 "fields": {"matchfeatures": mf, "documentid": f"id:mq2008:doc::{docs[r]}"}})
            out.append({"root": {"id": "toplevel", "relevance": 1.0, "fields": {"totalCount": b - a},
                                 "coverage": {"coverage": 100, "documents": b - a, "full": True, "nodes": 1,
                                              "results": 1, "resultsFull": 1},
                                 "children": children}})
    eol = "\r\n" if crlf else "\n"
    if fmt == "opensearch" and layout == "msearch":
        text = json.dumps({"took": sum(r["took"] for r in out), "responses": out}, ensure_ascii=False) + eol
    else:
        text = eol.join(json.dumps(o, ensure_ascii=False) for o in out) + eol
    from rankwise._io import atomic_write

    with atomic_write(path, "w", newline="") as fh:
        fh.write(text)
    return order
