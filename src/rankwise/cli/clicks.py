"""``rankwise clicks``: fit click models, estimate propensities, simulate clicks, train from a click log.

- ``rankwise clicks fit-model --log FILE --model PBM [--test-log TEST]``: held-out log-likelihood (per
  session and, PyClick's convention, per result) and perplexity (per rank), fitting speed; the test
  sessions are ``--test-log`` (the whole ``--log`` trains) or a random ``--test-fraction`` of
  ``--log``; ``--relevance-out CSV`` writes the per-(query, doc) relevance estimates.
- ``rankwise clicks propensities --log FILE --method pbm|harvest|randtop|randpair|regression-em``.
- ``rankwise clicks simulate --data LETOR --out LOG.csv``: the simulation protocol's click log (long table).
- ``rankwise clicks train --log LOG --features LETOR --debias regression-em --out MODEL``.
"""
from __future__ import annotations

import sys

# rankwise.data.CLICK_LOG_FORMATS, spelled out: `rankwise --help` loads no numpy (tests/clicks checks they agree)
LOG_FORMATS = ("yandex_sample", "csv", "parquet")
PROPENSITY_METHODS = ("pbm", "harvest", "randtop", "randpair", "regression-em")


def add_clicks_parser(sub) -> None:
    p = sub.add_parser("clicks", help="click logs: click models, propensities, debiased training")
    csub = p.add_subparsers(dest="clicks_command", metavar="SUBCOMMAND")

    def log_opts(q):
        q.add_argument("--log", required=True, help="click log file")
        q.add_argument("--log-format", default="yandex_sample", choices=LOG_FORMATS,
                       help="yandex_sample (the Yandex challenge sample layout), csv or parquet long table "
                            "(session, query, rank, doc, clicked)")

    f = csub.add_parser("fit-model", help="fit a click model; held-out log-likelihood and perplexity per rank")
    log_opts(f)
    f.add_argument("--model", default="PBM", help="GCTR, RCTR, DCTR, PBM, CM, UBM, DCM, CCM, DBN, SDBN, or 'all'")
    f.add_argument("--test-log", default=None,
                   help="held-out sessions (PyClick's test file); then every session of --log trains")
    f.add_argument("--test-log-format", default=None, choices=LOG_FORMATS,
                   help="layout of --test-log (default: --log-format)")
    f.add_argument("--test-fraction", type=float, default=0.25,
                   help="without --test-log: sessions of --log held out at random (default 0.25)")
    f.add_argument("--seed", type=int, default=0, help="without --test-log: seed of the random train/test split")
    f.add_argument("--max-iter", type=int, default=50, help="EM iterations (default 50)")
    f.add_argument("--relevance-out", default=None, help="write query,doc,relevance (CSV) of the fitted model")

    pr = csub.add_parser("propensities", help="examination propensities θ_k/θ_1 from a click log")
    log_opts(pr)
    pr.add_argument("--method", default="pbm", choices=PROPENSITY_METHODS)
    pr.add_argument("--features", default=None, help="LETOR/Parquet features of the documents (regression-em)")
    pr.add_argument("--pair-rank-column", default="pair_rank",
                    help="randpair: the session column with the rank paired with rank 1 (csv/parquet logs)")
    pr.add_argument("--out", default=None,
                    help="save the fitted estimator or click model (.npz; rankwise.models.load reads it)")

    s = csub.add_parser("simulate", help="click log of the simulation protocol from graded LETOR data (long table)")
    s.add_argument("--data", required=True, help="graded training data (LETOR/SVMlight or Parquet)")
    s.add_argument("--out", required=True, help="output click log (.csv or .parquet)")
    s.add_argument("--sessions", type=int, default=100_000)
    s.add_argument("--eta", type=float, default=1.0, help="position bias severity: θ_k = (1/k)^eta")
    s.add_argument("--click-model", default="pbm", choices=("pbm", "cascade"))
    s.add_argument("--top-k", default="10",
                   help="display depth: documents per result page, or 'all' for the whole ranked list")
    s.add_argument("--production-fraction", type=float, default=0.01)
    s.add_argument("--seed", type=int, default=0)

    t = csub.add_parser("train", help="train a ranker on a click log (IPS-debiased with --debias)")
    log_opts(t)
    t.add_argument("--features", required=True,
                   help="document features (LETOR/Parquet); the log's documents are its doc ids or row numbers")
    t.add_argument("--model", default="gbdt", choices=("linear", "neural", "gbdt"))
    t.add_argument("--loss", default="op_pairwise", help="a loss affine in the labels (default op_pairwise)")
    t.add_argument("--debias", default="none", choices=("none",) + PROPENSITY_METHODS,
                   help="propensity estimator for IPS labels; none = raw click-through rates")
    t.add_argument("--clip", type=float, default=None, help="propensity clipping: θ replaced by max(θ, CLIP)")
    t.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="model parameter, repeatable")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", required=True, help="model file")
    p.set_defaults(func=run_clicks)


