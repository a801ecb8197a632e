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


_SHARED_SCOPES = ("module", "class", "package")


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a fixture made once for its module (or class): its tests go together."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d.scope in _SHARED_SCOPES for chain in defs for d in chain)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the tests that share a module's fixture; skip `@pytest.mark.gpu` tests without CUDA.

    The suite runs with ``--dist loadgroup``: every other test is its own unit of work, so the two
    workers stay busy to the end; a module whose tests share a fixture made once (a profiled run,
    a browser) keeps them on one worker, which makes it once. GPU tests are skipped without CUDA,
    or failed if AUTOTUNE_REQUIRE_GPU=1.
    """
    grouped = {
        item.nodeid.split("::")[0]
        for item in items
        if isinstance(item, pytest.Function) and _shares_a_fixture(item)
    }
    for item in items:
        if isinstance(item, pytest.Function) and item.nodeid.split("::")[0] in grouped:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
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
