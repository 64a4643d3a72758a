"""Memory bounds on extreme shapes (issue 29 item 5): a 100 MB line, 10^6 one-document queries, one query of 10^6.

``python benchmarks/faults_memory.py [--limit-gb 6] [--timeout 600] [--cases NAME,...] [--scale 1.0]``

Every case runs in a fresh child process whose address space is capped with ``RLIMIT_AS`` (``--limit-gb``),
so an allocation past the cap is a ``MemoryError`` in the child rather than an OOM kill of the machine, and
under a wall-clock ``--timeout`` (a hang). The input files are written by the parent (streamed, a few MB at a
time); arrays are built in the child, whose peak-RSS mark is then reset (``/proc/self/clear_refs``), so the
figure is the peak of the call itself above what it was given. Outcomes: ``ok`` (a result, checked), a
rankwise error (its message), ``MemoryError`` / another exception / ``hang`` / a signal (failures).

``--scale`` shrinks every size (e.g. 0.01 for a smoke run). Writes benchmarks/results/faults_memory.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
MB = 1 << 20
CHUNK = 1 << 16


# ------------------------------------------------------------------------------ inputs (parent)
def _write_lines(path: Path, lines) -> None:
    with open(path, "w", newline="\n") as fh:
        buf = []
        for ln in lines:
            buf.append(ln)
            if len(buf) >= CHUNK:
                fh.write("".join(buf))
                buf = []
        fh.write("".join(buf))


def _svm_long_line(path: Path, nbytes: int) -> None:
    # one document whose features fill ``nbytes``: "1 qid:1 1:0.123456 2:0.123456 ..."
    with open(path, "w") as fh:
        fh.write("1 qid:1")
        j, size = 1, 7
        while size < nbytes:
            piece = "".join(f" {k}:0.{(k * 7919) % 1000000:06d}" for k in range(j, j + CHUNK))
            fh.write(piece)
            size += len(piece)
            j += CHUNK
        fh.write("\n0 qid:1 1:0.5\n")


def _svm_rows(path: Path, n: int, one_query: bool) -> None:
    _write_lines(path, (f"{i % 3} qid:{1 if one_query else i + 1} 1:{(i * 37) % 1000 / 1000:.3f} "
                        f"2:{(i * 11) % 997 / 997:.6e} 3:{i % 5}\n" for i in range(n)))


def _run_long_line(path: Path, nbytes: int) -> None:
    # a TREC run whose one line holds a ``nbytes`` document id, then an ordinary line
    with open(path, "w") as fh:
        fh.write("q1 Q0 ")
        block = "d" * MB
        for _ in range(nbytes // MB):
            fh.write(block)
        fh.write(" 1 1.5 tag\nq1 Q0 d2 2 0.5 tag\n")


def _run_rows(path: Path, n: int, one_query: bool) -> None:
    _write_lines(path, (f"q{0 if one_query else i} Q0 d{i} {i + 1 if one_query else 1} {-(i * 1e-6):.9e} tag\n"
                        for i in range(n)))


def _qrels_rows(path: Path, n: int, one_query: bool) -> None:
    _write_lines(path, (f"q{0 if one_query else i} 0 d{i} {i % 3}\n" for i in range(n)))


def _run_and_qrels(path: Path, n: int, one_query: bool) -> None:
    _run_rows(path, n, one_query)
    _qrels_rows(Path(str(path) + ".qrels"), n, one_query)


def _qrels_long_line(path: Path, nbytes: int) -> None:
    with open(path, "w") as fh:
        fh.write("q1 0 ")
        block = "d" * MB
        for _ in range(nbytes // MB):
            fh.write(block)
        fh.write(" 1\nq1 0 d2 0\n")


def _feature_log_long_line(path: Path, nbytes: int) -> None:
    # one OpenSearch response (NDJSON: one line) whose hits fill ``nbytes``
    import json as _json

    with open(path, "w") as fh:
        fh.write('{"hits": {"hits": [')
        size, i = 0, 0
        while size < nbytes:
            hits = []
            for _ in range(2000):
                hits.append(_json.dumps({"_id": f"d{i}", "fields": {"_ltrlog": [{"log_entries": [
                    {"name": "f1", "value": (i % 97) / 7.0}, {"name": "f2", "value": i * 1e-3}]}]}}))
                i += 1
            piece = ("," if size else "") + ",".join(hits)
            fh.write(piece)
            size += len(piece)
        fh.write("]}}\n")


def _click_long_line(path: Path, nbytes: int) -> None:
    # the Yandex sample layout, one session whose page lists ``nbytes`` of document ids
    with open(path, "w") as fh:
        fh.write("q1\t")
        size, i = 0, 0
        while size < nbytes:
            piece = ",".join(f"d{j}" for j in range(i, i + CHUNK)) + ","
            fh.write(piece)
            size += len(piece)
            i += CHUNK
        fh.write("d0 : d0, d5;\nq2\td1,d2 : d2;\n")


def _click_rows(path: Path, n: int) -> None:
    _write_lines(path, (f"q{i % 1000}\td{i},d{i + 1},d{i + 2} : d{i + 1};\n" for i in range(n)))


# ------------------------------------------------------------------------------ cases (child)
def _arrays(n: int, one_query: bool):
    import numpy as np

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, n).astype(np.float64)
    s = rng.normal(size=n)
    q = np.zeros(n, dtype=np.int64) if one_query else np.arange(n, dtype=np.int64)
    return s, y, q


def _features(n: int, d: int = 5):
    import numpy as np

    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0.5).astype(np.float64) + (X[:, 1] > 1)
    return X, y


def case_run(name: str, path: str | None, n: int):
    """Run one case; return (prepare, call): prepare builds in-memory inputs, call is measured."""
    import numpy as np

    if name.startswith("read_svmlight"):
        from rankwise.data import read_svmlight

        def call(_):
            ds = read_svmlight(path, cache=False)
            return f"{ds.n_queries} queries, {len(ds.labels)} docs x {ds.n_features}"
        return None, call
    if name.startswith("Run.read"):
        from rankwise.data import Run

        return None, lambda _: _describe(Run.read(path))
    if name.startswith("Qrels.read"):
        from rankwise.data import Qrels

        return None, lambda _: _describe(Qrels.read(path))
    if name.startswith("read_trec_run"):
        from rankwise.data import read_trec_run

        return None, lambda _: f"{len(read_trec_run(path))} queries"
    if name.startswith("read_feature_log"):
        from rankwise.data.feature_logs import read_feature_log

        def call(_):
            log = read_feature_log(path, "opensearch")
            return f"{len(log)} rows"
        return None, call
    if name.startswith("read_click_log"):
        from rankwise.clicks import read_click_log

        def call(_):
            log = read_click_log(path)
            return f"{log.n_sessions} sessions"
        return None, call
    if name.startswith("evaluate_runs"):
        from rankwise.data import Qrels, Run
        from rankwise.metrics.trec import evaluate_runs

        one = "1q" in name

        def prep():
            return Qrels.read(path + ".qrels"), Run.read(path)

        def call(inp):
            out = evaluate_runs(inp[0], {"r": inp[1]}, ["map", "ndcg@10", "P@10"])
            return f"map={_first_mean(out):.6f}" if one else "ok"
        return prep, call
    if name.startswith("evaluate"):
        from rankwise.metrics import evaluate

        one = "1q" in name

        def call(inp):
            res = evaluate(*inp, metrics=["ndcg@10", "map", "err@10"])
            return f"ndcg@10={res.mean['ndcg@10']:.6f}, {len(res.per_query)} queries"
        return lambda: _arrays(n, one), call
    if name.startswith("GBDTRanker"):
        from rankwise.models import GBDTRanker

        loss = name.split("(")[1].split(")")[0]

        def call(inp):
            X, y = inp
            m = GBDTRanker(loss, backend="lightgbm", n_estimators=5, num_leaves=15, random_state=0)
            m.fit(X, y, qid=np.zeros(len(y), dtype=np.int64))
            p = m.predict(X)
            return f"fit+predict, score spread {float(p.max() - p.min()):.3g}"
        return lambda: _features(n), call
    if name.startswith("LinearRanker"):
        from rankwise.models import LinearRanker

        loss = name.split("(")[1].split(")")[0]

        def call(inp):
            X, y = inp
            m = LinearRanker(loss, max_iter=5, random_state=0)
            m.fit(X, y, qid=np.zeros(len(y), dtype=np.int64))
            p = m.predict(X)
            return f"fit+predict, score spread {float(p.max() - p.min()):.3g}"
        return lambda: _features(n), call
    if name.startswith("PairwiseReductionRanker"):
        from rankwise.models import PairwiseReductionRanker

        inference = "quicksort" if "quicksort" in name else "aggregate"

        def call(inp):
            X, y = inp
            q = np.arange(len(y)) // 50  # fit on small queries, predict one query of n documents
            m = PairwiseReductionRanker(random_state=0, inference=inference).fit(X[:5000], y[:5000], qid=q[:5000])
            p = m.predict(X, qid=np.zeros(len(y), dtype=np.int64))
            extra = f", {m.n_comparisons_:,} comparisons" if inference == "quicksort" else ""
            return f"predict on 1 query, score spread {float(p.max() - p.min()):.3g}{extra}"
        return lambda: _features(n), call
    if name.startswith("grad_hess"):
        from rankwise.losses import grad_hess

        loss = name.split("(")[1].split(")")[0]

        def call(inp):
            s, y, _ = inp
            g, h = grad_hess(loss, s, y, np.array([0, len(s)]))
            return f"|g|max {float(np.abs(g).max()):.3g}"
        return lambda: _arrays(n, True), call
    raise SystemExit(f"unknown case {name}")


def _describe(obj) -> str:
    return f"{obj.n_queries} queries, {len(obj)} rows"


def _first_mean(out) -> float:
    res = next(iter(out.values()))
    mean = getattr(res, "mean", None)
    return float(next(iter(mean.values()))) if isinstance(mean, dict) else float("nan")


def _vm_hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # pragma: no cover - not Linux


def _vm_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")  # pragma: no cover


def child(name: str, path: str | None, n: int, limit_gb: float, out: str) -> None:
    from rankwise.errors import RankwiseError

    rec = {"case": name}
    prep, call = case_run(name, path, n)
    inp = prep() if prep is not None else None
    if limit_gb > 0:
        cap = int(limit_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS mark
    except OSError:  # pragma: no cover
        pass
    rec["base_mb"] = _vm_rss_mb()
    t0 = time.perf_counter()
    try:
        rec["result"] = call(inp)
        rec["outcome"] = "ok"
    except RankwiseError as e:
        rec.update(outcome="rankwise error", result=f"{type(e).__name__}: {str(e)[:220]}")
    except MemoryError as e:
        rec.update(outcome="MemoryError", result=f"MemoryError {str(e)[:200]}")
    except BaseException as e:  # noqa: BLE001
        rec.update(outcome="foreign error", result=f"{type(e).__module__}.{type(e).__name__}: {str(e)[:200]}")
    rec["seconds"] = time.perf_counter() - t0
    rec["peak_mb"] = _vm_hwm_mb()
    Path(out).write_text(json.dumps(rec))


def run_child(name, path, n, limit_gb, timeout, workdir):
    out = Path(workdir) / "result.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
    cmd = [sys.executable, __file__, "--child", name, "--path", path or "", "--n", str(n), "--limit-gb", str(limit_gb),
           "--out", str(out)]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return {"case": name, "outcome": "hang", "seconds": time.perf_counter() - t0, "result": "timeout"}
    if not out.exists():
        sig = -p.returncode if p.returncode < 0 else None
        return {"case": name, "outcome": "died", "seconds": time.perf_counter() - t0,
                "result": (f"signal {signal.Signals(sig).name}" if sig else f"exit {p.returncode}")
                + f": {err.decode(errors='replace')[-200:]}"}
    return json.loads(out.read_text())


def cases(scale: float):
    """(name, input writer or None, n) for every case."""
    line = int(100 * MB * scale)
    n = max(1000, int(1_000_000 * scale))
    big = f"{line / MB:.0f} MB line"
    many = f"{n:,} one-doc queries"
    one = f"1 query of {n:,} docs"
    return [
        (f"read_svmlight: {big}", lambda p: _svm_long_line(p, line), n),
        (f"read_svmlight: {many}", lambda p: _svm_rows(p, n, False), n),
        (f"read_svmlight: {one}", lambda p: _svm_rows(p, n, True), n),
        (f"Run.read: {big}", lambda p: _run_long_line(p, line), n),
        (f"Run.read: {many}", lambda p: _run_rows(p, n, False), n),
        (f"Run.read: {one}", lambda p: _run_rows(p, n, True), n),
        (f"read_trec_run (dict): {one}", lambda p: _run_rows(p, n, True), n),
        (f"Qrels.read: {big}", lambda p: _qrels_long_line(p, line), n),
        (f"Qrels.read: {many}", lambda p: _qrels_rows(p, n, False), n),
        (f"Qrels.read: {one}", lambda p: _qrels_rows(p, n, True), n),
        (f"read_feature_log: {big}", lambda p: _feature_log_long_line(p, line), n),
        (f"read_click_log: {big}", lambda p: _click_long_line(p, line), n),
        (f"read_click_log: {n:,} sessions", lambda p: _click_rows(p, n), n),
        (f"evaluate: {many}", None, n),
        (f"evaluate: {one} (1q)", None, n),
        (f"evaluate_runs: {many}", lambda p: _run_and_qrels(p, n, False), n),
        (f"evaluate_runs: {one} (1q)", lambda p: _run_and_qrels(p, n, True), n),
        (f"grad_hess(ranknet): {one}", None, n),
        (f"grad_hess(lambdarank): {one}", None, n),
        (f"grad_hess(listmle): {one}", None, n),
        (f"GBDTRanker(ranknet) lightgbm: {one}", None, n),
        (f"GBDTRanker(lambdarank) lightgbm: {one}", None, n),
        (f"LinearRanker(listnet): {one}", None, n),
        (f"LinearRanker(ranknet): {one}", None, n),
        (f"PairwiseReductionRanker.predict: {one}", None, n),
        (f"PairwiseReductionRanker.predict quicksort: {one}", None, n),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--child")
    ap.add_argument("--path")
    ap.add_argument("--n", type=int)
    ap.add_argument("--out")
    ap.add_argument("--limit-gb", type=float, default=6.0)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--cases", default="", help="comma-separated substrings of the case names to run")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.path or None, args.n, args.limit_gb, args.out)
        return 0
    wanted = [w for w in args.cases.split(",") if w]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, writer, n in cases(args.scale):
            if wanted and not any(w in name for w in wanted):
                continue
            path = None
            if writer is not None:
                path = Path(tmp) / "input.txt"
                writer(path)
            r = run_child(name, None if path is None else str(path), n, args.limit_gb, args.timeout, tmp)
            if path is not None:
                for f in Path(tmp).glob("input.txt*"):
                    f.unlink()
            print(json.dumps(r), flush=True)
            rows.append(r)
    lines = [
        "## Faults: memory bounds (faults_memory.py)",
        "",
        f"`python benchmarks/faults_memory.py --limit-gb {args.limit_gb:g}"
        + (f" --scale {args.scale:g}" if args.scale != 1 else "")
        + f"` on {platform.node()} ({os.cpu_count()} CPUs, shared). Each case in a fresh process with its "
        f"address space capped at {args.limit_gb:g} GiB (`RLIMIT_AS`: past it an allocation fails with MemoryError "
        f"instead of the OOM killer) and a {args.timeout:.0f} s timeout. Peak RSS: the process's high-water mark "
        "during the call (reset after imports and after building in-memory inputs; the 'base' column is the RSS "
        "then).",
        "",
        "| case | base RSS MB | peak RSS MB | seconds | result or error |",
        "|---|---:|---:|---:|---|",
    ]
    for r in rows:
        res = str(r.get("result", "")).replace("|", "\\|").replace("\n", " ")
        if r["outcome"] not in ("ok", "rankwise error"):
            res = f"**{r['outcome']}**: {res}"
        base = f"{r['base_mb']:.0f}" if "base_mb" in r else "—"
        peak = f"{r['peak_mb']:.0f}" if "peak_mb" in r else "—"
        lines.append(f"| {r['case']} | {base} | {peak} | {r['seconds']:.1f} | {res} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "faults_memory.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
