"""`rankwise theory ...`: hyper-parameters (--param), --n-levels and --repeats reach the functions."""
from __future__ import annotations

import pytest

import rankwise.theory
import rankwise.theory.list_length
from rankwise.cli import main
from rankwise.cli.theory import parse_params
from rankwise.errors import InputError


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_parse_params_types_and_errors():
    assert parse_params(["eta=4", "phi=exponential", "alpha=0.25", "flag=true", "x=none"]) == \
        {"eta": 4, "phi": "exponential", "alpha": 0.25, "flag": True, "x": None}
    assert parse_params([]) == {}
    with pytest.raises(InputError, match="--param expects KEY=VALUE"):
        parse_params(["eta"])
    with pytest.raises(InputError, match="--param expects KEY=VALUE"):
        parse_params(["=4"])
    with pytest.raises(InputError, match="--param eta given twice"):
        parse_params(["eta=4", "eta=5"])


def test_calibration_passes_params_and_n_levels(capsys, monkeypatch):
    seen = {}

    def fake(loss, metric, **kwargs):
        seen.update(loss=loss, metric=metric, **kwargs)
        return "REPORT"

    monkeypatch.setattr(rankwise.theory, "check_calibration", fake)
    code, out, err = run_cli(capsys, "theory", "calibration", "--loss", "op_pairwise", "--metric", "dcg",
                             "--param", "phi=exponential", "--n-levels", "4", "--n-items", "4")
    assert code == 0, err
    assert out.strip() == "REPORT"
    assert seen == {"loss": "op_pairwise", "metric": "dcg", "n_items": 4, "n_levels": 4, "random_state": 0,
                    "phi": "exponential"}


def test_calibration_cli_runs_with_a_hyper_parameter(capsys):
    code, out, err = run_cli(capsys, "theory", "calibration", "--loss", "pointwise_logistic", "--metric", "err",
                             "--param", "eta=2", "--n-levels", "2")
    assert code == 0, err
    assert "NOT CALIBRATED" in out and "'eta': 2" in out


@pytest.mark.parametrize("argv,match", [
    (["--param", "eta"], "--param expects KEY=VALUE"),
    (["--param", "etta=2"], "takes no hyper-parameter 'etta'"),
    (["--param", "utility=exp2", "--utility", "linear"], "give the utility once"),
])
def test_calibration_cli_bad_params_are_clean_errors(capsys, argv, match):
    code, out, err = run_cli(capsys, "theory", "calibration", "--loss", "pointwise_logistic", "--metric", "dcg", *argv)
    assert code == 2 and match in err and "Traceback" not in err


def test_lipschitz_cli_uses_the_hyper_parameters(capsys):
    code, out, err = run_cli(capsys, "theory", "lipschitz", "--loss", "listnet", "--lengths", "6",
                             "--param", "temperature=0.5")
    assert code == 0, err
    row = out.splitlines()[1].split()
    assert row[0] == "6" and float(row[2]) == pytest.approx(4.0)  # declared 2/T
    assert 3.5 < float(row[1]) <= 4.0
    code, out, err = run_cli(capsys, "theory", "lipschitz", "--loss", "listnet", "--lengths", "5,x")
    assert code == 2 and "--lengths" in err


def test_list_length_cli_repeats_and_seed(capsys, monkeypatch, tmp_path):
    seen = {}

    def fake(**kwargs):
        seen.update(kwargs)
        return "RESULT"

    monkeypatch.setattr(rankwise.theory.list_length, "run_list_length_experiment", fake)
    code, out, err = run_cli(capsys, "theory", "list-length", "--repeats", "3", "--seed", "7",
                             "--out", str(tmp_path))
    assert code == 0, err
    assert seen == {"out_dir": str(tmp_path), "quick": False, "n_repeats": 3, "seed": 7}
    code, out, err = run_cli(capsys, "theory", "list-length", "--quick", "--out", str(tmp_path))
    assert seen["n_repeats"] is None and seen["quick"] is True
