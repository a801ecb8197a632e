"""The Markdown report: GitHub-flavoured tables to paste into a pull request or a chat.

Every user-supplied string goes through :func:`md_text`, so a run named
``<script>alert(1)</script>`` shows as text and a ``|`` cannot break a table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from autotune.fmt import NA, format_bytes, format_number, format_pct, format_rate, format_seconds, format_usd
from autotune.report.gpu_time_tables import tables
from autotune.report.plan_cells import HEADERS, REPORT_ROWS, config_cells, summary_lines, trust_notes
from autotune.report.sections import SECTION_TITLES, Report
from autotune.report.style import metric_label
from profilers.contract.outcome import stop_reason_words
from profilers.contract.plan_doc import PlanDocument
from profilers.contract.schema import Params
from profilers.contract.study.verdict import VerdictStatus

_MD_SPECIAL = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "|": "\\|",
        "\\": "\\\\",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
        "#": "\\#",
        "\n": " ",
        "\r": " ",
    }
)


def md_text(value: object) -> str:
    """``value`` as Markdown text: HTML and Markdown syntax escaped, newlines folded."""
    return str(value).translate(_MD_SPECIAL)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def _params(params: Params | None) -> str:
    if not params:
        return "the script's defaults"
    return ", ".join(f"{md_text(k)}={md_text(v)}" for k, v in params.items())


def plan_markdown_lines(plan: PlanDocument, rows: int = REPORT_ROWS, level: int = 2) -> list[str]:
    """The plan: the model, its configurations cheapest first, what the figures rest on."""
    head = "#" * level
    out = [f"- {md_text(line)}" for line in summary_lines(plan)]
    out += ["", f"{head} Configurations, cheapest first", ""]
    out += _table(HEADERS, [[md_text(cell) for cell in config_cells(c)] for c in plan.configs[:rows]])
    notes = trust_notes(plan)
    if notes:
        out += [f"{head} How far to trust it", "", *(f"- {md_text(n)}" for n in notes), ""]
    return out


def _plan(report: Report) -> list[str]:
    assert report.plan is not None
    return plan_markdown_lines(report.plan, level=3)


def render_markdown(report: Report) -> str:
    """The whole report as one Markdown document."""
    out = [f"# {md_text(report.title)}", "", f"Generated {report.generated_at}.", ""]
    for key, title in SECTION_TITLES.items():
        section = getattr(report, key)
        out.append(f"## {title}")
        out.append("")
        if section is None:
            out += [f"_{md_text(report.missing.get(key, 'not available for this run'))}_", ""]
            continue
        out += _SECTIONS[key](report)
    return "\n".join(out).rstrip() + "\n"


def _overview(report: Report) -> list[str]:
    o = report.overview
    rows = [
        ("run", md_text(o.name)),
        ("kind", o.kind_label),
        ("median step time", format_seconds(o.step_time_median_s)),
        ("throughput", format_rate(o.samples_per_s, "samples/s")),
    ]
    if o.tokens_per_s is not None:
        rows.append(("tokens", format_rate(o.tokens_per_s, "tokens/s")))
    rows += [
        ("peak memory", format_bytes(o.peak_memory_bytes)),
        ("precision", md_text(o.precision or NA)),
        ("device", md_text(o.device or NA)),
        ("ranks", str(o.world_size)),
        ("MFU", format_pct(o.mfu)),
    ]
    if o.load:
        rows.append(("machine load", md_text(o.load)))
    if o.kind == "tune":
        if o.best_params is None and o.verdict == VerdictStatus.NO_EFFECT:
            rows.append(("best configuration", "none: nothing the study tuned had an effect"))
        else:
            rows.append((f"{o.best_label.lower()} configuration", _params(o.best_params)))
        if o.verdict_headline is not None:
            rows.append(("verdict", md_text(o.verdict_headline)))
        if o.placement is not None:
            rows.append(("trials", md_text(o.placement)))
        if o.bill is not None:
            rows.append(("study cost", md_text(o.bill.cost_words())))
            rows.append(("saving and payback", md_text(o.bill.payback_words())))
        if o.starved is not None:
            rows.append(("busy machine", md_text(o.starved)))
    if o.outcome is not None and o.outcome != "finished":
        rows.insert(0, ("outcome", md_text(o.outcome)))
    if not o.finished:
        rows.append(("finished", "no"))
    out = _table(("", "value"), rows)
    out += [f"- {md_text(note)}" for note in o.notes]
    return out + ([""] if o.notes else [])


def _advice(report: Report) -> list[str]:
    a = report.advice
    out: list[str] = []
    if not a.recommendations:
        out += ["No rule found anything to change in this run.", ""]
    for rec in a.recommendations:
        out += [f"### {md_text(rec.severity.upper())}: {md_text(rec.title)}", ""]
        out += [f"- {md_text(line)}" for line in rec.evidence]
        if rec.actions:
            out += ["", "What to do:", ""]
            out += [f"1. {md_text(line)}" for line in rec.actions]
        if rec.params:
            out += ["", f"Configuration: {_params(rec.params)}"]
        gain = " · ".join(rec.gain_parts())
        if gain:
            out += ["", f"Expected gain: {gain}."]
        out.append("")
    if a.rules_checked:
        out += ["<details><summary>Rules checked</summary>", ""]
        out += _table(
            ("rule", "fires when", "source"),
            (
                (
                    md_text(t.title),
                    md_text(f"{t.metric} {t.limit_text()}"),
                    md_text(t.source),
                )
                for t in a.rules_checked
            ),
        )
        out += ["</details>", ""]
    if a.not_checked:
        out += ["Not checked here:", ""] + [f"- {md_text(line)}" for line in a.not_checked] + [""]
    return out


def _cost(report: Report) -> list[str]:
    c = report.cost
    assert c is not None
    rows = [
        ("price", f"{format_usd(c.price_per_gpu_hour)} per GPU-hour ({md_text(c.price_source)})"),
        ("devices billed", str(c.devices)),
        ("per million samples", format_usd(c.usd_per_million_samples)),
    ]
    if c.usd_per_million_tokens is not None:
        rows.append(("per million tokens", format_usd(c.usd_per_million_tokens)))
    if c.usd_per_epoch is not None:
        rows.append((f"per epoch ({c.dataset_samples:,} samples)", format_usd(c.usd_per_epoch)))
    rows.append((f"per month at {c.duty_cycle:.0%} duty", format_usd(c.usd_per_month)))
    if c.joules_per_sample is not None:
        rows.append(("energy per sample", f"{format_number(c.joules_per_sample)} J"))
    if c.saving_pct is not None:
        rows += [
            ("baseline per million samples", format_usd(c.baseline_usd_per_million_samples)),
            (
                "saving",
                f"{c.saving_pct:.1f}% ({format_usd(c.saving_usd_per_million_samples)} per million samples)",
            ),
        ]
        if c.saving_usd_per_month is not None:
            rows.append(("saving per month", format_usd(c.saving_usd_per_month)))
    return _table(("", "value"), rows)


def _steps(report: Report) -> list[str]:
    s = report.steps
    assert s is not None
    out = [
        f"Median step {format_seconds(s.median_s)} (p10 {format_seconds(s.p10_s)}, "
        f"p90 {format_seconds(s.p90_s)}).",
        "",
    ]
    out += _table(
        ("phase", "share", "median per step"),
        ((r.phase, format_pct(r.share), format_seconds(r.median_s)) for r in s.phase_rows()),
    )
    if s.outlier_steps:
        shown = ", ".join(str(n) for n in s.outlier_steps[:20])
        more = f" and {len(s.outlier_steps) - 20} more" if len(s.outlier_steps) > 20 else ""
        out += [f"Outlier steps (beyond 3σ): {shown}{more}.", ""]
    if s.per_rank_median_s:
        out += _table(
            ("rank", "median step"), ((str(r), format_seconds(v)) for r, v in s.per_rank_median_s.items())
        )
    return out


def _series_stats(values: Sequence[float | None]) -> tuple[str, str]:
    real = [v for v in values if v is not None]
    if not real:
        return NA, NA
    return format_number(sum(real) / len(real)), format_number(max(real))


def _timelines(report: Report) -> list[str]:
    t = report.timelines
    assert t is not None
    rows = []
    for g in t.gpus:
        util_mean, util_max = _series_stats(g.util_pct)
        power_mean, power_max = _series_stats(g.power_w)
        mem = [v for v in g.mem_used_bytes if v is not None]
        rows.append(
            (
                str(g.index),
                f"{util_mean}% mean, {util_max}% max",
                f"{format_bytes(max(mem) if mem else None)} of {format_bytes(g.mem_total_bytes)}",
                f"{power_mean} W mean, {power_max} W max",
                str(len(g.t_s)),
            )
        )
    return _table(("GPU", "utilization", "peak memory used", "power", "samples"), rows)


def _host(report: Report) -> list[str]:
    h = report.host
    assert h is not None
    cpu_mean, cpu_max = _series_stats(h.cpu_util_pct)
    rss = [v for v in h.rss_bytes if v is not None]
    return _table(
        ("CPU utilization", "peak resident memory", "samples"),
        [(f"{cpu_mean}% mean, {cpu_max}% max", format_bytes(max(rss) if rss else None), str(len(h.t_s)))],
    )


def _sweep(report: Report) -> list[str]:
    s = report.sweep
    assert s is not None
    rows = [
        (
            md_text(series.label),
            format_number(p.batch, 6),
            md_text(p.status),
            format_rate(p.samples_per_s, "samples/s"),
            format_bytes(p.peak_memory_bytes),
        )
        for series in s.series
        for p in series.points
    ]
    out = _table(("series", md_text(s.batch_param), "status", "throughput", "peak memory"), rows)
    if s.memory_budget_bytes:
        out += [f"Memory budget: {format_bytes(s.memory_budget_bytes)}.", ""]
    return out


def _convergence(report: Report) -> list[str]:
    c = report.convergence
    assert c is not None
    done = [v for v in c.best_so_far if v is not None]
    if not done:
        return ["No trial finished ok.", ""]
    first = next(i for i, v in enumerate(c.best_so_far) if v == done[-1])
    return [
        f"Best {md_text(metric_label(c.metric).lower())}: {format_number(done[-1], 4)} "
        f"({'higher' if c.direction == 'maximize' else 'lower'} is better), first reached at trial "
        f"{c.trial_ids[first]} of {len(c.trial_ids)} run.",
        "",
    ]


def _pareto(report: Report) -> list[str]:
    p = report.pareto
    assert p is not None
    front = sorted((pt for pt in p.points if pt.on_front), key=lambda pt: -pt.samples_per_s)
    return _table(
        ("trial", "configuration", "throughput", "$ per million samples"),
        (
            (
                str(pt.trial_id),
                md_text(pt.label),
                format_rate(pt.samples_per_s, "samples/s"),
                format_usd(pt.usd_per_million_samples),
            )
            for pt in front
        ),
    )


def _trials(report: Report) -> list[str]:
    t = report.trials
    assert t is not None

    def mark(row: object) -> str:
        return (
            f" ({t.best_label})"
            if getattr(row, "best", False)
            else (" (baseline)" if getattr(row, "baseline", False) else "")
        )

    return _table(
        ("trial", "configuration", "status", md_text(t.metric), "throughput", "peak memory", "note"),
        (
            (
                f"{r.id}{mark(r)}",
                _params(r.params),
                md_text(r.status),
                format_number(r.objective, 4),
                format_rate(r.samples_per_s, "samples/s"),
                format_bytes(r.peak_memory_bytes),
                md_text((r.error or stop_reason_words(r.stop_reason))[:160]),
            )
            for r in t.rows
        ),
    )


def _gpu_time(report: Report) -> list[str]:
    g = report.gpu_time
    assert g is not None
    out = [f"From `{md_text(g.source)}` (definitions of Holistic Trace Analysis).", ""]
    for t in tables(g):
        out += [f"**{md_text(t.title)}**", ""]
        out += _table(t.header, (tuple(md_text(c) for c in row) for row in t.rows))
    if g.problems:
        out += ["Not read:", ""] + [f"- {md_text(p)}" for p in g.problems] + [""]
    return out


def _environment(report: Report) -> list[str]:
    return _table(("", "value"), ((md_text(k), md_text(v)) for k, v in report.environment.items))


_SECTIONS = {
    "overview": _overview,
    "advice": _advice,
    "cost": _cost,
    "steps": _steps,
    "gpu_time": _gpu_time,
    "timelines": _timelines,
    "host": _host,
    "sweep": _sweep,
    "convergence": _convergence,
    "pareto": _pareto,
    "trials": _trials,
    "plan": _plan,
    "environment": _environment,
}
