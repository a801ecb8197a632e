"""Regenerate hta_reference.json: HTA's own figures on each folder of traces here, per rank.

Run with Holistic Trace Analysis installed (``pip install holistictraceanalysis``, best in a venv
of its own: it pulls pandas and plotly):  python tests/data/gpu_traces/hta_reference.py
"""

import json
import math
import shutil
import tempfile
from pathlib import Path

from hta.trace_analysis import TraceAnalysis  # type: ignore[import-not-found]

HERE = Path(__file__).parent
SOURCE = (
    "HolisticTraceAnalysis 0.5.0 (pip install holistictraceanalysis): TraceAnalysis(trace_dir=<the "
    "folder>).get_temporal_breakdown(visualize=False) and get_comm_comp_overlap(visualize=False), "
    "per rank; regenerate with tests/data/gpu_traces/hta_reference.py"
)


def _number(value: object) -> float | None:
    number = float(value)  # type: ignore[arg-type]
    return None if math.isnan(number) else number


IDLE_SOURCE = (
    "HolisticTraceAnalysis 0.5.0: TraceAnalysis(trace_dir=<the folder>).get_idle_time_breakdown("
    "ranks=<every rank>, visualize=False) (consecutive_kernel_delay 30, its default), per rank and "
    "stream; idle_time in the trace's µs; regenerate with tests/data/gpu_traces/hta_reference.py"
)


def idle_reference() -> None:
    """HTA's idle time breakdown of every stream of every rank, into hta_idle_reference.json."""
    traces: dict[str, list[dict[str, object]]] = {}
    for folder in sorted(p for p in HERE.iterdir() if p.is_dir()):
        with tempfile.TemporaryDirectory() as tmp:
            for trace in folder.glob("*.json.gz"):
                shutil.copy(trace, tmp)
            analysis = TraceAnalysis(trace_dir=tmp)
            ranks = sorted(analysis.t.traces.keys())
            idle, _ = analysis.get_idle_time_breakdown(ranks=ranks, visualize=False)
        traces[folder.name] = [
            {
                "rank": int(row["rank"]),
                "stream": int(row["stream"]),
                "idle_category": str(row["idle_category"]),
                "idle_time_us": float(row["idle_time"]),
                "idle_time_ratio": _number(row["idle_time_ratio"]),
            }
            for _, row in idle.iterrows()
        ]
    doc = {"_source": IDLE_SOURCE, "traces": traces}
    (HERE / "hta_idle_reference.json").write_text(json.dumps(doc, indent=1) + "\n")


def main() -> None:
    traces: dict[str, list[dict[str, float | None]]] = {}
    for folder in sorted(p for p in HERE.iterdir() if p.is_dir()):
        with tempfile.TemporaryDirectory() as tmp:
            for trace in folder.glob("*.json.gz"):
                shutil.copy(trace, tmp)
            analysis = TraceAnalysis(trace_dir=tmp)
            breakdown = analysis.get_temporal_breakdown(visualize=False)
            overlap = analysis.get_comm_comp_overlap(visualize=False)
        rows = []
        for (_, t), (_, o) in zip(breakdown.iterrows(), overlap.iterrows(), strict=True):
            rows.append(
                {
                    "rank": int(t["rank"]),
                    "idle_time_us": _number(t["idle_time(us)"]),
                    "compute_time_us": _number(t["compute_time(us)"]),
                    "non_compute_time_us": _number(t["non_compute_time(us)"]),
                    "kernel_time_us": _number(t["kernel_time(us)"]),
                    "idle_time_pctg": _number(t["idle_time_pctg"]),
                    "compute_time_pctg": _number(t["compute_time_pctg"]),
                    "non_compute_time_pctg": _number(t["non_compute_time_pctg"]),
                    "comp_comm_overlap_pctg": _number(o["comp_comm_overlap_pctg"]),
                }
            )
        traces[folder.name] = rows
    doc = {"_source": SOURCE, "traces": traces}
    (HERE / "hta_reference.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
    idle_reference()
