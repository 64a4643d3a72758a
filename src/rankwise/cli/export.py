"""``rankwise export``: a saved model written for a search engine, with its parity checked on data."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from rankwise.cli.feature_logs import LOG_FORMATS
from rankwise.errors import InputError

TARGETS = ("opensearch", "solr", "elasticsearch", "vespa", "onnx")


def _feature_names(args):
    if args.featureset and args.feature_names:
        raise InputError("give --feature-names or --featureset, not both")
    if args.featureset:
        path = Path(args.featureset)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: --featureset: expected the JSON of PUT _ltr/_featureset/<name> "
                             f"({{\"featureset\": {{\"features\": [{{\"name\": ...}}]}}}}): {e}") from None
        feats = doc.get("featureset", doc).get("features") if isinstance(doc, dict) else None
        if not isinstance(feats, list) or not all(isinstance(f, dict) and "name" in f for f in feats):
            raise InputError(f"{path}: --featureset: expected {{\"featureset\": {{\"features\": [{{\"name\": ...}}, "
                             "...]}}}} (the feature set's features in order)")
        return [f["name"] for f in feats]
    if args.feature_names:
        value = args.feature_names
        text = Path(value).read_text(encoding="utf-8") if "," not in value and Path(value).is_file() else value
        names = [n.strip() for n in text.replace(",", "\n").splitlines() if n.strip()]
        return names
    return None


def _check_log(args, feature_names):
    """The ``--check`` feature log joined with ``--judgments``, its columns in the export's feature order."""
    from rankwise.cli import feature_logs

    if args.judgments is None:
        raise InputError(f"--data-format {args.data_format} reads --check as a feature log, which holds no grades: "
                         "pass --judgments QRELS (TREC qrels or a CSV qid,docid,grade)")
    if args.qid is not None and args.qids is not None:
        raise InputError("--qid and --qids both name the query ids; pass one")
    log_args = SimpleNamespace(format=args.data_format, judgments=args.judgments, qid=args.qid, qids=args.qids,
                               doc_id=args.doc_id, log_name=args.log_name, feature_set=None,
                               missing_as_zero=args.log_missing_as_zero, features_format=args.features_format,
                               duplicates="error", feature_store=None, field=None, absent_features="error",
                               key_value_sep="=", feature_sep=",", unjudged="drop", model="gbdt")
    return feature_logs.load(args.check, log_args, feature_names=feature_names, label="--check")


