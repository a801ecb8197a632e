"""``autotune plan``: predict memory, speed and cost of every configuration on every GPU, before renting."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from autotune.cli.support import UsageError
from autotune.demo.models import default_config
from autotune.demo.plan import demo_plan
from autotune.plan.plan import with_run
from autotune.plan.published import EAGER
from autotune.plan.script import NoStepError, ScriptError, plan_script
from autotune.report.jsonout import clean_json
from autotune.report.plan_cells import HEADERS, config_cells, cpu_notes
from autotune.report.plan_report import plan_html, plan_markdown
from profilers.contract.json_checks import JsonObject, record_json
from profilers.contract.plan_doc import PlanDocument


def _misplaced(args: argparse.Namespace) -> str:
    """A hint when the script got one of ``autotune plan``'s own options (they go before SCRIPT)."""
    options: dict[str, bool] = getattr(args, "plan_options", {})
    words, given = list(args.script_args), []
    for i, word in enumerate(words):
        name = word.split("=", 1)[0]
        if name in options:
            takes_value = options[name] and "=" not in word and i + 1 < len(words)
            given.append(f"{word} {words[i + 1]}" if takes_value else word)
    if not given:
        return ""
    names = ", ".join(g.split()[0].split("=")[0] for g in given)
    return (
        f"; {names} went to the script: autotune plan's own options go before it "
        f"(autotune plan {' '.join(given)} {args.script} ...)"
    )


def run(args: argparse.Namespace) -> int:
    """Plan and print; bad input raises UsageError (one line, exit 2)."""
    if (args.demo is None) == (args.script is None):
        raise UsageError("give a SCRIPT to plan, or --demo gpt|cnn")
    if args.script is not None and not Path(args.script).is_file():
        raise UsageError(f"{args.script}: no such script")
    if sum(x is not None for x in (args.samples, args.tokens, args.epochs)) > 1:
        raise UsageError("give the run as one of --samples, --tokens, or --epochs with --dataset-samples")
    if args.global_batch is not None and args.global_batch % args.gpus:
        raise UsageError(f"--global-batch {args.global_batch} does not split over --gpus {args.gpus}")
    if (args.epochs is None) != (args.dataset_samples is None):
        raise UsageError("--epochs and --dataset-samples go together")
    common: dict[str, Any] = {
        "gpus": tuple(args.gpu), "gpus_per_node": args.gpus, "headroom": args.headroom, "nodes": args.nodes,
        "inter_node_gb_s": args.inter_node_gb_s, "pp_schedule": args.pp_schedule,
        "optimizations": (EAGER, *["compile"] * args.compile, *["compile+float8"] * args.float8),
    }  # fmt: skip
    checkpointing: tuple[bool | str, ...] = (False, *[True] * args.checkpointing)
    checkpointing += ("selective",) * args.selective_checkpointing
    if args.demo is not None:  # a bad --tokens for a demo model is known before planning
        _run_samples(args, demo_tokens_per_sample(args.demo))
    try:
        if args.script is not None:
            result = plan_script(
                args.script, list(args.script_args), global_batch=args.global_batch,
                precisions=tuple(args.precision or ("as-is",)), checkpointing=checkpointing,
                calibrate=args.calibrate, **common,
            )  # fmt: skip
            per_sample = result.model.tokens_per_sample
        else:
            result = _demo(args, checkpointing, common)
            per_sample = demo_tokens_per_sample(args.demo)
    except NoStepError as exc:  # not a training script: one line, as a usage error
        raise UsageError(str(exc)) from None
    except ScriptError as exc:
        print(f"autotune plan: {exc}{_misplaced(args)}", file=sys.stderr)
        return 1
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    run_samples = _run_samples(args, per_sample)
    if run_samples is not None:
        result = with_run(result, run_samples)
    data = plan_dict(result)
    if args.format == "table":
        _print_table(PlanDocument.parse(data), args.top)
        return 0
    if args.format == "json":
        text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    else:
        doc = PlanDocument.parse(data)
        text = plan_markdown(doc, rows=args.top) if args.format == "md" else plan_html(doc)
    if args.output in (None, "-"):
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"autotune plan: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"Plan: {args.output}", file=sys.stderr)
    return 0


def _demo(args: argparse.Namespace, checkpointing: tuple[bool | str, ...], common: dict[str, Any]) -> Any:

    return demo_plan(
        args.demo,
        global_batch=args.global_batch or 64,
        precisions=tuple(args.precision or ("fp32", "bf16")),
        checkpointing=checkpointing,
        calibrate=args.calibrate,
        **common,
    )


def demo_tokens_per_sample(name: str) -> int | None:
    """Tokens per sample of a demo model (None for the CNN)."""
    return int(getattr(default_config(name), "seq_len", 0)) or None


