"""Prices of one GPU-hour: the built-in dated table, a user's price file, and the choice of one price.

The built-in table (``prices.toml`` beside this module) lists public on-demand prices, each with
its provider, instance or SKU, date and source. Prices change: a user's price file of the same
shape replaces entries with the same (gpu, provider) and adds others, and an explicit
``--price-per-gpu-hour`` always wins.

Several providers may list one GPU. With no provider asked for, the table's ``default_provider``
is used when it lists the GPU, otherwise the lower median of the listed prices (entries sorted by
price, then provider), so the choice is deterministic and is always a real, sourced entry.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path

from profilers.hardware.gpus import match_gpu_model

BUILTIN_FILE = "prices.toml"
TABLE_SCHEMA = 1
#: Provider and source of a price given on the command line.
USER_PROVIDER = "user"
EXPLICIT_SOURCE = "--price-per-gpu-hour"

_REQUIRED = ("gpu", "provider", "usd_per_gpu_hour", "date", "source")
_OPTIONAL = ("sku", "seen_via")
_TOP_LEVEL = ("schema", "default_provider", "price")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

class PriceTableError(ValueError):
    """A price table that cannot be used; the message is one line naming the file and the problem."""


@dataclass(frozen=True, slots=True)
class PriceEntry:
    """One row of a price table: what one GPU-hour costs at one provider."""

    gpu: str  # table key, "H100-SXM"
    provider: str  # lower case
    usd_per_gpu_hour: float
    date: str  # YYYY-MM-DD, when the price was published or seen
    source: str  # the provider's pricing page, a contract…
    sku: str = ""  # the instance or SKU, "p5.48xlarge (8x H100 SXM 80GB): 55.04 USD / 8"
    seen_via: str = ""  # where the figure was read, when not on the provider's own page
    origin: str = ""  # the table file it came from

    def quote(self) -> PriceQuote:
        """The price a run is charged at when this entry is chosen."""
        return PriceQuote(self.usd_per_gpu_hour, self.gpu, self.provider, self.sku, self.date, self.source)


@dataclass(frozen=True, slots=True)
class PriceQuote:
    """The price a run is charged at, and where it comes from."""

    usd_per_gpu_hour: float
    gpu: str
    provider: str  # "user" for --price-per-gpu-hour
    sku: str
    date: str  # YYYY-MM-DD
    source: str

    def describe(self) -> str:
        """One line for a report: ``--price-per-gpu-hour``, or provider, SKU, date and source."""
        if self.provider == USER_PROVIDER:
            return self.source
        sku = f" {self.sku}" if self.sku else ""
        return f"{self.provider}{sku} ({self.gpu}), {self.date}, {self.source}"


@dataclass(frozen=True)
class PriceTable:
    """Price entries, at most one per (gpu, provider), and the provider to prefer."""

    entries: tuple[PriceEntry, ...]
    default_provider: str | None = None
    files: tuple[str, ...] = ()  # the files it was read from, built-in first

    def gpus(self) -> tuple[str, ...]:
        """The GPU keys that have at least one price, in table order."""
        return tuple(dict.fromkeys(e.gpu for e in self.entries))

    def for_gpu(self, gpu: str) -> tuple[PriceEntry, ...]:
        """Every entry for ``gpu`` (a table key, compared case-insensitively)."""
        key = gpu.casefold()
        return tuple(e for e in self.entries if e.gpu.casefold() == key)


def canonical_gpu(name: str) -> str:
    """The key a GPU or device name is priced under ("NVIDIA H100 PCIe" -> "H100-PCIe"), else ``name``."""
    model = match_gpu_model(name)
    return model.market if model is not None else name.strip()


def match_gpu(device_name: str | None, table: PriceTable | None = None) -> str | None:
    """The table key of an NVML/torch device name, or None for no name or an unknown GPU.

    Known GPUs are priced under their row's market key in the one GPU table
    (:func:`profilers.hardware.gpus.match_gpu_model`); a name the table does not know matches a
    price entry whose ``gpu`` is exactly that name (case-insensitively), so a price file can price
    any GPU by its device name.
    """
    if not device_name or not device_name.strip():
        return None
    model = match_gpu_model(device_name)
    if model is not None:
        return model.market
    if table is not None:
        wanted = device_name.strip().casefold()
        for gpu in table.gpus():
            if gpu.casefold() == wanted:
                return gpu
    return None


@lru_cache(maxsize=1)
def builtin_prices() -> PriceTable:
    """The built-in table shipped with the package (read once)."""
    resource = resources.files("autotune.cost").joinpath(BUILTIN_FILE)
    label = f"{BUILTIN_FILE} (built-in)"
    return _parse(resource.read_bytes(), label, require_sku=True)


def load_prices(override: Path | None = None) -> PriceTable:
    """The built-in table merged with the price file ``override`` when one is given.

    Entries of ``override`` replace built-in entries with the same (gpu, provider) and add the
    others; its ``default_provider``, when set, replaces the built-in one. Raises
    :class:`PriceTableError` (one line naming the file) for a file that cannot be read, is not
    TOML, or has an entry with a missing or unknown field, a non-positive price or a bad date.
    """
    builtin = builtin_prices()
    if override is None:
        return builtin
    path = Path(override)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PriceTableError(f"{path}: cannot read the price file: {exc.strerror or exc}") from None
    user = _parse(data, str(path), require_sku=False)
    return merge(builtin, user)


def merge(base: PriceTable, override: PriceTable) -> PriceTable:
    """``base`` with ``override``'s entries replacing same (gpu, provider) ones and added after."""
    replacing = {(e.gpu.casefold(), e.provider): e for e in override.entries}
    entries = [replacing.pop((e.gpu.casefold(), e.provider), e) for e in base.entries]
    entries.extend(e for e in override.entries if (e.gpu.casefold(), e.provider) in replacing)
    return PriceTable(
        tuple(entries),
        override.default_provider or base.default_provider,
        base.files + override.files,
    )


