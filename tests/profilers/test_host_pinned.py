"""A run pinned to some cores (a trial's slot of a parallel study) reads the load of those cores only."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2, reason="needs 2 cores and affinity"
)

#: Pinned to one core, read the host backend and psutil's per-core figure over the same second.
PROBE = """
import json, os, sys, time
import psutil
os.sched_setaffinity(0, {int(sys.argv[1])})
from profilers.runtime.backends.host import HostBackend, machine_cores, pinned_cpus
backend = HostBackend()
psutil.cpu_percent(percpu=True)
backend.sample()
time.sleep(1.0)
[sample] = backend.sample()
per_core = psutil.cpu_percent(percpu=True)
print(json.dumps({"util": sample.cpu_util_pct, "core": per_core[int(sys.argv[1])],
                  "pinned": sorted(pinned_cpus() or []), "cores": machine_cores()}))
"""


def _probe(core: int) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, str(core)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_pinned_run_reads_its_own_cores_load_not_the_machines():
    """A busy loop pinned to the last core fills it whatever else runs: a run pinned there reads it full
    (not the machine's mean, half of it on a quiet 2-core machine), as psutil's per-core figure does."""
    core = (os.cpu_count() or 2) - 1
    hog = subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"]
    )
    try:
        reading = _probe(core)
    finally:
        hog.kill()
        hog.wait()
    assert reading["pinned"] == [core] and reading["cores"] == 1
    assert reading["util"] >= 90.0, reading
    assert abs(reading["util"] - reading["core"]) <= 10.0, reading  # the same core, read another way


@pytest.mark.skipif(
    hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) < (os.cpu_count() or 1),
    reason="the test runner itself is pinned to some cores",
)
def test_an_unpinned_run_reads_every_core():
    out = subprocess.run(
        [sys.executable, "-c", "from profilers.runtime.backends.host import machine_cores, pinned_cpus;"
         "print(pinned_cpus(), machine_cores())"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.stdout.split() == ["None", str(os.cpu_count())]