def _cmd_export(args) -> int:
    import numpy as np

    import rankwise
    from rankwise.export import parity_report, to_opensearch, to_solr

    model = rankwise.load(args.model)
    n_features = getattr(model, "n_features_in_", None)
    names = _feature_names(args)
    shift = None if args.shift is None else (args.shift if args.shift == "auto" else float(args.shift))
    out = Path(args.out)
    if args.target == "solr":
        export = to_solr(model, feature_names=names, name=args.name, store=args.store, shift=shift,
                         drop_intercept=args.drop_intercept, accept_inexact=args.accept_inexact)
        out.write_text(json.dumps(export.document, indent=2) + "\n", encoding="utf-8")
        print(f"wrote Solr {export.document['class'].rsplit('.', 1)[-1]} (model-store document) to {out}")
    elif args.target in ("elasticsearch", "vespa", "onnx"):
        export = _write_more(args, model, names, out)
    else:
        export = to_opensearch(model, args.format, feature_names=names, shift=shift, missing=args.missing,
                               missing_as_zero=args.missing_as_zero, drop_intercept=args.drop_intercept)
        if args.definition_only:
            out.write_text(export.definition, encoding="utf-8")
        else:
            out.write_text(json.dumps(export.createmodel_body(args.name), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {export.model_type} ({'definition' if args.definition_only else '_createmodel body'}) to {out}")
    for note in export.notes:
        print(f"note: {note}")
    if not args.check:
        return 0
    from rankwise.cli.inputs import _cli_hints, _load_predict_data

    if args.data_format in LOG_FORMATS:
        ds = _check_log(args, export.feature_names)
    else:
        data_args = SimpleNamespace(data=args.check, format=args.data_format, split="u1", group=args.group)
        with _cli_hints():
            ds = _load_predict_data(data_args, n_features=n_features)
    report = parity_report(model, export, np.asarray(ds.X.toarray() if hasattr(ds.X, "toarray") else ds.X),
                           ds.qid, rel_tol=args.rel_tol, missing=args.plugin_missing)
    engine = {"solr": "Solr LTR", "elasticsearch": "Elasticsearch learning_to_rank", "vespa": "Vespa",
              "onnx": "onnxruntime"}.get(args.target, f"OpenSearch LTR, missing features: {args.plugin_missing}")
    print(f"parity on {args.check} ({engine}):")
    print(report)
    return 0 if report.passed else 1


def add_export_parser(sub) -> None:
    p = sub.add_parser("export", help="write a saved model for a search engine (OpenSearch/Elasticsearch LTR, Solr, "
                                                      "Elasticsearch, Vespa, ONNX)",
                       description="Write a saved model as a search engine's LTR model, validated by rankwise's "
                                   "restatement of the engine's parser; --check scores a data set both ways and "
                                   "prints the parity report (exit 1 when it does not pass).")
    p.add_argument("model", help="a model saved by `rankwise train` (GBDT or linear)")
    p.add_argument("--target", choices=TARGETS, default="opensearch")
    p.add_argument("--format", choices=("xgboost+json", "xgboost+json+raw", "ranklib", "linear"),
                   default="xgboost+json",
                   help="opensearch: model/xgboost+json (trees), model/xgboost+json+raw (XGBoost trees: its own "
                        "model JSON), model/ranklib (trees, linear), model/linear; solr: the model's class follows "
                        "from the model")
    p.add_argument("--store", default="rankwise", help="solr: the feature store's name")
    p.add_argument("--accept-inexact", action="store_true",
                   help="solr: write splits the 1e-6 slack cannot reproduce exactly (the note says which values)")
    p.add_argument("--feature-names", help="the feature set's names in model column order: a file (one per line) "
                                           "or a comma-separated list")
    p.add_argument("--featureset", help="a feature-set JSON (PUT _ltr/_featureset/<name> body): its feature order")
    p.add_argument("--out", required=True, help="file to write: the _createmodel request body (opensearch) or the "
                                                "model-store document (solr), JSON")
    p.add_argument("--definition-only", action="store_true", help="write the model definition alone")
    p.add_argument("--name", default="rankwise_model", help="model name in the _createmodel body")
    p.add_argument("--shift", help="'auto' (scores made non-negative for Lucene) or a constant added to every score")
    p.add_argument("--missing", choices=("refuse", "as_zero"), default="refuse",
                   help="ranklib: refuse a model whose NaN rule differs from 0.0, or accept it (as_zero)")
    p.add_argument("--missing-as-zero", action="store_true",
                   help="xgboost+json(+raw): write missing_as_zero (OpenSearch main)")
    p.add_argument("--drop-intercept", action="store_true", help="linear: accept that model/linear has no intercept")
    p.add_argument("--check", metavar="DATA", help="data set (LETOR/SVMlight, ...) to score both ways")
    p.add_argument("--plugin-missing", choices=("branch", "right", "zero"), default="branch",
                   help="--check: how the plugin treats an absent feature: branch (OpenSearch >= 3.8), right "
                        "(3.2-3.7), zero (<= 3.1)")
    p.add_argument("--rel-tol", type=float, default=1e-6, help="--check: tolerance on |dscore| / score range")
    p.add_argument("--group", help="--check: SVMlight without qid: file of query sizes")
    p.add_argument("--data-format", default="auto",
                   help="--check: auto (default), svmlight, parquet, npz, or a feature log: opensearch, "
                        "elasticsearch, solr, vespa (with --judgments; its columns are read in the model's order)")
    p.add_argument("--onnx-dtype", choices=("float32", "double"), default="float32",
                   help="onnx (and vespa --vespa-format onnx): element type of the input, and the arithmetic of "
                        "tree and linear graphs (double: refused for neural models, which compute in float32)")
    p.add_argument("--vespa-format", choices=("native", "onnx"), default="native",
                   help="vespa: lightgbm()/xgboost() model files or a linear expression (native), or an ONNX model")
    p.add_argument("--schema", default="doc", help="vespa: the schema the rank profile goes under (--out is the "
                                                   "application package directory)")
    p.add_argument("--queries", help="elasticsearch: JSON file {feature: query} for the feature extractors (without "
                                     "it, --out holds the trained-model definition alone)")
    g = p.add_argument_group("--check on a feature log (--data-format opensearch, elasticsearch, solr or vespa)")
    g.add_argument("--judgments", metavar="FILE", help="TREC qrels or a CSV qid,docid,grade joined with the log")
    g.add_argument("--qid", metavar="PATH", help="dotted path of the query id in each hit")
    g.add_argument("--qids", metavar="FILE", help="query ids one per line, one per response in file order")
    g.add_argument("--doc-id", metavar="PATH", help="dotted path of the document id in a hit")
    g.add_argument("--log-name", help="OpenSearch: the ltr_log log_specs name, when the hits hold several")
    g.add_argument("--log-missing-as-zero", action="store_true",
                   help="OpenSearch: read a logged feature with no value as 0 (as the model was trained), not NaN")
    g.add_argument("--features-format", choices=("dense", "sparse"), default="dense",
                   help="Solr: the [features] transformer's format")
    p.set_defaults(func=_cmd_export)


def _write_more(args, model, names, out):
    """--target elasticsearch | vespa | onnx: write the export, print what was written; returns the export."""
    from rankwise.export.elasticsearch import to_elasticsearch
    from rankwise.export.onnx import to_onnx
    from rankwise.export.vespa import to_vespa

    if args.target == "onnx":
        export = to_onnx(model, feature_names=names, dtype=args.onnx_dtype)
        export.save(out)
        print(f"wrote ONNX ({export.family}, {export.dtype} input 'features', output 'score') to {out}")
    elif args.target == "vespa":
        export = to_vespa(model, feature_names=names, name=args.name, format=args.vespa_format)
        paths = export.write(out, args.schema)
        print(f"wrote Vespa rank profile {args.name!r} ({export.expression[:60]}) to " + ", ".join(map(str, paths)))
    else:
        export = to_elasticsearch(model, feature_names=names)
        if args.queries:
            doc = export.put_body(json.loads(Path(args.queries).read_text(encoding="utf-8")))
            what = "PUT _ml/trained_models body"
        else:
            doc = {"definition": {"trained_model": export.trained_model}}
            what = "trained-model definition"
        out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote Elasticsearch learning_to_rank {what} to {out}")
    return export
