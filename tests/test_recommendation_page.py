"""docs/recommendation.md shows the tables benchmarks/bench_recommendation.py wrote, as measured."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _table(text: str, header: str = "| model | NDCG@10 |") -> list[str]:
    lines = text.splitlines()
    start = next(k for k, ln in enumerate(lines) if ln.startswith(header))
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


def test_full_catalogue_table_is_the_benchmark_output():
    header = "| model | NDCG@10, 100 sampled negatives |"
    bench = (REPO / "benchmarks" / "results" / "bench_recommendation_full.md").read_text(encoding="utf-8")
    page = (REPO / "docs" / "recommendation.md").read_text(encoding="utf-8")
    table = _table(bench, header)
    assert len(table) >= 2 + 5, "the full-catalogue table has fewer rows than the 5 rankers it runs"
    assert _table(page, header) == table, \
        "docs/recommendation.md: the full-catalogue table differs from bench_recommendation_full.md; copy it"
    assert _table((REPO / "BENCHMARKS.md").read_text(encoding="utf-8"), header) == table
