"""Training at native speed: rankwise objectives on the compiled engine against LightGBM's own
lambdarank, every ratio from the same run (issue 14).

Sections, each on the path a user runs:

1. Per boosting round CPU time of ``GBDTRanker``'s objective + tree for each rankwise loss ÷ LightGBM's
   native lambdarank, same leaves, bins, threads (the exact LightGBM parameters and objective
   that ``GBDTRanker`` builds), on MSLR-like synthetic sets (``make_synthetic``), 1 and 2 threads.
   Per round = CPU of rounds ``warm..n`` ÷ their number, timed by a callback inside the one run.
2. ``GBDTRanker(loss="native:lambdarank")`` with ``eval_set`` and early stopping vs
   ``lightgbm.LGBMRanker`` doing the same (CPU time of the whole fit).
3. Quality with equal budgets (``n_estimators=300, learning_rate=0.1, early_stopping_rounds=30`` on the
   validation queries; queries split 60/20/20) on the synthetic set, and on MQ2008 (five folds,
   train/vali/test): test NDCG@10 of every objective, with the paired randomisation test against
   native lambdarank on the per-query test NDCG@10.
4. ``NeuralRanker`` MLP (128, 64) with ``lambdaloss`` vs ``listnet``: CPU time per epoch and the peak
   RSS of a process that only trains it (1,500-query set).
5. One ``grad_hess`` call against the number of rows (MSLR-like list lengths): CPU time and the
   peak of the Python-level allocations (tracemalloc; the kernels' own O(list) scratch is freed per
   query and not counted).

CPU time is ``time.process_time`` (all threads of the process). The machine is a shared 2-core
box with other jobs running: absolute times are noisy, the ratios of the same run less so.

Usage: python benchmarks/bench_training.py [--quick] [--sections 1245] [--out FILE]
Writes benchmarks/results/bench_training.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

# OpenMP threads (LightGBM's, for both sides) wait passively: on a shared machine a thread waiting
# at a barrier for one that other jobs preempted spins, and that spinning, not the work, then
# dominates the CPU time of the 2-thread runs. Set before any OpenMP runtime is loaded.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "bench_training.md"

# objective -> loss_params; the ΔNDCG/LambdaLoss pair objectives first
OBJECTIVES = [
    ("native:lambdarank", None),
    ("lambdarank", None),  # = ranknet(pair_weights="delta_ndcg", truncation_level=30, norm=True)
    ("ranknet", {"pair_weights": "delta_ndcg"}),
    ("lambdaloss", None),
    ("lambdaloss", {"weighting": "ndcg2pp", "mu": 1.0, "truncation_level": 30, "norm": True}),
    ("listnet", None),
    ("listmle", None),
    ("pointwise_squared", None),
]
# the quality runs (each up to 300 rounds): a subset, to keep the run within the machine's budget
QUALITY = [OBJECTIVES[i] for i in (0, 1, 3, 4, 5, 7)]
PAIR = ("ranknet", "lambdaloss", "pairwise_hinge", "rankboost")


def label(loss, params):
    if not params:
        return loss
    return loss + "[" + ", ".join(f"{k}={v}" for k, v in params.items()) + "]"


def split_queries(ds, seed=0):
    off = ds.query_offsets
    Q = len(off) - 1
    perm = np.random.default_rng(seed).permutation(Q)
    out = []
    for qs in np.split(perm, [int(0.6 * Q), int(0.8 * Q)]):
        qs = np.sort(qs)
        rows = np.concatenate([np.arange(off[q], off[q + 1]) for q in qs])
        out.append((ds.X[rows], np.asarray(ds.labels[rows], dtype=np.float64),
                    np.repeat(np.arange(len(qs)), np.diff(off)[qs])))
    return out


# ------------------------------------------------------------------------------ 1. per round


def per_round(ds, threads, rounds, warm, objectives, every_round=(), repeats=2):
    """CPU seconds per boosting round for each objective, one lgb.train each, GBDTRanker's params
    and objective as ``fit`` builds it: with the default ``loss_every=10`` the objective computes
    the loss value for ``history_`` in rounds 0, 10, 20, ... only (one round of the ten timed).
    Each loss in ``every_round`` is also timed with ``loss_every=1`` (the value every round, the
    behaviour before ``loss_every``), labelled ``... with the loss value every round``. The runs
    go round-robin ``repeats`` times and each keeps its fastest: on a shared machine the load
    drifts during the section, and a thread waiting for a preempted one spins on CPU time."""
    import lightgbm as lgb

    from rankwise.models import GBDTRanker

    sizes = np.diff(ds.query_offsets)
    dtrain = lgb.Dataset(ds.X, label=ds.labels, group=sizes, params={"verbosity": -1, "feature_pre_filter": False},
                         free_raw_data=False)  # the dataset parameter GBDTRanker sets, so that it is binned once
    dtrain.construct()
    out = {}
    runs = [(loss, params, 10) for loss, params in objectives]
    runs += [(loss, params, 1) for loss, params in objectives if loss in every_round]
    for _, (loss, params, every) in [(r, run) for r in range(repeats) for run in runs]:
        m = GBDTRanker(loss, loss_params=params, n_jobs=threads, random_state=0, loss_every=every)
        native, obj = m._objective(lambda value: None)
        p = m._lgb_params(native, 0)
        if obj is not None:
            p["objective"] = obj
        stamps = []
        lgb.train(p, dtrain, num_boost_round=rounds,
                  callbacks=[lambda env: stamps.append(time.process_time())])
        key = label(loss, params) + (" with the loss value every round" if every == 1 else "")
        out[key] = min(out.get(key, np.inf), (stamps[-1] - stamps[warm - 1]) / (rounds - warm))
    return out


# ------------------------------------------------------------------------ 2. eval_set overhead


def eval_set_overhead(tr, va):
    """Both fits validate on NDCG@10 only and stop after 30 rounds without improvement of it:
    ``GBDTRanker``'s default ``eval_metric="ndcg@10"``, ``LGBMRanker`` with ``eval_at=[10]`` and
    ``early_stopping(30, first_metric_only=True)`` (its default ``eval_at`` is 1..5 and it stops on
    any of them). The two NDCG@10 conventions differ (LightGBM: a query without relevant documents
    scores 1 and tied scores keep their order; rankwise: 0 and ties averaged), so the rounds may
    still differ: the per-round ratio is reported next to the total."""
    import lightgbm as lgb

    from rankwise.models import GBDTRanker

    # warm-up, untimed: imports and the compiled metric kernels' first load are paid once per process
    GBDTRanker("native:lambdarank", n_estimators=3, random_state=0, n_jobs=1, verbose=False).fit(
        tr[0], tr[1], qid=tr[2], eval_set=va)
    lgb.LGBMRanker(n_estimators=3, n_jobs=1, verbosity=-1).fit(tr[0], tr[1], group=np.bincount(tr[2]),
                                                              eval_set=[va[:2]], eval_group=[np.bincount(va[2])],
                                                              eval_at=[10])
    t = time.process_time()
    m = GBDTRanker("native:lambdarank", n_estimators=300, learning_rate=0.1, early_stopping_rounds=30,
                   random_state=0, n_jobs=1, verbose=False).fit(tr[0], tr[1], qid=tr[2], eval_set=va)
    ours = time.process_time() - t
    boosted = []  # rounds LGBMRanker boosted (its booster keeps only those up to the best one)
    t = time.process_time()
    ref = lgb.LGBMRanker(objective="lambdarank", n_estimators=300, learning_rate=0.1, num_leaves=31,
                         min_child_samples=20, random_state=0, n_jobs=1, deterministic=True, force_row_wise=True,
                         verbosity=-1)
    ref.fit(tr[0], tr[1], group=np.bincount(tr[2]), eval_set=[va[:2]], eval_group=[np.bincount(va[2])],
            eval_at=[10], callbacks=[lgb.early_stopping(30, first_metric_only=True, verbose=False),
                                     lambda env: boosted.append(env.iteration)])
    peer = time.process_time() - t
    return ours, peer, len(m.history_), len(boosted)


# ------------------------------------------------------------------------------- 3. quality


def quality(splits, objectives):
    """{objective: per-query test NDCG@10 (concatenated over the splits)}, best rounds, CPU."""
    from rankwise.metrics import evaluate
    from rankwise.models import GBDTRanker

    per_q, rounds, cpu = {}, {}, {}
    for loss, params in objectives:
        name = label(loss, params)
        vals, its, t = [], [], time.process_time()
        for tr, va, te in splits:
            m = GBDTRanker(loss, loss_params=params, n_estimators=300, learning_rate=0.1, early_stopping_rounds=30,
                           random_state=0, n_jobs=1, verbose=False).fit(tr[0], tr[1], qid=tr[2], eval_set=va)
            res = evaluate(m.predict(te[0]), te[1], qid=te[2], metrics=["ndcg@10"])
            vals.append(np.asarray(res.per_query["ndcg@10"], dtype=np.float64))
            its.append(m.best_iteration_ + 1)
        per_q[name], rounds[name], cpu[name] = np.concatenate(vals), its, time.process_time() - t
    return per_q, rounds, cpu


def dump_quality(path, per_q, rounds, cpu):
    """Save one quality run (per-query NDCG@10, rounds, CPU) so that runs split over processes
    can be put in one table (``merge_quality``)."""
    import json

    Path(path).write_text(json.dumps({k: {"ndcg": per_q[k].tolist(), "rounds": rounds[k], "cpu": cpu[k]}
                                      for k in per_q}))


def merge_quality(paths):
    import json

    per_q, rounds, cpu = {}, {}, {}
    for p in paths:
        for k, v in json.loads(Path(p).read_text()).items():
            per_q[k], rounds[k], cpu[k] = np.asarray(v["ndcg"]), v["rounds"], v["cpu"]
    order = [label(*o) for o in QUALITY if label(*o) in per_q]
    return ({k: per_q[k] for k in order}, rounds, cpu)


def quality_table(per_q, rounds, cpu, ref="native:lambdarank"):
    from rankwise.report.significance import paired_randomization_test

    rows = ["| objective | test NDCG@10 | Δ vs native | p (randomisation) | best rounds | CPU s |", "|---|---:|---:|---:|---|---:|"]
    base = per_q[ref]
    for name, v in per_q.items():
        p = "—" if name == ref else f"{paired_randomization_test(v, base, n_resamples=5000):.3f}"
        rows.append(f"| {name} | {v.mean():.4f} | {v.mean() - base.mean():+.4f} | {p} | "
                    f"{', '.join(map(str, rounds[name]))} | {cpu[name]:.0f} |")
    return rows


def load_mq2008(root, fold):
    from rankwise.data import read_svmlight

    d = Path(root) / "MQ2008" / f"Fold{fold}"
    out = []
    for part in ("train", "vali", "test"):
        ds = read_svmlight(d / f"{part}.txt.gz", n_features=46)
        X = ds.X.toarray() if hasattr(ds.X, "toarray") else ds.X
        out.append((X, np.asarray(ds.labels, dtype=np.float64), np.asarray(ds.qid)))
    return out


# --------------------------------------------------------------------------- 4. neural, child


NEURAL_CHILD = r"""
import resource, sys, time, numpy as np
sys.path.insert(0, {here!r})
from bench_training import split_queries
from rankwise.data.synthetic import make_synthetic
from rankwise.models import NeuralRanker
tr, va, te = split_queries(make_synthetic({nq}, n_features=136, seed=1))
m = NeuralRanker(loss={loss!r}, hidden=(128, 64), max_iter={epochs}, random_state=0, verbose=False)
t = time.process_time()
m.fit(tr[0], tr[1], qid=tr[2])
cpu = time.process_time() - t
print(cpu / {epochs}, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, len(tr[1]))
"""


def neural(nq, epochs):
    out = {}
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for loss in ("listnet", "lambdaloss"):  # untimed: numba compiles (and caches) the kernels once per install,
        warm = NEURAL_CHILD.format(here=str(HERE), nq=60, loss=loss, epochs=1)  # and compiling peaks RSS
        subprocess.run([sys.executable, "-c", warm], capture_output=True, text=True, env=env, timeout=900)
    for loss in ("listnet", "lambdaloss"):
        code = NEURAL_CHILD.format(here=str(HERE), nq=nq, loss=loss, epochs=epochs)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
        if r.returncode != 0:
            out[loss] = ("error", r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "?")
            continue
        per_epoch, rss_mb, rows = r.stdout.split()
        out[loss] = (float(per_epoch), float(rss_mb), int(rows))
    return out


# ----------------------------------------------------------------------------- 5. scaling


def scaling(row_counts, losses, threads=1):
    from rankwise.data.synthetic import _list_lengths
    from rankwise.losses import grad_hess

    rng = np.random.default_rng(0)
    out = []
    for n_rows in row_counts:
        L = _list_lengths(rng, n_rows // 100, "mslr", 1300)
        L = L[np.cumsum(L) <= n_rows]
        off = np.concatenate(([0], np.cumsum(L)))
        n = int(off[-1])
        s = rng.normal(size=n)
        y = rng.integers(0, 5, n).astype(np.float64)
        for loss, params in losses:
            ow = off[off <= 2000]
            grad_hess(loss, s[:ow[-1]], y[:ow[-1]], ow, n_jobs=threads, **(params or {}))  # warm
            tracemalloc.start()
            t = time.process_time()
            grad_hess(loss, s, y, off, n_jobs=threads, **(params or {}))
            cpu = time.process_time() - t
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            out.append((label(loss, params), n, len(L), cpu, peak / n))
    return out


# ----------------------------------------------------------------------------------- main


class Report:
    """The results file, rewritten after every section (a run cut short keeps what it measured)."""

    def __init__(self, lines, out=OUT):
        self.lines = list(lines)
        self.out = Path(out)

    def guard(self, title, fn):
        """Run one section; an exception is written into the report instead of losing the run."""
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - a benchmark reports, it does not stop
            import traceback

            self.add([f"### {title}: FAILED", "", "```", traceback.format_exc()[-1500:], "```", ""])
            print(exc, file=sys.stderr)

    def add(self, lines):
        self.lines += list(lines)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text("\n".join(self.lines) + "\n")
        print("\n".join(lines), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sets (smoke run)")
    ap.add_argument("--data", default=os.environ.get("RANKWISE_DATA", str(HERE.parent.parent / "shared" / "data")))
    ap.add_argument("--sections", default="12345", help="which sections to run (default all)")
    ap.add_argument("--quality", default="", help="indices into QUALITY (e.g. 01) to run in section 3 (default all)")
    ap.add_argument("--quality-sets", default="sm", help="section 3 data: s = synthetic, m = MQ2008 (default both)")
    ap.add_argument("--dump", default="", help="section 3: also save the per-query results to DUMP_syn/_mq.json")
    ap.add_argument("--out", default=str(OUT), help="results file (default benchmarks/results/bench_training.md)")
    args = ap.parse_args(argv)
    from rankwise.data.synthetic import make_synthetic

    t_start = time.time()
    sizes = (300, 600) if args.quick else (1500, 6000)
    rounds, warm = (6, 2) if args.quick else (14, 4)
    rep = Report(["## Training on the compiled engine (`benchmarks/bench_training.py`)", "",
                  f"Machine: {platform.machine()}, {os.cpu_count()} CPUs **shared with other jobs while this ran** "
                  f"(load average {os.getloadavg()[0]:.1f} at the start); CPU time = `time.process_time` of the "
                  "process (all its threads), so other jobs slow the wall clock but not these figures, except "
                  "through shared caches. Every ratio comes from this one run. OpenMP threads wait passively "
                  f"(`OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}`, LightGBM's for both sides): with "
                  "libgomp's default spin-then-sleep, a thread waiting for one that other jobs preempted spins, "
                  "and on this loaded machine that spinning dominated the 2-thread CPU times (a trial run at "
                  "load 7.5: `pointwise_squared`, whose objective costs 1 ms, at 2.5× native).", ""], args.out)

    def section1():
        lines = ["### 1. CPU per boosting round ÷ LightGBM's native lambdarank", "",
                 "`GBDTRanker`'s LightGBM parameters (31 leaves, 255 bins, min_child_samples 20) and objective, "
                 f"CPU of rounds {warm + 1}..{rounds} of one run ÷ {rounds - warm}, the faster of two runs (all "
                 "objectives of a column run round-robin, twice). Goal: ≤ 1.2× for the ΔNDCG/"
                 "LambdaLoss pair objectives, ≤ 1.0× for listwise and pointwise ones. Each objective is built as "
                 "`fit` builds it: with the default `loss_every=10` it computes the loss value for `history_` in "
                 "rounds 0, 10, 20, ... (one of the timed rounds); the row *with the loss value every round* is "
                 "`loss_every=1`, what `fit` did before.", ""]
        table, rows_info, cols = {}, [], []
        for nq in sizes:
            ds = make_synthetic(nq, n_features=136, seed=1)
            rows_info.append(f"{nq:,} queries = {ds.X.shape[0]:,} rows")
            for thr in (1, 2):
                table[(nq, thr)] = per_round(ds, thr, rounds, warm, OBJECTIVES, every_round=("lambdarank",))
                cols.append((nq, thr))
            del ds
        lines += ["| objective | " + " | ".join(f"{q:,} q, {t} thr" for q, t in cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        for name in table[cols[0]]:
            cells = [f"{table[c][name]:.3f} s" if name.startswith("native") else
                     f"{table[c][name] / table[c]['native:lambdarank']:.2f}×" for c in cols]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += ["", "Sets: " + "; ".join(rows_info) + ". The native row gives its CPU seconds per round. "
                  f"Load average after this section: {os.getloadavg()[0]:.1f}.", ""]
        rep.add(lines)

    ds = make_synthetic(sizes[0], n_features=136, seed=1)
    tr, va, te = split_queries(ds)
    del ds
    def section2():
        small = split_queries(make_synthetic(sizes[0] * 2 // 3, n_features=136, seed=2))
        ours, peer, n_ours, n_peer = eval_set_overhead(small[0], small[1])
        rep.add(["### 2. Validation set and early stopping: `GBDTRanker('native:lambdarank')` vs `LGBMRanker`", "",
                 f"{sizes[0] * 2 // 3:,}-query set (seed 2) split 60/20/20 by query, `n_estimators=300, "
                 "learning_rate=0.1`, early stopping 30 rounds on NDCG@10 of the validation queries, 1 thread: "
                 "`GBDTRanker`'s default `eval_metric=\"ndcg@10\"`; `LGBMRanker(eval_at=[10])` with "
                 "`early_stopping(30, first_metric_only=True)`. Rounds = trees boosted (best round + 30 when "
                 "stopped). Their NDCG@10 conventions differ (LightGBM: a query with no relevant document scores 1 "
                 "and tied scores keep their input order; rankwise: 0 and ties averaged), so they may stop at "
                 "different rounds; CPU per round compares the rounds themselves. Each timed after an untimed "
                 "3-round fit of its own (imports and the first load of compiled kernels are paid once per "
                 "process).", "",
                 "| | CPU s | rounds | CPU ms / round |", "|---|---:|---:|---:|",
                 f"| GBDTRanker(native:lambdarank, eval_set) | {ours:.1f} | {n_ours} | {1e3 * ours / n_ours:.0f} |",
                 f"| LGBMRanker(eval_set, eval_at=[10], early_stopping) | {peer:.1f} | {n_peer} | "
                 f"{1e3 * peer / n_peer:.0f} |",
                 f"| ratio (goal ≤ 1.1×) | {ours / peer:.2f}× | | {(ours / n_ours) / (peer / n_peer):.2f}× |", ""])

    def section3():
        q_objs = QUALITY if not args.quick else QUALITY[:3]
        if args.quality:
            q_objs = [QUALITY[int(i)] for i in args.quality]
        if "s" not in args.quality_sets:
            per_q = None
        else:
            per_q, rnds, cpu = quality([(tr, va, te)], q_objs)
            if args.dump:
                dump_quality(args.dump + "_syn.json", per_q, rnds, cpu)
        lines = [f"### 3. Quality, {sizes[0]:,}-query synthetic set (seed 1), test NDCG@10", "",
                 "Equal budgets: `n_estimators=300, learning_rate=0.1, early_stopping_rounds=30` on the validation "
                 "queries, 1 thread; p: paired randomisation test (5,000 sign flips) against native lambdarank on "
                 "the per-query test NDCG@10.", ""]
        if per_q is not None and "native:lambdarank" in per_q:
            rep.add(lines + quality_table(per_q, rnds, cpu) + [""])
        mq = Path(args.data) / "MQ2008" / "Fold1" / "train.txt.gz"
        if "m" not in args.quality_sets:
            pass
        elif mq.exists():
            folds = [load_mq2008(args.data, f) for f in ((1,) if args.quick else (1, 2, 3, 4, 5))]
            per_q, rnds, cpu = quality(folds, q_objs)
            if args.dump:
                dump_quality(args.dump + "_mq.json", per_q, rnds, cpu)
            lines = [f"### 3b. Quality, MQ2008 ({len(folds)} folds, every test query once), test NDCG@10", "",
                     "Same budget; train on `train`, early stopping on `vali`, scored on `test`.", ""]
            if "native:lambdarank" in per_q:
                rep.add(lines + quality_table(per_q, rnds, cpu) + [""])
        else:
            rep.add(["MQ2008 not found (set RANKWISE_DATA): its quality table was not run.", ""])

    def section4():
        nq = sizes[0]
        nr = neural(nq, 1)
        lines = [f"### 4. NeuralRanker MLP (128, 64), {nq:,}-query set: CPU per epoch and peak RSS", "",
                 "Each in its own process (peak RSS of that process: data, model and training, 1 epoch), after "
                 "an untimed run on 60 queries that lets numba compile and cache the kernels. Goal: "
                 "lambdaloss ≤ 2× listnet per epoch, peak RSS ≤ 1.5 GB.", "",
                 "| loss | CPU s / epoch | peak RSS (MB) | training rows |", "|---|---:|---:|---:|"]
        for loss, v in nr.items():
            lines.append(f"| {loss} | " + (" | ".join([f"{v[0]:.1f}", f"{v[1]:.0f}", f"{v[2]:,}"])
                                            if v[0] != "error" else f"error: {v[1]} | | ") + " |")
        if all(v[0] != "error" for v in nr.values()):
            lines.append(f"| ratio lambdaloss / listnet | {nr['lambdaloss'][0] / nr['listnet'][0]:.2f}× | | |")
        rep.add(lines + [""])

    def section5():
        counts = (20_000, 50_000) if args.quick else (100_000, 500_000, 1_000_000, 2_000_000)
        sc = scaling(counts, [("lambdarank", None), ("lambdaloss", None), ("listnet", None)])
        lines = ["### 5. One `grad_hess` call against rows (MSLR-like list lengths, 1 thread)", "",
                 "| objective | rows | queries | CPU s | CPU µs / row | peak traced bytes / row |",
                 "|---|---:|---:|---:|---:|---:|"]
        for name, n, nqq, c, per_row in sc:
            lines.append(f"| {name} | {n:,} | {nqq:,} | {c:.2f} | {1e6 * c / n:.2f} | {per_row:.0f} |")
        rep.add(lines + [""])
    for n, fn in (("1", section1), ("2", section2), ("3", section3), ("4", section4), ("5", section5)):
        if n in args.sections:
            rep.guard(f"section {n}", fn)
    rep.add([f"Load average at the end: {os.getloadavg()[0]:.1f}; total wall {time.time() - t_start:.0f} s.", ""])


if __name__ == "__main__":
    main()
