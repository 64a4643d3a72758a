"""``rankwise fuse``: several TREC runs fused into one (``rankwise.data.fusion``)."""
from __future__ import annotations

import sys


#: rankwise.data.fusion.FUSION_METHODS, spelled out so that building the parser imports no numpy (a test
#: checks that the two agree)
METHODS_HELP = "combsum (default), combmnz, combmax, combmin, combmed, combanz, rrf"


def add_fuse_parser(sub) -> None:
    p = sub.add_parser("fuse", help="fuse TREC runs (CombSUM, CombMNZ, ..., RRF) into one TREC run",
                       description="rankwise fuse RUN RUN [RUN ...] --method rrf --out fused.run")
    p.add_argument("runs", nargs="+", help="TREC run files (plain or .gz), at least two")
    p.add_argument("--method", default="combsum", help=METHODS_HELP)
    p.add_argument("--norm", default="min-max",
                   help="per-query score normalisation: min-max (default), max, sum, zmuv (z-score), rank, borda, "
                        "none; RRF uses ranks, so a normalisation does not change it")
    p.add_argument("--k", type=float, default=60.0, help="RRF's constant (default 60)")
    p.add_argument("--missing", choices=("skip", "zero"), default="skip",
                   help="a document a run did not retrieve: the run takes no part (skip, as ranx) or counts 0")
    p.add_argument("--depth", type=int, help="keep the best DEPTH documents per query (e.g. 1000); default all")
    p.add_argument("--out", required=True, help="the fused TREC run file to write")
    p.add_argument("--tag", default=None, help="run tag of the written file (default: the method)")
    from rankwise.cli._options import add_allow_truncated

    add_allow_truncated(p)
    p.set_defaults(func=run_fuse)


def run_fuse(args) -> int:
    from rankwise.data import write_trec_run
    from rankwise.data.fusion import fuse

    norm = None if str(args.norm).lower() == "none" else args.norm
    k = int(args.k) if float(args.k).is_integer() else args.k
    runs = args.runs
    if args.allow_truncated:
        from rankwise.data.trec import Run

        runs = [Run.read(p, allow_truncated=True) for p in runs]
    fused = fuse(runs, method=args.method, norm=norm, k=k, missing=args.missing, depth=args.depth)
    write_trec_run(fused, args.out, tag=args.tag or fused.name)
    print(f"rankwise: {len(args.runs)} runs fused by {fused.name} into {args.out}: {fused.n_queries} queries, "
          f"{len(fused)} documents", file=sys.stderr)
    return 0
