"""``rankwise theory``: calibration verdicts, Lipschitz constants, the loss table, the list-length experiment."""
from __future__ import annotations


def add_theory_parser(sub) -> None:
    p = sub.add_parser("theory", help="calibration verdicts, Lipschitz constants, the list-length experiment")
    tsub = p.add_subparsers(dest="theory_command", metavar="SUBCOMMAND")
    c = tsub.add_parser("calibration", help="is LOSS calibrated with METRIC? prints the verdict and a counterexample")
    c.add_argument("--loss", required=True, help="a loss name from `rankwise theory losses`")
    c.add_argument("--metric", required=True, help="dcg, ndcg, ndcg@3, precision@2, err, ap, ...")
    c.add_argument("--n-items", type=int, default=3)
    c.add_argument("--utility", default=None, help="utility u(y) for template losses: linear or exp2")
    c.add_argument("--n-levels", type=int, default=None,
                   help="labels take values 0..N-1 (default 2 for binary measures, 3 otherwise)")
    c.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="loss hyper-parameter, repeatable (e.g. --param phi=exponential --param eta=4)")
    c.add_argument("--seed", type=int, default=0)
    lp = tsub.add_parser("lipschitz", help="numeric Lipschitz constant of a loss next to its closed form")
    lp.add_argument("--loss", required=True)
    lp.add_argument("--norm", choices=("inf", "2"), default="inf")
    lp.add_argument("--lengths", default="10,100,1000", help="comma-separated list lengths")
    lp.add_argument("--n-levels", type=int, default=5, help="labels take values 0..N-1 (default 5)")
    lp.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="loss hyper-parameter, repeatable (e.g. --param temperature=0.5)")
    tsub.add_parser("losses", help="table of every registered loss with its properties")
    ll = tsub.add_parser("list-length", help="train/test gap and bounds against list length (PNG + table)")
    ll.add_argument("--out", default="list_length", help="output folder")
    ll.add_argument("--quick", action="store_true", help="smaller run (one data draw unless --repeats is given)")
    ll.add_argument("--repeats", type=int, default=None,
                    help="independent data draws per list length, averaged (default 3; 1 with --quick)")
    ll.add_argument("--seed", type=int, default=0, help="seed of the synthetic data")
    p.set_defaults(func=run_theory)


def _parse_value(text: str):
    """``"4"`` -> 4, ``"0.5"`` -> 0.5, ``"true"``/``"false"`` -> bool, ``"none"`` -> None, else the string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_params(items) -> dict:
    """``["eta=4", "phi=exponential"]`` -> ``{"eta": 4, "phi": "exponential"}`` (for ``--param``)."""
    from rankwise.errors import InputError

    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise InputError(f"--param expects KEY=VALUE with KEY a hyper-parameter name (e.g. eta=4); got {item!r}")
        if key in out:
            raise InputError(f"--param {key} given twice ({out[key]!r} and {value!r})")
        out[key] = _parse_value(value)
    return out


def run_theory(args) -> int:
    from rankwise.errors import InputError

    cmd = getattr(args, "theory_command", None)
    if cmd == "calibration":
        from rankwise.theory import check_calibration

        hyper = parse_params(args.param)
        if args.utility is not None:
            if "utility" in hyper:
                raise InputError("give the utility once: --utility or --param utility=..., not both")
            hyper["utility"] = args.utility
        report = check_calibration(args.loss, args.metric, n_items=args.n_items, n_levels=args.n_levels,
                                   random_state=args.seed, **hyper)
        print(report)
        return 0
    if cmd == "lipschitz":
        from rankwise.theory import lipschitz

        try:
            lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
        except ValueError:
            raise InputError(f"--lengths must be comma-separated integers (e.g. 10,100); got {args.lengths!r}") from None
        hyper = parse_params(args.param)
        print(f"{'m':>6}  {'estimate':>10}  {'declared':>10}")
        for m in lengths:
            est = lipschitz(args.loss, norm=args.norm, list_length=m, n_levels=args.n_levels, **hyper)
            declared = "—" if est.declared is None else f"{est.declared:.4f}"
            print(f"{m:>6}  {est.estimate:>10.4f}  {declared:>10}")
        return 0
    if cmd == "losses":
        from rankwise.losses import REGISTRY, spec

        print(f"{'loss':<24} {'family':<10} {'convex':<7} {'order-preserving':<17} reference")
        for name in sorted(REGISTRY):
            s = spec(name)
            op = "?" if s.order_preserving is None else ("yes" if s.order_preserving else "no")
            print(f"{name:<24} {s.family:<10} {'yes' if s.convex else 'no':<7} {op:<17} {s.reference.splitlines()[0][:60]}")
        return 0
    if cmd == "list-length":
        from rankwise.theory.list_length import run_list_length_experiment

        result = run_list_length_experiment(out_dir=args.out, quick=args.quick, n_repeats=args.repeats,
                                            seed=args.seed)
        print(result)
        return 0
    raise InputError("rankwise theory needs a sub-command: calibration, lipschitz, losses or list-length")
