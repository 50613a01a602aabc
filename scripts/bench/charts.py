"""The performance charts of docs/performance.md, drawn from the benchmarks' own JSON output.

    python scripts/bench/charts.py                 # docs/benchmarks/*-N.json -> docs/images/chart-*.svg
    python scripts/bench/charts.py --out DIR       # somewhere else (the test suite draws into a temporary folder)

The data files are what the benchmarks wrote with ``--json``, committed in docs/benchmarks as they came,
one file per run, numbered (every run is drawn, so the charts show how far runs on a shared machine
disagree):

    decode-N.json    scripts/bench/bench_decode.py --json   (llamact vs llama-bench)
    server-N.json    scripts/bench/bench_server.py --json   (llamact serve vs llama-server, llama-cpp-python)

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


def _save(fig: plt.Figure, path: Path, bottom: float = 0.0) -> None:
    fig.tight_layout(rect=(0, bottom, 1, 1))   # bottom: room for a legend under the panels
    fig.savefig(path, format="svg", metadata={"Date": None, "Creator": "scripts/bench/charts.py"})
    plt.close(fig)


def _machine(meta: dict[str, object]) -> str:
    cores = meta.get("cpu_count")
    load = meta.get("loadavg_start")
    end = meta.get("loadavg_end")
    text = f"{cores} cores" if cores else ""
    if isinstance(load, Sequence) and load:
        text += f", load average {float(load[0]):.1f} at the start"
        if isinstance(end, Sequence) and end:
            text += f", {float(end[0]):.1f} at the end"
    return text


def _busy(row: dict) -> bool:
    """bench_decode's ``reps_used`` says "k/n busy" when fewer than two repetitions ran on a quiet machine."""
    return "busy" in str(row.get("reps_used", ""))


RUN_COLOURS = [LLAMACT, OTHER, "#2e7d32", "#7b1fa2", "#00838f"]


def _run_label(index: int, meta: dict[str, object]) -> str:
    return f"run {index + 1}: {_machine(meta) or 'load not recorded'}"


def _decode_rows(data: dict) -> list[dict]:
    """bench_decode's rows, then its low-noise estimates of the per-token loop (llama.cpp's own decode
    timer, same process), each with the note its bar carries."""
    rows = [{"label": f"{r['test']}  {r['path']}", "ratio": r["ratio"],
             "note": f"  busy, spread {float(r['spread']):.0%}" if _busy(r) else ""} for r in data["rows"]]
    for test, est in sorted(data.get("per_token", {}).items()):
        for key, what in (("estimated_engine_vs_native", "engine, loop estimate"),
                          ("estimated_engine_vs_native_sampling", "engine vs native+sampling, loop estimate")):
            if key in est:
                rows.append({"label": f"{test}  {what}", "ratio": est[key], "note": "  per-token timers"})
    return rows


def decode_chart(runs: list[dict], out: Path) -> Path:
    """Decode throughput through llamact over llama-bench's, per test and path, one bar per run (bench_decode's
    rows), then bench_decode's low-noise loop estimates. A row measured with no quiet repetitions says so,
    with its spread: on a busy machine the throughput ratios measure the neighbours as much as llamact,
    and the estimates are the figures to read."""
    tables = [_decode_rows(data) for data in runs]
    labels = [row["label"] for row in tables[0]]
    height = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(10, (0.3 + 0.25 * len(runs)) * len(labels) + 2.0))
    top = 0.0
    for i, (data, rows) in enumerate(zip(runs, tables, strict=True)):
        by_label = {row["label"]: row for row in rows}
        ys = [k + (i - (len(runs) - 1) / 2) * height for k in range(len(labels))]
        ratios = [float(by_label[label]["ratio"]) for label in labels]
        top = max(top, *ratios)
        bars = ax.barh(ys, ratios, height=height * 0.9, color=RUN_COLOURS[i % len(RUN_COLOURS)],
                       label=_run_label(i, data))
        for bar, ratio, label in zip(bars, ratios, labels, strict=True):
            ax.text(bar.get_width() + 0.01, bar.get_y() + bar.get_height() / 2,
                    f"{ratio:.3f}x{by_label[label]['note']}", va="center", fontsize=8)
    target = float(runs[0].get("target", 0.97))
    ax.axvline(1.0, color="#444", linewidth=1)
    ax.axvline(target, color="#888", linewidth=1, linestyle="--", label=f"target {target:.2f}x")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, max(1.2, top) + 0.9)
    ax.set_xlabel("llamact tokens/s ÷ llama-bench tokens/s (same run)")
    model = Path(str(runs[0].get("model", ""))).name
    ax.set_title(f"Decoding: llamact / llama-bench\n{model}, {runs[0].get('threads')} threads", fontsize=10)
    ax.legend(loc="lower right", frameon=False, fontsize=8)
    path = out / "chart-decode.svg"
    _save(fig, path)
    return path


