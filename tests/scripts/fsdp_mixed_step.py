"""A real FSDP2 step of the demo GPT under MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)
on this CPU (gloo), rank 0's allocator peak printed as JSON (and the peak without gloo's own buffers):
what the plan's FSDP rows predict.

    python tests/scripts/fsdp_mixed_step.py MICRO_BATCH PORT            # one rank, the demo GPT
    torchrun --nproc-per-node 2 tests/scripts/fsdp_mixed_step.py MICRO_BATCH - VOCAB

With ``VOCAB``: the GPT of :func:`wide_vocab_gpt` (4 blocks of 128, an untied head over ``VOCAB``).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import torch.distributed as dist
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.profiler import ProfilerActivity, profile

from autotune.demo.models import GPTConfig
from autotune.demo.plan import demo_workload
from autotune.repeated_blocks import repeated_blocks


def wide_vocab_gpt(vocab: int) -> GPTConfig:
    """A GPT whose root (embedding and untied head) outweighs its blocks, as a large vocabulary makes it."""
    return GPTConfig(vocab_size=vocab, d_model=128, n_layers=4, n_heads=4, tie_weights=False)


def main() -> None:
    micro_batch, port = int(sys.argv[1]), sys.argv[2]
    if "RANK" not in os.environ:  # not under torchrun: one rank
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo")
    config = wide_vocab_gpt(int(sys.argv[3])) if len(sys.argv) > 3 else None
    factory, batch_fn, loss_fn, optimizer_fn = demo_workload("gpt", config)[:4]
    torch.manual_seed(0)
    net = factory()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for slot in repeated_blocks(net):  # per block, then the root, as torchtitan shards
        fully_shard(slot.block, mp_policy=policy)
    fully_shard(net, mp_policy=policy)
    optimizer = optimizer_fn(list(net.parameters()))
    inputs, target = batch_fn(micro_batch)

    def step() -> None:
        loss_fn(net(*inputs), target).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # the optimizer's state
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(path)
    events = json.loads(Path(path).read_text())["traceEvents"]
    os.unlink(path)
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    # gloo's collectives allocate buffers of their own (its reduce-scatter clones the whole fp32
    # input, its all-gather a copy of the output); NCCL's (what a GPU runs) do not: the peak without
    # what the collectives allocate, each left out from its allocation to its free
    calls = ("gloo:", "c10d::")
    gloo = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("name", "").startswith(calls)]
    gloo_live: dict[object, int] = {}
    without_gloo = 0
    for e in memory:
        size, addr = e["args"].get("Bytes", 0), e["args"].get("Addr")
        if size > 0 and any(a <= e["ts"] <= b for a, b in gloo):
            gloo_live[addr] = size
        elif size < 0:
            gloo_live.pop(addr, None)
        without_gloo = max(without_gloo, e["args"]["Total Allocated"] - sum(gloo_live.values()))
    if dist.get_rank() == 0:
        print(json.dumps({
            "measured_step_peak_bytes": max([0, *(e["args"]["Total Allocated"] for e in memory)]),
            "without_gloo_peak_bytes": without_gloo,
        }))  # fmt: skip
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
