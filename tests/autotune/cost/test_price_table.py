"""The built-in price table, name matching, price files and the choice of one price."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from autotune.cost.prices import (
    EXPLICIT_SOURCE,
    PriceEntry,
    PriceTable,
    PriceTableError,
    builtin_prices,
    choose_entry,
    load_prices,
    match_gpu,
    resolve_price,
    unavailable_reason,
)
from profilers.hardware.gpus import market_keys

#: GPUs the brief asks the built-in table to price.
REQUIRED_GPUS = (
    "H200",
    "H100-SXM",
    "H100-PCIe",
    "A100-80GB",
    "A100-40GB",
    "L40S",
    "L4",
    "A10G",
    "V100",
    "T4",
)


def write(tmp_path: Path, text: str, name: str = "prices.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---- the built-in table ------------------------------------------------------------------------


def test_builtin_table_loads_and_every_entry_is_dated_sourced_and_positive():
    table = load_prices()
    assert len(table.entries) >= 20
    for e in table.entries:
        assert e.usd_per_gpu_hour > 0, e
        assert date.fromisoformat(e.date) <= date.today(), e
        assert date.fromisoformat(e.date) >= date(2025, 1, 1), e  # nothing older than 2025
        assert e.source.startswith("https://"), e
        assert e.sku, e
        assert e.provider == e.provider.lower(), e
        assert e.origin.endswith("(built-in)")


def test_builtin_table_prices_every_common_training_gpu():
    table = builtin_prices()
    for gpu in REQUIRED_GPUS:
        assert table.for_gpu(gpu), f"no built-in price for {gpu}"


def test_builtin_table_has_one_entry_per_gpu_and_provider():
    keys = [(e.gpu, e.provider) for e in builtin_prices().entries]
    assert len(keys) == len(set(keys))


def test_multi_gpu_instance_prices_are_the_instance_price_divided_by_its_gpus():
    # p5.48xlarge: 55.04 USD an instance-hour for 8 H100s -> 55.04 / 8 = 6.88 USD a GPU-hour
    checked = 0
    for e in builtin_prices().entries:
        m = re.search(r"([\d.]+) USD per (?:instance|VM)-hour / (\d+)", e.sku)
        if m:
            assert e.usd_per_gpu_hour == pytest.approx(float(m[1]) / int(m[2])), e
            checked += 1
    assert checked >= 5
    aws_h100 = next(e for e in builtin_prices().for_gpu("H100-SXM") if e.provider == "aws")
    assert aws_h100.usd_per_gpu_hour == pytest.approx(6.88)


# ---- matching device names ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device_name", "gpu"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA GH200 480GB", "GH200"),  # not an H200
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),  # not an L40S, not an L4
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA A10", "A10"),  # not an A10G, not an A100
        ("Tesla V100-SXM2-16GB", "V100"),
        ("Tesla V100S-PCIE-32GB", "V100"),
        ("Tesla T4", "T4"),
    ],
)
def test_device_names_match_their_table_gpu(device_name, gpu):
    assert match_gpu(device_name, builtin_prices()) == gpu


@pytest.mark.parametrize(
    "device_name", ["AMD EPYC", "cpu (AMD EPYC)", "NVIDIA GeForce RTX 4090", "Tesla P100", ""]
)
def test_unknown_or_cpu_names_match_nothing(device_name):
    assert match_gpu(device_name, builtin_prices()) is None
    assert resolve_price(device_name) is None


def test_table_keys_match_themselves():
    keys = market_keys()
    assert len(keys) >= 14
    for key in keys:
        assert match_gpu(key) == key


def test_every_built_in_price_is_listed_under_a_key_of_the_gpu_table():
    assert set(builtin_prices().gpus()) <= set(market_keys())


# ---- choosing a price --------------------------------------------------------------------------


def entry(gpu: str, provider: str, usd: float) -> PriceEntry:
    return PriceEntry(gpu, provider, usd, "2026-11-01", "https://example.com", "sku")


def test_a_cpu_run_or_unknown_gpu_has_no_price_and_a_reason():
    assert resolve_price(None) is None
    assert "no GPU" in unavailable_reason(None)
    assert "NVIDIA GeForce RTX 4090" in unavailable_reason("NVIDIA GeForce RTX 4090")


def test_an_explicit_price_always_wins():
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090", None):
        quote = resolve_price(name, provider="aws", explicit=2.5)
        assert quote is not None
        assert quote.usd_per_gpu_hour == 2.5
        assert quote.provider == "user"
        assert quote.source == EXPLICIT_SOURCE
        assert quote.describe() == "--price-per-gpu-hour"
    assert resolve_price("NVIDIA H100 PCIe", explicit=1.0).gpu == "H100-PCIe"
    with pytest.raises(ValueError, match="positive"):
        resolve_price("NVIDIA H100 PCIe", explicit=0.0)


def test_an_asked_provider_is_used_or_gives_no_price():
    quote = resolve_price("NVIDIA H100 80GB HBM3", provider="AWS")
    assert quote is not None
    assert (quote.provider, quote.usd_per_gpu_hour, quote.date) == ("aws", 6.88, "2026-11-09")
    assert "p5.48xlarge" in quote.sku
    assert resolve_price("NVIDIA H100 PCIe", provider="aws") is None
    assert "lambda, runpod" in unavailable_reason("NVIDIA H100 PCIe", provider="aws")


def test_without_a_provider_the_lower_median_price_is_chosen():
    four = (entry("X", "d", 4.0), entry("X", "a", 1.0), entry("X", "c", 3.0), entry("X", "b", 2.0))
    # sorted 1, 2, 3, 4: the lower median is the 2nd, 2.0 from "b"
    assert choose_entry(four).provider == "b"
    assert choose_entry(four[:3]).provider == "c"  # 1, 3, 4: the middle one, 3.0
    ties = (entry("X", "zeta", 2.0), entry("X", "alpha", 2.0))
    assert choose_entry(ties).provider == "alpha"  # equal prices: by provider name
    assert choose_entry(()) is None


def test_the_default_provider_is_preferred_when_it_lists_the_gpu():
    entries = (entry("X", "a", 1.0), entry("X", "b", 2.0), entry("X", "c", 9.0))
    assert choose_entry(entries, default_provider="c").provider == "c"
    assert choose_entry(entries, default_provider="nobody").provider == "b"
    assert choose_entry(entries, provider="a", default_provider="c").provider == "a"


def test_builtin_h100_choice_is_deterministic():
    # H100-SXM: lambda 3.99, runpod 3.99, aws 6.88, azure 12.29 -> lower median = 2nd = runpod 3.99
    quote = resolve_price("NVIDIA H100 80GB HBM3")
    assert (quote.provider, quote.usd_per_gpu_hour) == ("runpod", 3.99)
    assert "runpod" in quote.describe() and "2026-11-09" in quote.describe()


# ---- price files -------------------------------------------------------------------------------


def test_a_price_file_replaces_and_adds_entries(tmp_path):
    path = write(
        tmp_path,
        """
