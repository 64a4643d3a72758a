"""Entry point of the ``rankwise`` command: a thin layer over the public API.

Every sub-command is a function ``_cmd_NAME(args) -> int``. User mistakes (``RankwiseError``,
which includes bad files with ``path:line``) print one line on stderr and exit with 2; a
traceback only with ``--debug``.
"""
from __future__ import annotations

import argparse
import os
import sys

from rankwise.cli._options import add_allow_truncated
from rankwise.errors import RankwiseError

MODELS = ("linear", "neural", "gbdt", "reduction", "structured")


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


# ---------------------------------------------------------------- train / predict
def best_point(history, metric):
    """``(index, value)`` of the best (highest) validation value in a training history, or None.

    The index counts history entries from 0, as the models' ``best_iteration_`` does."""
    if not history or not metric or metric not in history:
        return None
    values = [(i, v) for i, v in enumerate(history[metric]) if v is not None]
    return max(values, key=lambda iv: iv[1]) if values else None


def _check_out_dir(path) -> None:
    from pathlib import Path

    from rankwise.errors import InputError

    target = Path(path).expanduser().resolve()
    parent = target.parent
    if not parent.is_dir():
        raise InputError(f"--out {path}: directory {parent} does not exist")
    if target.is_dir():
        raise InputError(f"--out {path} is a directory; give a file name")
    _check_writable(parent, f"--out {path}")


def _check_writable(folder, what: str) -> None:
    """Create and remove a scratch file in ``folder``: a read-only place is found before any work."""
    import tempfile

    from rankwise.errors import InputError

    try:
        fd, scratch = tempfile.mkstemp(dir=folder, prefix=".rankwise-write-check-")
        os.close(fd)
        os.unlink(scratch)
    except OSError as exc:
        raise InputError(f"{what}: cannot write in {folder} ({exc.strerror or exc})") from None


def _check_model_params(model) -> None:
    """The model's own parameter checks, which ``fit`` would run only after the data is read."""
    from rankwise.errors import InputError, RankwiseError

    for name in ("_validate_params", "_check_params"):
        owner = next((c for c in type(model).__mro__ if name in vars(c)), None)
        # scikit-learn's BaseEstimator._validate_params needs _parameter_constraints
        if owner is None or not (owner.__module__.startswith("rankwise") or hasattr(model, "_parameter_constraints")):
            continue
        try:
            getattr(model, name)()
        except RankwiseError:
            raise
        except (ValueError, TypeError) as exc:
            raise InputError(f"--param: {exc}") from None


def _cmd_train(args) -> int:
    from rankwise.cli.inputs import _cli_hints, build_model, load_dataset, parse_params

    # cheap checks first: a typo in --loss, --param or --out must not cost a training run
    _check_out_dir(args.out)
    if args.loss is not None and args.model in ("linear", "neural", "gbdt") and not args.loss.startswith("native:"):
        from rankwise.losses import get

        get(args.loss)
    model = build_model(args.model, args.loss, parse_params(args.param), args.seed)
    _check_model_params(model)  # e.g. --param max_iter=-3 or alpha=abc, before reading the data
    from rankwise.cli import feature_logs

    with _cli_hints():
        if feature_logs.uses_feature_log(args):
            train, valid = feature_logs.load_train_valid(args)
        else:
            train = load_dataset(args.train, fmt=args.format, part="train", split=args.split, query_file=args.group,
                                 allow_truncated=args.allow_truncated)
            valid = None
            if args.valid is not None:
                valid = load_dataset(args.valid, fmt=args.format, part="test", split=args.split,
                                     n_features=train.X.shape[1], allow_truncated=args.allow_truncated)
    print(f"training {type(model).__name__} on {train.n_queries} queries, {len(train)} rows, "
          f"{train.X.shape[1]} features", file=sys.stderr)
    model.fit(train, eval_set=valid)
    best = best_point(getattr(model, "history_", None), getattr(model, "eval_metric", None))
    if best is not None:
        step, value = best
        print(f"best validation point: iteration {step} (0-based, as best_iteration_), "
              f"{model.eval_metric} = {value:.4f}")
    if valid is not None:
        print(f"validation ndcg@10 = {model.score(valid):.4f}")
    if getattr(model, "untrained_", False) and not args.allow_untrained:
        from rankwise.errors import UntrainedModelError

        raise UntrainedModelError(f"{type(model).__name__} came back untrained: it scores every document of each "
                                  f"training query alike or never left its start (see the warning above); "
                                  f"{args.out} was not written. Change the model's parameters, or pass "
                                  "--allow-untrained to save it anyway")
    model.save(args.out)
    print(f"saved {args.out}")
    return 0


