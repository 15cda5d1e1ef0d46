"""What every report module shares: sizes in binary units, the designs as operators know them
(:func:`ledgercache.designs`, declared once in Rust), rates over a run's duration, Markdown escaping."""

from __future__ import annotations

import re
from collections.abc import Iterable

from . import _native

__all__ = [
    "MIB",
    "format_size",
    "format_rate",
    "format_mib_rate",
    "design_info",
    "design_label",
    "design_order",
    "is_broker_design",
    "broker_designs",
    "md_escape",
]

MIB = 1 << 20


def format_size(n: int) -> str:
    """A cache size in binary units as the CLI takes it: ``32 MiB``, ``1.5 GiB``, ``4 KiB``."""
    if n >= 1 << 40 and n % (1 << 38) == 0:
        return f"{n / (1 << 40):g} TiB"
    if n >= 1 << 30 and n % (1 << 28) == 0:
        return f"{n / (1 << 30):g} GiB"
    if n >= MIB and n % (MIB // 4) == 0:
        return f"{n / MIB:g} MiB"
    if n >= 1024 and n % 256 == 0:
        return f"{n / 1024:g} KiB"
    return f"{n:,} B"


def format_rate(v: float) -> str:
    """A count a second: ``1,234``, ``12.5``, ``0.25``."""
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}".rstrip("0").rstrip(".") if v else "0"


def format_mib_rate(bytes_per_second: float) -> str:
    """Bytes a second as MiB/s: ``37.4 MiB/s``."""
    v = bytes_per_second / MIB
    if v == 0:
        return "0 MiB/s"
    return f"{v:,.0f} MiB/s" if v >= 100 else f"{v:.1f} MiB/s" if v >= 1 else f"{v:.2f} MiB/s"


def _designs() -> tuple[dict, ...]:
    return tuple(dict(d) for d in _native.designs())


def design_info(name: str) -> dict:
    """The :func:`ledgercache.designs` entry of a strategy name (``label``, ``role``, ``models``,
    ``broker_settings``); a name it does not know gets its own name as label and role ``unknown``."""
    for d in _designs():
        if d["name"] == name:
            return d
    return {"name": name, "label": name, "models": "", "role": "unknown", "broker_settings": ""}


def design_label(name: str) -> str:
    """How operators know a design: ``pip430`` -> ``PIP-430 (Pulsar 4.1+)`` (from :func:`ledgercache.designs`)."""
    return design_info(name)["label"]


def is_broker_design(name: str) -> bool:
    """True for the designs a Pulsar broker runs (role ``broker``): the only ones a report recommends."""
    return design_info(name)["role"] == "broker"


def broker_designs() -> list[dict]:
    """The :func:`ledgercache.designs` entries a Pulsar broker runs (role ``broker``), in order."""
    return [d for d in _designs() if d["role"] == "broker"]


def design_order(names: Iterable[str]) -> list[str]:
    """Strategy names in :func:`ledgercache.designs` order (brokers' designs first); unknown ones last."""
    order = {d["name"]: i for i, d in enumerate(_designs())}
    return sorted(set(names), key=lambda n: (order.get(n, len(order)), n))


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]>|#])")


def md_escape(text: str) -> str:
    """Text (a scenario or file name) safe inside Markdown: its ``*``, ``_``, ``|``, ... kept as written."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("<", "&lt;")