def _read_log(args):
    from rankwise.clicks import read_click_log

    return read_click_log(args.log, format=args.log_format)


def _load_features(path):
    from rankwise.cli.inputs import load_dataset

    return load_dataset(path, fmt="auto", part="train")


def _propensity_estimator(args, log, method):
    """The fitted propensity estimator of ``--method`` (a click model for pbm)."""
    from rankwise import clicks
    from rankwise.errors import InputError

    if method == "pbm":
        return clicks.PBM().fit(log)
    if method == "harvest":
        return clicks.InterventionHarvesting().fit(log)
    if method == "randtop":
        return clicks.RandTop().fit(log)
    if method == "randpair":
        if args.log_format == "yandex_sample":
            raise InputError("randpair needs the intervention of each session: give a csv/parquet log with a "
                             f"{args.pair_rank_column!r} column")
        _attach_session_column(args, log, args.pair_rank_column)
        return clicks.RandPair(args.pair_rank_column).fit(log)
    if getattr(args, "features", None) is None:
        raise InputError("--method regression-em needs --features (the documents' features)")
    feats = _load_features(args.features)
    return clicks.RegressionEM().fit(log, features=feats)


def _propensities(args, log, method):
    return _propensity_estimator(args, log, method).propensity_


def _attach_session_column(args, log, column):
    import pandas as pd

    from rankwise.errors import InputError

    frame = pd.read_csv(args.log) if args.log_format == "csv" else pd.read_parquet(args.log)
    if column not in frame.columns:
        raise InputError(f"{args.log}: no column {column!r} (the rank paired with rank 1 in each session)")
    first = frame.drop_duplicates("session", keep="first")
    log.session_data[column] = first[column].to_numpy()[: log.n_sessions]


