"""``rankwise demo``: what a newcomer needs to see, on a built-in synthetic data set (no files).

It generates an MSLR-like data set with a known scoring function, splits its queries into
train / validation / test, trains several models side by side (ridge-style pointwise baseline,
linear ListNet, a neural ranker, LightGBM driven by a rankwise loss and by its own lambdarank)
and prints a table of test metrics and fit times, plus the oracle (the true scoring function).
"""
from __future__ import annotations

import time

import numpy as np

DEMO_METRICS = ("ndcg@10", "err@10", "map")


def _models(seed: int):
    from rankwise.models import GBDTRanker, LinearRanker, NeuralRanker

    return [
        ("linear · pointwise squared (ridge)", LinearRanker(loss="pointwise_squared", alpha=1e-3, random_state=seed)),
        ("linear · listnet", LinearRanker(loss="listnet", alpha=1e-4, random_state=seed)),
        ("neural mlp · listnet", NeuralRanker(loss="listnet", hidden=(64, 32), max_iter=15, random_state=seed)),
        ("gbdt · rankwise lambdarank (default)", GBDTRanker(n_estimators=100, random_state=seed)),
        ("gbdt · rankwise lambdaloss", GBDTRanker(loss="lambdaloss", n_estimators=100, random_state=seed)),
        ("gbdt · native lambdarank", GBDTRanker(loss="native:lambdarank", n_estimators=100, random_state=seed)),
    ]


def run_demo(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from rankwise.data import make_synthetic
    from rankwise.metrics import evaluate

    console = Console()
    seed = int(getattr(args, "seed", 0))
    n_queries = int(getattr(args, "queries", 300))
    data = make_synthetic(n_queries, n_features=136, list_length=(5, 120), seed=seed)
    s = data.summary()
    console.print(f"[bold]Synthetic MSLR-like data set[/bold] (seed {seed}): {s['rows']} rows, {s['queries']} "
                  f"queries, {s['features']} features; labels {s['labels']}; list length "
                  f"{s['list_length']['min']}–{s['list_length']['max']} (median {s['list_length']['median']:g}); "
                  f"{s['queries_without_relevant']} queries without a relevant document.")
    rng = np.random.default_rng(seed)
    order = rng.permutation(data.n_queries)
    n_train, n_valid = int(0.6 * data.n_queries), int(0.2 * data.n_queries)
    train = data.take(np.sort(order[:n_train]))
    valid = data.take(np.sort(order[n_train:n_train + n_valid]))
    test = data.take(np.sort(order[n_train + n_valid:]))
    console.print(f"Split by query: train {train.n_queries}, validation {valid.n_queries}, test {test.n_queries} queries.")

    table = Table(title="Test metrics (exp2 gain, ties averaged, queries without relevant document = 0)")
    table.add_column("model")
    for m in DEMO_METRICS:
        table.add_column(m, justify="right")
    table.add_column("fit s", justify="right")

    def add(name, scores, seconds):
        res = evaluate(scores, test.labels, test.qid, metrics=DEMO_METRICS)
        table.add_row(name, *[f"{res.mean[m]:.4f}" for m in DEMO_METRICS], "—" if seconds is None else f"{seconds:.1f}")

    add("random scores (floor)", rng.random(len(test)), None)
    for name, model in _models(seed):
        t0 = time.perf_counter()
        model.fit(train, eval_set=valid)  # every ranker's fit takes eval_set (the shared contract)
        add(name, model.predict(test.X), time.perf_counter() - t0)
    add("oracle (true scoring function)", data.truth.score(test.X), None)
    console.print(table)
    console.print("Next: `rankwise train --help`, `rankwise theory calibration --loss listnet --metric ndcg`, "
                  "and README.md for the five-minute tour.")
    return 0
