"""The rules table: one row per threshold, each with its source, and every rule uses only its rows."""

import re
from pathlib import Path

import pytest

from autotune.advice import advise as advise_mod
from autotune.advice.records import Threshold
from autotune.advice.rules_trace import TRACE_RULES, TRACE_THRESHOLDS
from autotune.advice.thresholds import BY_KEY, THRESHOLDS, limit, severity_for, thresholds_for

ADVICE = Path(__file__).resolve().parents[3] / "autotune" / "advice"


def test_every_threshold_says_where_its_figure_comes_from():
    assert THRESHOLDS and all(isinstance(t, Threshold) for t in THRESHOLDS)
    for key, t in BY_KEY.items():
        assert key.split(".")[0] == t.rule
        assert t.comparison in (">", "<")
        assert t.unit and t.metric and t.title
        public = ("torch-tb-profiler", "SageMaker", "Holistic Trace Analysis")
        assert t.source.startswith("this project") or any(p in t.source for p in public), key


def test_the_public_figures_are_the_published_ones():
    # torch-tb-profiler data.py: dataloader_ratio > 0.05, communication_ratio > 0.1,
    # gpu_utilization < 0.5, peak_mem > total_mem * 0.9
    assert limit("input_bound.data_share") == 5.0
    assert limit("comm_bound.share") == 10.0
    assert limit("host_bound.gpu_busy") == 50.0
    assert limit("memory_high.peak") == 90.0
    # SageMaker Debugger rules.py defaults
    assert limit("low_gpu_util.p95") == 70.0
    assert limit("gpu_util_swings.p5") == 10.0
    assert limit("step_outliers.sigma") == 3.0
    assert limit("memory_growth.growth") == 5.0


def test_every_rule_has_thresholds_and_every_threshold_a_rule():
    ids = {r.id for r in advise_mod.RULES} | {rule for rule, _ in TRACE_RULES}
    assert {t.rule for t in THRESHOLDS} == ids
    assert set(TRACE_THRESHOLDS) <= set(BY_KEY)
    assert {BY_KEY[k].rule for k in TRACE_THRESHOLDS} == {rule for rule, _ in TRACE_RULES}
    for rule_id in ids:
        assert thresholds_for(rule_id)


def test_rules_look_up_only_keys_of_the_table_and_use_every_key():
    source = "".join(p.read_text() for p in ADVICE.glob("*.py"))
    used = set(re.findall(r'limit\("([a-z_0-9]+\.[a-z_0-9]+)"\)', source))
    used |= set(re.findall(r"limit\('([a-z_0-9]+\.[a-z_0-9]+)'\)", source))
    assert used <= set(BY_KEY), used - set(BY_KEY)
    assert used == set(BY_KEY), set(BY_KEY) - used


def test_unknown_key_and_severity_cutoffs():
    with pytest.raises(KeyError):
        limit("no_such.rule")
    assert severity_for(None) == "low"
    assert severity_for(1.05) == "low"
    assert severity_for(1.1) == "medium"
    assert severity_for(1.3) == "high"