def server_chart(runs: list[dict], out: Path) -> Path:
    """llamact serve's streamed tokens/s over each other server's, per number of clients: a panel per other
    server, a bar per run."""
    others = [name for name in runs[0]["results"] if name != "llamact"]
    clients = sorted(runs[0]["results"]["llamact"], key=int)
    fig, axes = plt.subplots(1, len(others), figsize=(5.2 * len(others), 4.4), sharey=True, squeeze=False)
    width = 0.8 / len(runs)
    top = 0.0
    for ax, other in zip(axes[0], others, strict=True):
        for i, data in enumerate(runs):
            results = data["results"]
            ratios = [results["llamact"][c]["tok_per_s"] / results[other][c]["tok_per_s"] for c in clients]
            top = max(top, *ratios)
            xs = [k + (i - (len(runs) - 1) / 2) * width for k in range(len(clients))]
            bars = ax.bar(xs, ratios, width=width * 0.9, color=RUN_COLOURS[i % len(RUN_COLOURS)],
                          label=_run_label(i, data.get("machine", {})))
            for bar, ratio in zip(bars, ratios, strict=True):
                ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 0.04, f"{ratio:.2f}x",
                        ha="center", fontsize=8)
        ax.axhline(1.0, color="#444", linewidth=1)
        ax.set_xticks(range(len(clients)), [f"{c} client{'s' if int(c) > 1 else ''}" for c in clients])
        ax.set_title(f"vs {other}", fontsize=10)
    axes[0][0].set_ylabel("llamact tokens/s ÷ the other's (same run)")
    axes[0][0].set_ylim(0, max(1.3, top + 0.4))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(runs), 2), frameon=False, fontsize=8)
    args = runs[0].get("args", {})
    model = args.get("model")
    # bench_server's default model (None) is the bundled SmolLM2
    model = "SmolLM2-135M-Instruct.Q4_1.gguf" if model in (None, "None") else Path(str(model)).name
    fig.suptitle(f"llamact serve, streamed greedy requests: throughput over llama-server and llama-cpp-python\n"
                 f"{model}, {args.get('threads')} threads, "
                 f"--parallel {args.get('parallel')}, {args.get('max_tokens')} tokens a request, "
                 f"median of {args.get('repeats')} rounds", fontsize=10)
    path = out / "chart-server.svg"
    _save(fig, path, bottom=0.04 + 0.04 * ((len(runs) + 1) // 2))
    return path


# each chart draws every run of its benchmark in docs/benchmarks: decode-1.json, decode-2.json, ...
CHARTS = {"decode": decode_chart, "server": server_chart}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the benchmarks' JSON files")
    parser.add_argument("--out", type=Path, default=IMAGES, help="where the SVGs go")
    args = parser.parse_args(argv)
    _style()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, draw in CHARTS.items():
        files = sorted(args.data.glob(f"{name}-*.json"), key=lambda f: int(f.stem.rsplit("-", 1)[1]))
        if not files:
            raise SystemExit(f"no {name}-N.json in {args.data}: run the benchmark with --json first")
        print(draw([json.loads(f.read_text(encoding="utf-8")) for f in files], args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
