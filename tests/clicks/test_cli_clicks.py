"""``rankwise clicks ...`` end to end, in-process."""
from __future__ import annotations

import numpy as np

from rankwise.cli.main import main
from rankwise.data import make_synthetic, write_svmlight


def test_simulate_fit_propensities_train(tmp_path, capsys):
    data = make_synthetic(40, n_features=8, list_length=(10, 14), seed=1)
    letor = tmp_path / "train.txt"
    write_svmlight(data, letor)
    log = tmp_path / "log.csv"
    assert main(["clicks", "simulate", "--data", str(letor), "--out", str(log), "--sessions", "1500",
                 "--production-fraction", "0.2", "--top-k", "6"]) == 0
    assert main(["clicks", "fit-model", "--log", str(log), "--log-format", "csv", "--model", "all",
                 "--max-iter", "5", "--relevance-out", str(tmp_path / "rel.csv")]) == 0
    out = capsys.readouterr().out
    for name in ("GCTR", "PBM", "UBM", "DBN", "SDBN"):
        assert f"\n{name}" in out
    assert (tmp_path / "rel.csv").read_text().startswith("query,doc,relevance")
    assert main(["clicks", "propensities", "--log", str(log), "--log-format", "csv", "--method", "pbm"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[1].split() == ["1", "1.0000"] and len(lines) == 7
    model = tmp_path / "m.json"
    assert main(["clicks", "train", "--log", str(log), "--log-format", "csv", "--features", str(letor),
                 "--model", "linear", "--debias", "pbm", "--clip", "0.1", "--param", "max_iter=20",
                 "--out", str(model)]) == 0
    assert "IPS labels (pbm propensities, clipped at 0.1)" in capsys.readouterr().out
    from rankwise.models import load

    assert np.isfinite(load(model).predict(data.X)).all()
    full = tmp_path / "full.csv"
    assert main(["clicks", "simulate", "--data", str(letor), "--out", str(full), "--sessions", "200",
                 "--production-fraction", "0.2", "--top-k", "all"]) == 0
    import pandas as pd

    assert pd.read_csv(full)["rank"].max() == np.diff(data.query_offsets).max()  # the whole list
    assert main(["clicks", "simulate", "--data", str(letor), "--out", str(full), "--top-k", "ten"]) == 2
    assert "--top-k must be a positive integer or 'all'" in capsys.readouterr().err


def test_errors(tmp_path, capsys):
    assert main(["clicks", "fit-model", "--log", str(tmp_path / "none.txt")]) == 2
    assert "does not exist" in capsys.readouterr().err
    p = tmp_path / "s.txt"
    p.write_text("1_1\t5,6,7 : 5; 1_1\t5,6,7 :;")
    assert main(["clicks", "fit-model", "--log", str(p), "--model", "XYZ"]) == 2
    assert "--model must be one of" in capsys.readouterr().err
    assert main(["clicks", "train", "--log", str(p), "--features", str(p), "--out", str(tmp_path / "m"),
                 "--loss", "listnet", "--debias", "pbm"]) == 2
