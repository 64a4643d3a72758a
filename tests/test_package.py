import subprocess
import sys


def test_import_rankwise_is_light():
    code = ("import sys, rankwise, rankwise.data, rankwise.metrics; "
            "heavy = [m for m in ('torch', 'lightgbm', 'xgboost') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cli_demo_runs():
    from rankwise.cli import main

    assert main(["demo"]) == 0
