#!/usr/bin/env bash
# Run HERE, where the package registry is reachable, before a device call: wheels of the packages
# the device machine's image lacks go to .whl/ (git-ignored), to be carried (`carry: [".whl"]`).
# The device machine reaches nothing, and its image already holds torch, nvidia-ml-py, psutil,
# rich, numpy, scipy, scikit-learn, pytest, lightning, transformers and accelerate (its package
# list: the device tool's KINDS.md); what it lacks is below, pinned to the versions installed in
# this environment (the ones CI tests), for the image's Python 3.12 on x86-64 (PYTHON_VERSION=3.11
# for another). About 15 MB.
#
#   scripts/gpu_wheels.sh && (device) bash scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MISSING=(nvtx scikit-optimize pyaml plotly textual platformdirs mdit-py-plugins
         pytest-textual-snapshot syrupy jsonargparse docstring-parser typeshed-client)
pins=$(python - "${MISSING[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version

for name in sys.argv[1:]:
    try:
        print(f"{name}=={version(name)}")
    except PackageNotFoundError:
        print(name)
PY
)
rm -rf .whl
mkdir .whl
# shellcheck disable=SC2086  # one requirement per word
python -m pip download -q --no-deps --only-binary=:all: --implementation cp --python-version "${PYTHON_VERSION:-3.12}" \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d .whl $pins
ls .whl
du -sh .whl
