"""GBDT row subsampling: rankwise's (seed, round) draw against the library's own bagging.

``GBDTRanker(subsample=f)`` draws each round's rows itself (so that a resumed fit equals the
uninterrupted one, docs/models.md "Row subsampling"); the library's own bagging
(``backend_params``: LightGBM ``bagging_fraction=f, bagging_freq=1``, XGBoost ``subsample=f``) is
the reference. For each backend: ``--seeds`` fits of each (LambdaMART objective, 100 rounds, one
thread) on MQ2008 Fold 1 train, NDCG@10 on its test queries (mean, sd over seeds) and the fit time
(the fastest of the fits: the machine is shared); and one fit without subsampling. LightGBM also:
``colsample_bytree=0.5`` (its column sampler reseeded from ``(seed, round)`` every round) against its
own ``feature_fraction=0.5`` left running.

    PYTHONPATH=src RANKWISE_DATA=/work/shared/data python benchmarks/bench_gbdt_subsample.py \
        [--seeds 5] [--fraction 0.8]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--fraction", type=float, default=0.8)
    ap.add_argument("--rounds", type=int, default=100)
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
    library = {"lightgbm": {"bagging_fraction": f, "bagging_freq": 1}, "xgboost": {"subsample": f}}
    print(f"MQ2008 Fold1: {tr.X.shape[0]} training rows, {len(te.query_ids)} test queries; fraction {f}, "
          f"{args.rounds} rounds, lambdarank, n_jobs=1, seeds 0..{args.seeds - 1}\n")
    print("| backend | subsample drawn by | fits | test NDCG@10 mean | sd over seeds | min | max | fastest fit (s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for backend in ("lightgbm", "xgboost"):
        cfg = {"rankwise (seed, round)": {"subsample": f}, "the library": {"backend_params": library[backend]},
               "none (subsample=1)": {}}
        if backend == "lightgbm":  # columns: LightGBM's sampler reseeded from (seed, round) vs left running
            cfg["columns 0.5: reseeded (seed, round)"] = {"colsample_bytree": 0.5}
            cfg["columns 0.5: the library"] = {"backend_params": {"feature_fraction": 0.5}}
        GBDTRanker("lambdarank", backend=backend, n_estimators=3, n_jobs=1, verbose=False).fit(tr)  # imports
        res = {k: [] for k in cfg}
        times = {k: [] for k in cfg}
        for seed in range(args.seeds):
            for name, kw in cfg.items():
                if name.startswith("none") and seed:
                    continue
                m = GBDTRanker("lambdarank", backend=backend, n_estimators=args.rounds, random_state=seed, n_jobs=1,
                               verbose=False, **kw)
                t = time.perf_counter()
                m.fit(tr)
                times[name].append(time.perf_counter() - t)
                res[name].append(ndcg(m.predict(te.X), te.labels, qid=te.qid, k=10))
        for name, v in res.items():
            v = np.array(v)
            sd = f"{v.std(ddof=1):.4f}" if len(v) > 1 else "—"
            print(f"| {backend} | {name} | {len(v)} | {v.mean():.4f} | {sd} | {v.min():.4f} | {v.max():.4f} | "
                  f"{min(times[name]):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
