"""The report: ``report.json`` (everything) and ``report.md`` (a table plus the machine)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.common import REPO, Figure

__all__ = ["machine_info", "render_markdown", "write_report"]

PACKAGES = ["aklab", "pydantic-ai-slim", "pydantic", "pydantic-core", "pykka", "pandas", "ipython", "ipykernel"]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine_info() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gb": _memory_gb(),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "packages": versions,
        "commit": _commit(),
    }


def render_markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    smoke = " — smoke run, tiny N, figures meaningless" if report["smoke"] else ""
    lines = [
        "# aklab benchmarks",
        "",
        f"Run {report['started_at']} ({report['duration_s']:.0f} s){smoke}.",
        "",
        "| id | workload | figure | budget | measured | verdict | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in report["figures"]:
        cells = [f["id"], f["workload"], f["figure"], f["budget"], f["measured"], f["verdict"], f["note"]]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    missed = [f"{f['id']} {f['figure']}" for f in report["figures"] if f["verdict"] == "missed"]
    lines += ["", f"Budgets missed: {', '.join(missed) if missed else 'none'}.", ""]
    packages = ", ".join(f"{k} {v}" for k, v in m["packages"].items() if v)
    lines += [
        "## Machine",
        "",
        f"- CPU: {m['cpu']}, {m['cores']} cores ({m['cores_usable']} usable), {m['memory_gb']} GB RAM",
        f"- OS: {m['os']}; Python: {m['python']}",
        f"- Packages: {packages}",
        f"- Commit: {m['commit'] or 'unknown'} (plus any uncommitted changes in the working tree)",
        "",
        "## Command",
        "",
        "```",
        report["command"],
        "```",
        "",
        "Timings are the best of the repeats (B7: the worst trial), in one process unless the",
        "benchmark says otherwise; every repeat is in `report.json` under `details`.",
        "",
    ]
    return "\n".join(lines)


def write_report(
    figures: list[Figure],
    out: Path,
    *,
    command: str,
    started_at: datetime,
    duration_s: float,
    smoke: bool,
) -> dict[str, Any]:
    """Write ``report.json`` and ``report.md`` into ``out``; returns the report."""
    report = {
        "started_at": started_at.astimezone(UTC).isoformat(timespec="seconds"),
        "duration_s": duration_s,
        "smoke": smoke,
        "command": command,
        "machine": machine_info(),
        "figures": [f.to_dict() for f in figures],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out / "report.md").write_text(render_markdown(report))
    return report


def command_line(argv: list[str] | None = None) -> str:
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python -m bench", *args])
