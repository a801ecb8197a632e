"""Transcribe published training-throughput tables into ``data/published_landscapes.json``.

Reads two public repositories from local git clones (``git show COMMIT:PATH``, so the numbers are
tied to a commit) and writes one landscape per table family: every configuration of the product of
its knobs' values, with the published figure or null where the table has no such row (not
measured, or out of memory). Only numbers and citations are kept.

- NVIDIA/DeepLearningExamples: the "Training performance: <hardware>" tables of a model's README
  (GPUs × batch size per GPU, a full-precision (TF32 on A100, FP32 on V100) and a mixed-precision
  throughput column); the hardware tables of one README form one landscape (knobs: hardware,
  gpus, batch_per_gpu, precision), split by a "Dimension" column where there is one.
- mosaicml/llm-foundry ``scripts/train/benchmarking/README.md``: MPT models on 8 GPUs over
  sequence length (model × seq_len, × precision where a heading has two), and at sequence length
  2048 over the GPU count (model × gpus); the objective is the published MFU, since tokens/s is
  monotone in the model size.

Kept: landscapes of at least ``MIN_CELLS`` configurations, at least half of them published.

    python benchmarks/transcribe_landscapes.py --dle CLONE/DeepLearningExamples --foundry CLONE/llm-foundry
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from itertools import product
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "data" / "published_landscapes.json"
MIN_CELLS = 20
DLE_FILES = (
    "PyTorch/Segmentation/nnUNet/README.md",
    "TensorFlow2/Segmentation/nnUNet/README.md",
    "PyTorch/Detection/SSD/README.md",
    "PyTorch/SpeechRecognition/Jasper/README.md",
    "TensorFlow/Segmentation/UNet_3D_Medical/README.md",
)
FOUNDRY_PATH = "scripts/train/benchmarking/README.md"
FOUNDRY_COMMITS = ("HEAD", "c6cfb4284")  # today's README and the torch-1.13 era one (other numbers)
MODEL_ORDER = ("125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b", "70b")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def tables(text: str) -> list[dict[str, Any]]:
    """Markdown tables with the heading above them: {"heading", "header", "rows"}."""
    found: list[dict[str, Any]] = []
    heading: str = ""
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if line.startswith("#"):
            heading, current = line.strip("# ").strip(), None
        elif stripped.startswith("|"):
            cells = [c.strip().strip("*").strip() for c in stripped.strip("|").split("|")]
            if current is None:
                current = {"heading": heading, "header": cells, "rows": list[list[str]]()}
                found.append(current)
            elif not re.fullmatch(r"[\s:\-|]+", stripped):
                current["rows"].append(cells)
        elif stripped:
            current = None
    return found


def number(text: str) -> float | None:
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def landscape(
    name: str,
    source: dict[str, Any],
    objective: str,
    knobs: dict[str, list[Any]],
    table: dict[tuple[Any, ...], float],
) -> dict[str, Any] | None:
    keep = [i for i, values in enumerate(knobs.values()) if len(values) > 1]  # one value: no knob
    knobs = {k: v for k, v in knobs.items() if len(v) > 1}
    table = {tuple(combo[i] for i in keep): value for combo, value in table.items()}
    cells = [
        {"params": dict(zip(knobs, combo, strict=True)), "value": table.get(combo)}
        for combo in product(*knobs.values())
    ]
    published = sum(c["value"] is not None for c in cells)
    if len(cells) < MIN_CELLS or published * 2 < len(cells):
        print(f"skipped {name}: {published} of {len(cells)} configurations published")
        return None
    print(f"{name}: {published} of {len(cells)} configurations published")
    return {"name": name, "source": source, "objective": objective, "knobs": knobs, "configs": cells}


def ordered(values: set[Any]) -> list[Any]:
    return sorted(values, key=lambda v: (MODEL_ORDER.index(v) if v in MODEL_ORDER else 0, v))


def dle(repo: Path) -> list[dict[str, Any]]:
    commit = git(repo, "rev-parse", "HEAD").strip()
    out = []
    for path in DLE_FILES:
        groups: dict[str, dict[tuple[Any, ...], float]] = {}
        headings: dict[str, list[str]] = {}
        for t in tables(git(repo, "show", f"{commit}:{path}")):
            heading = t["heading"]
            if not re.search(r"training performance", heading, re.I):
                continue
            head = [h.lower() for h in t["header"]]

            def col(pattern: str, avoid: str = r"speed|scal", head: list[str] = head) -> int:
                hits = [i for i, h in enumerate(head) if re.search(pattern, h) and not re.search(avoid, h)]
                assert len(hits) == 1, (pattern, head)
                return hits[0]

            gpus, batch = col(r"gpus"), col(r"batch")
            full, mixed = col(r"tf32|fp32", r"speed|scal|batch"), col(r"mixed", r"speed|scal|batch")
            split = [i for i, h in enumerate(head) if h == "dimension"]
            hardware = heading.split(":", 1)[1].strip()
            for row in t["rows"]:
                key = f"dim{row[split[0]]}" if split else ""
                for precision, i in (("full", full), ("mixed", mixed)):
                    value = number(row[i])
                    if value is not None:
                        combo = (
                            hardware,
                            int(number(row[gpus]) or 0),
                            int(number(row[batch]) or 0),
                            precision,
                        )
                        groups.setdefault(key, {})[combo] = value
                headings.setdefault(key, [])
                if heading not in headings[key]:
                    headings[key].append(heading)
        model = path.split("/")[-2]
        framework = path.split("/")[0].lower()
        for key, table in groups.items():
            knobs = {
                name: ordered({combo[i] for combo in table})
                for i, name in enumerate(("hardware", "gpus", "batch_per_gpu", "precision"))
            }
            source = {
                "repo": "NVIDIA/DeepLearningExamples",
                "commit": commit,
                "path": path,
                "headings": headings[key],
                "note": "precision full = TF32 on A100, FP32 on V100; mixed = AMP"
                + (f"; rows with Dimension {key[3:]}" if key else ""),
            }
            name = f"dle-{framework}-{model}{'-' + key if key else ''}".lower()
            if (
                land := landscape(name, source, "throughput (published unit per s)", knobs, table)
            ) is not None:
                out.append(land)
    return out


def foundry(repo: Path) -> list[dict[str, Any]]:
    out = []
    for ref in FOUNDRY_COMMITS:
        commit = git(repo, "log", "-1", "--format=%H", ref, "--", FOUNDRY_PATH).strip()
        era = "" if ref == "HEAD" else f"-{commit[:7]}"
        by_heading: dict[str, list[dict[str, str]]] = {}
        for t in tables(git(repo, "show", f"{commit}:{FOUNDRY_PATH}")):
            if "MFU" in t["header"]:
                rows = [dict(zip(t["header"], r, strict=False)) for r in t["rows"]]
                by_heading.setdefault(t["heading"], []).extend(rows)
        for heading, rows in by_heading.items():
            if "Large Scale" in heading or "FP8" in heading:
                continue
            gpu = "h100" if "H100" in heading else "a100-80" if "80GB" in heading else "a100-40"
            source = {
                "repo": "mosaicml/llm-foundry",
                "commit": commit,
                "path": FOUNDRY_PATH,
                "headings": [heading],
            }
            precisions = sorted({r.get("Precision", "amp_bf16") for r in rows})
            seq: dict[tuple[Any, ...], float] = {}
            for r in rows:
                if r["# GPUs"] == "8":
                    combo: tuple[Any, ...] = (r["Model"], int(r["SeqLen (T)"]))
                    combo += (r.get("Precision", "amp_bf16"),) if len(precisions) > 1 else ()
                    seq[combo] = max(seq.get(combo, 0.0), float(r["MFU"]))
            names = ("model", "seq_len", "precision")[: 2 + (len(precisions) > 1)]
            knobs = {n: ordered({c[i] for c in seq}) for i, n in enumerate(names)}
            if (land := landscape(f"foundry-{gpu}{era}-seqlen", source, "MFU (%)", knobs, seq)) is not None:
                out.append(land)
            for precision in precisions:
                scale: dict[tuple[Any, ...], float] = {}
                for r in rows:
                    if r["SeqLen (T)"] == "2048" and r.get("Precision", "amp_bf16") == precision:
                        combo = (r["Model"], int(r["# GPUs"]))
                        scale[combo] = max(scale.get(combo, 0.0), float(r["MFU"]))
                knobs = {n: ordered({c[i] for c in scale}) for i, n in enumerate(("model", "gpus"))}
                tag = f"-{precision}" if len(precisions) > 1 else ""
                src = dict(source, note=f"seq_len 2048, precision {precision}")
                if (
                    land := landscape(f"foundry-{gpu}{era}-gpus{tag}", src, "MFU (%)", knobs, scale)
                ) is not None:
                    out.append(land)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dle", type=Path, required=True, help="a clone of NVIDIA/DeepLearningExamples")
    parser.add_argument("--foundry", type=Path, required=True, help="a clone of mosaicml/llm-foundry")
    args = parser.parse_args()
    lands = dle(args.dle) + foundry(args.foundry)
    doc = {
        "description": "Published training-throughput tables as search landscapes; null = no published row.",
        "min_cells": MIN_CELLS,
        "landscapes": lands,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(lands)} landscapes written to {OUT}")


if __name__ == "__main__":
    main()