def _run_samples(args: argparse.Namespace, per_sample: int | None) -> int | None:
    if args.epochs is not None:
        return round(args.epochs * args.dataset_samples)
    if args.tokens is not None:
        if not per_sample:
            raise UsageError("--tokens: this model does not train on tokens; use --samples")
        return -(-args.tokens // per_sample)
    return args.samples


def plan_dict(result: PlanDocument) -> JsonObject:
    """The plan as JSON: ``configs``, ``model``, ``calibration``, ``trace_s``, ``notes``, ``suggestion``.

    Written by the record (no NaN or infinity: those are null).
    """
    cleaned: JsonObject = clean_json(record_json(result))
    return cleaned


#: Columns the terminal leaves out, in this order, while the table is wider than it (JSON, Markdown
#: and HTML keep every one): predictions, never what tells one configuration from another; the $
#: per million samples only beside the run's $.
NARROW_DROPS = ("interval", "peak memory", "step", "$/M samples")
#: Columns whose cells may wrap at their spaces in a narrow terminal (the others stay on one line).
_WRAPPING = frozenset({"fits"})
#: What the table puts between two columns: a space either side of a (blank) rule.
_GAP = 3


@dataclasses.dataclass(frozen=True)
class TableColumns:
    """The columns of the terminal's plan table at a width (:func:`table_columns`)."""

    shown: dict[int, int]  # index -> the column's width: its longest cell or header word, or header
    common: dict[str, str]  # header -> the one value of a column every row shares
    left_out: list[str]  # headers left out for the width


def table_columns(headers: list[str], rows: list[list[str]], width: int) -> TableColumns:
    """Which columns the terminal's table shows at ``width`` characters, and what it says instead.

    A column with one value in every row (``precision`` fp32, ``fits`` yes) is said once below the
    table, not on every row; then :data:`NARROW_DROPS` go, one by one, until each shown cell fits on
    one line and each header word on its own.
    """
    keep = [i for i, name in enumerate(headers) if name == "GPU" or not rows or len({r[i] for r in rows}) > 1]
    common = {headers[i]: rows[0][i] for i in range(len(headers)) if i not in keep}

    def need(i: int) -> int:
        words = [w for text in (headers[i], *(r[i] for r in rows)) for w in text.split()]
        cells = [headers[i]] if headers[i] in _WRAPPING else [r[i] for r in rows]
        return max([cell_len(w) for w in words] + [cell_len(c) for c in cells if headers[i] not in _WRAPPING])

    def total(widths: list[int]) -> int:
        return sum(widths) + _GAP * (len(widths) - 1)

    left_out = []
    for name in NARROW_DROPS:
        if total([need(i) for i in keep]) <= width:
            break
        if name == "$/M samples" and "$ for the run" not in headers:
            continue
        if name in headers and headers.index(name) in keep:
            keep.remove(headers.index(name))
            left_out.append(name)
    widths = {i: need(i) for i in keep}
    spare = width - total(list(widths.values()))
    for i in keep:  # headers on one line where the width allows
        grow = min(spare, max(0, cell_len(headers[i]) - widths[i]))
        widths[i] += grow
        spare -= grow
    return TableColumns(widths, common, left_out)


def _print_table(plan: PlanDocument, top: int) -> None:

    console = Console()
    run_total = any(c.usd_total is not None for c in plan.configs)
    # the terminal's columns: the documents' less tokens/s, $/M tokens, and $ for a run not given
    offered = [i for i, name in enumerate(HEADERS) if name not in ("tokens/s", "$/M tokens")]
    offered = offered if run_total else offered[:-1]
    headers = [HEADERS[i] for i in offered]
    rows = [[config_cells(c)[i] for i in offered] for c in plan.configs[:top]]
    columns = table_columns(headers, rows, console.width)
    table = Table(
        title="Plan: cheapest first (step times calibrated on published runs)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
    )
    for i, need in columns.shown.items():
        name = headers[i]
        wraps = name in _WRAPPING  # takes the width the others leave; the others exactly their cells'
        table.add_column(name, justify="left" if name in ("GPU", "precision", "layout", "fits") else "right",
                         width=None if wraps else need, min_width=need if wraps else None)  # fmt: skip
    for row in rows:
        table.add_row(*(row[i] for i in columns.shown))
    if plan.suggestion_text:
        console.print(f"Suggestion: {plan.suggestion_text}.")
    console.print(table)
    if columns.common:
        console.print("In every row: " + ", ".join(f"{k} {v}" for k, v in columns.common.items()) + ".")
    if columns.left_out:
        console.print(
            f"Left out at {console.width} columns: {', '.join(columns.left_out)} (a wider terminal or "
            "--format md shows them)."
        )
    for line in cpu_notes(plan.cpu, plan.cpu_memory) if plan.cpu is not None else []:
        console.print(f"{line}.")
    for note in plan.notes:
        console.print(f"Note: {note}.")
    console.print(
        f"{len(plan.configs)} configurations; traced in {plan.trace_s:.1f} s; "
        f"{plan.model.parameters or 0:,} parameters. {plan.calibration_note}."
    )


__all__ = ["plan_dict", "run"]
