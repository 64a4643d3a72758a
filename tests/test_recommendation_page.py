"""docs/recommendation.md shows the table benchmarks/bench_recommendation.py wrote, as measured."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _table(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(k for k, ln in enumerate(lines) if ln.startswith("| model | NDCG@10 |"))
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return lines[start:end]


def test_docs_table_is_the_benchmark_output():
    bench = (REPO / "benchmarks" / "results" / "bench_recommendation.md").read_text(encoding="utf-8")
    page = (REPO / "docs" / "recommendation.md").read_text(encoding="utf-8")
    table = _table(bench)
    assert len(table) >= 2 + 7, "the benchmark table has fewer rows than the 7 rankers it runs"
    assert _table(page) == table, "docs/recommendation.md: the table differs from bench_recommendation.md; copy it"
