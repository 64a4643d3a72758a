"""GBDT row and column sampling: rankwise's (seed, round) draws against the libraries' own samplers.

A fit resumed from a checkpoint equals the uninterrupted one only if every random draw of round r is a
function of ``(random_state, r)``. ``GBDTRanker`` gets there two ways (docs/models.md, "Row
subsampling"): with a rankwise loss, ``subsample=f`` draws each round's rows itself (the others get
gradient and Hessian 0); every other draw stays the library's, its generator reseeded from
``(random_state, round)`` every round (LightGBM: bagging, column sampling, ``rank_xendcg``; XGBoost: its
global generator, with a new tree updater every round). The references are the libraries' samplers
left running -- the same fits with rankwise's reseeding switched off (what ``GBDTRanker`` did before).

For each row: ``--seeds`` fits (100 rounds, one thread) on MQ2008 Fold 1 train, NDCG@10 on its test
queries (mean, sd over seeds, min, max) and the fit time (the fastest of the fits: the machine is
shared); and one fit without sampling per objective.

    PYTHONPATH=src RANKWISE_DATA=/work/shared/data python benchmarks/bench_gbdt_subsample.py \\
        [--seeds 5] [--first-seed 0] [--fraction 0.8] [--rounds 100] [--backends lightgbm xgboost] [--rows TEXT ...]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np


@contextlib.contextmanager
def library_generators_left_running():
    """GBDTRanker with its per-round reseeding of the libraries' generators switched off (the reference)."""
    from rankwise.models import gbdt

    saved = gbdt._LgbReseeder.__bool__, gbdt._xgb_updaters
    gbdt._LgbReseeder.__bool__ = lambda self: False
    gbdt._xgb_updaters = lambda params, pinned: None
    try:
        yield
    finally:
        gbdt._LgbReseeder.__bool__, gbdt._xgb_updaters = saved


def rows(backend: str, f: float) -> list[tuple[str, str, dict, bool]]:
    """(label, loss, GBDTRanker parameters, reseeded) of each row of ``backend``."""
    native = "native:lambdarank" if backend == "lightgbm" else "native:rank:ndcg"
    own_rows = ({"bagging_fraction": f, "bagging_freq": 1} if backend == "lightgbm" else {"subsample": f})
    own_cols = {"feature_fraction": 0.5} if backend == "lightgbm" else {"colsample_bynode": 0.5}
    out = [("lambdarank, subsample: rankwise (seed, round)", "lambdarank", {"subsample": f}, True)]
    for reseeded in (True, False):
        tag = "reseeded every round" if reseeded else "library, left running"
        out += [(f"lambdarank, rows {own_rows}: {tag}", "lambdarank", {"backend_params": own_rows}, reseeded),
                (f"lambdarank, columns {own_cols}: {tag}", "lambdarank", {"backend_params": own_cols}, reseeded),
                (f"{native}, subsample={f}: {tag}", native, {"subsample": f}, reseeded)]
        if backend == "lightgbm":  # XGBoost's colsample_bytree is pinned by rankwise (_xgb_columns) either way
            out += [(f"{native}, colsample_bytree=0.5: {tag}", native, {"colsample_bytree": 0.5}, reseeded),
                    (f"native:rank_xendcg (its own draws): {tag}", "native:rank_xendcg", {}, reseeded)]
    out += [("lambdarank, no sampling", "lambdarank", {}, True), (f"{native}, no sampling", native, {}, True)]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--fraction", type=float, default=0.8)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--backends", nargs="+", default=["lightgbm", "xgboost"], choices=["lightgbm", "xgboost"])
    ap.add_argument("--rows", nargs="*", help="only the rows whose label contains one of these strings")
    args = ap.parse_args(argv)
    from rankwise.data import read_svmlight
    from rankwise.metrics import ndcg
    from rankwise.models import GBDTRanker

    root = Path(os.environ.get("RANKWISE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    fold = root / "MQ2008" / "Fold1"
    if not fold.is_dir():
        print(f"MQ2008 Fold1 not found under {root}: set RANKWISE_DATA", file=sys.stderr)
        return 2
    tr, te = read_svmlight(fold / "train.txt.gz"), read_svmlight(fold / "test.txt.gz")
    f = args.fraction
    print(f"MQ2008 Fold1: {tr.X.shape[0]} training rows, {len(te.query_ids)} test queries; fraction {f}, "
          f"{args.rounds} rounds, n_jobs=1, seeds {args.first_seed}..{args.first_seed + args.seeds - 1}\n")
    print("| backend | objective, sampling: drawn by | fits | test NDCG@10 mean | sd over seeds | min | max "
          "| fastest fit (s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for backend in args.backends:
        GBDTRanker("lambdarank", backend=backend, n_estimators=3, n_jobs=1, verbose=False).fit(tr)  # imports
        for label, loss, kw, reseeded in rows(backend, f):
            if args.rows and not any(r in label for r in args.rows):
                continue
            scores, times = [], []
            n_fits = args.seeds if kw or loss == "native:rank_xendcg" else 1
            for seed in range(args.first_seed, args.first_seed + n_fits):
                m = GBDTRanker(loss, backend=backend, n_estimators=args.rounds, random_state=seed, n_jobs=1,
                               verbose=False, **kw)
                with contextlib.nullcontext() if reseeded else library_generators_left_running():
                    t = time.perf_counter()
                    m.fit(tr)
                    times.append(time.perf_counter() - t)
                scores.append(ndcg(m.predict(te.X), te.labels, qid=te.qid, k=10))
            v = np.array(scores)
            sd = f"{v.std(ddof=1):.4f}" if len(v) > 1 else "—"
            print(f"| {backend} | {label} | {len(v)} | {v.mean():.4f} | {sd} | {v.min():.4f} | {v.max():.4f} | "
                  f"{min(times):.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
