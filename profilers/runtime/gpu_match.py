"""Which NVML devices are the job's GPUs: the one place CUDA's numbering meets NVML's.

NVML enumerates every GPU of the machine in PCI bus order and ignores ``CUDA_VISIBLE_DEVICES``;
CUDA numbers only the visible GPUs, fastest first unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (GPUs of
one model tie and keep PCI order). So CUDA device 0 under ``CUDA_VISIBLE_DEVICES=3`` is NVML GPU 3,
and an 8-GPU node running a 1-GPU job has 7 GPUs that are not the job's. A device's UUID is the
same on both sides (NVML's text carries a ``GPU-`` prefix, torch's does not): matching on it is
exact. Before CUDA is initialized the environment already says a lot (:func:`visible_nvml_indexes`);
once the model is on a GPU, :func:`cuda_uuids` and :func:`match_uuids` settle it.

Pure except :func:`cuda_uuids` (torch, imported there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from profilers.contract.records import DeviceInfo
from profilers.runtime.launch_env import LaunchEnv

_PREFIXES = ("gpu-", "mig-")


def normalize_uuid(text: str) -> str:
    """A UUID as compared here: lower case, without NVML's ``GPU-``/``MIG-`` prefix."""
    lower = text.strip().lower()
    for prefix in _PREFIXES:
        if lower.startswith(prefix):
            return lower[len(prefix) :]
    return lower


def match_uuids(job_uuids: Sequence[str], nvml: Sequence[DeviceInfo]) -> list[int] | None:
    """NVML indexes of the GPUs with ``job_uuids``, in the job's order; None if one has no match.

    (MIG slices have UUIDs of their own, which NVML lists only under their parent GPU.)
    """
    by_uuid = {normalize_uuid(d.uuid): d.index for d in nvml if d.kind == "gpu" and d.uuid}
    out = []
    for uuid in job_uuids:
        index = by_uuid.get(normalize_uuid(uuid))
        if index is None:
            return None
        out.append(index)
    return out


def visible_nvml_indexes(env: Mapping[str, str], nvml: Sequence[DeviceInfo]) -> list[int] | None:
    """The NVML indexes ``CUDA_VISIBLE_DEVICES`` lets CUDA see, in CUDA's order; None when unsure.

    Unset: None (every GPU is visible; which ones the job uses is known later). Integers are CUDA's
    own numbering: NVML's when ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or when every GPU is the same model
    (fastest-first then keeps PCI order); on a mixed node they wait for the UUIDs. ``GPU-``
    UUIDs (or unique prefixes of them, as CUDA accepts) match NVML's. As CUDA does, the list ends at
    the first entry that names no device. MIG entries: None. Under torchrun with fewer visible GPUs
    than local ranks (a launcher that gives each rank its own GPU), this process cannot name the
    other ranks' GPUs: None (every GPU stays sampled).
    """
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    gpus = [d for d in nvml if d.kind == "gpu"]
    tokens = [t.strip() for t in value.split(",")]
    if tokens == [""]:
        return []
    if any(t.lower().startswith("mig-") for t in tokens):
        return None
    pci_order = env.get("CUDA_DEVICE_ORDER", "").strip().upper() == "PCI_BUS_ID"
    same_model = len({d.name for d in gpus}) <= 1
    known = {d.index for d in gpus}
    out: list[int] = []
    for token in tokens:
        index: int | None
        if token.lstrip("-").isdigit():
            if not (pci_order or same_model):
                return None
            index = int(token) if int(token) in known else None
        else:
            wanted = normalize_uuid(token)
            hits = [d.index for d in gpus if d.uuid and normalize_uuid(d.uuid).startswith(wanted)]
            index = hits[0] if len(hits) == 1 and wanted else None
        if index is None or index in out:
            break
        out.append(index)
    if out and LaunchEnv.read(env).local_world_size > len(out):
        return None
    return out


def cuda_uuids(cuda_indexes: Sequence[int]) -> list[str]:
    """The UUIDs of CUDA devices ``cuda_indexes`` (CUDA must be initialized, or is, here)."""
    import torch

    return [str(torch.cuda.get_device_properties(i).uuid) for i in cuda_indexes]


def job_cuda_indexes(model_device: int, local_world_size: int, device_count: int) -> list[int] | None:
    """The CUDA devices of this node's processes of the job, or None when they cannot be named.

    One process: its model's GPU. Several (torchrun): the first ``local_world_size`` devices, the
    usual ``cuda:LOCAL_RANK`` binding (the other ranks' own choices are not visible from here); None
    when this process sees fewer GPUs than the node has ranks (each rank given its own GPU).
    """
    if local_world_size <= 1:
        return [model_device]
    if local_world_size > device_count:
        return None
    return list(range(local_world_size))


__all__ = ["cuda_uuids", "job_cuda_indexes", "match_uuids", "normalize_uuid", "visible_nvml_indexes"]
