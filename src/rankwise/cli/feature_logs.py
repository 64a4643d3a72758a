"""``rankwise train LOG --format opensearch|elasticsearch|solr|vespa --judgments QRELS``: a search engine's
feature log joined with judgments (``rankwise.data.read_feature_log`` / ``join_judgments``) as training data."""
from __future__ import annotations

import sys
from pathlib import Path

from rankwise.errors import InputError

LOG_FORMATS = ("opensearch", "elasticsearch", "solr", "vespa")


def add_arguments(p) -> None:
    """The ``train`` options of feature logs (used only with a log ``--format``)."""
    g = p.add_argument_group("feature logs (--format opensearch, elasticsearch, solr or vespa)")
    g.add_argument("--judgments", metavar="FILE",
                   help="TREC qrels, or a CSV/TSV with columns qid,docid,grade, joined with the log(s)")
    g.add_argument("--qid", metavar="PATH", help="dotted path of the query id in each hit (tried in its response "
                                                 "too), e.g. qid or responseHeader.params.qid")
    g.add_argument("--qids", metavar="FILE", help="query ids one per line, one per response in file order "
                                                  "(when the log does not hold them)")
    g.add_argument("--doc-id", metavar="PATH", help="dotted path of the document id in a hit (default _id for "
                                                    "OpenSearch, id for Solr; Vespa: the key of id:ns:type::key)")
    g.add_argument("--log-name", help="OpenSearch: the ltr_log log_specs name, when the hits hold several")
    g.add_argument("--feature-set", metavar="FILE", help="feature set / feature store JSON (or one name per "
                                                         "line): the column order")
    g.add_argument("--field", metavar="NAME", help="Solr: the transformer's field (default [features]); Vespa: "
                                                   "matchfeatures (default when present) or summaryfeatures")
    g.add_argument("--feature-store", metavar="NAME", help="Solr: the store of a --feature-set JSON holding several")
    g.add_argument("--absent-features", choices=("error", "nan"), default="error",
                   help="a column a hit does not list at all: an error (default; another feature set?) or missing")
    g.add_argument("--key-value-sep", default="=", metavar="C",
                   help="Solr: the transformer's csvKeyValueDelimiter (default '=')")
    g.add_argument("--feature-sep", default=",", metavar="C",
                   help="Solr: the transformer's csvFeatureSeparator (default ',')")
    g.add_argument("--missing-as-zero", action="store_true", help="OpenSearch: a feature with no value is 0, "
                                                                  "not missing (NaN)")
    g.add_argument("--features-format", choices=("dense", "sparse"), default="dense",
                   help="Solr: the [features] transformer's format (sparse: absent features are 0)")
    g.add_argument("--unjudged", default="drop", metavar="drop|GRADE",
                   help="logged hits without a judgment: drop them (default) or keep them with this grade")
    g.add_argument("--duplicates", choices=("error", "first", "last"), default="error",
                   help="a document logged twice for a query with other values: error (default) or keep one")


def uses_feature_log(args) -> bool:
    """True when ``args.format`` is a log format; checks the options before any data is read."""
    is_log = args.format in LOG_FORMATS
    if not is_log:
        names = ("judgments", "qid", "qids", "doc_id", "log_name", "feature_set", "feature_store", "field")
        given = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n, None) is not None]
        if given:
            raise InputError(f"{', '.join(given)} go with a feature log: --format {'|'.join(LOG_FORMATS)}; "
                             f"got --format {args.format}")
        return False
    if args.judgments is None:
        raise InputError(f"--format {args.format} reads a feature log, which holds no grades: "
                         "pass --judgments QRELS (TREC qrels or a CSV qid,docid,grade)")
    if args.qid is not None and args.qids is not None:
        raise InputError("--qid and --qids both name the query ids; pass one")
    _unjudged(args.unjudged)
    return True


def _unjudged(text: str):
    if text == "drop":
        return text
    try:
        return float(text)
    except ValueError:
        raise InputError(f"--unjudged must be 'drop' or a grade (a number); got {text!r}") from None


def _lines(path, what: str) -> list[str]:
    try:
        return [ln.strip() for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot read ({exc.strerror})") from None


def _feature_set(path):
    if path is None:
        return None
    p = Path(path)
    if p.suffix.lower() == ".json":
        return p
    return _lines(p, "--feature-set")


def load(path, args, *, feature_names=None, label: str = "train"):
    """The data set of one log joined with ``--judgments``; the join report goes to stderr."""
    from rankwise.data import join_judgments, read_feature_log

    qid = args.qid
    if args.qids is not None:
        qid = _lines(args.qids, "--qids")
    log = read_feature_log(path, args.format, qid=qid, doc_id=args.doc_id, log_name=args.log_name,
                           feature_names=feature_names if feature_names is not None else _feature_set(
                               args.feature_set), missing_as_zero=args.missing_as_zero,
                           features_format=args.features_format, duplicates=args.duplicates,
                           feature_store=args.feature_store, field=args.field, absent_features=args.absent_features,
                           key_value_sep=args.key_value_sep, feature_sep=args.feature_sep)
    ds, report = join_judgments(log, args.judgments, unjudged=_unjudged(args.unjudged))
    print(f"{label} feature log {path}:\n  " + str(report).replace("\n", "\n  "), file=sys.stderr)
    if getattr(args, "model", "gbdt") != "gbdt" and any(report.missing_per_feature.values()):
        print(f"note: the log has missing values (NaN); --model gbdt handles them, --model {args.model} needs "
              "them imputed (OpenSearch: --missing-as-zero reads them as 0)", file=sys.stderr)
    return ds


def load_train_valid(args):
    """``(train, valid or None)``; the validation log is read in the training log's feature order."""
    train = load(args.train, args)
    valid = None
    if args.valid is not None:
        if args.qids is not None:
            raise InputError("--qids names the training log's responses; a --valid log needs its query ids in "
                             "the hits or responses (--qid PATH)")
        valid = load(args.valid, args, feature_names=train.feature_names, label="valid")
    return train, valid
