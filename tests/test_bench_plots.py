"""bench/plots.py's reading of the CSV files bench/plots.exs writes (the drawing itself needs
matplotlib, which only the bench extra installs: `make bench-plots` runs it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_plots() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_plots", ROOT / "bench" / "plots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


plots = load_plots()


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_latency_series_groups_panels_and_sorts_samples(tmp_path: Path) -> None:
    f = write(tmp_path / "latency.csv", "condition,workload,row,us\n"
              "quiet,small call,nx_jax defn,20.5\n"
              "quiet,small call,nx_jax defn,15.0\n"
              "quiet,small call,in-process JAX,7.0\n"
              "CPU hog beside,small call,nx_jax defn,40.0\n"
              'quiet,MLP step,"nx_jax, weights resident",300.0\n')
    series = plots.latency_series(plots.read_rows(f))
    assert list(series) == [("small call", "quiet"), ("small call", "CPU hog beside"),
                            ("MLP step", "quiet")]
    assert series[("small call", "quiet")] == {"nx_jax defn": [15.0, 20.5],
                                               "in-process JAX": [7.0]}
    # a row name with a comma comes back whole (bench/plots.exs quotes it)
    assert series[("MLP step", "quiet")] == {"nx_jax, weights resident": [300.0]}


def test_percentile_takes_the_rank_bench_lib_takes() -> None:
    samples = [float(i) for i in range(1, 101)]
    # Bench.percentiles: p50 = Enum.at(sorted, div(n, 2)), p99 = min(n - 1, trunc(n * 0.99))
    assert plots.percentile(samples, 0.5) == 51.0
    assert plots.percentile(samples, 0.99) == 100.0
    assert plots.percentile([3.0], 0.99) == 3.0


def test_transfer_series_by_path_and_direction_sorted_by_size(tmp_path: Path) -> None:
    f = write(tmp_path / "transfer.csv", "bytes,direction,path,mb_s\n"
              "65536,in,nx_jax,200.5\n4096,in,nx_jax,17.0\n4096,out,raw port,90.0\n")
    assert plots.transfer_series(plots.read_rows(f)) == {
        ("nx_jax", "in"): [(4096, 17.0), (65536, 200.5)],
        ("raw port", "out"): [(4096, 90.0)],
    }


def test_pool_series_scales_against_one_worker(tmp_path: Path) -> None:
    f = write(tmp_path / "pool.csv", "machine,workload,workers,calls_s\n"
              "2 cores,small,2,150\n2 cores,small,1,100\n"
              "16 cores,small,1,50\n16 cores,small,4,125\n")
    assert plots.pool_series(plots.read_rows(f)) == {
        ("2 cores", "small"): [(1, 1.0), (2, 1.5)],
        ("16 cores", "small"): [(1, 1.0), (4, 2.5)],
    }
    bad = write(tmp_path / "bad.csv", "machine,workload,workers,calls_s\nm,w,2,10\n")
    with pytest.raises(ValueError, match="no 1-worker row"):
        plots.pool_series(plots.read_rows(bad))


def test_size_labels() -> None:
    assert [plots.size_label(n) for n in (512, 4096, 1 << 20, 64 << 20, 1 << 30)] == [
        "512 B", "4 KiB", "1 MiB", "64 MiB", "1 GiB"]


def test_the_committed_data_is_whole() -> None:
    """docs/plots/ holds what the pictures were drawn from: every panel and path present."""
    d = ROOT / "docs" / "plots"
    latency = plots.latency_series(plots.read_rows(d / "latency.csv"))
    assert set(latency) == {("small call", "quiet"), ("small call", "CPU hog beside"),
                            ("MLP step", "quiet")}
    for panel in latency.values():
        assert all(len(samples) >= 100 for samples in panel.values())
    transfer = plots.transfer_series(plots.read_rows(d / "transfer.csv"))
    sizes = [b for b, _ in transfer[("nx_jax", "in")]]
    assert sizes == [b for b, _ in transfer[("raw port", "out")]] and len(sizes) >= 6
    pool = plots.pool_series(plots.read_rows(d / "pool.csv"))
    assert all(points[0] == (1, 1.0) for points in pool.values())
    for name in ("latency", "transfer", "pool"):
        assert (d / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
