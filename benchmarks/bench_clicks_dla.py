"""DLA on the shared torch loop (issue 26) against the former DLA (its own MLP, Adam loop and standardiser).

Protocol: part 3 of ``bench_clicks.py`` (``simulate_clicks_protocol``: production LinearRanker on 1% of the
training queries, top-10 pages, PBM clicks with θ_k = (1/k)^η, ε⁺ = 1, ε⁻ = 0.1, seed 0) in its short
setting: 100,000 sessions per data set and η (the published table used 1,000,000 and five MQ2008 folds),
MQ2008 fold 1 and the MSLR-like synthetic set (600 training / 300 test queries), η ∈ {1, 2}; both DLAs
with MLP 64-32 and 30 epochs (the published setting), three training seeds each on the same log. The new
DLA fits on ``session_dataset(log, features)``; the former one, run from ``$RANKWISE_MAIN/src`` (default: a
checkout called ``main`` beside this repository: rankwise before the change) in a subprocess per setting, right
before the new one, on the same log (same simulation code and seed; the log's checksum is compared), fits
``DLA().fit(log, features)``; each process warms torch up with one small fit outside the timings. Reported:
test NDCG@10 on the true labels (per query, rankwise conventions; each query's value averaged over the seeds),
the paired randomisation test new vs old on those, the ratio to the same MLP trained on the true labels
(``NeuralRanker``, ``op_pairwise``, 20 epochs, as part 3's *full*), the relative error of the propensities
(averaged over the seeds) at ranks 2-10 against the truth, and the median fit time of each, wall clock and CPU
time, with their ratios new/old (the new one's ``session_dataset`` time apart, once per log).

Usage: python benchmarks/bench_clicks_dla.py [--data DIR] [--sessions N]
Writes benchmarks/results/bench_clicks_dla.md.
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
OUT = HERE / "results" / "bench_clicks_dla.md"
sys.path.insert(0, str(HERE.parent / "src"))

ETAS = (1.0, 2.0)
EPOCHS = 30
SEEDS = (0, 1, 2)

# the part shared by both processes: the data sets and the simulated log (the same code on both sides)
COMMON = r'''
import hashlib, time, numpy as np
from pathlib import Path
from rankwise.clicks import simulate_clicks_protocol
from rankwise.data import make_synthetic, read_svmlight
from rankwise.metrics import evaluate

def datasets(ddir):
    out = []
    mq = None if ddir is None else Path(ddir) / "MQ2008" / "Fold1"
    if mq is not None and (mq / "train.txt.gz").exists():
        out.append(("MQ2008 fold 1", read_svmlight(mq / "train.txt.gz"), read_svmlight(mq / "test.txt.gz")))
    syn = make_synthetic(900, n_features=136, list_length=(20, 60), seed=0)
    out.append(("MSLR-like", syn.take(np.arange(600)), syn.take(np.arange(600, 900))))
    return out

def simulate(train, eta, n_sessions):
    sim = simulate_clicks_protocol(train, n_sessions=n_sessions, eta=eta, random_state=0)
    digest = hashlib.sha256(sim.log.clicked.tobytes() + sim.log.doc.tobytes()).hexdigest()[:16]
    return sim, digest

def warm_up(DLA, fit):
    """One small fit outside the timings (torch's first optimiser imports its compiler: seconds)."""
    data = make_synthetic(6, n_features=4, list_length=(5, 8), seed=0)
    fit(DLA(hidden=(4,), max_iter=1, random_state=0), simulate_clicks_protocol(data, n_sessions=50, random_state=0))

def ndcg10(scores, ds):
    return evaluate(scores, ds.labels, ds.qid, metrics=("ndcg@10",)).per_query["ndcg@10"].to_numpy()
'''

# the former DLA, in a process that imports rankwise from before the change: one setting per call
OLD = COMMON + r"""
import json, sys
from rankwise.clicks import DLA
import rankwise
from rankwise.models import NeuralRanker
ddir, n_sessions, epochs = sys.argv[1] or None, int(sys.argv[2]), int(sys.argv[3])
want, eta = sys.argv[4], float(sys.argv[5])
seeds = [int(x) for x in sys.argv[6].split(",")]
warm_up(DLA, lambda m, sim: m.fit(sim.log, sim.features))
name, tr, te = next(d for d in datasets(ddir) if d[0] == want)
sim, digest = simulate(tr, eta, n_sessions)
runs = []
for seed in seeds:
    t, c = time.perf_counter(), time.process_time()
    m = DLA(max_iter=epochs, random_state=seed).fit(sim.log, sim.features)
    runs.append({"fit_s": time.perf_counter() - t, "cpu_s": time.process_time() - c,
                 "propensity": m.propensity_.tolist(),
                 "ndcg": ndcg10(m.predict(te.X), te).tolist()})
print("RESULT " + json.dumps({"digest": digest, "runs": runs, "file": rankwise.__file__,
                              "new": issubclass(DLA, NeuralRanker)}))
"""


from bench_clicks import data_dir  # noqa: E402  (the data folder: argument, $RANKWISE_DATA, ../shared/data)


def main_src():
    """rankwise before the change: $RANKWISE_MAIN, or a checkout called main beside this repository or its parent."""
    cands = [Path(os.environ["RANKWISE_MAIN"])] if "RANKWISE_MAIN" in os.environ else [
        HERE.parent.parent / "main", HERE.parent.parent.parent / "main"]
    src = next((c / "src" for c in cands if (c / "src" / "rankwise").is_dir()), None)
    if src is None:
        raise RuntimeError(f"no rankwise checkout to run the former DLA from (tried {cands}); set RANKWISE_MAIN")
    return src


def run_old(src, ddir, n_sessions, name, eta):
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", OLD, str(ddir or ""), str(n_sessions), str(EPOCHS), name, str(eta),
                           ",".join(map(str, SEEDS))], env=env, capture_output=True, text=True, check=False)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        raise RuntimeError(f"the former DLA ({src}) failed:\n{proc.stderr[-3000:]}")
    res = json.loads(line[0][len("RESULT "):])
    if res["new"] or not res["file"].startswith(str(src)):
        raise RuntimeError(f"the reference process imported {res['file']} (new DLA: {res['new']}), not the former DLA "
                           f"from {src}")
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", default=None)
    ap.add_argument("--sessions", type=int, default=100_000)
    args = ap.parse_args(argv)
    ddir = data_dir(args.data)
    src = main_src()
    ns = {}
    exec(COMMON, ns)  # noqa: S102  (the same code as the subprocess's, so both simulate the same log)
    from rankwise.clicks import DLA, session_dataset
    from rankwise.models import NeuralRanker
    from rankwise.report.significance import paired_randomization_test

    t_all, load0 = time.perf_counter(), os.getloadavg()[0]
    ns["warm_up"](DLA, lambda m, sim: m.set_params(verbose=False).fit(session_dataset(sim.log, sim.features)))
    rows = []
    for name, tr, te in ns["datasets"](ddir):
        full = NeuralRanker(loss="op_pairwise", hidden=(64, 32), max_iter=20, learning_rate=1e-3, random_state=0,
                            verbose=False).fit(tr)
        full_nd = ns["ndcg10"](full.predict(te.X), te)
        for eta in ETAS:
            o = run_old(src, ddir, args.sessions, name, eta)
            sim, digest = ns["simulate"](tr, eta, args.sessions)
            if o["digest"] != digest:
                raise RuntimeError(f"{name} η={eta}: the two processes simulated different logs")
            t = time.perf_counter()
            ds = session_dataset(sim.log, sim.features)
            ds_s = time.perf_counter() - t
            new = []
            for seed in SEEDS:
                t, c = time.perf_counter(), time.process_time()
                m = DLA(max_iter=EPOCHS, random_state=seed, verbose=False).fit(ds)
                new.append({"fit_s": time.perf_counter() - t, "cpu_s": time.process_time() - c,
                            "propensity": m.propensity_,
                            "ndcg": ns["ndcg10"](m.predict(te.X), te)})
            true = sim.propensity / sim.propensity[0]
            r = {"data": name, "eta": eta, "full": full_nd.mean(), "ds_s": ds_s, "sessions": sim.log.n_sessions,
                 "rows": ds.X.shape[0], "true": true}
            for tag, runs in (("old", o["runs"]), ("new", new)):
                r[tag] = np.mean([x["ndcg"] for x in runs], 0)
                r["range_" + tag] = (min(np.mean(x["ndcg"]) for x in runs), max(np.mean(x["ndcg"]) for x in runs))
                r["theta_" + tag] = np.mean([x["propensity"] for x in runs], 0)
                r["err_" + tag] = np.abs(r["theta_" + tag][1:10] / true[1:10] - 1)
                r["fit_" + tag] = float(np.median([x["fit_s"] for x in runs]))
                r["cpu_" + tag] = float(np.median([x["cpu_s"] for x in runs]))
            r["p"] = paired_randomization_test(r["new"], r["old"])
            rows.append(r)
            print(f"  {name} η={eta:g}: old {r['old'].mean():.4f} new {r['new'].mean():.4f}", flush=True)
    total = time.perf_counter() - t_all
    lines = [
        "## Clicks: DLA on the shared training loop (issue 26)\n",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs: read the ratios), Python "
        f"{platform.python_version()}, OMP_NUM_THREADS=1. *old* = the former `DLA` (own MLP, Adam loop and "
        f"standardiser; `fit(log, features)`, distinct pages weighted once each) from `{src}`, in a subprocess run "
        "right before the new one on the same log; *new* = `DLA` on `NeuralRanker`'s loop "
        "(`fit(session_dataset(log, features))`, repeated pages merged, sessions weighted equally). Short setting of "
        f"`bench_clicks.py` part 3: {args.sessions:,} PBM sessions per data set and η (published: 1,000,000, five "
        f"MQ2008 folds), top-10 pages, MLP 64-32, {EPOCHS} epochs, training seeds {', '.join(map(str, SEEDS))} on "
        "the same log (checksum compared). NDCG@10: test queries, true labels, each query averaged over the seeds; "
        "*full* = the same MLP on the true labels (`op_pairwise`, 20 epochs); p = paired randomisation test new vs "
        "old over the test queries (it does not count the variation between training seeds: compare the seeds' "
        "ranges). Propensity errors: |θ̂_k/θ_k − 1| at ranks 2-10 of θ̂ averaged over the seeds. Fit: median over the "
        "seeds, seconds (torch warmed up in each process): wall clock, and CPU time (the process's, one thread; less "
        "sensitive to the other jobs on the machine than the wall clock); new/old = the ratio of the medians. "
        f"Load average at the start: {load0:.1f}, at the end: {os.getloadavg()[0]:.1f}.\n",
        "| data | η | full | old | new | old, seeds min-max | new, seeds min-max | new/full | p (new vs old) | "
        "max rel. error θ old | new | mean rel. error old | new | fit s old | fit s new | new/old | fit CPU s old | "
        "new | new/old | session_dataset s | sessions → rows |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['data']} | {r['eta']:g} | {r['full']:.4f} | {r['old'].mean():.4f} | "
                     f"{r['new'].mean():.4f} | {r['range_old'][0]:.4f}-{r['range_old'][1]:.4f} | "
                     f"{r['range_new'][0]:.4f}-{r['range_new'][1]:.4f} | "
                     f"{r['new'].mean() / r['full']:.3f} | {r['p']:.4f} | {r['err_old'].max():.3f} | "
                     f"{r['err_new'].max():.3f} | {r['err_old'].mean():.3f} | {r['err_new'].mean():.3f} | "
                     f"{r['fit_old']:.2f} | {r['fit_new']:.2f} | {r['fit_new'] / r['fit_old']:.2f} | "
                     f"{r['cpu_old']:.2f} | "
                     f"{r['cpu_new']:.2f} | {r['cpu_new'] / r['cpu_old']:.2f} | {r['ds_s']:.1f} | "
                     f"{r['sessions']:,} → {r['rows']:,} |")
    lines += ["", "Propensities θ_k/θ_1 (true; old and new averaged over the seeds):\n",
              "| data | η | estimate | " + " | ".join(f"r{k}" for k in range(2, 11)) + " |",
              "|---|---|---|" + "---|" * 9]
    for r in rows:
        for label in ("true", "theta_old", "theta_new"):
            lines.append(f"| {r['data']} | {r['eta']:g} | {label.removeprefix('theta_')} | "
                         + " | ".join(f"{x:.3f}" for x in r[label][1:10]) + " |")
    lines += ["", "Published (benchmarks/results/bench_clicks.md, part 3, 1,000,000 sessions, MQ2008 pooled over five "
              "folds), the former DLA: test NDCG@10 MQ2008 0.4960 (η = 1), 0.4911 (η = 2); MSLR-like 0.7039, 0.6616.",
              f"\nTotal time {total:.0f} s.\n"]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