def _predict_scores(model, ds):
    return model.predict(ds.X, qid=ds.qid)  # every ranker takes qid (models scoring a whole list use it)


def _cmd_predict(args) -> int:
    import numpy as np

    import rankwise
    from rankwise.cli.inputs import _cli_hints, _load_predict_data
    from rankwise.data import write_trec_run

    _check_out_dir(args.out)
    model = rankwise.load(args.model)
    expected = getattr(model, "n_features_in_", None)
    with _cli_hints():
        ds = _load_predict_data(args, n_features=None)
        found = ds.X.shape[1]
        if expected is not None and found < expected:
            if not args.pad_features:
                from rankwise.errors import InputError

                raise InputError(f"{args.data}: the data has {found} features (highest feature index {found}) but the "
                                 f"model {args.model} was trained on {expected}; the {expected - found} missing "
                                 "features would be scored as zeros. Score data with the model's features, or pass "
                                 "--pad-features when the file is sparse SVMlight that omits zero values")
            # SVMlight's sparse convention: an absent feature is 0 (asked for explicitly)
            ds = _load_predict_data(args, n_features=expected)
    scores = np.asarray(_predict_scores(model, ds), dtype=np.float64)
    if args.trec:
        write_trec_run(ds, args.out, scores=scores, tag=args.tag)
    else:
        from rankwise._io import atomic_write

        with atomic_write(args.out, "w") as fh:
            fh.write("".join(f"{s!r}\n" for s in scores.tolist()))
    print(f"wrote {len(scores)} scores for {ds.n_queries} queries to {args.out}")
    return 0


# ---------------------------------------------------------------- evaluate / compare / report
def _conventions(args) -> dict:
    from rankwise.cli.inputs import parse_params

    return parse_params(args.convention)


def _evaluate_runs(run_paths, qrels, metrics, profile, conventions, complete=False, *, names=None, quiet=False,
                   trec_options=None, allow_truncated=False):
    """TREC runs against qrels, as trec_eval sees them (``rankwise.metrics.evaluate_runs``).

    The queries evaluated are those in both the run and the qrels (trec_eval 9's default), or with
    ``complete`` every qrels query, a query the run lacks scoring as an empty ranking (trec_eval
    ``-c``). What is left out is said on stderr; no query in common is an error.
    ``allow_truncated``: files whose last line has no line break are read as they are.
    """
    from rankwise.metrics import evaluate_runs
    from rankwise.metrics.trec import PreparedQrels

    names = names or [os.path.basename(str(p)) for p in run_paths]
    runs = {n: p for n, p in zip(names, run_paths)}  # read by evaluate_runs, on its threads
    if allow_truncated:
        from rankwise.data.trec import Run

        runs = {n: Run.read(p, name=n, allow_truncated=True) for n, p in runs.items()}
    pq = qrels if isinstance(qrels, PreparedQrels) else PreparedQrels(_read_qrels(qrels, allow_truncated))
    results = evaluate_runs(pq, runs, metrics=metrics, profile=profile, complete=complete,
                            **(trec_options or {}), **conventions)
    if not quiet:
        for (name, res), path in zip(results.items(), run_paths):
            c = res.conventions
            unjudged, absent = c["run_topics_without_judgments"], c["qrels_topics_missing_from_run"]
            if unjudged or absent:
                what = "scored as empty rankings (--complete)" if complete else \
                    "left out (use --complete to score them as 0)"
                print(f"rankwise: {path}: {unjudged} run queries have no judgments and are left out; "
                      f"{absent} judged queries are not in the run and are {what}", file=sys.stderr)
    return results


def _read_qrels(path, allow_truncated: bool):
    from rankwise.data.trec import Qrels

    return Qrels.read(path, allow_truncated=allow_truncated)


def _evaluate_run(run_path, qrels, metrics, profile, conventions, complete=False, *, quiet=False):
    """One run against qrels (see :func:`_evaluate_runs`)."""
    return next(iter(_evaluate_runs([run_path], qrels, metrics, profile, conventions, complete,
                                    quiet=quiet).values()))


