"""Click rankers on the shared contract (issue 26, item 3): Unbiased LambdaMART as a GBDTRanker on a click
data set, against the former implementation, on the MQ2008 simulation protocol.

Setting (a short run of ``bench_clicks.py``'s joint part): MQ2008 folds ``--folds`` (default 1 and 2),
``simulate_clicks_protocol(train, n_sessions=--sessions, eta=--eta, random_state=0)`` (its defaults: production
LinearRanker on 1 % of the training queries, top-10 page, PBM θ_k = (1/k)^η, click noise), Unbiased
LambdaMART with 100 trees, learning rate 0.05 (bench_clicks' joint setting), one thread. *new*: this
checkout's ``UnbiasedLambdaMART().fit(session_dataset(log, features))`` (trees on the distinct pages found
from the rows, gradients from the engine's pair kernel on the pages with their sessions' (clicked, unclicked)
pair counts as given pair weights); *previous*: the former class, ``fit(log, features)`` on the log's distinct
pages with its own pair kernel, imported from ``--previous-src`` (default ``/work/main/src``; it must hold the
former class, e.g. a worktree at commit 64e05ba). Each runs in a fresh process that draws the same simulated
log (the clicked-row count is printed for both, to show it is the same log). Fit time is the wall time of
``fit`` alone (``session_dataset`` timed apart). Test NDCG@10 on the true labels (rankwise
conventions: exp2 gain, ties averaged), mean over the test queries of the folds run; the paired
randomisation test new vs previous per query. For reference, ``benchmarks/results/bench_clicks.md`` reports
0.4924 for the previous Unbiased LambdaMART on MQ2008, η = 1, pooled over 5 folds with 1,000,000 sessions each.

The last row: the first fold again with ``--large`` sessions (default 1,000,000), for the fit times.

Usage: python benchmarks/bench_clicks_rankers.py [--folds 1 2] [--sessions 200000] [--large 1000000] [--eta 1]
       [--data DIR] [--previous-src /work/main/src]
Writes benchmarks/results/bench_clicks_rankers.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "bench_clicks_rankers.md"
SRC = HERE.parent / "src"
TREES = {"n_estimators": 100, "learning_rate": 0.05}


def data_dir(arg):
    for c in ([Path(arg)] if arg else []) + ([Path(os.environ["RANKWISE_DATA"])] if "RANKWISE_DATA" in os.environ
                                            else []) + [HERE.parent.parent / "shared" / "data"]:
        if (c / "MQ2008").is_dir():
            return c
    return None


def worker(kind, ddir, fold, n_sessions, eta):
    """One fit in this process; prints a JSON line."""
    from rankwise.clicks import UnbiasedLambdaMART, simulate_clicks_protocol
    from rankwise.data import read_svmlight
    from rankwise.metrics import evaluate

    mq = Path(ddir) / "MQ2008" / f"Fold{fold}"
    tr, te = read_svmlight(mq / "train.txt.gz"), read_svmlight(mq / "test.txt.gz")
    sim = simulate_clicks_protocol(tr, n_sessions=n_sessions, eta=eta, random_state=0)
    build = 0.0
    if kind == "new":
        from rankwise.clicks import session_dataset

        t = time.perf_counter()
        data = session_dataset(sim.log, sim.features)
        build = time.perf_counter() - t
        model = UnbiasedLambdaMART(**TREES, n_jobs=1)
        t = time.perf_counter()
        model.fit(data)
    else:
        model = UnbiasedLambdaMART(**TREES)
        t = time.perf_counter()
        model.fit(sim.log, sim.features)
    fit = time.perf_counter() - t
    r = evaluate(model.predict(te.X), te.labels, te.qid, metrics=("ndcg@10",))
    print(json.dumps({"fit_s": fit, "build_s": build, "clicked": int(sim.log.clicked.sum()),
                      "sessions": int(sim.log.n_sessions), "ndcg": r.per_query["ndcg@10"].tolist(),
                      "t_plus": np.asarray(model.t_plus_).tolist()}))


def run(kind, src, args, fold):
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, __file__, "--worker", kind, "--fold", str(fold), "--sessions", str(args.sessions),
           "--eta", str(args.eta), "--data", str(args.data)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} fold {fold} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def previous_available(src: Path) -> bool:
    joint = src / "rankwise" / "clicks" / "joint.py"
    return joint.exists() and "class UnbiasedLambdaMART:" in joint.read_text()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folds", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--sessions", type=int, default=200_000)
    ap.add_argument("--eta", type=float, default=1.0)
    ap.add_argument("--large", type=int, default=1_000_000,
                    help="also fold 1 with this many sessions, for the fit times (0: not run)")
    ap.add_argument("--data", default=None)
    ap.add_argument("--previous-src", default="/work/main/src")
    ap.add_argument("--worker", choices=("new", "previous"), default=None)
    ap.add_argument("--fold", type=int, default=1)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.data, args.fold, args.sessions, args.eta)
        return 0
    ddir = data_dir(args.data)
    lines = ["## Click rankers on the shared contract: Unbiased LambdaMART\n"]
    if ddir is None:
        lines.append("MQ2008 absent (set RANKWISE_DATA); nothing run.\n")
        OUT.write_text("\n".join(lines))
        return 0
    args.data = ddir
    prev = Path(args.previous_src)
    has_prev = previous_available(prev)
    res = {"new": [], "previous": []}
    t0 = time.perf_counter()
    for f in args.folds:
        res["new"].append(run("new", SRC, args, f))
        if has_prev:
            res["previous"].append(run("previous", prev, args, f))
        print(f"  fold {f} done", flush=True)
    large = {}
    if args.large:
        big = argparse.Namespace(**{**vars(args), "sessions": args.large})
        large["new"] = run("new", SRC, big, args.folds[0])
        if has_prev:
            large["previous"] = run("previous", prev, big, args.folds[0])
    lines.append(f"MQ2008 folds {', '.join(map(str, args.folds))}; `simulate_clicks_protocol(train, "
                 f"n_sessions={args.sessions:,}, eta={args.eta:g}, random_state=0)` (top-10 page, production "
                 "LinearRanker on 1 % of the training queries); Unbiased LambdaMART with 100 trees, learning rate "
                 "0.05, one thread. *new*: `UnbiasedLambdaMART(n_jobs=1).fit(session_dataset(log, features))` "
                 "(a GBDTRanker: trees on the distinct pages found from the rows, gradients from the engine's "
                 "pair kernel on the pages with their sessions' (clicked, unclicked) pair counts as given pair "
                 "weights); *previous*: the "
                 "former class, `fit(log, features)` on the log's distinct pages with "
                 f"its own pair kernel (from `{prev}`), each in a fresh process on the same simulated log. "
                 f"Machine: {platform.machine()}, Python {platform.python_version()}, shared 2-core host "
                 "(times are noisy; read the ratio). Script: `benchmarks/bench_clicks_rankers.py`.\n")
    lines += ["| fold | sessions | clicked rows (new / previous) | NDCG@10 new | NDCG@10 previous | fit s new "
              "(+ session_dataset s) | fit s previous |", "|---|---|---|---|---|---|---|"]
    rows = [(f, res["new"][i], res["previous"][i] if has_prev else None) for i, f in enumerate(args.folds)]
    if large:
        rows.append((args.folds[0], large["new"], large.get("previous")))
    for f, n, p in rows:
        pc = f"{p['clicked']:,}" if p else "-"
        lines.append(f"| {f} | {n['sessions']:,} | {n['clicked']:,} / {pc} | "
                     f"{np.mean(n['ndcg']):.4f} | {np.mean(p['ndcg']) if p else float('nan'):.4f} | "
                     f"{n['fit_s']:.1f} (+ {n['build_s']:.1f}) | {p['fit_s'] if p else float('nan'):.1f} |")
    new_q = np.concatenate([np.asarray(r["ndcg"]) for r in res["new"]])
    summary = (f"\nNew, pooled over the test queries of the {args.sessions:,}-session runs: NDCG@10 "
               f"{new_q.mean():.4f}")
    if has_prev:
        from rankwise.report.significance import paired_randomization_test

        prev_q = np.concatenate([np.asarray(r["ndcg"]) for r in res["previous"]])
        fit_new = sum(r["fit_s"] for r in res["new"])
        fit_prev = sum(r["fit_s"] for r in res["previous"])
        summary += (f"; previous {prev_q.mean():.4f} (paired randomisation test p = "
                    f"{paired_randomization_test(new_q, prev_q):.4f}); fit time new / previous "
                    f"{fit_new / fit_prev:.2f}x ({fit_new:.1f} s / {fit_prev:.1f} s)")
        if large:
            summary += (f", at {args.large:,} sessions {large['new']['fit_s'] / large['previous']['fit_s']:.2f}x "
                        f"(and session_dataset {large['new']['build_s']:.1f} s)")
        summary += ". "
        tp = ["| t⁺ | " + " | ".join(f"r{k}" for k in range(2, 11)) + " |", "|---" * 10 + "|"]
        for kind in ("new", "previous"):
            t = np.mean([r["t_plus"] for r in res[kind]], axis=0)
            tp.append(f"| {kind} | " + " | ".join(f"{x:.3f}" for x in t[1:10]) + " |")
        tp.append("| true (1/k)^η | " + " | ".join(f"{(1 / k) ** args.eta:.3f}" for k in range(2, 11)) + " |")
    else:
        summary += f" (the previous implementation is not at `{prev}`: only the new one ran). "
        tp = []
    summary += ("For reference, `bench_clicks.md` reports 0.4924 for the previous Unbiased LambdaMART on MQ2008, "
                "η = 1, pooled over 5 folds with 1,000,000 sessions each.")
    lines.append(summary + "\n")
    if tp:
        lines += ["Position bias of clicked documents t⁺ (mean over the folds):\n"] + tp + [""]
    lines.append(f"Total wall time {time.perf_counter() - t0:.0f} s.\n")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
