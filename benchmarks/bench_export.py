"""Exports: parity of the Elasticsearch, Vespa and ONNX targets, and onnxruntime throughput vs model.predict.

Models trained on MQ2008 Fold1 train with rankwise losses (GBDTRanker lambdarank, 60 trees, LightGBM
and XGBoost; LinearRanker listnet; NeuralRanker listnet MLP and attention, hidden (16, 8), 3 epochs).
In one run:

* parity on MQ2008 Fold1 test (2,874 rows, 156 queries): max |Δscore|, that over the score range, and
  the share of queries ranked identically, for each (target x family) pair the targets represent, with
  the target's arithmetic precision and the issue's tolerance for it (float32: max |Δ| <= 1e-6 x the
  score range; double: max |Δ| <= 1e-12), "met" when within it and every query ranked identically;
* GBDTRanker(backend="xgboost").predict (XGBoost's float32 leaves summed in double) against XGBoost's
  own float32 ``predict(output_margin=True)`` on the same rows (rows/s, best of 5, one thread);
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


def _precision(target: str, family: str) -> str:
    """The arithmetic the target's scorer runs in for a model family: Elasticsearch's and Vespa's tree and
    expression evaluators in double, an ONNX graph in its element type (Vespa serves an MLP through ONNX)."""
    if target == "ONNX float32" or (target == "Vespa" and family in ("mlp", "attention")):
        return "float32"
    return "double"


def main() -> int:
    from rankwise.data.svmlight import read_svmlight
    from rankwise.export import ExportError, parity_report, to_elasticsearch, to_onnx, to_vespa
    from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker
    import xgboost as xgb

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
             "### Parity with `predict`",
             "", "Each cell: the target's arithmetic precision; max \\|Δscore\\| (its share of the score range); "
             "queries ranked identically; the issue's tolerance for that precision (float32: max \\|Δ\\| ≤ "
             "1e-6 × range; double: max \\|Δ\\| ≤ 1e-12) and whether it is **met** (within it, and every "
             "query ranked identically). \"refused\": the export raises `ExportError` (no exact form).",
             "", "| target | " + " | ".join(models) + " |", "|---|" + "---|" * len(models)]
    met_count = [0, 0]
    for tname, make in targets.items():
        cells = []
        for label, m in models.items():
            try:
                r = parity_report(m, make(m, feature_names=names), test.X, test.qid)
            except ExportError as e:  # a refusal: the target has no exact form for this family
                cells.append(f"refused ({type(e).__name__})")
                continue
            precision = _precision(tname, label)
            if precision == "double":
                tol, ok = "≤ 1e-12", r.max_abs_diff <= 1e-12
            else:
                tol, ok = "≤ 1e-6 × range", r.max_rel_diff <= 1e-6
            ok = ok and r.identical_rankings == 1.0
            met_count[ok] += 1
            cells.append(f"{precision}: {r.max_abs_diff:.2g} ({r.max_rel_diff:.2g}), {r.identical_rankings:.0%}; "
                         f"{tol}: {'**met**' if ok else '**not met**'}")
        lines.append(f"| {tname} | " + " | ".join(cells) + " |")
    lines += ["", f"{met_count[1]} cells met, {met_count[0]} not met."]
    xgb_model = models["GBDT xgboost"]
    Xx = np.tile(test.X, (10, 1))
    X32 = Xx.astype(np.float32)
    xgb_model.predict(Xx)  # the leaf table is read once per booster: not timed
    t_double = _best(lambda: xgb_model.predict(Xx))
    t_own = _best(lambda: xgb_model.booster_.predict(xgb.DMatrix(X32, missing=np.nan, nthread=1), output_margin=True,
                                                     validate_features=False))
    own = xgb_model.booster_.predict(xgb.DMatrix(test.X.astype(np.float32), missing=np.nan), output_margin=True,
                                     validate_features=False)
    gap = np.abs(xgb_model.predict(test.X) - own)
    lines += ["", f"### XGBoost `predict` in double against XGBoost's own float32 margin ({len(Xx):,} rows, one "
              "thread, best of 5)", "",
              "| scorer | rows/s |", "|---|---|",
              f"| `GBDTRanker.predict` (XGBoost's leaves, `pred_leaf`, summed in double) | {len(Xx) / t_double:,.0f} |",
              f"| `booster_.predict(DMatrix, output_margin=True)` (float32 sum; the former `predict`) | "
              f"{len(Xx) / t_own:,.0f} |", "",
              f"`predict` takes {t_double / t_own:.2f}x the time of XGBoost's own margin here; the two differ by at "
              f"most {gap.max():.2g} on the test rows (the float32 sum's rounding)."]
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