def _cmd_evaluate(args) -> int:
    from rankwise.errors import InputError
    from rankwise.metrics import evaluate

    metrics = _csv(args.metrics) if args.metrics else None
    conventions = _conventions(args)
    if isinstance(args.per_query, str) and not args.per_query.lower().endswith(".csv"):
        # `--per-query RUN1 RUN2`: a flag followed by the runs, never a file to overwrite
        args.inputs = [args.per_query, *args.inputs]
        args.per_query = True
    out_format = args.format if args.format in ("trec_eval", "table") else "table"
    data_format = args.format if args.format not in ("trec_eval", "table") else "auto"
    runs = list(args.run or []) + (list(args.inputs) if args.qrels is not None else [])
    if args.run or args.qrels is not None:
        if not runs or args.qrels is None or args.scores is not None:
            raise InputError("give either --qrels QRELS RUN [RUN ...] (or --run RUN --qrels QRELS), "
                             "or DATA --scores FILE")
        from rankwise.metrics.trec import PreparedQrels, describe_conventions, format_trec_eval

        profile = args.profile or "trec_eval"  # TREC files: trec_eval's conventions unless told otherwise
        metrics = metrics or (["all_trec"] if out_format == "trec_eval" else ["ndcg@10", "err@10", "map"])
        trec_options = {}
        if args.relevance_level is not None:
            trec_options["relevance_level"] = args.relevance_level
        if args.max_docs is not None:
            trec_options["max_docs"] = args.max_docs
        if args.judged_only:
            trec_options["judged_only"] = True
        qrels = PreparedQrels(_read_qrels(args.qrels, args.allow_truncated))
        results = _evaluate_runs(runs, qrels, metrics, profile, conventions, args.complete,
                                 trec_options=trec_options, quiet=out_format == "trec_eval",
                                 allow_truncated=args.allow_truncated)
        first = next(iter(results.values()))
        print(f"rankwise: {describe_conventions(profile, first.conventions)}", file=sys.stderr)
        per_query_stdout = args.per_query is True
        if out_format == "trec_eval":
            format_trec_eval(results, metrics, per_query=per_query_stdout, file=sys.stdout)
        else:
            for name, result in results.items():
                if len(results) > 1:
                    print(f"# {name}")
                _print_table(result, per_query_stdout)
        if isinstance(args.per_query, str):
            import pandas as pd

            frame = pd.concat({n: r.per_query for n, r in results.items()}, names=["run"]) if len(results) > 1 \
                else first.per_query
            frame.to_csv(args.per_query)
            print(f"per-query values written to {args.per_query}", file=sys.stderr)
        return 0
    if not args.inputs or args.scores is None:
        raise InputError("give either --qrels QRELS RUN [RUN ...] (or --run RUN --qrels QRELS), or DATA --scores FILE")
    if len(args.inputs) > 1:
        raise InputError(f"DATA --scores FILE takes one data set; got {len(args.inputs)}: {args.inputs}")
    from rankwise.cli.inputs import load_dataset, read_scores

    ds = load_dataset(args.inputs[0], fmt=data_format, part="test", split=args.split,
                      allow_truncated=args.allow_truncated)
    scores = read_scores(args.scores, len(ds))
    result = evaluate(scores, ds.labels, ds.qid, metrics=metrics or ["ndcg@10", "err@10", "map"],
                      profile=args.profile, doc_ids=ds.doc_ids, **conventions)
    _print_table(result, args.per_query is True)
    if isinstance(args.per_query, str):
        result.per_query.to_csv(args.per_query, index_label="qid")
        print(f"per-query values written to {args.per_query}")
    return 0


def _print_table(result, per_query: bool) -> None:
    width = max(len(m) for m in result.mean)
    if per_query:
        for qid, row in result.per_query.iterrows():
            for name, value in row.items():
                print(f"{name:<{width}}  {qid}  {float(value):.6f}")
    for name, value in result.mean.items():
        print(f"{name:<{width}}  {value:.6f}")
    print(f"{'queries':<{width}}  {result.n_queries}")  # the count alone: no per-query table built