def run_clicks(args) -> int:
    from rankwise.errors import InputError

    cmd = getattr(args, "clicks_command", None)
    if cmd == "fit-model":
        import time

        from rankwise.clicks import CLICK_MODELS

        names = list(CLICK_MODELS) if args.model == "all" else [args.model]
        for n in names:
            if n not in CLICK_MODELS:
                raise InputError(f"--model must be one of {', '.join(CLICK_MODELS)} or 'all'; got {n!r}")
        from rankwise.clicks import read_click_log

        log = _read_log(args)
        if args.test_log is None:
            if not 0 < args.test_fraction < 1:
                raise InputError(f"--test-fraction must be in (0, 1); got {args.test_fraction}")
            train, test = log.split(1 - args.test_fraction, shuffle=True, random_state=args.seed)
            print(f"{log.n_sessions} sessions: {train.n_sessions} train, {test.n_sessions} test "
                  f"(random split, seed {args.seed})")
        else:
            train = log
            test = read_click_log(args.test_log, format=args.test_log_format or args.log_format)
            print(f"{train.n_sessions} training sessions ({args.log}), {test.n_sessions} test sessions "
                  f"({args.test_log})")
        if test.max_rank > train.max_rank:
            raise InputError(f"{args.test_log or args.log}: test sessions show up to {test.max_rank} results, the "
                             f"training sessions at most {train.max_rank}: no parameter for the ranks below")
        print("loglik: mean log P(clicks) per session (natural log); per result: each session's value divided by "
              "its number of results (PyClick's LogLikelihood)")
        print(f"{'model':6s} {'loglik':>9s} {'per result':>10s} {'perplexity':>10s}  "
              f"perplexity at rank 1..{test.max_rank}  sessions/s")
        for n in names:
            t = time.perf_counter()
            m = CLICK_MODELS[n](max_iter=args.max_iter).fit(train)
            speed = train.n_sessions / max(time.perf_counter() - t, 1e-9)
            ll = m.log_likelihood(test)
            overall, per_rank = m.perplexity(test)
            print(f"{n:6s} {float(ll):9.4f} {ll.per_result:10.4f} {overall:10.4f}  "
                  + " ".join(f"{x:.3f}" for x in per_rank) + f"  {speed:,.0f}")
        print(f"held-out sessions evaluated: {ll.n_sessions}; left out (query not in training): {ll.n_dropped}")
        if args.relevance_out:
            m.relevance().to_csv(args.relevance_out, index=False)
            print(f"relevance of {names[-1]} written to {args.relevance_out}")
        return 0
    if cmd == "propensities":
        from rankwise.clicks import identifiability

        log = _read_log(args)
        est = _propensity_estimator(args, log, args.method)
        print("rank  propensity (relative to rank 1)")
        for k, v in enumerate(est.propensity_, start=1):
            print(f"{k:4d}  {v:.4f}")
        print(f"identifiability: {identifiability(log):.4f} of the (query, doc) pairs are seen at two or more ranks",
              file=sys.stderr)
        if args.out:
            est.save(args.out)
            print(f"estimator written to {args.out}", file=sys.stderr)
        return 0
    if cmd == "simulate":
        def _top_k(v):
            if str(v).lower() == "all":
                return None
            try:
                return int(v)
            except ValueError:
                raise InputError(f"--top-k must be a positive integer or 'all'; got {v!r}") from None

        from pathlib import Path

        from rankwise.clicks import simulate_clicks_protocol

        out = Path(args.out)
        if out.suffix not in (".csv", ".parquet"):
            raise InputError(f"--out must end in .csv or .parquet; got {args.out}")
        data = _load_features(args.data)
        sim = simulate_clicks_protocol(data, n_sessions=args.sessions, eta=args.eta, click_model=args.click_model,
                                       top_k=_top_k(args.top_k), production_fraction=args.production_fraction,
                                       random_state=args.seed)
        frame = sim.log.to_frame()
        from rankwise._io import atomic_write

        with atomic_write(out) as fh:
            frame.to_csv(fh, index=False) if out.suffix == ".csv" else frame.to_parquet(fh)
        print(f"{sim.log.n_sessions} sessions, {int(sim.log.clicked.sum())} clicks written to {out} "
              "(documents are row numbers of --data)")
        return 0
    if cmd == "train":
        from rankwise.cli.inputs import build_model, parse_params
        from rankwise.clicks import click_dataset, fit_debiased

        log = _read_log(args)
        feats = _load_features(args.features)
        if feats.doc_ids is not None and not set(log.docs.astype(str)) <= set(feats.doc_ids.astype(str)):
            feats.doc_ids = None  # the log's documents are row numbers (what `clicks simulate` writes)
        model = build_model(args.model, args.loss, parse_params(args.param), args.seed)
        if args.debias == "none":
            model.fit(click_dataset(log, feats))
            print(f"trained {type(model).__name__} on raw click-through rates (biased by position)")
        else:
            p = _propensities(args, log, args.debias)
            fit_debiased(model, log, feats, p, clip=args.clip)
            print("propensities: " + " ".join(f"{x:.3f}" for x in p))
            print(f"trained {type(model).__name__} on IPS labels ({args.debias} propensities"
                  f"{'' if args.clip is None else f', clipped at {args.clip}'})")
        model.save(args.out)
        print(f"saved {args.out}")
        return 0
    print("usage: rankwise clicks {fit-model,propensities,simulate,train} ... (see --help)", file=sys.stderr)
    return 2
