"""Dead Dask workers (issue 29 item 6): SIGKILL one worker at a random moment of a distributed fit or evaluation.

``python benchmarks/faults_dask.py [--trials 10] [--cases lightgbm,xgboost,evaluate] [--timeout 120]``

Each trial runs in a fresh child process with its own ``distributed.LocalCluster`` (processes=True, 2 workers,
1 thread each, nanny restarts dead workers). A thread of the child kills one worker process with SIGKILL at a
random moment within the uninterrupted run's duration; the child then reports what the call gave:

- ``correct``: the fitted model predicts exactly what the uninterrupted fit predicts (|Δ| ≤ 1e-12), or the
  evaluation equals the single-machine ``rankwise.metrics.evaluate``;
- ``clean error``: a ``rankwise.errors.RankwiseError`` (its message is recorded);
- ``partial model``: a model was returned that predicts differently from the uninterrupted one;
- ``foreign error``: any other exception (its type is recorded);
- ``hang``: the child did not finish within ``--timeout`` seconds (killed by the parent).

Writes benchmarks/results/faults_dask.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"


def _data(n_queries=200):
    import numpy as np

    from rankwise.data import make_synthetic, to_pandas

    ds = make_synthetic(n_queries, n_features=8, list_length=(5, 30), seed=3)
    pdf = to_pandas(ds)
    pdf["score"] = np.random.default_rng(0).normal(size=len(pdf))
    return ds, pdf


def _model(backend):
    from rankwise.models import GBDTRanker

    return GBDTRanker("ranknet", backend=backend, n_estimators=8, num_leaves=7, min_child_samples=5, random_state=0,
                      verbose=False)


def child(case: str, kill_after: float | None, out: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import numpy as np
    import distributed

    import rankwise.distributed as rd
    from rankwise.errors import RankwiseError
    from rankwise.metrics import evaluate

    ds, pdf = _data()
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None, memory_limit="2GiB")
    client = distributed.Client(cluster)
    pids = client.run(os.getpid)
    killed = {}

    def killer():
        time.sleep(kill_after)
        addr, pid = random.Random(kill_after).choice(sorted(pids.items()))
        killed.update(addr=addr, pid=pid, at=time.perf_counter() - t0)
        os.kill(pid, signal.SIGKILL)

    frame = rd.from_pandas(pdf, npartitions=2)
    rec = {"case": case, "kill_after": kill_after}
    t0 = time.perf_counter()
    if kill_after is not None:
        threading.Thread(target=killer, daemon=True).start()
    try:
        if case == "evaluate":
            got = rd.evaluate(frame, ["ndcg@10", "map", "err@10"])
            ref = evaluate(pdf["score"].to_numpy(), pdf["label"].to_numpy(), pdf["qid"].to_numpy(),
                           metrics=["ndcg@10", "map", "err@10"])
            same = got.per_query.equals(ref.per_query) and got.mean == ref.mean
            rec["outcome"] = "correct" if same else "partial model"
        else:
            model = rd.fit_gbdt(_model(case), frame.drop(columns=["score"]), client=client)
            pred = model.predict(ds.X)
            ref_path = Path(out).with_name(f"ref_{case}.npy")
            if kill_after is None:
                np.save(ref_path, pred)
                rec["outcome"] = "correct"
            elif not ref_path.exists():
                rec["outcome"] = "model, no reference"
            else:
                ref = np.load(ref_path)
                rec["max_abs_diff"] = float(np.max(np.abs(pred - ref)))
                rec["outcome"] = "correct" if rec["max_abs_diff"] <= 1e-12 else "partial model"
    except RankwiseError as e:
        rec.update(outcome="clean error", error=str(e)[:300])
    except BaseException as e:  # noqa: BLE001 - recorded as foreign
        rec.update(outcome="foreign error", error=f"{type(e).__module__}.{type(e).__name__}: {str(e)[:300]}")
    rec["seconds"] = time.perf_counter() - t0
    rec["killed"] = dict(killed)
    Path(out).write_text(json.dumps(rec))
    try:
        client.close(timeout=10)
        cluster.close(timeout=10)
    except Exception:  # noqa: BLE001
        pass
    os._exit(0)


def run_child(case, kill_after, timeout, workdir):
    out = Path(workdir) / f"{case}_{kill_after}.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
    when = "none" if kill_after is None else repr(kill_after)
    cmd = [sys.executable, __file__, "--child", case, "--kill-after", when, "--out", str(out)]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return {"case": case, "kill_after": kill_after, "outcome": "hang", "seconds": time.perf_counter() - t0}
    if not out.exists():
        return {"case": case, "kill_after": kill_after, "outcome": "foreign error",
                "error": f"child exit {p.returncode}: {err.decode(errors='replace')[-300:]}"}
    return json.loads(out.read_text())


NEVER = 1e9  # a kill moment after any run's end

OUTCOMES = ["correct", "clean error", "hang", "partial model", "foreign error", "model, no reference"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--child")
    ap.add_argument("--kill-after")
    ap.add_argument("--out")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--cases", default="lightgbm,xgboost,evaluate")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--window", type=float, default=None,
                    help="kill within [0, WINDOW] s (default: the uninterrupted call's duration); trials run even "
                         "when the uninterrupted call failed or timed out")
    ap.add_argument("--repeats", type=int, default=5,
                    help="uninterrupted fits run again in fresh clusters, compared with the first (a fit that "
                         "differs without any kill would make 'partial model' meaningless)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, None if args.kill_after == "none" else float(args.kill_after), args.out)
        return 0
    rng = random.Random(args.seed)
    rows = []
    details = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            base = run_child(case, None, args.timeout, tmp)
            print(json.dumps(base), flush=True)
            if base["outcome"] != "correct" and args.window is None:
                rows.append((case, base, []))
                continue
            span = base["seconds"] if args.window is None else args.window
            if case != "evaluate" and base["outcome"] == "correct":
                again = []
                for _ in range(args.repeats):  # no kill: the killer thread never wakes
                    r = run_child(case, NEVER, args.timeout, tmp)
                    print(json.dumps(r), flush=True)
                    again.append(r)
                rows.append((case + " again", base, again))
            trials = []
            for _ in range(args.trials):
                r = run_child(case, round(rng.uniform(0.0, span), 3), args.timeout, tmp)
                print(json.dumps(r), flush=True)
                trials.append(r)
            rows.append((case, base, trials))
            details += trials
    lines = [
        "## Faults: dead Dask workers (faults_dask.py)",
        "",
        f"`python benchmarks/faults_dask.py --trials {args.trials}` on {platform.node()} ({os.cpu_count()} CPUs, "
        f"shared). Each trial: a fresh `distributed.LocalCluster` (processes=True, 2 workers x 1 thread, nanny), "
        f"`rankwise.distributed.fit_gbdt` (GBDTRanker('ranknet'), 8 trees, 200 queries) or "
        f"`rankwise.distributed.evaluate`, one worker killed with SIGKILL at a random moment within "
        + (f"the first {args.window:g} s of the call" if args.window is not None else
           "the uninterrupted call's duration (the 'uninterrupted s' column)")
        + f"; a trial that does not finish within "
        f"{args.timeout:.0f} s counts as a hang. 'correct': predictions equal to the uninterrupted fit's (≤ 1e-12) "
        "or "
        f"evaluation equal to `rankwise.metrics.evaluate`; 'partial model': a model or result that differs. "
        f"Before the kills, each fit is run again {args.repeats} times without a kill, each in a fresh cluster, and "
        "compared with the first uninterrupted fit (the 'again' rows): were the fit not reproducible, 'partial "
        "model' would mean nothing.",
        "",
        "| case | uninterrupted s | trials | correct result | clean error | hang | partial model | foreign error "
        "| model, no reference |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case, base, trials in rows:
        n = {o: sum(t["outcome"] == o for t in trials) for o in OUTCOMES}
        label = case if case == "evaluate" else "fit_gbdt " + case
        if case.endswith(" again"):
            label = f"fit_gbdt {case[:-6]}, uninterrupted again (no kill), compared with the first"
        base_s = f"{base['seconds']:.1f}" + (f" ({base['outcome']})" if base["outcome"] != "correct" else "")
        lines.append(f"| {label} | {base_s} | {len(trials)} | " + " | ".join(str(n[o]) for o in OUTCOMES) + " |")
    errs = sorted({t.get("error", "")[:200] for t in details if t["outcome"] in ("clean error", "foreign error")})
    if errs:
        lines += ["", "Errors seen:", ""] + [f"- `{e}`" for e in errs]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "faults_dask.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
