#!/usr/bin/env bash
# One prepared run for a session that has a GPU machine (the device tool): GPU tests, the demo,
# and small real recordings for CPU-only CI to replay. Everything it makes lands in $OUT
# (or ./gpu-out), to be copied into tests/data/ after a look.
#
#   run: bash scripts/gpu_check.sh          (about 3 minutes on an H200)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
LOG="$OUT/log.txt"  # one text log: the device tool returns at most 8 files
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee -a "$LOG"
python -m pip install -q -e '.[test]' 2>&1 | tail -2 | tee -a "$LOG"
autotune doctor 2>&1 | tee -a "$LOG"
AUTOTUNE_REQUIRE_GPU=1 python -m pytest -q -m gpu -p no:cacheprovider 2>&1 | tee -a "$LOG"
python scripts/record_backend.py --backend nvml --seconds 5 --hz 10 \
    --out "$OUT/nvml_recording.jsonl.gz" --load torch 2>&1 | tail -3 | tee -a "$LOG"
( time autotune demo --run-root "$OUT/runs" ) 2>&1 | tee -a "$LOG"
python benchmarks/overhead.py --device cuda --rounds 16 2>&1 | grep -v USDT | tee -a "$LOG"
# the smallest demo trace, for replaying real CUDA kernels in CPU-only tests
find "$OUT/runs" -name '*.json.gz' -path '*traces*' -printf '%s %p\n' | sort -n | head -1 \
    | awk '{print $2}' | xargs -r -I{} cp {} "$OUT/cuda_trace.json.gz"
find "$OUT/runs" -name summary.json | head -2 | while read -r f; do cp "$f" "$OUT/$(basename "$(dirname "$f")")-summary.json"; done
rm -rf "$OUT/runs"
ls -la "$OUT"
