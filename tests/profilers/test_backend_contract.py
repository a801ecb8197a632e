"""One contract suite run on every sampling backend, then backend-specific tests.

Backends under contract: host (live), replay (a real host recording from tests/data, and the NVML
recording once one is committed), real NVML (marked gpu), and NvmlBackend driven through a fake
``pynvml`` module injected into ``sys.modules`` (raises the real pynvml error classes).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from profilers.contract.records import SAMPLE_FIELDS, DeviceInfo, DeviceSample
from profilers.runtime.backends import describe_unavailable, get_backend, libnvml
from profilers.runtime.backends.base import Backend
from profilers.runtime.backends.host import HostBackend
from profilers.runtime.backends.nvml import NvmlBackend
from profilers.runtime.backends.replay import ReplayBackend, record, write_recording
from tests.fake_nvml import make_fake_pynvml

real_pynvml = pytest.importorskip("pynvml")

DATA = Path(__file__).resolve().parent.parent / "data"
HOST_RECORDING = DATA / "host_recording.jsonl.gz"
NVML_RECORDING = DATA / "nvml_recording.jsonl.gz"
GiB = 1 << 30


# --------------------------------------------------------------------------- fake pynvml


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """Install the fake pynvml (the autouse fixture in conftest resets libnvml around the test)."""
    fake = make_fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    libnvml.reset()
    return fake


# --------------------------------------------------------------------------- contract

BACKENDS: list[Any] = ["host", "replay_host", pytest.param("nvml", marks=pytest.mark.gpu), "nvml_fake"]
if NVML_RECORDING.exists():  # made on a GPU machine with scripts/record_backend.py --backend nvml
    BACKENDS.append("replay_nvml")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    kind = request.param
    b: Backend
    if kind == "host":
        b = HostBackend()
    elif kind == "replay_host":
        b = ReplayBackend(HOST_RECORDING)
    elif kind == "replay_nvml":
        b = ReplayBackend(NVML_RECORDING)
    elif kind == "nvml":
        b = NvmlBackend()
    else:
        monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml())
        libnvml.reset()
        b = NvmlBackend()
    yield b
    b.close()


def _check_plausible(s: DeviceSample) -> None:
    annotations = DeviceSample.__annotations__
    for name in SAMPLE_FIELDS:
        v = getattr(s, name)
        if v is None:
            continue
        want = (int, float) if "float" in str(annotations[name]) else (str if name == "kind" else int)
        assert isinstance(v, want) and not isinstance(v, bool), f"{name}={v!r} is not {want}"
    for name in ("gpu_util_pct", "mem_busy_pct", "cpu_util_pct"):
        v = getattr(s, name)
        assert v is None or 0 <= v <= 100, f"{name}={v}"
    cores = os.cpu_count() or 1
    assert s.process_cpu_pct is None or 0 <= s.process_cpu_pct <= 100 * cores * 1.5
    for name in (
        "power_mw",
        "energy_mj",
        "sm_clock_mhz",
        "mem_clock_mhz",
        "throttle_reasons",
        "pcie_rx_kbps",
        "pcie_tx_kbps",
        "process_mem_bytes",
        "mem_used_bytes",
    ):
        v = getattr(s, name)
        assert v is None or v >= 0, f"{name}={v}"
    assert s.temperature_c is None or -40 <= s.temperature_c <= 150
    if s.mem_used_bytes is not None and s.mem_total_bytes is not None:
        assert s.mem_used_bytes <= s.mem_total_bytes
    if s.process_mem_bytes is not None and s.mem_total_bytes is not None:
        assert s.process_mem_bytes <= s.mem_total_bytes
    if s.host_mem_used_bytes is not None:
        assert s.host_mem_total_bytes is not None and 0 <= s.host_mem_used_bytes <= s.host_mem_total_bytes
    assert s.rss_bytes is None or s.rss_bytes > 0
    gpu_only = ("gpu_util_pct", "mem_used_bytes", "power_mw", "energy_mj", "sm_clock_mhz")
    host_only = ("cpu_util_pct", "process_cpu_pct", "rss_bytes", "host_mem_used_bytes")
    other = host_only if s.kind == "gpu" else gpu_only
    assert all(getattr(s, f) is None for f in other), f"{s.kind} sample fills the other kind's fields"


def test_devices_are_stable(backend: Backend) -> None:
    devs = backend.devices()
    assert devs, "a backend samples at least one device"
    assert backend.devices() == devs
    assert len({d.index for d in devs}) == len(devs)
    assert all(isinstance(d, DeviceInfo) and d.kind in ("gpu", "host") and d.name for d in devs)
    backend.sample()
    assert backend.devices() == devs


def test_sample_one_record_per_device_in_order(backend: Backend) -> None:
    devs = backend.devices()
    before = time.time_ns()
    readings = backend.sample()
    assert [(s.device_index, s.kind) for s in readings] == [(d.index, d.kind) for d in devs]
    assert all(isinstance(s, DeviceSample) for s in readings)
    assert all(abs(s.t_ns - before) < 60 * 10**9 for s in readings), "t_ns is wall-clock ns near now"


def test_t_ns_increases_and_values_are_plausible(backend: Backend) -> None:
    last: dict[int, int] = {}
    for _ in range(12):
        for s in backend.sample():
            _check_plausible(s)
            assert s.t_ns > last.get(s.device_index, 0)
            last[s.device_index] = s.t_ns


def test_energy_counter_never_decreases(backend: Backend) -> None:
    last: dict[int, int] = {}
    for _ in range(40):  # longer than the host recording, so replay loops
        for s in backend.sample():
            if s.energy_mj is not None:
                assert s.energy_mj >= last.get(s.device_index, 0)
                last[s.device_index] = s.energy_mj


def test_supported_metrics_is_a_bool_per_field(backend: Backend) -> None:
    metrics = backend.supported_metrics()
    assert set(metrics) == set(SAMPLE_FIELDS) - {"t_ns", "device_index", "kind"}
    assert all(isinstance(v, bool) for v in metrics.values())
    assert any(metrics.values())


def test_sample_is_thread_safe(backend: Backend) -> None:
    n_dev = len(backend.devices())
    results: list[list[DeviceSample]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def worker() -> None:
        try:
            barrier.wait()
            for _ in range(25):
                results.append(backend.sample())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert len(results) == 50 and all(len(r) == n_dev for r in results)
    for index in {d.index for d in backend.devices()}:
        stamps = [s.t_ns for r in results for s in r if s.device_index == index]
        assert len(set(stamps)) == len(stamps), "each reading of a device has its own t_ns"


def test_close_is_idempotent_and_stops_sampling(backend: Backend) -> None:
    devs = backend.devices()
    backend.close()
    backend.close()
    assert backend.sample() == []
    assert backend.devices() == devs


# --------------------------------------------------------------------------- NVML through the fake


def test_fake_nvml_translation(fake_nvml: types.ModuleType) -> None:
    b = NvmlBackend()
    d0, d1 = b.devices()
    assert d0 == DeviceInfo(
        0, "gpu", "NVIDIA H100 80GB HBM3", 80 * GiB, "GPU-00000000-fake", 700_000, 1980, 2619
    )
    assert (d1.index, d1.name, d1.power_limit_mw) == (1, "Tesla T4", 70_000)
    s0, s1 = b.sample()
    assert (s0.gpu_util_pct, s0.mem_busy_pct, s0.mem_used_bytes, s0.mem_total_bytes) == (
        87.0,
        40.0,
        20 * GiB,
        80 * GiB,
    )
    assert (s0.power_mw, s0.sm_clock_mhz, s0.mem_clock_mhz, s0.temperature_c) == (250_000, 1980, 2619, 65)
    assert s0.energy_mj is not None and s0.energy_mj > 1_000_000
    assert (s0.pcie_rx_kbps, s0.pcie_tx_kbps, s0.process_mem_bytes) == (1000, 2000, 2 * GiB)
    assert libnvml.throttle_reason_names(s0.throttle_reasons) == ["sw_power_cap"]
    # device 1: unsupported / no permission -> None, never an exception
    assert (s1.power_mw, s1.energy_mj, s1.pcie_rx_kbps, s1.pcie_tx_kbps, s1.process_mem_bytes) == (None,) * 5
    assert s1.gpu_util_pct == 3.0 and s1.temperature_c == 40
    assert libnvml.throttle_reason_names(s1.throttle_reasons) == ["gpu_idle"]  # ThrottleReasons fallback
    assert b.supported_metrics()["power_mw"] is True  # judged on the first device


def test_fake_nvml_caches_handles_and_rate_limits_pcie(fake_nvml: types.ModuleType) -> None:
    b = NvmlBackend(pcie_interval_s=3600)
    for _ in range(5):
        b.sample()
    calls = fake_nvml.calls  # type: ignore[attr-defined]
    assert calls["nvmlInit"] == 1
    assert calls["nvmlDeviceGetHandleByIndex"] == 2
    assert calls["nvmlDeviceGetPcieThroughput"] == 4  # rx + tx, once per device
    assert calls["nvmlDeviceGetPowerUsage"] == 10
    off = NvmlBackend(pcie_interval_s=None)
    assert off.sample()[0].pcie_rx_kbps is None
    assert calls["nvmlDeviceGetPcieThroughput"] == 4


def test_fake_nvml_device_subset(fake_nvml: types.ModuleType) -> None:
    b = NvmlBackend(device_indices=[1])
    assert [d.index for d in b.devices()] == [1]
    assert [s.device_index for s in b.sample()] == [1]
    for bad in ([2], [0, 0], []):
        with pytest.raises(ValueError, match="bad NVML device indices"):
            NvmlBackend(device_indices=bad)


def test_query_turns_nvml_errors_into_none(fake_nvml: types.ModuleType) -> None:
    h = libnvml.device_handle(1)
    assert libnvml.query("nvmlDeviceGetPowerUsage", h) is None  # NotSupported
    assert libnvml.query("nvmlDeviceGetPcieThroughput", h, 0) is None  # NoPermission
    assert libnvml.query("nvmlDeviceGetCurrentClocksEventReasons", h) is None  # FunctionNotFound
    assert libnvml.query("nvmlDeviceGetSomethingFromTheFuture", h) is None  # not in this pynvml
    assert libnvml.query("nvmlDeviceGetPowerUsage", libnvml.device_handle(0)) == 250_000
    with pytest.raises(KeyError):  # a bug (here: an unknown clock id) is not hidden
        libnvml.query("nvmlDeviceGetClockInfo", h, 99)
    assert libnvml.driver_version() == "550.54.15"
    assert libnvml.nvml_version() == "12.550.54.15"


@pytest.mark.parametrize(
    ("error", "n_devices", "reason"),
    [
        (real_pynvml.NVMLError_LibraryNotFound(), 1, "library not found"),
        (real_pynvml.NVMLError_DriverNotLoaded(), 1, "driver not loaded"),
        (real_pynvml.NVMLError_NoPermission(), 1, "no permission"),
        (real_pynvml.NVMLError_Unknown(), 1, "NVML failed to initialise"),
        (None, 0, "no GPU"),
    ],
)
def test_nvml_unavailable_reasons(
    monkeypatch: pytest.MonkeyPatch, error: BaseException | None, n_devices: int, reason: str
) -> None:
    fake = make_fake_pynvml(n_devices=n_devices, init_error=error)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    libnvml.reset()
    with pytest.raises(libnvml.NvmlUnavailable, match=reason):
        NvmlBackend()
    assert reason in (libnvml.unavailable_reason() or "")
    assert "\n" not in (libnvml.unavailable_reason() or "")
    assert fake.calls["nvmlInit"] == 1, "a failed init is remembered, not retried"  # type: ignore[attr-defined]
    assert libnvml.query("nvmlDeviceGetCount") is None
    if n_devices == 0:
        assert fake.state["init"] == 0, "NVML is shut down again when it sees no GPU"  # type: ignore[attr-defined]


def test_pynvml_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    libnvml.reset()
    assert not libnvml.is_available()
    assert "pip install nvidia-ml-py" in (libnvml.unavailable_reason() or "")


def test_throttle_reason_names_match_pynvml() -> None:
    assert libnvml.throttle_reason_names(None) == []
    assert libnvml.throttle_reason_names(0) == []
    mask = real_pynvml.nvmlClocksEventReasonSwPowerCap | real_pynvml.nvmlClocksEventReasonHwThermalSlowdown
    assert libnvml.throttle_reason_names(mask) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert libnvml.throttle_reason_names(1 << 40) == ["unknown_0x10000000000"]
    pairs = {
        "GpuIdle": "gpu_idle",
        "ApplicationsClocksSetting": "applications_clocks_setting",
        "SwPowerCap": "sw_power_cap",
        "HwSlowdown": "hw_slowdown",
        "SyncBoost": "sync_boost",
        "SwThermalSlowdown": "sw_thermal_slowdown",
        "HwThermalSlowdown": "hw_thermal_slowdown",
        "HwPowerBrakeSlowdown": "hw_power_brake",
        "DisplayClockSetting": "display_clock_setting",
    }
    for nvml_name, ours in pairs.items():
        assert libnvml.THROTTLE_REASONS[getattr(real_pynvml, "nvmlClocksEventReason" + nvml_name)] == ours


def test_importing_backends_is_light() -> None:
    code = (
        "import sys, profilers.runtime.backends, profilers.runtime.backends.libnvml, "
        "profilers.runtime.backends.nvml, profilers.runtime.backends.replay,"
        " profilers.runtime.backends.host\n"
        "heavy = [m for m in ('pynvml', 'torch', 'nvtx') if m in sys.modules]\n"
        "assert not heavy, heavy"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)}
    )


# --------------------------------------------------------------------------- host


def test_host_matches_psutil_and_is_cheap() -> None:
    b = HostBackend()
    (d,) = b.devices()
    assert (d.index, d.kind) == (0, "host") and d.mem_total_bytes == psutil.virtual_memory().total
    (s,) = b.sample()
    assert s.host_mem_total_bytes == psutil.virtual_memory().total
    assert (
        s.rss_bytes is not None and abs(s.rss_bytes - psutil.Process().memory_info().rss) < 0.5 * s.rss_bytes
    )
    n = 200
    start = time.perf_counter()
    for _ in range(n):
        b.sample()
    per_sample = (time.perf_counter() - start) / n
    assert per_sample < 2e-3, f"host sample() took {per_sample * 1e6:.0f} µs"  # ~40 µs here; loose for CI


def test_host_process_cpu_sees_a_busy_thread() -> None:
    b = HostBackend()
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:
        pass
    (s,) = b.sample()
    assert s.process_cpu_pct is not None and s.process_cpu_pct > 20


_BURN = (
    "import time\nend = time.perf_counter() + {s}\nwhile time.perf_counter() < end: pass\n"
    "print(time.process_time())"
)


def test_host_process_cpu_counts_its_child_processes() -> None:
    """A child process spinning (a DataLoader worker's stand-in) is the training's CPU, not another
    process's: the readings' process CPU, integrated over the child's life, is this process's CPU
    plus the CPU the child reports of itself. The child gets less CPU beside other work, but what it
    reports is what it got; the margin is the child's last reading interval (at most 0.1 s of its
    CPU) and the 10 ms ticks of /proc."""
    b = HostBackend()
    b.sample()
    own0, last = time.process_time(), time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", _BURN.format(s=1.0)], stdout=subprocess.PIPE, text=True)
    counted_s = 0.0
    while child.poll() is None:
        time.sleep(0.1)
        (s,) = b.sample()
        now = time.monotonic()
        counted_s += (s.process_cpu_pct or 0.0) / 100 * (now - last)
        last = now
    out, _ = child.communicate()
    child_s, own_s = float(out), time.process_time() - own0
    assert child_s > 0.3  # it ran
    assert own_s + child_s - 0.15 <= counted_s <= own_s + child_s + 0.05, (counted_s, own_s, child_s)


# --------------------------------------------------------------------------- replay


def _synthetic(path: Path) -> tuple[list[DeviceInfo], list[DeviceSample]]:
    devices = [DeviceInfo(0, "gpu", "A"), DeviceInfo(1, "gpu", "B")]
    samples = []
    for i in range(3):  # 100 ms apart; device 0 gains 5 J per period, device 1 has no energy counter
        t = 1_000_000_000 + i * 100_000_000
        samples.append(DeviceSample(t, 0, "gpu", gpu_util_pct=10.0 * i, energy_mj=50_000 + 5_000 * i))
        samples.append(DeviceSample(t + 1000, 1, "gpu", gpu_util_pct=50.0))
    write_recording(path, "nvml", devices, samples, meta={"hz": 10})
    return devices, samples


def test_replay_loops_with_rebased_time_and_monotonic_energy(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl.gz"
    devices, _ = _synthetic(path)
    b = ReplayBackend(path)
    assert b.devices() == devices and b.backend_name == "nvml" and b.meta == {"hz": 10}
    start = time.time_ns()
    got = [b.sample() for _ in range(7)]
    d0 = [r[0] for r in got]
    assert [s.gpu_util_pct for s in d0] == [0.0, 10.0, 20.0] * 2 + [0.0]
    # loop length = recorded span (200 ms) + one period (100 ms); energy per loop likewise 10 J + 5 J
    t_first = d0[0].t_ns
    assert start <= t_first <= time.time_ns()
    assert [s.t_ns - t_first for s in d0] == [k * 100_000_000 for k in range(7)]
    assert [s.energy_mj for s in d0] == [50_000 + 5_000 * k for k in range(7)]
    assert all(r[1].energy_mj is None and r[1].t_ns == r[0].t_ns + 1000 for r in got)


def test_replay_plays_the_real_host_recording_faithfully() -> None:
    with gzip.open(HOST_RECORDING, "rt") as f:
        lines = [json.loads(line) for line in f]
    header, recorded = lines[0], lines[1:]
    assert header["format"] == "autotune-recording" and header["backend"] == "host"
    assert len(recorded) >= 20, "a few seconds at 10 Hz"
    b = ReplayBackend(HOST_RECORDING)
    played = [b.sample()[0] for _ in range(len(recorded))]
    for raw, s in zip(recorded, played, strict=True):
        got = s.to_dict()
        assert {k: v for k, v in got.items() if k != "t_ns"} == {k: v for k, v in raw.items() if k != "t_ns"}
    assert [s.t_ns - played[0].t_ns for s in played] == [r["t_ns"] - recorded[0]["t_ns"] for r in recorded]


def test_record_then_replay_round_trip(tmp_path: Path) -> None:
    path = record(HostBackend(), seconds=0.3, hz=20, path=tmp_path / "host.jsonl.gz", meta={"note": "test"})
    b = ReplayBackend(path)
    assert b.backend_name == "host" and b.meta["note"] == "test" and b.meta["hz"] == 20
    with gzip.open(path, "rt") as f:
        assert sum(1 for _ in f) == 1 + 6
    assert b.sample()[0].kind == "host"


def _gz(text: str) -> bytes:
    """``text`` gzipped, the same bytes every time: they name the parametrized tests below, and
    gzip's header holds the time by default, so two xdist workers collecting a second apart
    collected tests of different names (pytest-xdist refuses that: seen in a CI reproduction)."""
    return gzip.compress(text.encode(), mtime=0)


GOOD_HEADER = json.dumps(
    {
        "format": "autotune-recording",
        "version": 1,
        "backend": "host",
        "devices": [{"index": 0, "kind": "host", "name": "cpu"}],
        "meta": {},
    }
)
GOOD_LINE = json.dumps({"t_ns": 1, "device_index": 0, "kind": "host", "cpu_util_pct": 5.0})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty replay recording"),
        (b"\x1f\x8b\x08\x00garbage", "corrupt replay recording"),
        (_gz(GOOD_HEADER + "\n" + GOOD_LINE)[:-12], "corrupt replay recording"),  # truncated gzip
        (_gz("hello\n"), "not an autotune recording"),
        (_gz('{"format": "other"}\n'), "not an autotune recording"),
        (
            _gz(GOOD_HEADER.replace('"version": 1', '"version": 99') + "\n" + GOOD_LINE),
            "unsupported recording",
        ),
        (_gz(GOOD_HEADER + "\n" + GOOD_LINE + "\n{broken"), "line 3"),
        (_gz(GOOD_HEADER + "\n" + GOOD_LINE.replace('"t_ns": 1', '"t_ns": "x"')), "line 2"),
        (_gz(GOOD_HEADER), "no samples"),
        (_gz(GOOD_HEADER + "\n" + GOOD_LINE.replace('"device_index": 0', '"device_index": 7')), "device 7"),
    ],
)
def test_bad_recording_gives_one_line_error_naming_the_file(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as info:
        ReplayBackend(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_missing_recording(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"replay recording not found: .*nope\.jsonl\.gz"):
        ReplayBackend(tmp_path / "nope.jsonl.gz")


def test_plain_jsonl_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_text(GOOD_HEADER + "\n" + GOOD_LINE + "\n")
    assert ReplayBackend(path).sample()[0].cpu_util_pct == 5.0


# --------------------------------------------------------------------------- get_backend


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("AUTOTUNE_BACKEND", raising=False)
    return monkeypatch


def test_get_backend_explicit_names(no_env: pytest.MonkeyPatch) -> None:
    host = get_backend("host")
    assert isinstance(host, HostBackend) and get_backend("host") is host, "cached"
    replay = get_backend(f"replay:{HOST_RECORDING}")
    assert isinstance(replay, ReplayBackend) and replay.path == HOST_RECORDING
    for bad in ("gpu", "replay:", "nvml:x", "host:1"):
        with pytest.raises(ValueError, match=r"backend spec|unknown backend"):
            get_backend(bad)


def test_get_backend_env_var_and_explicit_name_wins(no_env: pytest.MonkeyPatch) -> None:
    no_env.setenv("AUTOTUNE_BACKEND", f"replay:{HOST_RECORDING}")
    assert isinstance(get_backend(), ReplayBackend)
    assert isinstance(get_backend("host"), HostBackend)
    assert describe_unavailable() is None, "NVML was never tried"


def test_get_backend_picks_nvml_when_it_works(
    no_env: pytest.MonkeyPatch, fake_nvml: types.ModuleType
) -> None:
    b = get_backend()
    assert isinstance(b, NvmlBackend) and get_backend() is b
    assert describe_unavailable() is None
    assert isinstance(get_backend("nvml:1"), NvmlBackend)


def test_nvml_missing_falls_back_to_host_and_says_why(no_env: pytest.MonkeyPatch) -> None:
    no_env.setitem(
        sys.modules, "pynvml", make_fake_pynvml(init_error=real_pynvml.NVMLError_LibraryNotFound())
    )
    assert describe_unavailable() is not None  # runs the automatic choice itself
    b = get_backend()
    assert isinstance(b, HostBackend)
    reason = describe_unavailable()
    assert reason is not None and "library not found" in reason
    with pytest.raises(libnvml.NvmlUnavailable, match="library not found"):
        get_backend("nvml")  # an explicit request does not fall back


def test_reset_backend_closes_and_forgets(no_env: pytest.MonkeyPatch) -> None:
    from profilers.runtime.backends import reset_backend

    b = get_backend("host")
    reset_backend()
    assert b.sample() == []
    assert get_backend("host") is not b


def test_record_script_makes_a_replayable_file(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "rec.jsonl.gz"
    load = [sys.executable, "-c", "import time; time.sleep(30)"]  # stopped by the script at the end
    cmd = [sys.executable, "scripts/record_backend.py", "--backend", "host", "--seconds", "0.3", "--hz", "10"]
    done = subprocess.run(
        [*cmd, "--out", str(out), "--", *load], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout
    b = ReplayBackend(out)
    assert b.backend_name == "host" and b.meta["load"].endswith("time.sleep(30)'")
    assert len(b._rounds) == 3