default_provider = "mycloud"

[[price]]
gpu = "H100-SXM"
provider = "aws"
usd_per_gpu_hour = 5.0
date = "2026-11-20"
source = "https://example.com/aws-private-pricing"

[[price]]
gpu = "NVIDIA H100 80GB HBM3"   # a device name is turned into its table key
provider = "mycloud"
usd_per_gpu_hour = 2.1
date = 2026-11-01               # a TOML date works too
source = "contract"

[[price]]
gpu = "NVIDIA RTX 6000 Ada Generation"
provider = "mycloud"
usd_per_gpu_hour = 0.9
date = "2026-10-01"
source = "contract"
""",
    )
    builtin = builtin_prices()
    table = load_prices(path)
    assert len(table.entries) == len(builtin.entries) + 2  # one replaced, two added
    assert table.files == (*builtin.files, str(path))
    aws = resolve_price("NVIDIA H100 80GB HBM3", provider="aws", table=table)
    assert (aws.usd_per_gpu_hour, aws.date, aws.sku) == (5.0, "2026-11-20", "")
    mine = resolve_price("NVIDIA H100 80GB HBM3", table=table)  # the default provider
    assert (mine.provider, mine.usd_per_gpu_hour, mine.gpu, mine.source) == (
        "mycloud",
        2.1,
        "H100-SXM",
        "contract",
    )
    ada = resolve_price("NVIDIA RTX 6000 Ada Generation", table=table)  # matched by its exact name
    assert ada.usd_per_gpu_hour == 0.9
    # the default provider does not list the A100: the built-in choice stands
    assert resolve_price("NVIDIA A100-SXM4-80GB", table=table) == resolve_price("NVIDIA A100-SXM4-80GB")
    assert builtin_prices() is builtin and len(builtin.entries) == len(load_prices().entries)


GOOD = 'gpu = "T4"\nprovider = "x"\nusd_per_gpu_hour = 1.0\ndate = "2026-11-01"\nsource = "s"\n'


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[[price]\ngpu = 'T4'", "not valid TOML"),
        ("[[price]]\n" + GOOD.replace('source = "s"\n', ""), "missing field(s) source"),
        ("[[price]]\n" + GOOD.replace("1.0", "0"), "must be > 0"),
        ("[[price]]\n" + GOOD.replace("1.0", "-2.5"), "must be > 0"),
        ("[[price]]\n" + GOOD.replace("1.0", "nan"), "must be > 0"),
        ("[[price]]\n" + GOOD.replace("1.0", '"1.0"'), "must be a number"),
        ("[[price]]\n" + GOOD.replace("1.0", "true"), "must be a number"),
        ("[[price]]\n" + GOOD.replace('"2026-11-01"', '"2026-13-01"'), "date must be"),
        ("[[price]]\n" + GOOD.replace('"2026-11-01"', '"yesterday"'), "date must be"),
        ("[[price]]\n" + GOOD.replace('"2026-11-01"', "20261101"), "date must be"),
        ("[[price]]\n" + GOOD.replace('"2026-11-01"', "2026-11-01T10:00:00"), "date must be"),
        ("[[price]]\n" + GOOD + "usd_per_hour = 2\n", "unknown field(s) usd_per_hour"),
        ("[[price]]\n" + GOOD.replace('"x"', '""'), "provider must be a non-empty string"),
        ("[[price]]\n" + GOOD + "\n[[price]]\n" + GOOD, "a second entry"),
        ("price = 3\n", "list of [[price]] tables"),
        ("prices = []\n", "unknown top-level key(s) prices"),
        ("schema = 2\n", "schema 2 is not supported"),
        ('default_provider = ""\n', "default_provider must be"),
    ],
)
def test_each_bad_price_file_raises_one_line_naming_the_file(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(PriceTableError) as info:
        load_prices(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert problem in message


def test_a_missing_or_binary_price_file_raises_one_line(tmp_path):
    with pytest.raises(PriceTableError, match="cannot read") as info:
        load_prices(tmp_path / "nope.toml")
    assert "\n" not in str(info.value) and "nope.toml" in str(info.value)
    path = tmp_path / "bin.toml"
    path.write_bytes(b"\xff\xfe\x00price")
    with pytest.raises(PriceTableError, match="not UTF-8"):
        load_prices(path)


def test_the_entry_that_failed_is_named(tmp_path):
    path = write(
        tmp_path, "[[price]]\n" + GOOD + "\n[[price]]\n" + GOOD.replace('"x"', '"y"').replace("1.0", "-1")
    )
    with pytest.raises(PriceTableError, match=r"\[\[price\]\] #2 \(T4 at y\)"):
        load_prices(path)


def test_an_empty_price_file_changes_nothing(tmp_path):
    table = load_prices(write(tmp_path, "# nothing yet\n"))
    assert table.entries == builtin_prices().entries
    assert isinstance(table, PriceTable)


def test_cost_modules_import_no_torch():
    code = (
        "import sys, autotune.cost.prices, autotune.cost.model; "
        "print([m for m in ('torch', 'pynvml', 'numpy', 'skopt') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
