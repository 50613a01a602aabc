"""The performance charts of docs/performance.md, drawn from the benchmarks' own JSON output.

    python scripts/bench/charts.py                 # docs/benchmarks/*.json -> docs/images/chart-*.svg
    python scripts/bench/charts.py --out DIR       # somewhere else (the test suite draws into a temporary folder)

The data files are what the benchmarks wrote with ``--json``, committed in docs/benchmarks as they came:

    decode.json    scripts/bench/bench_decode.py --json   (llamact vs llama-bench)
    server.json    scripts/bench/bench_server.py --json   (llamact serve vs llama-server, llama-cpp-python)

Each chart shows ratios to the baseline measured in the same run (above 1: llamact faster), with the
ratio printed on every bar, so the picture and the numbers cannot disagree. The SVGs keep their text as
text and carry no date, so drawing the same data again gives the same labels (tests/test_docs.py checks
that the committed charts say what the committed data says).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")   # no display: files only
import matplotlib.pyplot as plt  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs"
DATA = DOCS / "benchmarks"
IMAGES = DOCS / "images"

LLAMACT = "#3f51b5"
OTHER = "#c77700"


def _style() -> None:
    plt.rcParams.update({
        "svg.fonttype": "none",          # text stays text: searchable, and comparable by the tests
        "svg.hashsalt": "llamact-docs",  # stable element ids
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
    })


def _save(fig: plt.Figure, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None, "Creator": "scripts/bench/charts.py"})
    plt.close(fig)


def _machine(meta: dict[str, object]) -> str:
    cores = meta.get("cpu_count")
    load = meta.get("loadavg_start")
    text = f"{cores} cores" if cores else ""
    if isinstance(load, Sequence) and load:
        text += f", load average {float(load[0]):.1f} at the start"
    return text


def decode_chart(data: dict, out: Path) -> Path:
    """Decode throughput through llamact over llama-bench's, per test and path (bench_decode's rows)."""
    rows = data["rows"]
    labels = [f"{r['test']}  {r['path']}" for r in rows]
    ratios = [float(r["ratio"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.6))
    y = range(len(rows))
    bars = ax.barh(list(y), ratios, color=LLAMACT, height=0.6)
    ax.axvline(1.0, color="#444", linewidth=1)
    ax.axvline(float(data.get("target", 0.97)), color=OTHER, linewidth=1, linestyle="--",
               label=f"target {float(data.get('target', 0.97)):.2f}x")
    for bar, ratio in zip(bars, ratios, strict=True):
        ax.text(bar.get_width() + 0.01, bar.get_y() + bar.get_height() / 2, f"{ratio:.3f}x", va="center")
    ax.set_yticks(list(y), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, max(1.2, max(ratios) + 0.15))
    ax.set_xlabel("llamact tokens/s ÷ llama-bench tokens/s (same run)")
    model = Path(str(data.get("model", ""))).name
    ax.set_title(f"Decoding: llamact / llama-bench\n{model}, {data.get('threads')} threads, "
                 f"{_machine(data)}", fontsize=10)
    ax.legend(loc="lower right", frameon=False)
    path = out / "chart-decode.svg"
    _save(fig, path)
    return path


def server_chart(data: dict, out: Path) -> Path:
    """llamact serve's streamed tokens/s over each other server's, per number of clients."""
    results = data["results"]
    clients = sorted(results["llamact"], key=int)
    others = [name for name in results if name != "llamact"]
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    width = 0.8 / max(1, len(others))
    colours = [OTHER, "#2e7d32", "#7b1fa2"]
    for i, other in enumerate(others):
        ratios = [results["llamact"][c]["tok_per_s"] / results[other][c]["tok_per_s"] for c in clients]
        xs = [k + (i - (len(others) - 1) / 2) * width for k in range(len(clients))]
        bars = ax.bar(xs, ratios, width=width * 0.9, color=colours[i % len(colours)], label=f"vs {other}")
        for bar, ratio in zip(bars, ratios, strict=True):
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 0.04, f"{ratio:.2f}x", ha="center")
    ax.axhline(1.0, color="#444", linewidth=1)
    ax.set_xticks(range(len(clients)), [f"{c} client{'s' if int(c) > 1 else ''}" for c in clients])
    ax.set_ylabel("llamact tokens/s ÷ the other's")
    args = data.get("args", {})
    ax.set_title(f"llamact serve, streamed: throughput over llama-server and llama-cpp-python\n"
                 f"{Path(str(args.get('model') or 'SmolLM2-135M')).name}, {args.get('threads')} threads, "
                 f"--parallel {args.get('parallel')}, {args.get('max_tokens')} tokens a request, "
                 f"median of {args.get('repeats')} rounds", fontsize=10)
    ax.legend(frameon=False)
    ax.set_ylim(0, max(ax.get_ylim()[1], 1.3))
    path = out / "chart-server.svg"
    _save(fig, path)
    return path


CHARTS = {"decode.json": decode_chart, "server.json": server_chart}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the benchmarks' JSON files")
    parser.add_argument("--out", type=Path, default=IMAGES, help="where the SVGs go")
    args = parser.parse_args(argv)
    _style()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, draw in CHARTS.items():
        data = json.loads((args.data / name).read_text(encoding="utf-8"))
        print(draw(data, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