def _per_query_runs(args):
    from pathlib import Path

    from rankwise.errors import InputError

    names = _csv(args.names) if args.names else [Path(r).name for r in args.runs]
    if len(names) != len(args.runs) or len(set(names)) != len(names):
        raise InputError(f"--names must give {len(args.runs)} distinct names, one per run; got {names}")
    metrics = _csv(args.metrics)
    results = _evaluate_runs(args.runs, args.qrels, metrics, args.profile or "trec_eval", _conventions(args),
                             args.complete, names=names, allow_truncated=args.allow_truncated)
    sizes = {n: len(r.per_query) for n, r in results.items()}
    if len(set(sizes.values())) > 1:
        raise InputError(f"the runs cover different sets of queries ({sizes}); paired comparisons need the same "
                         "queries: use --complete to score every judged query in every run")
    return results, metrics


def _add_significance_options(p) -> None:
    p.add_argument("--correction", default="holm", choices=("holm", "bonferroni", "bh", "none"),
                   help="multiple-comparison correction: holm (default), bonferroni, bh (Benjamini-Hochberg), none")
    p.add_argument("--family", default="all", choices=("all", "metric"),
                   help="correct over all (pair, metric) tests (default) or over the pairs of each metric")
    p.add_argument("--tukey", action="store_true", help="add the randomised Tukey HSD p-values (Carterette 2012)")
    p.add_argument("--effect-size", action="store_true", help="add Cohen's d_z of the paired differences")
    p.add_argument("--bootstrap", type=int, default=0, metavar="N",
                   help="add percentile bootstrap confidence intervals of the mean differences (N resamples)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="level of the intervals and of the resolution note (default 0.05)")


def _cmd_compare(args) -> int:
    import warnings

    from rankwise.report import compare_systems

    results, _ = _per_query_runs(args)
    with warnings.catch_warnings():  # the notes (a resolution floor) are printed with the table
        warnings.simplefilter("ignore", UserWarning)
        table = compare_systems({n: r.per_query for n, r in results.items()}, n_resamples=args.resamples,
                                random_state=args.seed, correction=args.correction, family=args.family,
                                tukey_hsd=args.tukey, effect_size=args.effect_size, n_bootstrap=args.bootstrap,
                                alpha=args.alpha)
    print(table)  # with its notes
    return 0


def _curve_metric(args, metrics) -> str:
    """The metric of the metric@k plot: --curve-metric, else the first metric that takes a cut-off."""
    from rankwise.errors import InputError
    from rankwise.metrics import get_metric

    if args.curve_metric:
        m = get_metric(args.curve_metric)
        if not m.entry.takes_k:
            raise InputError(f"--curve-metric {args.curve_metric!r} takes no cut-off; choose e.g. ndcg, map, precision")
        return m.name
    return next((get_metric(m).name for m in metrics if get_metric(m).entry.takes_k), "ndcg")


def _cmd_report(args) -> int:
    from pathlib import Path

    import rankwise
    from rankwise.report.markdown import CURVE_KS, write_report

    models = [rankwise.load(path) for path in args.model]  # a bad model file fails before any work
    results, metrics = _per_query_runs(args)
    base = _curve_metric(args, metrics)
    curve_specs = [f"{base}@{k}" for k in CURVE_KS]
    curve_results = _evaluate_runs(args.runs, args.qrels, curve_specs, args.profile or "trec_eval",
                                   _conventions(args), args.complete, names=list(results), quiet=True,
                                   allow_truncated=args.allow_truncated)
    curves = {name: {k: r.mean[s] for k, s in zip(CURVE_KS, curve_specs)} for name, r in curve_results.items()}
    histories = {}
    for path, model in zip(args.model, models):
        history = getattr(model, "history_", None)
        if history:
            histories[Path(path).name] = dict(history)
    out = write_report(results, args.out, metrics=metrics, curves=curves, curve_metric=base,
                       histories=histories or None, n_resamples=args.resamples, random_state=args.seed)
    if args.model and not histories:
        print("rankwise: the --model files hold no training history; no learning-curve plot", file=sys.stderr)
    print(f"report written to {out}")
    return 0


# ---------------------------------------------------------------- fetch / demo / theory / bench
def _cmd_fetch(args) -> int:
    from rankwise.data import fetch

    path = fetch(args.name, cache_dir=args.cache_dir)
    print(path)
    return 0


def _cmd_demo(args) -> int:
    from rankwise.cli.demo import run_demo

    return run_demo(args)


def _cmd_theory(args) -> int:
    from rankwise.cli.theory import run_theory

    return run_theory(args)


def _cmd_bench(args) -> int:
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[3] / "benchmarks" / "run_all.py"
    from rankwise.errors import InputError

    if not script.exists():
        raise InputError(f"the benchmarks live in the source tree ({script}); run from a checkout of rankwise")
    cmd = [sys.executable, str(script)] + (["--only", *args.only] if args.only else [])
    return subprocess.call(cmd)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rankwise", description="Learning to rank: train, predict, evaluate, compare.")
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    # --debug is accepted after the sub-command too ("rankwise evaluate ... --debug")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show a traceback on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_parser = sub.add_parser

    def add_parser(name, **kwargs):
        return _add_parser(name, parents=[common], **kwargs)

    sub.add_parser = add_parser

    def data_opts(p):
        p.add_argument("--format", default="auto", help="auto (default), svmlight, parquet, movielens, npz")
        p.add_argument("--split", default=None, help="MovieLens: split u1..u5, ua, ub (100k; default u1), or time "
                                                     "/ time-full (per-user time split; default for 1M and latest)")

    p = sub.add_parser("train", help="train a model and save it", description="Train a ranker and save it (no pickle).")
    p.add_argument("train", help="training data: LETOR/SVMlight file, .parquet, a MovieLens 100k folder, or a "
                                 "search engine's feature log (--format opensearch|elasticsearch|solr|vespa)")
    p.add_argument("--valid", help="validation data (early stopping, best point)")
    p.add_argument("--model", choices=MODELS, default="linear")
    p.add_argument("--loss", help="a rankwise loss name (see `rankwise theory losses`), 'native:lambdarank' "
                                  "for gbdt, or the measure for --model structured")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="model parameter (repeatable), e.g. alpha=1e-3 hidden=(64,32); for reduction: "
                        "classifier=logistic|linear_svc|... (rankwise.models.reduction.CLASSIFIERS)")
    p.add_argument("--out", required=True, help="model file to write")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--group", help="SVMlight without qid: file of query sizes, one per line (LightGBM .query)")
    add_allow_truncated(p)
    p.add_argument("--allow-untrained", action="store_true",
                   help="save the model even when training left it untrained (a constant scorer, or parameters "
                        "that never left their start); without it that is an error and nothing is written")
    data_opts(p)
    from rankwise.cli import feature_logs

    feature_logs.add_arguments(p)  # --format opensearch|elasticsearch|solr|vespa: a feature log + --judgments
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("predict", help="score a data set with a saved model")
    p.add_argument("model")
    p.add_argument("data")
    p.add_argument("--out", required=True, help="scores (one per line) or, with --trec, a TREC run file")
    p.add_argument("--trec", action="store_true", help="write a TREC run file")
    p.add_argument("--tag", default="rankwise", help="run tag for --trec")
    p.add_argument("--group", help="SVMlight without qid: file of query sizes, one per line (LightGBM .query)")
    p.add_argument("--pad-features", action="store_true",
                   help="score features beyond the file's highest index as 0 (sparse SVMlight omits zeros); "
                        "without it a file with fewer features than the model is an error")
    add_allow_truncated(p)
    data_opts(p)
    p.set_defaults(func=_cmd_predict)

    def eval_opts(p, default_metrics="ndcg@10,err@10,map"):
        p.add_argument("--metrics", default=default_metrics,
                       help="comma-separated measures: rankwise (ndcg@10, P@5) or trec_eval names (ndcg_cut_10, "
                            "P_5, bpref) and groups (all_trec, official)")
        p.add_argument("--profile", help="trec_eval (default for TREC runs: trec_eval 10), trec_eval9, lightgbm, "
                                         "xgboost, sklearn, ranx or letor")
        p.add_argument("--convention", action="append", default=[], metavar="KEY=VALUE",
                       help="override a convention: gain=linear, ties=average, empty=drop, threshold=1, ...")
        p.add_argument("--complete", "-c", action="store_true",
                       help="with --run: score every judged query, a query missing from the run as an empty "
                            "ranking (trec_eval -c); default: only the queries in both run and qrels")

    p = sub.add_parser("evaluate", help="evaluate runs against qrels (as trec_eval), or scores against a data set",
                       description="rankwise evaluate --qrels QRELS [--format trec_eval] RUN [RUN ...], or "
                                   "rankwise evaluate DATA --scores FILE")
    p.add_argument("inputs", nargs="*", metavar="RUN|DATA",
                   help="TREC run files (with --qrels), or the data set whose labels are the truth (with --scores)")
    p.add_argument("--scores", help="one score per row of DATA")
    p.add_argument("--run", action="append", help="TREC run file (repeatable; or give runs as arguments)")
    p.add_argument("--qrels", help="TREC qrels file (plain or .gz)")
    p.add_argument("--per-query", "-q", nargs="?", const=True, default=None, metavar="CSV",
                   help="print per-query values (trec_eval -q); with a file name ending in .csv, write them to "
                        "that CSV instead")
    p.add_argument("--relevance-level", "-l", type=int, help="trec_eval -l: grades >= this are relevant (default 1)")
    p.add_argument("--max-docs", "-M", type=int, help="trec_eval -M: at most this many documents per topic")
    p.add_argument("--judged-only", "-J", action="store_true", help="trec_eval -J: drop unjudged documents")
    eval_opts(p, default_metrics=None)
    add_allow_truncated(p)
    p.add_argument("--format", default="auto", help="output: table (default) or trec_eval; data format of DATA: "
                                                     "auto, svmlight, parquet, movielens, npz")
    p.add_argument("--split", default=None, help="MovieLens: split u1..u5, ua, ub (100k; default u1), or time / "
                                                 "time-full (per-user time split; default for 1M and latest)")
    p.set_defaults(func=_cmd_evaluate)

    for name, helptext in (("compare", "compare runs: means, paired tests (Holm, Bonferroni or BH; Tukey HSD), "
                                       "effect sizes, bootstrap intervals, win/tie/loss"),
                           ("report", "plots (PNG) and a Markdown summary for several runs")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("runs", nargs="+", help="TREC run files")
        p.add_argument("--qrels", required=True)
        p.add_argument("--names", help="comma-separated display names, one per run")
        p.add_argument("--resamples", type=int, default=10_000, help="randomisation-test resamples")
        p.add_argument("--seed", type=int, default=0)
        eval_opts(p)
        add_allow_truncated(p)
        if name == "compare":
            _add_significance_options(p)
        if name == "report":
            p.add_argument("--out", required=True, help="output folder")
            p.add_argument("--model", action="append", default=[], help="saved model whose training history to plot")
            p.add_argument("--curve-metric", help="metric of the metric@k plot (default: the first metric with a cut-off)")
        p.set_defaults(func=_cmd_compare if name == "compare" else _cmd_report)

    p = sub.add_parser("fetch", help="download a data set into the cache (checksums verified)")
    p.add_argument("name", help="mq2007, mq2008, ohsumed, mslr-web10k, mslr-web30k, movielens-100k")
    p.add_argument("--cache-dir")
    p.set_defaults(func=_cmd_fetch)

    p = sub.add_parser("demo", help="train and evaluate several models on a built-in synthetic data set")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--queries", type=int, default=300, help="number of synthetic queries (default 300)")
    p.set_defaults(func=_cmd_demo)

    from rankwise.cli.theory import add_theory_parser

    add_theory_parser(sub)
    from rankwise.cli.clicks import add_clicks_parser

    add_clicks_parser(sub)
    from rankwise.cli.recommend import add_recommend_parser

    add_recommend_parser(sub)
    from rankwise.cli.fusion import add_fuse_parser

    add_fuse_parser(sub)
    from rankwise.cli.export import add_export_parser

    add_export_parser(sub)
    from rankwise.cli.trec_eval import add_trec_eval_parser

    add_trec_eval_parser(sub)
    p = sub.add_parser("bench", help="run the benchmarks (from a source checkout) and rewrite BENCHMARKS.md")
    p.add_argument("--only", nargs="*", help="benchmark names, e.g. bench_metrics")
    p.set_defaults(func=_cmd_bench)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage line
        return int(exc.code or 0)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `rankwise compare ... | head`: the reader left, nothing to report
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except (RankwiseError, OSError) as exc:
        if args.debug:
            raise
        msg = str(exc) if not isinstance(exc, OSError) or isinstance(exc, RankwiseError) else \
            f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")
        if hasattr(args, "allow_truncated"):  # the readers' hint, in this command's words
            msg = msg.replace("allow_truncated=True", "--allow-truncated")
        print(f"rankwise: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
