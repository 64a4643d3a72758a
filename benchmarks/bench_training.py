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
   validation queries; queries split 60/20/20) on the 1,500- and 6,000-query synthetic sets, and on
   MQ2008 (five folds, train/vali/test): test NDCG@10 of every objective, with the paired
   randomisation test against native lambdarank on the per-query test NDCG@10 (``--sections 3``).
   3s (``--sections s``, not in the default run): the sweep of LambdaMART's options and of the
   LambdaLoss weightings with the same budget, selected on the *validation* queries only (the
   defaults of ``lambdarank`` and ``lambdaloss`` come from it, docs/losses.md). 3d (``--sections d``):
   the share of the gradient on each query's current top 10, per objective.
4. ``NeuralRanker`` MLP (128, 64) with ``lambdaloss`` vs ``listnet``: CPU time per epoch and the peak
   RSS of a process that only trains it (1,500-query set).
5. One ``grad_hess`` call against the number of rows (MSLR-like list lengths): CPU time and the
   peak of the Python-level allocations (tracemalloc; the kernels' own O(list) scratch is freed per
   query and not counted).

CPU time is ``time.process_time`` (all threads of the process). The machine is a shared 2-core
box with other jobs running: absolute times are noisy, the ratios of the same run less so.

Usage: python benchmarks/bench_training.py [--quick] [--sections 1245|3|s|d] [--out FILE]
Writes benchmarks/results/bench_training.md (sections 1, 2, 4, 5) and
benchmarks/results/bench_training_quality.md (sections 3, s, d).
"""
from __future__ import annotations

import argparse
import json
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
QOUT = HERE / "results" / "bench_training_quality.md"

# objective -> loss_params; the ΔNDCG/LambdaLoss pair objectives first
OBJECTIVES = [
    ("native:lambdarank", None),
    ("lambdarank", None),  # = ranknet(pair_weights="delta_ndcg", truncation_level=50, norm=True)
    ("lambdarank", {"truncation_level": 30}),  # LightGBM's own truncation (the default until the sweep)
    ("ranknet", {"pair_weights": "delta_ndcg"}),
    ("lambdaloss", None),  # NDCG-Loss2++ (mu=5), every pair, no norm: the validation-selected default
    ("lambdaloss", {"weighting": "ndcg2"}),  # NDCG-Loss2: the default until the sweep
    ("lambdaloss", {"weighting": "ndcg2pp", "mu": 1.0, "truncation_level": 30, "norm": True}),
    ("listnet", None),
    ("listmle", None),
    ("pointwise_squared", None),
]
# the quality runs of section 3 (each up to 300 rounds); the variants that the sweep selects on the
# validation queries are added by --extra (see docs/losses.md, "Defaults chosen by measurement")
QUALITY = [
    ("native:lambdarank", None),
    ("lambdarank", None),  # validation-selected defaults (truncation_level=50, norm=True)
    ("ranknet", {"pair_weights": "delta_ndcg"}),
    ("lambdaloss", None),  # validation-selected defaults (NDCG-Loss2++, mu=5)
    ("lambdarank", {"truncation_level": 30, "norm": True}),  # LightGBM's defaults
    ("lambdaloss", {"weighting": "ndcg2"}),  # NDCG-Loss2, the default before the sweep
    ("listnet", None),
    ("listmle", None),
    ("pointwise_squared", None),
]
SWEEP_DEFAULT = {"lr": ("lambdarank", {"truncation_level": 30, "norm": True}),
                 "ll": ("lambdaloss", {"weighting": "ndcg2", "truncation_level": None, "norm": False})}
# section 3s: LambdaMART's options and the LambdaLoss weightings, selected on the validation queries
SWEEP = {
    "lr": [("lambdarank", {"truncation_level": t, "norm": n}) for t, n in ((None, True), (30, True), (30, False),
                                                                         (10, True), (50, True))]
    + [("lambdarank", {"truncation_level": 30, "norm": True, "sigma": s}) for s in (0.5, 2.0)]
    + [("lambdarank", {"truncation_level": 30, "norm": True, "gain": "linear"})]
    + [("lambdarank", {"truncation_level": t, "norm": n}) for t, n in ((None, False), (20, True), (10, False),
                                                                         (50, False), (20, False))],
    "ll": [("lambdaloss", {"weighting": "ndcg2", "truncation_level": t, "norm": n})
           for t in (None, 30) for n in (False, True)]
    + [("lambdaloss", {"weighting": w, "mu": m, "truncation_level": t, "norm": n}) for w, m, t, n in (
        ("ndcg2pp", 0.1, 30, True), ("ndcg2pp", 1.0, 30, True), ("ndcg2pp", 10.0, 30, False),
        ("ndcg2pp", 1.0, 30, False), ("ndcg2pp", 5.0, None, False), ("ndcg2pp", 10.0, None, False))]
    + [("lambdaloss", {"weighting": "ndcg1", "truncation_level": None, "norm": False}),
       ("lambdaloss", {"weighting": "lambdarank", "truncation_level": 30, "norm": True})]
    + [("lambdaloss", {"weighting": "ndcg2pp", "mu": m, "truncation_level": t, "norm": n}) for m, t, n in (
        (10.0, 30, True), (5.0, 30, True), (1.0, None, False), (0.1, None, False), (1.0, 10, True))]
    + [("lambdaloss", {"weighting": "ndcg1", "truncation_level": 30, "norm": True})],
}
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


def _lgbm_eval(va):
    """``LGBMRanker.fit``'s validation arguments: ``eval_X``/``eval_y`` from LightGBM 4.7 on (where
    ``eval_set`` is deprecated), ``eval_set`` before."""
    import inspect

    import lightgbm as lgb

    group = [np.bincount(va[2])]
    if "eval_X" in inspect.signature(lgb.LGBMRanker.fit).parameters:
        return {"eval_X": (va[0],), "eval_y": (va[1],), "eval_group": group}
    return {"eval_set": [va[:2]], "eval_group": group}


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
                                                              **_lgbm_eval(va), eval_at=[10])
    t = time.process_time()
    m = GBDTRanker("native:lambdarank", n_estimators=300, learning_rate=0.1, early_stopping_rounds=30,
                   random_state=0, n_jobs=1, verbose=False).fit(tr[0], tr[1], qid=tr[2], eval_set=va)
    ours = time.process_time() - t
    boosted = []  # rounds LGBMRanker boosted (its booster keeps only those up to the best one)
    t = time.process_time()
    ref = lgb.LGBMRanker(objective="lambdarank", n_estimators=300, learning_rate=0.1, num_leaves=31,
                         min_child_samples=20, random_state=0, n_jobs=1, deterministic=True, force_row_wise=True,
                         verbosity=-1)
    ref.fit(tr[0], tr[1], group=np.bincount(tr[2]), **_lgbm_eval(va), eval_at=[10],
            callbacks=[lgb.early_stopping(30, first_metric_only=True, verbose=False),
                       lambda env: boosted.append(env.iteration)])
    peer = time.process_time() - t
    return ours, peer, len(m.history_), len(boosted)


# ------------------------------------------------------------------------------- 3. quality


def fit_eval(splits, loss, params, n_estimators=300):
    """Fit one objective on each (train, validation, test) split with the section's budget;
    returns the per-query test and validation NDCG@10 (concatenated over the splits), the best
    rounds and the CPU seconds."""
    from rankwise.metrics import evaluate
    from rankwise.models import GBDTRanker

    te_v, va_v, its, t = [], [], [], time.process_time()
    for tr, va, te in splits:
        m = GBDTRanker(loss, loss_params=params, n_estimators=n_estimators, learning_rate=0.1,
                       early_stopping_rounds=30, random_state=0, n_jobs=1, verbose=False).fit(
            tr[0], tr[1], qid=tr[2], eval_set=va)
        for part, acc in ((te, te_v), (va, va_v)):
            res = evaluate(m.predict(part[0]), part[1], qid=part[2], metrics=["ndcg@10"])
            acc.append(np.asarray(res.per_query["ndcg@10"], dtype=np.float64))
        its.append(m.best_iteration_ + 1)
    return np.concatenate(te_v), np.concatenate(va_v), its, time.process_time() - t


def quality(splits, objectives, dump=None):
    """{objective: per-query test NDCG@10 (concatenated over the splits)}, best rounds, CPU; with
    ``dump`` the results so far are saved after every objective (a run cut short keeps them)."""
    per_q, rounds, cpu = {}, {}, {}
    for loss, params in objectives:
        name = label(loss, params)
        per_q[name], _, rounds[name], cpu[name] = fit_eval(splits, loss, params)
        if dump:
            dump_quality(dump, per_q, rounds, cpu)
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
        if not Path(p).exists():
            continue
        for k, v in json.loads(Path(p).read_text()).items():
            per_q[k], rounds[k], cpu[k] = np.asarray(v["ndcg"]), v["rounds"], v["cpu"]
    order = [label(*o) for o in QUALITY if label(*o) in per_q]
    order += [k for k in per_q if k not in order]
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


def load_mq2008_folds(root, quick=False):
    """The MQ2008 folds as (train, vali, test) splits; [] when the data is absent."""
    if not (Path(root) / "MQ2008" / "Fold1" / "train.txt.gz").exists():
        return []
    return [load_mq2008(root, f) for f in ((1,) if quick else (1, 2, 3, 4, 5))]


def quality_sets(sizes, n_folds):
    """(dump key, title lines) of the section-3 tables: both synthetic sizes, then MQ2008."""
    budget = ("Equal budgets: `n_estimators=300, learning_rate=0.1, early_stopping_rounds=30` on the validation "
              "queries, 1 thread; p: paired randomisation test (5,000 sign flips) against native lambdarank on "
              "the per-query test NDCG@10. Objectives marked *validation-selected* are the variants the sweep "
              "(section 3s, on the validation queries of the 1,500-query set and MQ2008 only) chose; the "
              "6,000-query set took no part in any choice. CPU s: the whole fit (processes ran side by side "
              "on a shared machine: indicative only).")
    out = [(f"syn{nq}", [f"### 3{'ab'[k]}. Quality, {nq:,}-query synthetic set (seed 1, queries split 60/20/20), "
                         "test NDCG@10", "", budget, ""]) for k, nq in enumerate(sizes)]
    out.append(("mq", [f"### 3c. Quality, MQ2008 ({n_folds} folds, every test query once), test NDCG@10", "",
                       "Same budget; train on `train`, early stopping on `vali`, scored on `test`; best rounds "
                       "per fold.", ""]))
    return out


def sweep(splits, grid, dump):
    """Section 3s: every (loss, params) of ``grid`` fitted with the section-3 budget; the
    per-query validation (the selection) and test NDCG@10 are dumped after every fit."""
    import json

    done = json.loads(Path(dump).read_text()) if Path(dump).exists() else {}
    for loss, params in grid:
        name = label(loss, params)
        if name in done:
            continue
        te, va, its, c = fit_eval(splits, loss, params)
        done[name] = {"val": va.tolist(), "test": te.tolist(), "rounds": its, "cpu": c}
        Path(dump).write_text(json.dumps(done))
        print(f"{name}: val {va.mean():.4f} test {te.mean():.4f} rounds {its} cpu {c:.0f}", flush=True)
    return done


def sweep_table(runs, sets, ref):
    """Validation NDCG@10 of every swept variant per set (MQ2008: pooled over the folds' vali
    queries), their mean over the sets, and the test NDCG@10 shown after the selection."""
    names = [k for k in runs[sets[0][0]] if all(k in runs[s] for s, _ in sets)]
    mean = {k: float(np.mean([np.mean(runs[s][k]["val"]) for s, _ in sets])) for k in names}
    best = max(names, key=lambda k: (mean[k], k == ref))
    rows = ["| variant | " + " | ".join(f"val {t}" for _, t in sets) + " | val mean | Δ val mean vs default | "
            + " | ".join(f"best rounds {t}" for _, t in sets) + " | " + " | ".join(f"test {t}" for _, t in sets)
            + " |", "|---|" + "---:|" * (3 * len(sets) + 2)]
    for k in sorted(names, key=lambda k: -mean[k]):
        mark = " **(selected)**" if k == best else (" (default before the sweep)" if k == ref else "")
        rows.append(f"| {k}{mark} | " + " | ".join(f"{np.mean(runs[s][k]['val']):.4f}" for s, _ in sets)
                    + f" | {mean[k]:.4f} | {mean[k] - mean.get(ref, np.nan):+.4f} | "
                    + " | ".join(", ".join(map(str, runs[s][k]["rounds"])) for s, _ in sets) + " | "
                    + " | ".join(f"{np.mean(runs[s][k]['test']):.4f}" for s, _ in sets) + " |")
    missing = [k for s, _ in sets for k in runs[s] if k not in names]
    if missing:
        rows += ["", "Run on one set only (the CPU budget of the shared machine ran out first), left out of the "
                 "selection: " + "; ".join(f"`{k}`" for k in dict.fromkeys(missing)) + "."]
    return rows, best


def top_share(tr, variants, rounds=50, k=10):
    """Share of the gradient's absolute mass on the documents of the current top ``k`` of each
    training query, for each (loss, params), at the scores of a native lambdarank model after
    ``rounds`` rounds (the same scores for every variant)."""
    from rankwise.losses import grad_hess
    from rankwise.models import GBDTRanker

    m = GBDTRanker("native:lambdarank", n_estimators=rounds, learning_rate=0.1, random_state=0, n_jobs=1,
                   verbose=False).fit(tr[0], tr[1], qid=tr[2])
    s = m.predict(tr[0])
    off = np.concatenate(([0], np.cumsum(np.bincount(tr[2]))))
    top = np.zeros(len(s), dtype=bool)
    for a, b in zip(off[:-1], off[1:]):
        top[a + np.argsort(-s[a:b], kind="stable")[:k]] = True
    out = {}
    for loss, params in variants:
        g, _ = grad_hess(loss, s, tr[1], off, n_jobs=1, **(params or {}))
        out[label(loss, params)] = float(np.abs(g[top]).sum() / np.abs(g).sum())
    return out, float(top.mean())


def goal_lines(goals):
    """Issue 14's quality goals per set: the best rankwise objective and the ``lambdaloss`` variant
    selected on validation against native lambdarank (test NDCG@10; the rows of the tables above)."""
    rows = ["### 3e. Quality goals (issue 14): rankwise ≥ native lambdarank on test NDCG@10", "",
            "| set | best rankwise objective (highest test NDCG@10 among the rows above) | Δ vs native | "
            "`lambdaloss`, the variant selected on validation | Δ vs native |",
            "|---|---|---:|---|---:|"]
    for title, per_q, named in goals:
        base = per_q["native:lambdarank"].mean()
        ours = {n: per_q[k].mean() - base for n, k in named.items() if k != "native:lambdarank"}
        best = max(ours, key=ours.get)
        bl = next((n for n in ours if n.startswith("lambdaloss") and "validation-selected" in n), None)
        rows.append(f"| {title} | {best} | {ours[best]:+.4f} | {bl or '—'} | "
                    + (f"{ours[bl]:+.4f} |" if bl else "— |"))
    return rows + [""]


# --------------------------------------------------------------------------- 4. neural, child


NEURAL_CHILD = r"""
import sys, time
sys.path.insert(0, {here!r})
from bench_training import split_queries
from rankwise.data.synthetic import make_synthetic
from rankwise.models import NeuralRanker
tr, va, te = split_queries(make_synthetic({nq}, n_features=136, seed=1))
m = NeuralRanker(loss={loss!r}, hidden=(128, 64), max_iter={epochs}, random_state=0, verbose=False)
t = time.process_time()
m.fit(tr[0], tr[1], qid=tr[2])
cpu = time.process_time() - t
from bench_io import _status_mb  # VmHWM: this process's own peak (ru_maxrss keeps a parent's size)
print(cpu / {epochs}, _status_mb("VmHWM"), len(tr[1]))
"""


def neural(nq, epochs):
    out = {}
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for loss in ("listnet", "lambdaloss"):  # untimed: warms the OS file cache and bytecode,
        warm = NEURAL_CHILD.format(here=str(HERE), nq=60, loss=loss, epochs=1)  # so the timed run is steady
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
    ap.add_argument("--sections", default="1245", help="which sections to run (default 1245; 3 = quality, s = its "
                    "validation sweep, d = where the gradient lies: hours of CPU, run on their own)")
    ap.add_argument("--quality", default="", help="indices into QUALITY (e.g. 01) to run in section 3 (default all)")
    ap.add_argument("--quality-sets", default="slm",
                    help="section 3 data: s = small synthetic, l = large synthetic, m = MQ2008 (default all)")
    ap.add_argument("--extra", default="", help='section 3: more objectives, JSON [[loss, params], ...]')
    ap.add_argument("--dump", default="", help="section 3: also save the per-query results to DUMP_<set>.json")
    ap.add_argument("--sweep-dumps", default="", help="section 3 --merge: also the swept variants named in --notes")
    ap.add_argument("--notes", default="", help='section 3 --merge: JSON {label: {"as": shown label, "note": ...}} '
                    "in table order")
    ap.add_argument("--sweep", default="lr,ll", help="section s: the grids of SWEEP to run (default lr,ll)")
    ap.add_argument("--merge", default="", help="section 3: only write the tables of the dumps PREFIX*_<set>.json")
    ap.add_argument("--out", default=None, help="results file (default benchmarks/results/bench_training.md, and "
                    "bench_training_quality.md for sections 3, s, d)")
    args = ap.parse_args(argv)
    if set(args.sections) & set("1245") and set(args.sections) & set("3sd"):
        ap.error("run sections 1, 2, 4, 5 and the quality sections 3, s, d separately (two results files)")
    if args.out is None:
        args.out = str(QOUT if set(args.sections) <= set("3sd") else OUT)
    from rankwise.data.synthetic import make_synthetic

    t_start = time.time()
    sizes = (300, 600) if args.quick else (1500, 6000)
    rounds, warm = (6, 2) if args.quick else (14, 4)
    quality_only = set(args.sections) <= set("3sd")
    title = ("## Training quality: every objective against native lambdarank, equal budgets "
             f"(`benchmarks/bench_training.py --sections {args.sections}`)" if quality_only
             else "## Training on the compiled engine (`benchmarks/bench_training.py`)")
    rep = Report([title, "",
                  f"Machine: {platform.machine()}, {os.cpu_count()} CPUs **shared with other jobs while this ran** "
                  f"(load average {os.getloadavg()[0]:.1f} at the start); CPU time = `time.process_time` of the "
                  "process (all its threads), so other jobs slow the wall clock but not these figures, except "
                  "through shared caches. Every ratio comes from this one run."
                  + ("" if quality_only else
                     " OpenMP threads wait passively "
                     f"(`OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}`, LightGBM's for both sides): with "
                     "libgomp's default spin-then-sleep, a thread waiting for one that other jobs preempted spins, "
                     "and on this loaded machine that spinning dominated the 2-thread CPU times (a trial run at "
                     "load 7.5: `pointwise_squared`, whose objective costs 1 ms, at 2.5× native).")
                  + (" These tables were assembled (`--merge`) from the per-query dumps (`--dump`) of separate "
                     "processes of this script, 1 thread each, that ran at the same time; the load average is that "
                     "of the assembly." if args.merge else ""), ""], args.out)

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
            q_objs = [QUALITY[int(i)] for i in args.quality if i != "-"]  # "-": only the --extra ones
        if args.extra:
            q_objs = list(q_objs) + [(lo, pa or None) for lo, pa in json.loads(args.extra)]
        if args.merge:
            notes, goals = (json.loads(args.notes) if args.notes else {}), []
            for key, title in quality_sets(sizes, 1 if args.quick else 5):
                per_q, rnds, cpu = merge_quality(sorted(Path(args.merge).parent.glob(
                    Path(args.merge).name + f"*_{key}.json")))
                if args.sweep_dumps:  # the swept variants' test results (same fit_eval, same budget)
                    for grid in SWEEP:
                        p = Path(f"{args.sweep_dumps}_sweep_{grid}_{'mq' if key == 'mq' else 'syn'}.json")
                        runs = json.loads(p.read_text()) if p.exists() and key != f"syn{sizes[1]}" else {}
                        for name in notes:
                            if name in runs and name not in per_q:
                                v = runs[name]
                                per_q[name], rnds[name], cpu[name] = np.asarray(v["test"]), v["rounds"], v["cpu"]
                named = {notes.get(k, {}).get("as", k) + (f" *({notes[k]['note']})*" if notes.get(k, {}).get("note")
                                                        else ""): k for k in per_q}
                order = [n for n in named if named[n] == "native:lambdarank"] + sorted(
                    (n for n in named if named[n] != "native:lambdarank"),
                    key=lambda n: list(notes).index(named[n]) if named[n] in notes else 99)
                if "native:lambdarank" in per_q:
                    rep.add(title + quality_table({n: per_q[named[n]] for n in order},
                                                  {n: rnds[named[n]] for n in order},
                                                  {n: cpu[named[n]] for n in order}) + [""])
                    goals.append(("MQ2008 (5 folds)" if key == "mq" else f"{int(key[3:]):,}-query synthetic",
                                  per_q, named))
            rep.add(goal_lines(goals))
            return
        for n, (key, title) in enumerate(quality_sets(sizes, 1 if args.quick else 5)):
            if "slm"[n] not in args.quality_sets:
                continue
            dump = args.dump + f"_{key}.json" if args.dump else None
            if key == "mq":
                splits = load_mq2008_folds(args.data, args.quick)
                if not splits:
                    rep.add(["MQ2008 not found (set RANKWISE_DATA): its quality table was not run.", ""])
                    continue
            else:
                splits = [split_queries(make_synthetic(int(key[3:]), n_features=136, seed=1))]
            per_q, rnds, cpu = quality(splits, q_objs, dump)
            if "native:lambdarank" in per_q:
                rep.add(title + quality_table(per_q, rnds, cpu) + [""])

    def section4():
        nq = sizes[0]
        nr = neural(nq, 1)
        lines = [f"### 4. NeuralRanker MLP (128, 64), {nq:,}-query set: CPU per epoch and peak RSS", "",
                 "Each in its own process (peak RSS of that process, its `VmHWM`: data, model and training, 1 epoch; "
                 "MB = 2^20 bytes), after "
                 "an untimed run on 60 queries (file cache and bytecode warm). Goal: "
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
    def section3s():
        sets = [(k, t) for k, t in (("syn", f"{sizes[0]:,}-q synthetic"), ("mq", "MQ2008")) if k[0] in args.quality_sets]
        for grid in args.sweep.split(","):
            runs = {}
            for key, _ in sets:
                dump = f"{args.dump or str(HERE / 'results' / 'sweep')}_sweep_{grid}_{key}.json"
                if args.merge:
                    runs[key] = json.loads(Path(dump).read_text())
                    continue
                splits = (load_mq2008_folds(args.data, args.quick) if key == "mq" else
                          [split_queries(make_synthetic(sizes[0], n_features=136, seed=1))])
                runs[key] = sweep(splits, SWEEP[grid] if not args.quick else SWEEP[grid][:2], dump)
            ref = label(*SWEEP_DEFAULT[grid])
            rows, best = sweep_table(runs, sets, ref)
            rep.add([f"### 3s-{grid}. Sweep of `{SWEEP_DEFAULT[grid][0]}`'s options, selected on validation NDCG@10", "",
                     "Budget of section 3; the *validation* columns decide (rule: the selected variant has the highest "
                     "mean over the sets of the validation NDCG@10, at the early-stopping round; it becomes the "
                     "default when it also beats the default before the sweep on each set). The test columns are "
                     "shown, not used.", ""] + rows + ["", f"Selected: `{best}`.", ""])

    def section3d():
        tr = split_queries(make_synthetic(sizes[0], n_features=136, seed=1))[0]
        variants = [("lambdarank", {"truncation_level": 30, "norm": True}), ("ranknet", {"pair_weights": "delta_ndcg"}),
                    ("lambdaloss", {"weighting": "ndcg2"}), ("lambdaloss", {"weighting": "ndcg2", "truncation_level": 30}),
                    ("lambdaloss", {"weighting": "ndcg2pp", "mu": 5.0})]
        share, frac = top_share(tr, variants)
        rep.add(["### 3d. Where the gradient lies: share of |gradient| on each query's current top 10", "",
                 f"{sizes[0]:,}-query synthetic set, training queries, at the scores of native lambdarank after 50 "
                 f"rounds (the same scores for every objective); the top 10 hold {frac:.1%} of the documents.", "",
                 "| objective | share of Σ|g| on the top 10 |", "|---|---:|"]
                + [f"| {k} | {v:.1%} |" for k, v in share.items()] + [""])

    for n, fn in (("1", section1), ("2", section2), ("3", section3), ("s", section3s), ("d", section3d), ("4", section4),
                  ("5", section5)):
        if n in args.sections:
            rep.guard(f"section {n}", fn)
    rep.add([f"Load average at the end: {os.getloadavg()[0]:.1f}; total wall {time.time() - t_start:.0f} s.", ""])


if __name__ == "__main__":
    main()
