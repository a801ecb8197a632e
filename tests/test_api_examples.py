"""Every example in the public API's docstrings runs and prints what it says (doctest)."""

import doctest
import importlib

import pytest

#: The modules whose docstrings hold examples: the public API and the contract's records.
MODULES = (
    "autotune.api",
    "autotune.knobs",
    "autotune.knob_values",
    "autotune.search.space",
    "autotune.search.records",
    "autotune.search.study",
    "autotune.tuner.config",
    "autotune.tuner.trial_facts",
    "profilers.contract.fields",
    "profilers.runtime.launch_env",
    "profilers.contract.json_checks",
    "profilers.contract.lenient",
    "profilers.contract.plan_doc",
    "profilers.contract.run_meta",
    "profilers.contract.trace_report",
    "profilers.contract.study.trial_view",
)


@pytest.mark.parametrize("name", MODULES)
def test_the_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes writes here
    for var in ("BATCH_SIZE", "MICRO_BATCH", "GRAD_ACCUM", "GLOBAL_BATCH"):
        monkeypatch.delenv(f"AUTOTUNE_PARAM_{var}", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0
