"""Issue 26 item 3: the regressions inside click learning are configured rankwise models.

No module of ``rankwise.clicks`` trains a booster itself (``lgb.train``, ``xgb.train``, ``lightgbm.train``,
``xgboost.train``, a ``lightgbm``/``xgboost`` import, their scikit-learn classes): the relevance regressions of
RegressionEM (every option), the direct model of the doubly robust labels and the click rankers fit
``rankwise.models`` estimators. Checked on the parsed source, so a call inside a function is found too.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLICKS = Path(__file__).resolve().parents[2] / "src" / "rankwise" / "clicks"
_LIBS = {"lightgbm", "xgboost"}


def _private_boosting(source: str) -> list[str]:
    """``line: what`` for every import of LightGBM/XGBoost and every ``<alias>.train(...)`` /
    ``<alias>.LGBM*``/``XGB*`` use of such an import in ``source``."""
    tree = ast.parse(source)
    aliases, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in _LIBS:
                    aliases.add(a.asname or a.name.split(".")[0])
                    found.append(f"{node.lineno}: import {a.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _LIBS:
            found.append(f"{node.lineno}: from {node.module} import ...")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases | _LIBS \
                and (node.attr == "train" or node.attr.startswith(("LGBM", "XGB"))):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_scan_finds_a_private_boosting_call():
    planted = ("def fit(X, y):\n"
               "    import lightgbm as lgb\n"
               "    return lgb.train({'objective': 'cross_entropy'}, lgb.Dataset(X, y))\n")
    assert _private_boosting(planted) == ["2: import lightgbm", "3: lgb.train"]
    assert _private_boosting("from xgboost import train\n") == ["1: from xgboost import ..."]
    assert _private_boosting("import xgboost\nm = xgboost.XGBRanker()\n") == ["1: import xgboost",
                                                                             "2: xgboost.XGBRanker"]


@pytest.mark.parametrize("path", sorted(CLICKS.rglob("*.py")), ids=lambda p: p.name)
def test_no_click_module_trains_a_booster_itself(path):
    assert _private_boosting(path.read_text(encoding="utf-8")) == [], (
        f"{path.relative_to(CLICKS.parents[1])} trains a booster itself; fit a configured rankwise model "
        "(rankwise.models.GBDTRanker: init_score=, objective=, eval_metric='loss') instead")
