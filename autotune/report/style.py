"""Colours and labels the HTML report and its charts share (neither imports the other for them)."""

from __future__ import annotations

from profilers.contract.schema import TrialStatus

#: Trial status -> colour, shared by the trial table and the convergence chart (every status has one).
STATUS_COLOURS: dict[str, str] = {
    TrialStatus.OK: "#1a7f37",
    TrialStatus.INFEASIBLE: "#8250df",
    TrialStatus.OOM: "#d97706",
    TrialStatus.TIMEOUT: "#9a6700",
    TrialStatus.DIVERGED: "#cf222e",
    TrialStatus.CRASHED: "#a40e26",
    TrialStatus.SKIPPED: "#8c959f",
    TrialStatus.BUSY: "#bf8700",
}
OTHER_STATUS_COLOUR = "#57606a"
#: The objective metrics of a study as axis and column titles, with their units.
METRIC_LABELS: dict[str, str] = {
    "samples_per_s": "Throughput (samples/s)",
    "tokens_per_s": "Throughput (tokens/s)",
    "usd_per_million_samples": "Cost (USD per million samples)",
    "joules_per_sample": "Energy (J per sample)",
}


def metric_label(metric: str) -> str:
    """An objective metric's title with its unit (the key itself when it is not a known metric)."""
    return METRIC_LABELS.get(metric, metric)
