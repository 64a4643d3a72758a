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
