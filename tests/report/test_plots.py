import numpy as np
import pytest

from rankwise.errors import InputError
from rankwise.report.plots import plot_difference_histogram, plot_learning_curves, plot_metric_at_k

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_plots_write_png(tmp_path):
    p1 = plot_metric_at_k({"a": {1: 0.3, 5: 0.4, 10: 0.5}, "b": {1: 0.2, 5: 0.35, 10: 0.45}}, tmp_path / "k.png")
    p2 = plot_learning_curves({"linear": {"epoch": [1, 2, 3], "loss": [900.0, 500.0, 450.0],
                                          "ndcg@10": [0.4, 0.45, None]},
                               "gbdt": {"iteration": [1, 2], "ndcg@10": [0.5, 0.55]}}, tmp_path / "lc.png")
    rng = np.random.default_rng(0)
    p3 = plot_difference_histogram(rng.random(50), rng.random(50), tmp_path / "sub" / "d.png")
    for p in (p1, p2, p3):
        assert p.read_bytes()[:8] == PNG_MAGIC and p.stat().st_size > 2000


def test_plot_bad_input(tmp_path):
    with pytest.raises(InputError, match="same length"):
        plot_difference_histogram([1, 2], [1], tmp_path / "x.png")
    with pytest.raises(InputError):
        plot_metric_at_k({}, tmp_path / "x.png")
    with pytest.raises(InputError, match="no recorded values"):
        plot_learning_curves({"m": {"epoch": [1, 2], "loss": [None, None]}}, tmp_path / "x.png")
    with pytest.raises(InputError, match="must be a dict of per-step lists"):
        plot_learning_curves({"m": [0.1, 0.2]}, tmp_path / "x.png")


def test_plots_stay_readable_with_many_systems(tmp_path, monkeypatch):
    """30 runs: 30 distinct colours, the legend outside the axes, integer cut-off ticks; a model
    keeps one colour in every panel of the learning curves."""
    import matplotlib.pyplot as plt

    from rankwise.report.plots import system_colors

    names = [f"run{i:02d}" for i in range(30)]
    colors = system_colors(names)
    assert len(set(colors.values())) == 30
    for n in (2, 12):
        assert len(set(system_colors(names[:n]).values())) == n
    figs = []
    monkeypatch.setattr(plt, "close", lambda fig: figs.append(fig))
    curves = {n: {1: 0.1 + i / 100, 2: 0.2, 3: 0.25, 5: 0.3, 10: 0.35, 20: 0.4} for i, n in enumerate(names)}
    plot_metric_at_k(curves, tmp_path / "k.png")
    ax = figs[-1].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "5", "10", "20"]
    legend = ax.get_legend()
    box = legend.get_window_extent(figs[-1].canvas.get_renderer())
    axbox = ax.get_window_extent(figs[-1].canvas.get_renderer())
    assert box.x0 >= axbox.x1  # beside the axes, not over the lines
    plot_learning_curves({"lin": {"epoch": [1, 2, 3], "loss": [3.0, 2.0, 1.0], "ndcg@10": [0.1, 0.2, 0.3]},
                          "gbdt": {"epoch": [1, 2, 3], "loss": [2.0, 1.5, 1.0], "ndcg@10": [0.2, 0.3, 0.4]}},
                         tmp_path / "lc.png")
    panels = figs[-1].axes
    per_panel = [{line.get_label(): line.get_color() for line in ax.get_lines()} for ax in panels]
    assert per_panel[0] == per_panel[1] and per_panel[0]["lin"] != per_panel[0]["gbdt"]


def test_markdown_tables_have_plain_labels():
    import pandas as pd

    from rankwise.report.markdown import _md_table

    frame = pd.DataFrame({"p": [0.01]}, index=pd.MultiIndex.from_tuples([("runA", "runB", "map")],
                                                                         names=["run A", "run B", "metric"]))
    text = _md_table(frame)
    assert text.splitlines()[0] == "| run A | run B | metric | p |"
    assert "('runA'" not in text and "| runA | runB | map | 0.0100 |" in text
