"""Shared fixtures and hooks for the whole test suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

REQUIRE_GPU_ENV = "AUTOTUNE_REQUIRE_GPU"
_NO_GPU = pytest.StashKey[str]()


@pytest.fixture(autouse=True)
def _fresh_backend() -> Iterator[None]:
    """Every test starts and ends with no cached sampling backend and NVML shut down."""
    from profilers.runtime.backends import reset_backend

    reset_backend()
    yield
    reset_backend()


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with the most slow tests first; `@pytest.mark.gpu` tests skipped without CUDA.

    The two xdist workers take whole modules (``--dist loadfile``) in this order
    (``--no-loadscope-reorder``): starting with the modules that start processes and ending with
    the quick ones keeps one worker from running a minute-long module alone at the end. Within a
    module the order is kept. A GPU test fails instead of skipping when AUTOTUNE_REQUIRE_GPU=1.
    """
    _heaviest_modules_first(items)
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items or _cuda_available():
        return
    reason = "needs a CUDA device (torch.cuda.is_available() is False)"
    for item in gpu_items:
        if os.environ.get(REQUIRE_GPU_ENV) == "1":
            item.stash[_NO_GPU] = f"{REQUIRE_GPU_ENV}=1 but this test {reason}"
        else:
            item.add_marker(pytest.mark.skip(reason=f"{reason}; set {REQUIRE_GPU_ENV}=1 to fail instead"))


def _heaviest_modules_first(items: list[pytest.Item]) -> None:
    slow: dict[str, int] = {}
    count: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        count[module] = count.get(module, 0) + 1
        slow[module] = slow.get(module, 0) + (item.get_closest_marker("slow") is not None)
    first_seen = {item.nodeid.split("::", 1)[0]: i for i, item in reversed(list(enumerate(items)))}
    items.sort(key=lambda it: (-slow[m := it.nodeid.split("::", 1)[0]], -count[m], first_seen[m]))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail the GPU tests that pytest_collection_modifyitems marked as required but impossible."""
    message = item.stash.get(_NO_GPU, None)
    if message is not None:
        pytest.fail(message, pytrace=False)
