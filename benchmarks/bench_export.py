"""Exports: parity of the Elasticsearch, Vespa and ONNX targets, and onnxruntime throughput vs model.predict.

Models trained on MQ2008 Fold1 train with rankwise losses (GBDTRanker lambdarank, 60 trees, LightGBM
and XGBoost; LinearRanker listnet; NeuralRanker listnet MLP and attention, hidden (16, 8), 3 epochs).
In one run:

* parity on MQ2008 Fold1 test (2,874 rows, 156 queries): max |Δscore|, that over the score range, and
  the share of queries ranked identically, for each (target x family) pair the targets represent;
* scoring throughput (rows/s, best of 5) of ``model.predict`` and of the onnxruntime session on the
  same rows (the test rows repeated to ~29k), both on one thread (``n_jobs=1``, ``intra_op_num_threads=1``);
  the attention scorer's graph takes one query per onnxruntime call (predict batches padded queries).

Usage: python benchmarks/bench_export.py   (writes benchmarks/results/bench_export.md)
"""
from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
DATA = Path(os.environ.get("RANKWISE_DATA", HERE.parent.parent / "shared" / "data")) / "MQ2008" / "Fold1"


def _best(fn, repeats=5):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    from rankwise.data.svmlight import read_svmlight
    from rankwise.export import ExportError, parity_report, to_elasticsearch, to_onnx, to_vespa
    from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker

    train, test = read_svmlight(DATA / "train.txt.gz"), read_svmlight(DATA / "test.txt.gz")
    names = [f"mq_{i + 1}" for i in range(46)]
    models = {f"GBDT {b}": GBDTRanker("lambdarank", backend=b, n_estimators=60, n_jobs=1, random_state=0,
                                      verbose=False).fit(train) for b in ("lightgbm", "xgboost")}
    models["linear"] = LinearRanker("listnet", random_state=0, n_jobs=1).fit(train)
    for arch in ("mlp", "attention"):
        models[arch] = NeuralRanker("listnet", architecture=arch, hidden=(16, 8), max_iter=3, random_state=0,
                                    n_jobs=1).fit(train)
    targets = {"Elasticsearch": to_elasticsearch, "Vespa": to_vespa, "ONNX float32": to_onnx,
               "ONNX double": lambda m, feature_names: to_onnx(m, feature_names=feature_names, dtype="double")}
    lines = ["## Exports: parity and onnxruntime throughput (`bench_export.py`)", "",
             f"MQ2008 Fold1 test (2,874 rows, 156 queries); models trained on Fold1 train with rankwise losses. "
             f"{platform.processor() or platform.machine()}, Python {platform.python_version()}.", "",
             "### Parity with `predict` (max \\|Δscore\\|, its share of the score range, queries ranked identically)",
             "", "| target | " + " | ".join(models) + " |", "|---|" + "---|" * len(models)]
    for tname, make in targets.items():
        cells = []
        for m in models.values():
            try:
                r = parity_report(m, make(m, feature_names=names), test.X, test.qid)
            except ExportError as e:  # a refusal: the target has no exact form for this family
                cells.append(f"refused ({type(e).__name__})")
                continue
            cells.append(f"{r.max_abs_diff:.2g} ({r.max_rel_diff:.2g}), {r.identical_rankings:.0%}")
        lines.append(f"| {tname} | " + " | ".join(cells) + " |")
    X = np.tile(test.X, (10, 1))
    qid = np.concatenate([test.qid + 10**6 * k for k in range(10)])
    lines += ["", f"### Scoring throughput, rows/s ({len(X):,} rows, one thread each, best of 5)", "",
              "| model | `model.predict` | onnxruntime | ratio |", "|---|---|---|---|"]
    for label, m in models.items():
        export = to_onnx(m, feature_names=names)
        session = export.reference(threads=1)
        per_query = export.per_query
        t_model = _best(lambda: m.predict(X, qid=qid) if per_query else m.predict(X))
        t_ort = _best(lambda: session.score(X, qid=qid) if per_query else session.score(X))
        lines.append(f"| {label} | {len(X) / t_model:,.0f} | {len(X) / t_ort:,.0f} | {t_model / t_ort:.2f}x |")
    lines += ["", "onnxruntime's time includes reading the rows as float32 (as `predict` does). The attention "
              "scorer: `predict(X, qid=qid)` pads and batches up to 256 queries per torch call; onnxruntime runs "
              "one query per session call (the graph takes one query).", ""]
    (HERE / "results").mkdir(exist_ok=True)
    out = HERE / "results" / "bench_export.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
