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
    """`@pytest.mark.gpu` tests: skipped without CUDA, or failed if AUTOTUNE_REQUIRE_GPU=1."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items or _cuda_available():
        return
    reason = "needs a CUDA device (torch.cuda.is_available() is False)"
    for item in gpu_items:
        if os.environ.get(REQUIRE_GPU_ENV) == "1":
            item.stash[_NO_GPU] = f"{REQUIRE_GPU_ENV}=1 but this test {reason}"
        else:
            item.add_marker(pytest.mark.skip(reason=f"{reason}; set {REQUIRE_GPU_ENV}=1 to fail instead"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail the GPU tests that pytest_collection_modifyitems marked as required but impossible."""
    message = item.stash.get(_NO_GPU, None)
    if message is not None:
        pytest.fail(message, pytrace=False)
