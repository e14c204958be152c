"""Draws docs/BENCHMARKS.md's plots from the CSV files bench/plots.exs writes.

    python bench/plots.py DIR     (make bench-plots runs it after bench/plots.exs)

Reads DIR/latency.csv, DIR/transfer.csv and DIR/pool.csv; writes DIR/latency.png (the
distribution of each row's call times, as the share of calls done within t), DIR/transfer.png
(MB/s against tensor size, each way) and DIR/pool.png (throughput against workers, relative to
one worker). Needs matplotlib (the project's ``bench`` extra). The reading and summing up of the
files is kept apart from the drawing so that tests can check it without matplotlib.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def latency_series(rows: list[dict[str, str]]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """``{(workload, condition): {row: sorted samples}}``, in the order the file lists them."""
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in rows:
        panel = out.setdefault((r["workload"], r["condition"]), {})
        panel.setdefault(r["row"], []).append(float(r["us"]))
    for panel in out.values():
        for samples in panel.values():
            samples.sort()
    return out


def percentile(sorted_samples: list[float], q: float) -> float:
    """The sample at rank ``q`` (0-1) of ``sorted_samples``, as bench/lib.exs takes them."""
    n = len(sorted_samples)
    return sorted_samples[min(n - 1, int(n * q))]


def transfer_series(rows: list[dict[str, str]]) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """``{(path, direction): [(bytes, MB/s)]}`` sorted by size."""
    out: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for r in rows:
        out[(r["path"], r["direction"])].append((int(r["bytes"]), float(r["mb_s"])))
    return {k: sorted(v) for k, v in out.items()}


def pool_series(rows: list[dict[str, str]]) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """``{(machine, workload): [(workers, speed-up over 1 worker)]}``."""
    rates: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for r in rows:
        rates[(r["machine"], r["workload"])][int(r["workers"])] = float(r["calls_s"])
    out = {}
    for key, by_size in rates.items():
        if 1 not in by_size:
            raise ValueError(f"pool.csv: {key} has no 1-worker row to scale against")
        out[key] = [(n, rate / by_size[1]) for n, rate in sorted(by_size.items())]
    return out


def size_label(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n // size} {unit}"
    return f"{n} B"


def draw(directory: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []

    panels = latency_series(read_rows(directory / "latency.csv"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8), squeeze=False)
    for ax, ((workload, condition), series) in zip(axes[0], panels.items(), strict=True):
        for row, samples in series.items():
            n = len(samples)
            p50 = percentile(samples, 0.5)
            ax.step(samples, [(i + 1) / n for i in range(n)], where="post",
                    label=f"{row} (p50 {p50:.1f} us)")
        ax.set_xscale("log")
        ax.set_xlabel("time per call (us, log scale)")
        ax.set_ylabel("share of calls done")
        ax.set_title(f"{workload}, {condition}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    written.append(_save(fig, directory / "latency.png"))

    series_t = transfer_series(read_rows(directory / "transfer.csv"))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, direction in zip(axes, ("in", "out"), strict=True):
        sizes: set[int] = set()
        for (path, d), points in series_t.items():
            if d != direction:
                continue
            xs = [p[0] for p in points]
            sizes.update(xs)
            ax.plot(xs, [p[1] for p in points], marker="o", label=path)
        ticks = sorted(sizes)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ticks, [size_label(t) for t in ticks], rotation=45, fontsize=8)
        ax.set_xlabel("tensor size")
        ax.set_title("Elixir -> worker (put)" if direction == "in" else "worker -> Elixir (fetch)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("MB/s (log scale)")
    fig.tight_layout()
    written.append(_save(fig, directory / "transfer.png"))

    series_p = pool_series(read_rows(directory / "pool.csv"))
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    most = max(n for points in series_p.values() for n, _ in points)
    ax.plot([1, most], [1, most], color="grey", linestyle=":", label="one worker's rate x workers")
    for (machine, workload), points in series_p.items():
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                label=f"{workload}, {machine}")
    ax.set_xlabel("workers in the pool")
    ax.set_ylabel("calls/s over 1 worker's")
    ax.set_title("Pool scaling, 8 callers")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    written.append(_save(fig, directory / "pool.png"))
    return written


def _save(fig: Any, path: Path) -> Path:
    # no timestamp in the file, so the same data gives the same bytes
    fig.savefig(path, dpi=90, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python bench/plots.py DIR (the folder bench/plots.exs wrote)")
    for path in draw(Path(sys.argv[1])):
        print(f"   wrote {path}")


if __name__ == "__main__":
    main()
