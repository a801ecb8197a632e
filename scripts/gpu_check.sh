#!/usr/bin/env bash
# One prepared run on a GPU machine lent by the device tool, offline (it reaches no registry).
# It records what CPU-only CI can replay, into $OUT (or ./gpu-out): log.txt (one text log of
# everything), an NVML recording, two CUDA memory snapshots (a run's, and one taken at an
# out-of-memory error), the smallest CUDA trace of the demo, the summaries of the demo, a Lightning
# and a Hugging Face run in one summaries.json, and the plan's GPU figures against real steps
# (plan_gpu.json). At most 8 files come back; each is copied out as soon as its part ends, so a run
# cut short still returns what it made.
#
#   here, first:  scripts/gpu_wheels.sh              (wheels of what the device image lacks -> .whl/)
#   device tool:  run(command="bash scripts/gpu_check.sh", carry=[".whl"], timeout_s=570)
#
# Every part has its own time limit, so one that hangs cannot take the others' time or the log;
# the whole run stays under 9 minutes. The image's python3 (its own torch) is used as it is: the
# project installs without build isolation and without dependencies, from .whl/ alone.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
RUNS=${RUNS:-/tmp/autotune-gpu-runs}  # outside $OUT: only the files above come back
mkdir -p "$OUT" "$RUNS"
LOG="$OUT/log.txt"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4 AUTOTUNE_REQUIRE_GPU=1 HF_HUB_OFFLINE=1
part() { echo "== $1 ($(date +%T))" | tee -a "$LOG"; }
run() {  # run LIMIT_S COMMAND...: its output into the log, its exit status noted
    local limit=$1
    shift
    timeout "$limit" "$@" >>"$LOG" 2>&1
    echo "-- exit $? (limit ${limit}s): $*" | tee -a "$LOG"
}

collect() {  # every summary.json so far into summaries.json (rewritten after each part that makes one)
    "$PY" - "$OUT" "$RUNS" <<'PY' 2>&1 | tee -a "$LOG"
import json, pathlib, sys
out, runs = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
found = {str(p.parent.relative_to(runs)): json.loads(p.read_text()) for p in sorted(runs.rglob("summary.json"))}
(out / "summaries.json").write_text(json.dumps(found, indent=1))
print(f"{len(found)} summaries: {', '.join(found)}")
PY
}

part machine
run 20 nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv
run 60 "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())'

part "install (offline)"
if [ -d .whl ]; then
    run 120 "$PY" -m pip install -q --no-index --no-deps .whl/*.whl
else
    echo "no .whl/: run scripts/gpu_wheels.sh here first and carry .whl" | tee -a "$LOG"
fi
run 120 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e .
run 60 "$PY" -m autotune doctor

part "memory snapshots"
run 60 "$PY" -m autotune profile --run-dir "$RUNS/snapshot" --quiet --memory-snapshot \
    tests/scripts/memory_mlp.py --width 2048 --layers 4 --steps 12
run 60 "$PY" -m autotune profile --run-dir "$RUNS/oom" --quiet --memory-snapshot \
    tests/scripts/memory_mlp.py --batch 4194304 --width 2048 --steps 2
for pair in snapshot/memory/rank0.pickle:memory_snapshot.pickle.gz oom/memory/rank0-oom.pickle:oom_snapshot.pickle.gz; do
    src="$RUNS/${pair%%:*}"
    [ -f "$src" ] && gzip -9 -c "$src" >"$OUT/${pair##*:}"
done
run 30 "$PY" -m autotune report "$OUT/oom_snapshot.pickle.gz" --format md -o -
collect

part "NVML recording"
run 40 "$PY" scripts/record_backend.py --backend nvml --seconds 5 --hz 10 \
    --out "$OUT/nvml_recording.jsonl.gz" --load torch

part "demo"
run 150 "$PY" -m autotune demo --device cuda --tune-trials 6 --confirm-rounds 1 --runs-root "$RUNS/demo"
# the smallest CUDA trace of the demo: real kernels for CPU-only tests to replay
find "$RUNS/demo" -name '*.json.gz' -path '*traces*' -printf '%s %p\n' | sort -n | head -1 \
    | awk '{print $2}' | xargs -r -I{} cp {} "$OUT/cuda_trace.json.gz"
run 60 "$PY" -m autotune report "$OUT/cuda_trace.json.gz" --format md -o -
collect

part "GPU tests"
# the files that hold GPU tests, in one process: the out-of-memory test fills the GPU
run 200 "$PY" -m pytest -q -n 0 -m gpu -p no:cacheprovider -W ignore::DeprecationWarning \
    $(grep -rl 'mark.gpu' tests --include='test_*.py')

part "frameworks"
run 60 "$PY" -m autotune profile --run-dir "$RUNS/lightning" --quiet \
    tests/scripts/fw_lightning.py --accelerator gpu --max-steps 60
run 90 "$PY" -m autotune profile --run-dir "$RUNS/hf" --quiet \
    tests/scripts/fw_hf_trainer.py --use_cpu False --max_steps 60
collect

part "plan against the GPU"
run 90 "$PY" benchmarks/plan_gpu_check.py --device cuda --gpu H200 --out "$OUT/plan_gpu.json"

part "overhead benchmark"
run 90 "$PY" benchmarks/overhead.py --device cuda --rounds 16

part "collect"
ls -la "$OUT" | tee -a "$LOG"