def resolve_price(
    device_name: str | None,
    provider: str | None = None,
    explicit: float | None = None,
    table: PriceTable | None = None,
) -> PriceQuote | None:
    """The price of one device-hour of ``device_name``, or None when there is none.

    ``explicit`` (``--price-per-gpu-hour``) always wins, for any device (provider "user").
    Otherwise the device name is matched to a table GPU and priced at ``provider``, else at the
    table's ``default_provider`` when it lists the GPU, else at the lower median of the listed
    prices. None for a CPU run (no device name), an unknown GPU, or a provider without that GPU;
    :func:`unavailable_reason` says which.
    """
    if explicit is not None:
        if isinstance(explicit, bool) or not math.isfinite(explicit) or explicit <= 0:
            raise ValueError(f"{EXPLICIT_SOURCE} must be a positive number of USD, got {explicit!r}")
        named = match_gpu(device_name, table) or (device_name.strip() if device_name else "unknown")
        today = date.today().isoformat()
        return PriceQuote(float(explicit), named, USER_PROVIDER, "", today, EXPLICIT_SOURCE)
    table = builtin_prices() if table is None else table
    gpu = match_gpu(device_name, table)
    if gpu is None:
        return None
    entry = choose_entry(table.for_gpu(gpu), provider, table.default_provider)
    return None if entry is None else entry.quote()


