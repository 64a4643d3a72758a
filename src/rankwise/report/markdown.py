"""``rankwise report``: a folder with PNG plots and a Markdown summary that embeds them."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rankwise.errors import InputError
from rankwise.report.plots import plot_difference_histogram, plot_learning_curves, plot_metric_at_k
from rankwise.report.significance import compare_systems

CURVE_KS = (1, 2, 3, 5, 10, 20)


def _md_table(frame, float_fmt="{:.4f}") -> str:
    """A Markdown table with plain labels: a MultiIndex becomes one column per level (named by
    the level), never a Python tuple such as ``('runA', 'runB', 'map')``."""
    names = [n if n is not None else "" for n in frame.index.names]
    multi = frame.index.nlevels > 1
    head = (names if multi else [names[0] or ""]) + [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for idx, row in frame.iterrows():
        labels = [str(x) for x in idx] if multi else [str(idx)]
        cells = [float_fmt.format(v) if isinstance(v, (float, np.floating)) else str(v) for v in row]
        lines.append("| " + " | ".join(labels + cells) + " |")
    return "\n".join(lines)


def write_report(results: dict, out_dir, *, metrics, curves: dict | None = None, curve_metric: str = "ndcg",
                 histories: dict | None = None,
                 n_resamples: int = 10_000, random_state=0, title: str = "rankwise report") -> Path:
    """Write ``out_dir/report.md`` with its PNG plots.

    Parameters
    ----------
    results : dict
        ``{run_name: EvaluationResult}`` on the same queries.
    metrics : list of str
        The metrics to tabulate and test (columns of each ``per_query``).
    curves : dict, optional
        ``{run_name: {k: value}}`` for the metric@k plot of ``curve_metric``.
    histories : dict, optional
        ``{label: list of values}`` (training histories) for the learning-curve plot.
    """
    if not results:
        raise InputError("write_report needs at least one run")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = list(results)
    import pandas as pd

    means = pd.DataFrame({n: {m: results[n].mean[m] for m in metrics} for n in names}).T.rename_axis("run")
    parts = [f"# {title}", "", f"{len(next(iter(results.values())).per_query)} queries, {len(names)} runs.", "",
             "## Means", "", _md_table(means), ""]
    if curves:
        plot_metric_at_k(curves, out / "metric_at_k.png", metric=curve_metric)
        parts += ["## Metric at k", "", "![metric@k](metric_at_k.png)", ""]
    if len(names) >= 2:
        table = compare_systems({n: results[n].per_query[metrics] for n in names}, n_resamples=n_resamples,
                                random_state=random_state)
        pairs = table.pairs.set_index(["system_a", "system_b", "metric"]).rename_axis(["run A", "run B", "metric"])
        parts += ["## Paired significance tests (Holm-corrected over all pairs and metrics)", "",
                  _md_table(pairs[["mean_diff", "p_ttest_holm", "p_randomization_holm", "wins", "ties", "losses"]],
                            "{:.4g}"), ""] + [f"Note: {note}\n" for note in table.notes]
        a, b = names[0], names[1]
        m = metrics[0]
        plot_difference_histogram(results[a].per_query[m].to_numpy(float), results[b].per_query[m].to_numpy(float),
                                  out / "per_query_difference.png", names=(a, b), metric=m)
        parts += [f"## Per-query differences ({m}: {a} − {b})", "", "![per-query differences](per_query_difference.png)", ""]
    if histories:
        plot_learning_curves(histories, out / "learning_curves.png")
        parts += ["## Learning curves", "", "![learning curves](learning_curves.png)", ""]
    path = out / "report.md"
    from rankwise._io import atomic_write

    with atomic_write(path, "w") as fh:
        fh.write("\n".join(parts))
    return path
