"""The benchmarks' shared helpers (quick: no service is started)."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import load  # noqa: E402


def test_each_benchmark_replaces_only_its_own_section_of_the_results(tmp_path):
    results = tmp_path / "results.md"
    load.write_section("embedded", "first run", results)
    load.write_section("peers", "peers run", results)
    load.write_section("embedded", "second run", results)
    text = results.read_text()
    assert "second run" in text and "first run" not in text and "peers run" in text
    assert text.index("second run") < text.index("peers run")


def test_percentiles_pick_the_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert load.percentile(values, 0.5) == 51.0 and load.percentile(values, 0.99) == 99.0
    assert load.percentile([3.0], 0.99) == 3.0


def test_resident_memory_counts_a_process_and_its_children():
    assert load.tree_rss_mb(os.getpid()) > 10
    assert load.tree_rss_mb(1 << 30) == 0  # no such process
    sum(range(10**6))
    assert load.tree_cpu_seconds(os.getpid()) > 0
