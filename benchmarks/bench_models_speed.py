"""Training speed of the models on a synthetic MSLR-WEB30K-like set, each against a peer in the same run.

Data: ``rankwise.data.make_synthetic`` with its MSLR-like defaults (136 features, 5 grades with
MSLR's label shares, log-normal list lengths up to 1300), enough queries for >= 200k rows.

1. GBDTRanker: seconds per boosting round with rankwise losses (``as_objective``: lambdaloss,
   listnet) against LightGBM's built-in ``lambdarank`` run through ``lgb.train`` with the same tree
   parameters. Per-round time = (T(R2) - T(R1)) / (R2 - R1) of two fits with R1 < R2 rounds, which
   cancels the fixed cost (Dataset binning), in wall and in process CPU time. Goal (issue 5):
   ratio <= 1.5x, judged on CPU time (other jobs on a shared machine inflate wall time unevenly).
2. LinearRanker / NeuralRanker: documents per second per epoch (L-BFGS: per iteration; CPU and wall) and the
   peak resident memory of the fit, each model in a fresh subprocess; the peer is a bare PyTorch
   loop (same module shape, same rankwise loss, same batch size, Adam) over batches padded once
   before the clock starts: the ratio is the cost of rankwise's loop (batch gathering, the per-epoch
   training-objective pass, bookkeeping) over the floor.

Peak memory: the kernel's high-water mark ``VmHWM`` of the worker process, reset just before
``fit`` by writing 5 to ``/proc/self/clear_refs`` (Linux); reported as the peak and as the
increase over the resident size before ``fit`` (which already holds the data and torch).

Everything single-threaded (torch, LightGBM): the benchmark machine is a shared 2-core box.

Usage: python benchmarks/bench_models_speed.py [--quick] [--queries N]
Writes benchmarks/results/bench_models_speed.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "bench_models_speed.md"
SEED = 0


def make_data(n_queries: int):
    from rankwise.data import make_synthetic

    return make_synthetic(n_queries, n_features=136, seed=SEED)


# -- 1. GBDT rounds -----------------------------------------------------------------------------------
TREE = {"learning_rate": 0.1, "num_leaves": 31, "min_child_samples": 20}


def _fit_gbdt(kind: str, X, y, offsets, rounds: int) -> tuple[float, float]:
    """Wall and CPU time of one fit with ``rounds`` boosting rounds, single-threaded."""
    t0, c0 = time.perf_counter(), time.process_time()
    if kind == "lgb:lambdarank":
        import lightgbm as lgb

        params = {"objective": "lambdarank", "learning_rate": TREE["learning_rate"], "num_leaves": TREE["num_leaves"],
                  "min_data_in_leaf": TREE["min_child_samples"], "lambda_l2": 0.0, "seed": SEED,
                  "deterministic": True, "force_row_wise": True, "verbosity": -1, "metric": "None",
                  "num_threads": 1}
        lgb.train(params, lgb.Dataset(X, y, group=np.diff(offsets)), rounds)
    else:
        from rankwise.models import GBDTRanker

        qid = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
        GBDTRanker(kind, n_estimators=rounds, n_jobs=1, random_state=SEED, verbose=False, **TREE).fit(X, y, qid=qid)
    return time.perf_counter() - t0, time.process_time() - c0


def gbdt_rounds(ds, r1: int, r2: int):
    from rankwise.losses import grad_hess

    X, y, off = ds.X, np.asarray(ds.labels, dtype=np.float64), np.asarray(ds.query_offsets)
    rows = []
    small = int(off[20])  # warm-up on the first 20 queries: imports and lazy initialisation off the clock
    for kind in ("lgb:lambdarank", "native:lambdarank", "listnet", "lambdaloss"):
        _fit_gbdt(kind, X[:small], y[:small], off[:21], 1)
        # best of two fits for each length: one-off stalls of a shared machine inflate single timings
        (t1, c1), (t2, c2) = (np.min([_fit_gbdt(kind, X, y, off, r) for _ in range(2)], axis=0) for r in (r1, r2))
        per, per_cpu = (t2 - t1) / (r2 - r1), (c2 - c1) / (r2 - r1)
        obj = np.nan
        if not kind.endswith("lambdarank"):  # one gradient/Hessian evaluation alone, as each round does
            s = np.random.default_rng(SEED).normal(size=len(y))
            c0 = time.process_time()
            grad_hess(kind, s, y, off)
            obj = time.process_time() - c0
        rows.append((kind, per, per_cpu, c1, c2, obj))
        print(f"gbdt {kind}: {per:.3f} s/round wall, {per_cpu:.3f} CPU (CPU T({r1})={c1:.1f}s, T({r2})={c2:.1f}s), "
              f"objective {obj:.3f}s CPU", flush=True)
    return rows


# -- 2. torch models: each in a fresh worker process ------------------------------------------------------
MODELS = {
    # name: (constructor kwargs, units of max_iter/epochs run, unit name)
    "LinearRanker listnet lbfgs": ("linear", {"loss": "listnet", "solver": "lbfgs", "max_iter": 10, "tol": 0.0}),
    "LinearRanker listnet adam": ("linear", {"loss": "listnet", "solver": "adam", "max_iter": 2, "batch_queries": 16}),
    "LinearRanker listnet ogd": ("linear", {"loss": "listnet", "solver": "ogd", "max_iter": 1}),
    "LinearRanker lambdaloss adam": ("linear", {"loss": "lambdaloss", "solver": "adam", "max_iter": 1,
                                                "batch_queries": 16}),
    "NeuralRanker listnet mlp": ("neural", {"loss": "listnet", "architecture": "mlp", "hidden": (64, 32), "epochs": 2,
                                            "batch_queries": 32}),
    "NeuralRanker lambdaloss mlp": ("neural", {"loss": "lambdaloss", "architecture": "mlp", "hidden": (64, 32),
                                               "epochs": 1, "batch_queries": 32}),
    "NeuralRanker listnet attention": ("neural", {"loss": "listnet", "architecture": "attention", "hidden": (32, 32),
                                                  "epochs": 1, "batch_queries": 32}),
}
QUICK_MODELS = ("LinearRanker listnet lbfgs", "LinearRanker listnet adam", "NeuralRanker listnet mlp")


def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _bare_module(kind: str, d: int, kw: dict):
    import torch
    from torch import nn

    if kind == "linear":
        return nn.Linear(d, 1)
    hidden = kw["hidden"]
    if kw["architecture"] == "mlp":
        layers, prev = [], d
        for h in hidden:
            layers += [nn.Linear(prev, h), nn.ReLU(), nn.Dropout(0.1)]
            prev = h
        return nn.Sequential(*layers, nn.Linear(prev, 1))

    class Att(nn.Module):
        def __init__(self):
            super().__init__()
            w = hidden[0]
            self.embed = nn.Sequential(nn.Linear(d, w), nn.ReLU())
            self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(w, 2, 2 * w, 0.1, batch_first=True), 1,
                                             enable_nested_tensor=False)
            self.head = nn.Sequential(nn.Linear(w, hidden[1]), nn.ReLU(), nn.Linear(hidden[1], 1))

        def forward(self, x, where):
            return self.head(self.enc(self.embed(x), src_key_padding_mask=~where))

    return Att()


def worker(name: str, data_dir: str, bare: bool) -> dict:
    """Fit one model (or its bare-torch peer) on the saved data set; print one JSON line."""
    import warnings

    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)
    warnings.filterwarnings("ignore", message=".*single document.*")
    X = np.load(os.path.join(data_dir, "X.npy"))
    y = np.load(os.path.join(data_dir, "y.npy"))
    off = np.load(os.path.join(data_dir, "offsets.npy"))
    qid = np.repeat(np.arange(len(off) - 1), np.diff(off))
    kind, kw = MODELS[name]
    units = kw.get("max_iter", kw.get("epochs"))
    small = int(off[8])
    if not bare:
        from rankwise.models import LinearRanker, NeuralRanker

        cls = LinearRanker if kind == "linear" else NeuralRanker
        # warm-up fit on 8 queries, 1 epoch: the first fit of a process pays one-time lazy imports
        # (torch.optim's first step alone took seconds here), which are not per-epoch cost
        cls(random_state=SEED, verbose=False, **dict(kw, **{"max_iter" if "max_iter" in kw else "epochs": 1})).fit(
            X[:small], y[:small], qid=qid[:small])
    rss_before = _rss_kb("VmRSS")
    reset = _reset_peak()
    out = {"name": name, "bare": bare, "rows": int(len(y)), "rss_before_kb": rss_before, "peak_reset": reset}
    if not bare:
        model = cls(random_state=SEED, verbose=False, **kw)
        t0, c0 = time.perf_counter(), time.process_time()
        model.fit(X, y, qid=qid)
        out["seconds"], out["cpu"] = time.perf_counter() - t0, time.process_time() - c0
        out["units"] = int(getattr(model, "n_iter_", units)) if kw.get("solver") == "lbfgs" else units
    else:
        from rankwise.losses import get
        from rankwise.train.batching import gather_padded, query_batches

        # standardise once, pad once: outside the clock, as the floor of what a loop must do
        Z = ((X - X.mean(0)) / X.std(0)).astype(np.float32)
        bq = kw.get("batch_queries", 1 if kw.get("solver") == "ogd" else 16)  # OGD: one query per step
        batches = []
        for qs in query_batches(off, bq, rng=np.random.default_rng(SEED)):
            Xb, yb, _, where, _ = gather_padded(Z, y, off, qs)
            batches.append((torch.from_numpy(Xb), torch.from_numpy(yb).float(), torch.from_numpy(where)))
        torch.manual_seed(SEED)
        module = _bare_module(kind, X.shape[1], kw)
        opt = torch.optim.Adam(module.parameters(), lr=1e-3)
        loss_fn = get(kw["loss"])
        att = kind == "neural" and kw["architecture"] == "attention"
        _reset_peak()
        t0 = None
        for epoch in range(units + 1):  # epoch 0: warm-up on the first batch only, off the clock
            for Xb, yb, where in (batches[:1] if epoch == 0 else batches):
                opt.zero_grad(set_to_none=True)
                s = (module(Xb, where) if att else module(Xb)).squeeze(-1)
                loss = loss_fn(s, yb, where=where, reduction="sum") / Xb.shape[0]
                loss.backward()
                opt.step()
            if epoch == 0:
                t0, c0 = time.perf_counter(), time.process_time()
        out["seconds"], out["cpu"] = time.perf_counter() - t0, time.process_time() - c0
        out["units"] = units
    out["peak_kb"] = _rss_kb("VmHWM")
    print("RESULT " + json.dumps(out), flush=True)
    return out


def run_worker(name: str, data_dir: str, bare: bool, timeout: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--data-dir", data_dir]
    if bare:
        cmd.append("--bare")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"name": name, "bare": bare, "error": f"timed out after {timeout:.0f}s"}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"name": name, "bare": bare, "error": (p.stderr.strip().splitlines() or ["no output"])[-1][:200]}


def torch_models(ds, names, timeout):
    with tempfile.TemporaryDirectory(prefix="rankwise_bench_") as tmp:
        np.save(os.path.join(tmp, "X.npy"), np.ascontiguousarray(ds.X, dtype=np.float32))
        np.save(os.path.join(tmp, "y.npy"), np.asarray(ds.labels, dtype=np.float64))
        np.save(os.path.join(tmp, "offsets.npy"), np.asarray(ds.query_offsets, dtype=np.int64))
        rows = []
        for name in names:
            ours = run_worker(name, tmp, False, timeout)
            print(ours, flush=True)
            lbfgs = MODELS[name][1].get("solver") == "lbfgs"
            peer = {"error": "n/a (full-batch L-BFGS has no minibatch loop)"} if lbfgs else run_worker(name, tmp, True,
                                                                                                    timeout)
            print(peer, flush=True)
            rows.append((name, ours, peer))
        return rows


# -- report ---------------------------------------------------------------------------------------------------
def _docs_per_s(r, key="seconds"):
    if "error" in r:
        return np.nan
    return r["rows"] * r["units"] / r[key]


def _mb(kb):
    return kb / 1024.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller data, fewer models (smoke run)")
    ap.add_argument("--queries", type=int, default=None, help="number of synthetic queries (default 1800, ~216k rows)")
    ap.add_argument("--rounds", type=int, nargs=2, default=None, metavar=("R1", "R2"))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per worker process")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--data-dir", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.data_dir, args.bare)
        return 0

    import warnings

    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)  # BLAS / OpenMP pools of numpy, LightGBM's Dataset construction
    warnings.filterwarnings("ignore", message=".*single document.*")  # MSLR-like data has a few 1-doc queries
    n_q = args.queries or (200 if args.quick else 1800)
    r1, r2 = args.rounds or ((2, 6) if args.quick else (5, 45))
    t_start = time.perf_counter()
    load0 = os.getloadavg()[0]
    ds = make_data(n_q)
    sizes = ds.query_sizes
    n_rows = len(ds.labels)
    print(f"data: {n_rows} rows, {n_q} queries, lists {sizes.min()}..{sizes.max()} (median {np.median(sizes):.0f}), "
          f"generated in {time.perf_counter() - t_start:.1f}s", flush=True)
    g = gbdt_rounds(ds, r1, r2)
    names = QUICK_MODELS if args.quick else tuple(MODELS)
    tm = torch_models(ds, names, args.timeout)
    total = time.perf_counter() - t_start
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total_cpu = sum(u.ru_utime + u.ru_stime for u in usage)

    import lightgbm

    peer = next(r for r in g if r[0] == "lgb:lambdarank")
    peer_wall, peer_cpu = peer[1], peer[2]
    lines = ["## Model training speed on MSLR-WEB30K-like data (`bench_models_speed.py`)", "",
             f"`make_synthetic({n_q}, n_features=136, seed={SEED})`: {n_rows:,} rows, {n_q:,} queries, list lengths "
             f"{sizes.min()}–{sizes.max()} (median {np.median(sizes):.0f}, mean {sizes.mean():.0f}), labels 0–4 "
             f"with MSLR's shares; dense float32. Single-threaded.", "",
             f"### GBDTRanker: time per boosting round vs LightGBM's built-in lambdarank", "",
             f"LightGBM backend, {TREE['num_leaves']} leaves, learning rate {TREE['learning_rate']}, ≥ "
             f"{TREE['min_child_samples']} rows per leaf, 1 thread, no validation set. Per round = "
             f"(T({r2} rounds) − T({r1} rounds)) / {r2 - r1}, each T the best of two fits, so Dataset construction "
             "(binning, several CPU seconds here) cancels; wall time and the "
             "process's CPU time (single-threaded: the cost on an idle core; the goal is judged on CPU time, which "
             "other jobs on this shared machine do not inflate). *objective alone*: CPU time of one "
             "`rankwise.losses.grad_hess` call on all rows (what each rankwise round adds to tree growth).", "",
             "| objective | s / round (wall) | ratio (wall) | CPU s / round | ratio (CPU) | goal ≤ 1.5× (CPU) "
             f"| objective alone, CPU s | T({r1}) CPU s | T({r2}) CPU s |",
             "|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    label = {"lgb:lambdarank": "LightGBM `lambdarank` via `lgb.train` (peer)",
             "native:lambdarank": "GBDTRanker `native:lambdarank` (wrapper overhead)",
             "listnet": "GBDTRanker `listnet` (rankwise objective)",
             "lambdaloss": "GBDTRanker `lambdaloss` (rankwise objective)"}
    for kind, per, per_cpu, t1, t2, obj in g:
        ratio_cpu = per_cpu / peer_cpu
        goal = "—" if kind.startswith(("lgb", "native")) else ("met" if ratio_cpu <= 1.5 else "**not met**")
        lines.append(f"| {label[kind]} | {per:.3f} | {per / peer_wall:.2f}× | {per_cpu:.3f} | {ratio_cpu:.2f}× "
                     f"| {goal} | "
                     f"{'—' if np.isnan(obj) else f'{obj:.3f}'} | {t1:.1f} | {t2:.1f} |")
    lines += ["", "### LinearRanker and NeuralRanker: documents per second per epoch, peak memory", "",
              "Each fit runs in a fresh Python process on the same data (loaded from `.npy`), without a validation "
              "set, after a warm-up fit (8 queries, 1 epoch; the bare loop: one batch) that takes one-time lazy "
              "imports off the clock. docs/s = rows × epochs / fit CPU time of the process (wall-clock in its own "
              "column; L-BFGS: rows × iterations; each iteration may "
              "evaluate the objective more than once). A rankwise epoch includes one extra forward pass over all "
              "queries to record the training objective. *bare torch loop* (peer): the same scorer shape and "
              "rankwise loss, Adam, the same queries per batch (OGD: 1), over batches standardised and padded once "
              "before "
              "the clock starts. Peak = the process's `VmHWM` after `fit`, reset by `/proc/self/clear_refs` just "
              "before it; *over start* = peak − resident size before `fit` (data ≈ "
              f"{ds.X.nbytes / 2**20:.0f} MB + torch).", "",
              "| model | epochs (L-BFGS: iterations) | rankwise docs/s (CPU) | bare torch loop docs/s (CPU) "
              "| rankwise / bare (1 = as fast) | "
              "rankwise docs/s (wall) | fit wall s | peak MB | over start MB | bare peak MB |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, ours, bare in tm:
        if "error" in ours:
            lines.append(f"| {name} | — | failed: {ours['error']} | | | | | | |")
            continue
        d_ours, d_bare = _docs_per_s(ours, "cpu"), _docs_per_s(bare, "cpu")
        ratio = "—" if np.isnan(d_bare) else f"{d_ours / d_bare:.2f}"
        bare_s = bare["error"] if "error" in bare else f"{d_bare:,.0f}"
        bare_peak = "—" if "error" in bare else f"{_mb(bare['peak_kb']):.0f}"
        lines.append(f"| {name} | {ours['units']} | {d_ours:,.0f} | {bare_s} | {ratio} | {_docs_per_s(ours):,.0f} | "
                     f"{ours['seconds']:.1f} | {_mb(ours['peak_kb']):.0f} | "
                     f"{_mb(ours['peak_kb'] - ours['rss_before_kb']):.0f} | {bare_peak} |")
    lines += ["", "Not run: LinearRanker lambdaloss with L-BFGS (left out when its full-batch objective padded "
              "chunks of 256 queries to the longest list, up to 1,191 here, and the O(n²) pair tensors needed "
              "several GB; not re-tried since). On CPU the rankwise models train their loss through the compiled "
              "engine (`rankwise.losses.compiled`: O(n) memory, no padding), while the bare loop runs the torch "
              "definition of the same loss on padded batches: hence rankwise faster than the bare loop for the "
              "O(n²) lambdaloss (the listnet rows' gap to the bare loop was not analysed in this run).", "",
              f"Run: `python benchmarks/bench_models_speed.py{' --quick' if args.quick else ''}` took "
              f"{total / 60:.1f} min wall, {total_cpu / 60:.1f} min CPU (this process and its workers), on "
              f"{platform.node()} ({os.cpu_count()} cores, shared with other jobs: load average "
              f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end — absolute times are noisy, ratios "
              f"within one table less so). Python {platform.python_version()}, torch {torch.__version__}, LightGBM "
              f"{lightgbm.__version__}.", ""]
    text = "\n".join(lines)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"wrote {out} after {total:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
