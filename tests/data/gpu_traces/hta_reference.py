"""Regenerate hta_reference.json: HTA's own figures on this folder's traces.

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


def main() -> None:
    out = json.loads((HERE / "hta_reference.json").read_text())
    for name in out["traces"]:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(HERE / name / "rank-0.json.gz", tmp)
            analysis = TraceAnalysis(trace_dir=tmp)
            t = analysis.get_temporal_breakdown(visualize=False).iloc[0]
            o = analysis.get_comm_comp_overlap(visualize=False).iloc[0]
        overlap = float(o["comp_comm_overlap_pctg"])
        out["traces"][name] = {
            "idle_time_us": float(t["idle_time(us)"]),
            "compute_time_us": float(t["compute_time(us)"]),
            "non_compute_time_us": float(t["non_compute_time(us)"]),
            "kernel_time_us": float(t["kernel_time(us)"]),
            "idle_time_pctg": float(t["idle_time_pctg"]),
            "compute_time_pctg": float(t["compute_time_pctg"]),
            "non_compute_time_pctg": float(t["non_compute_time_pctg"]),
            "comp_comm_overlap_pctg": None if math.isnan(overlap) else overlap,
        }
    (HERE / "hta_reference.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