def choose_entry(
    entries: tuple[PriceEntry, ...], provider: str | None = None, default_provider: str | None = None
) -> PriceEntry | None:
    """The entry of ``provider``; else ``default_provider``'s; else the lower median by price."""
    if not entries:
        return None
    if provider is not None:
        wanted = provider.strip().lower()
        return next((e for e in entries if e.provider == wanted), None)
    if default_provider:
        preferred = next((e for e in entries if e.provider == default_provider), None)
        if preferred is not None:
            return preferred
    ranked = sorted(entries, key=lambda e: (e.usd_per_gpu_hour, e.provider))
    return ranked[(len(ranked) - 1) // 2]


def unavailable_reason(
    device_name: str | None, provider: str | None = None, table: PriceTable | None = None
) -> str:
    """Why :func:`resolve_price` gives no price for this device (one sentence for the report)."""
    hint = "pass --price-per-gpu-hour USD or add the GPU to a price file"
    table = builtin_prices() if table is None else table
    if not device_name or not device_name.strip():
        return "the run used no GPU, so no GPU-hour price applies; pass --price-per-gpu-hour USD to price it"
    gpu = match_gpu(device_name, table)
    entries = () if gpu is None else table.for_gpu(gpu)
    if not entries:
        return f"the price table has no price for {device_name!r}; {hint}"
    listed = ", ".join(sorted({e.provider for e in entries}))
    return f"provider {provider!r} has no price for {gpu} in the price table (listed: {listed}); {hint}"


def _parse(data: bytes, label: str, *, require_sku: bool) -> PriceTable:
    """Parse and validate one price table file; ``label`` names it in error messages."""
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise PriceTableError(f"{label}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise PriceTableError(f"{label}: not valid TOML: {_one_line(exc)}") from None
    unknown = sorted(set(doc) - set(_TOP_LEVEL))
    if unknown:
        raise PriceTableError(f"{label}: unknown top-level key(s) {', '.join(unknown)}")
    schema = doc.get("schema", TABLE_SCHEMA)
    if schema != TABLE_SCHEMA:
        raise PriceTableError(f"{label}: schema {schema!r} is not supported (expected {TABLE_SCHEMA})")
    default = doc.get("default_provider")
    if default is not None and not (isinstance(default, str) and default.strip()):
        raise PriceTableError(f"{label}: default_provider must be a non-empty string, got {default!r}")
    rows = doc.get("price", [])
    if not isinstance(rows, list):
        raise PriceTableError(f"{label}: 'price' must be a list of [[price]] tables")
    entries: list[PriceEntry] = []
    seen: set[tuple[str, str]] = set()
    for number, row in enumerate(rows, start=1):
        entry = _entry(row, f"{label}: [[price]] #{number}", label, require_sku)
        key = (entry.gpu.casefold(), entry.provider)
        if key in seen:
            raise PriceTableError(
                f"{label}: [[price]] #{number}: a second entry for gpu {entry.gpu!r} "
                f"and provider {entry.provider!r}"
            )
        seen.add(key)
        entries.append(entry)
    return PriceTable(tuple(entries), default.strip().lower() if default else None, (label,))


def _entry(row: object, where: str, origin: str, require_sku: bool) -> PriceEntry:
    if not isinstance(row, dict):
        raise PriceTableError(f"{where}: must be a table of fields")
    gpu, provider = row.get("gpu"), row.get("provider")
    if isinstance(gpu, str) and isinstance(provider, str):
        where = f"{where} ({gpu} at {provider})"
    required = (*_REQUIRED, "sku") if require_sku else _REQUIRED
    missing = [name for name in required if name not in row]
    if missing:
        raise PriceTableError(f"{where}: missing field(s) {', '.join(missing)}")
    unknown = sorted(set(row) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise PriceTableError(f"{where}: unknown field(s) {', '.join(unknown)}")
    names = ("gpu", "provider", "source", *_OPTIONAL)
    text = {name: _text(row, name, where) for name in names if name in row}
    if require_sku and not text["sku"]:
        raise PriceTableError(f"{where}: sku must name the instance or SKU the price comes from")
    return PriceEntry(
        gpu=canonical_gpu(text["gpu"]),
        provider=text["provider"].lower(),
        usd_per_gpu_hour=_price(row["usd_per_gpu_hour"], where),
        date=_date(row["date"], where),
        source=text["source"],
        sku=text.get("sku", ""),
        seen_via=text.get("seen_via", ""),
        origin=origin,
    )


def _text(row: Mapping[str, object], name: str, where: str) -> str:
    value = row[name]
    if not isinstance(value, str) or (not value.strip() and name not in _OPTIONAL):
        raise PriceTableError(f"{where}: {name} must be a non-empty string, got {value!r}")
    return value.strip()


def _price(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PriceTableError(f"{where}: usd_per_gpu_hour must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise PriceTableError(f"{where}: usd_per_gpu_hour must be > 0, got {value!r}")
    return float(value)


def _date(value: object, where: str) -> str:
    if isinstance(value, date) and not isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str) and _DATE.fullmatch(value.strip()):
        try:
            return date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            pass
    raise PriceTableError(f"{where}: date must be a date YYYY-MM-DD, got {value!r}")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
