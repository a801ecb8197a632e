#!/usr/bin/env python
r"""Record a live sampling backend into a replayable file (for tests/data and demos).

Examples::

    python scripts/record_backend.py --backend host --seconds 3 --hz 10 \
        --out tests/data/host_recording.jsonl.gz --load torch
    python scripts/record_backend.py --backend nvml --seconds 5 --hz 10 \
        --out tests/data/nvml_recording.jsonl.gz --load torch
    python scripts/record_backend.py --backend nvml --seconds 5 --hz 10 --out rec.jsonl.gz -- python train.py

``--load torch`` runs a small built-in training loop (on CUDA when available) in this process while
a background thread records, as the profiler's sampler thread does in a training script, so the
per-process fields (process CPU, RSS, GPU memory of this process) see the load. A command after
``--`` is run as the load instead, in a child process started one second before recording and
stopped at the end.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from profilers.runtime.backends import get_backend  # noqa: E402 - after the sys.path fix above
from profilers.runtime.backends.replay import record  # noqa: E402


def train_loop(stop: threading.Event, on_ready: Callable[[], None]) -> None:
    """A small MLP training loop (CUDA when available) until ``stop`` is set: a load to record.

    ``on_ready`` starts the recording once the model is built: torch's import and CUDA's start took
    longer than a 5 s recording on an H200 machine, which then recorded an idle GPU.
    """
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    width = 4096 if device == "cuda" else 256
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10)
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(512, width, device=device)
    y = torch.randint(0, 10, (512,), device=device)
    steps = 0
    on_ready()
    start = time.monotonic()
    while not stop.is_set():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        steps += 1
        if device == "cuda" and steps % 20 == 0:
            torch.cuda.synchronize()  # keep the queue short so the load stops with the recording
    print(f"load: {steps} training steps on {device} in {time.monotonic() - start:.1f} s", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, start the load, record, stop the load. Returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    load_cmd: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, load_cmd = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backend", default=None, help="backend spec: nvml, host, nvml:0 (default: automatic)"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="how long to record (default 3)")
    parser.add_argument("--hz", type=float, default=10.0, help="samples per second (default 10)")
    parser.add_argument("--out", type=Path, required=True, help="recording to write (.jsonl.gz)")
    parser.add_argument("--load", choices=["none", "torch"], default="none", help="built-in load to run")
    args = parser.parse_args(argv)
    builtin = args.load == "torch" and not load_cmd
    if builtin:
        import torch  # noqa: F401 - import before recording starts, so the recording sees training

    backend = get_backend(args.backend)
    load = "built-in torch MLP training loop, in the recording process" if builtin else shlex.join(load_cmd)
    meta = {"load": load or None, "devices": [d.name for d in backend.devices()]}
    result: list[Path] = []
    stop = threading.Event()

    def run_recording() -> None:
        try:
            result.append(record(backend, args.seconds, args.hz, args.out, meta=meta))
        finally:
            stop.set()

    child = subprocess.Popen(load_cmd) if load_cmd else None
    try:
        if child is not None:
            time.sleep(1.0)  # let the load get going
        recorder = threading.Thread(target=run_recording, name="recorder")
        if builtin:  # in this process, like a training script with the sampler thread
            train_loop(stop, on_ready=recorder.start)
        else:
            recorder.start()
        recorder.join()
    finally:
        stop.set()
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        backend.close()
    if not result:
        return 1
    path = result[0]
    size = path.stat().st_size
    print(f"wrote {path} ({size} bytes, backend {backend.name}, {args.seconds:g} s at {args.hz:g} Hz)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
