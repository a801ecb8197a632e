"""Trials as Ray tasks: ``autotune tune --executor ray [--ray-address ADDR]``.

Each trial is one Ray task that asks for what the trial needs on one node: a GPU per rank
(``num_gpus``, or a custom resource per rank with ``--ray-resource NAME``) and its CPUs. Ray places
it on any node of the cluster and sets its ``CUDA_VISIBLE_DEVICES``; the task runs the trial there
exactly as the local executor does (:func:`autotune.tuner.trials.run_trial`: the profiler, torchrun
for several ranks, the time limit that kills the trial's process group on that node). Its run
directory comes back to the study one of two ways:

- ``shipped`` (the default): the task runs the trial in a temporary directory on its node and
  returns it as a gzipped tar, unpacked into the study's ``trials/trial-NNNN``; no shared storage.
- ``shared`` (``--ray-storage shared``): the task writes straight to the study's directory, which
  every node must see at the same path (a network file system).

A task whose node is lost, or which Ray cannot run, fails that trial only ("crashed", with Ray's
error). Tasks belong to the tuner: a tuner killed mid-study takes its running tasks with it (Ray
fate-shares a task with its owner), and ``--resume`` runs those trials again under their ids.
``ray`` is an optional dependency (``pip install 'gpu-autotune[ray]'``), imported here only.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import tarfile
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from autotune.search.space import Space, Value
from autotune.tuner.running import Placement, TrialRequest
from autotune.tuner.trials import TrialOutcome, TrialSettings, run_trial
from profilers.contract.schema import TrialStatus

#: Seconds a task may take beyond the trial's own time limit (start-up on a cold node, shipping).
GRACE_S = 120.0
STORAGES = ("shipped", "shared")
#: A shipped trial's temporary directory on its node: ``autotune-trial-<task's pid>-<random>``.
TRIAL_TMP_PREFIX = "autotune-trial-"
#: Seconds to wait for a cluster's head node to accept a connection.
CONNECT_TIMEOUT_S = 5.0


def _on_node(
    settings: TrialSettings,
    space: Space | None,
    params: dict[str, Value],
    shared_dir: str | None,
    stop_below: float | None,
    tuner_cwd: str,
) -> dict[str, Any]:
    """The Ray task: run the trial on this node; its outcome, where it ran, and its directory.

    In the tuner's directory when this node has it (the same checkout, a shared file system), so
    a script named relative to it is found; else in the task's own.
    """
    devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = {"node": socket.gethostname(), "devices": f"cuda:{devices}" if devices else None}
    cwd = tuner_cwd if os.path.isdir(tuner_cwd) else None
    if shared_dir is not None:
        outcome = run_trial(settings, space, params, Path(shared_dir), stop_below, cwd=cwd)
        return {"outcome": outcome, "where": where, "archive": None}
    remove_orphaned_trial_dirs(Path(tempfile.gettempdir()))
    with tempfile.TemporaryDirectory(prefix=f"{TRIAL_TMP_PREFIX}{os.getpid()}-") as tmp:
        outcome = run_trial(settings, space, params, Path(tmp) / "trial", stop_below, cwd=cwd)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            tar.add(Path(tmp) / "trial", arcname=".")
        return {"outcome": outcome, "where": where, "archive": buffer.getvalue()}


def remove_orphaned_trial_dirs(root: Path) -> list[Path]:
    """Remove the shipped trials' directories in ``root`` whose task's process is gone; those removed.

    A task killed with its tuner (``kill -9``, fate-sharing) never runs its own clean-up, and its
    trial's run directory would stay in the node's temporary directory; the next task on that node
    removes it. A directory of a live process, or not named by a pid, is left alone.
    """
    removed = []
    for path in root.glob(f"{TRIAL_TMP_PREFIX}*-*"):
        pid = path.name[len(TRIAL_TMP_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and path.is_dir() and not _process_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class RayExecutor:
    """Runs trials as Ray tasks on a cluster (``address``; None: a local cluster of this machine)."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        resource: str | None = None,
        storage: str = "shipped",
        cpus_per_trial: float = 1.0,
        device_kind: str = "cpu",
    ) -> None:
        if storage not in STORAGES:
            raise ValueError(f"--ray-storage must be one of {', '.join(STORAGES)}, got {storage!r}")
        try:
            import ray
        except ImportError:
            raise ValueError("--executor ray needs Ray: pip install 'gpu-autotune[ray]'") from None
        self._ray = ray
        if address is not None and address not in ("auto", "local"):
            _check_reachable(address)
        if not ray.is_initialized():
            try:
                ray.init(
                    address=address, include_dashboard=False, log_to_driver=False, configure_logging=False
                )
            except Exception as exc:  # no cluster at the address, a version mismatch...
                where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
                raise ValueError(
                    f"--executor ray: cannot reach {where}: {type(exc).__name__}: {exc}"
                ) from None
        self.resource = resource
        self.storage = storage
        self.cpus_per_trial = cpus_per_trial
        self.device_kind = device_kind
        self._task = ray.remote(max_retries=0)(_on_node)
        self._refs: dict[int, Any] = {}
        self._lock = threading.Lock()

    def capacity(self) -> int:
        """Trials of one rank the cluster can run at once: its GPUs (or the resource), else its CPUs."""
        total = self._ray.cluster_resources()
        if self.resource is not None:
            return max(1, int(total.get(self.resource, 1)))
        if self.device_kind == "cuda":
            return max(1, int(total.get("GPU", 1)))
        return max(1, int(total.get("CPU", 1) // self.cpus_per_trial))

    def cpus_total(self) -> int:
        """The cluster's CPUs (Ray's ``CPU`` resource over every node)."""
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def _options(self, ranks: int) -> dict[str, Any]:
        """What one trial of ``ranks`` ranks asks Ray for."""
        options: dict[str, Any] = {"num_cpus": self.cpus_per_trial}
        if self.resource is not None:
            options["resources"] = {self.resource: ranks}
        elif self.device_kind == "cuda":
            options["num_gpus"] = ranks
        return options

    def run(self, trial_id: int, ranks: int, request: TrialRequest) -> tuple[TrialOutcome, Placement]:
        """Run one trial as a task and wait for it; its outcome here, and where and when it ran."""
        ray = self._ray
        settings, run_dir = request.settings, request.run_dir
        shared = str(run_dir) if self.storage == "shared" else None
        started, started_at = time.monotonic(), time.time()
        task = self._task.options(**self._options(ranks))
        workdir = settings.workdir or os.getcwd()
        ref = task.remote(settings, request.space, request.params, shared, request.stop_below, workdir)
        with self._lock:
            self._refs[trial_id] = ref
        try:
            # a run, the wait for a calm machine and its second run (trials.run_trial)
            limit_s = 2 * settings.timeout_s + settings.calm_wait_s + GRACE_S
            result = ray.get(ref, timeout=limit_s)
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref, force=True)
            late = f"no result within {settings.timeout_s:g} s"
            return self._failed(TrialStatus.TIMEOUT, run_dir, started, late), self._placed(started_at)
        except ray.exceptions.RayError as exc:  # the node was lost, the task was cancelled or failed
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            reason = f"the Ray task failed: {type(exc).__name__}: {detail}"
            return self._failed(TrialStatus.CRASHED, run_dir, started, reason), self._placed(started_at)
        finally:
            with self._lock:
                self._refs.pop(trial_id, None)
        outcome: TrialOutcome = result["outcome"]
        where = dict(result["where"])
        if where.get("devices") is None and self.resource is not None:
            where["devices"] = f"{self.resource}:{ranks}"  # a custom resource sets no device variable
        if result["archive"] is not None:
            run_dir.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(result["archive"]), mode="r:gz") as tar:
                tar.extractall(run_dir, filter="data")
        placed = replace(self._placed(started_at), node=where.get("node"), devices=where.get("devices"))
        return _moved(outcome, run_dir), placed

    def _placed(self, started_at: float) -> Placement:
        """A run of this executor's that started at ``started_at`` and ends now (its node not known)."""
        return Placement(self.name, None, None, started_at, time.time())

    def cancel_all(self) -> None:
        """Cancel every running task (the study stops while they run)."""
        with self._lock:
            refs = list(self._refs.values())
        for ref in refs:
            self._ray.cancel(ref, force=True)

    @staticmethod
    def _failed(status: TrialStatus, run_dir: Path, started: float, error: str) -> TrialOutcome:
        run_dir.mkdir(parents=True, exist_ok=True)
        return TrialOutcome(status, run_dir, time.monotonic() - started, None, error)


def _check_reachable(address: str) -> None:
    """ValueError unless the head node at ``host:port`` (or ``ray://host:port``) accepts a connection.

    ``ray.init`` keeps retrying an address where nothing listens, for minutes: this says so at once.
    """
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--ray-address {address!r}: expected HOST:PORT (as ray start prints), or auto")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ValueError(f"--executor ray: no Ray cluster answers at {address} ({exc})") from None


def _moved(outcome: TrialOutcome, run_dir: Path) -> TrialOutcome:
    """The outcome with its run directory where the study keeps it."""
    return replace(outcome, run_dir=run_dir)
