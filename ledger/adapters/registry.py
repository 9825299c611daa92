"""Which adapters exist: the built-in ones and plug-ins found through entry points.

Third-party packages add an adapter by declaring an entry point in the group
``caseledger.adapters``; its name is the ``--adapter`` kind and its object is a
``build(options, ctx)`` callable (or a module that defines one), exactly what a
built-in adapter module exports. caseledger's own pyproject.toml registers the
built-ins the same way, but the built-in table below stays the authority for
them: an installation whose package metadata is stale or missing (an editable
install after a pull, a vendored copy) still finds every built-in, and a plug-in
can never take over a built-in's name (it is listed as refused instead).

Listing the registry reads package metadata only; a plug-in's code is imported
when it is built (or when ``load_entry`` is called), so one broken plug-in does
not stop any other command.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import Any

from ledger import __version__ as _APP_VERSION
from ledger.errors import AdapterError, UsageError

__all__ = [
    "BUILTIN_ADAPTERS",
    "DISTRIBUTION",
    "ENTRY_POINT_GROUP",
    "AdapterEntry",
    "Registry",
    "find_adapters",
    "load_entry",
]

ENTRY_POINT_GROUP = "caseledger.adapters"
DISTRIBUTION = "caseledger"

# kind -> module under ledger.adapters that defines ``build(options, ctx)``. The same
# names are declared in pyproject.toml's [project.entry-points."caseledger.adapters"].
BUILTIN_ADAPTERS: dict[str, str] = {
    "openai": "ledger.adapters.openai",
    "command": "ledger.adapters.command",
    "replay": "ledger.adapters.replay",
    "reference": "ledger.adapters.reference",
    "pi": "ledger.adapters.pi",
}


@dataclass(frozen=True)
class AdapterEntry:
    """One adapter kind: where its ``build`` lives and which distribution provides it.

    ``value`` is the entry point's ``module:attribute`` (or ``module``);
    ``distribution`` and ``version`` are None when the metadata does not say.
    """

    name: str
    value: str
    distribution: str | None
    version: str | None
    builtin: bool

    @property
    def module(self) -> str:
        """The module part of ``value``."""
        return self.value.partition(":")[0].strip()

    def origin(self) -> str:
        """``distribution version`` for messages (or ``an unknown distribution``)."""
        if self.distribution is None:
            return "an unknown distribution"
        return f"{self.distribution} {self.version}" if self.version else self.distribution


@dataclass(frozen=True)
class Registry:
    """Usable adapters by name, and plug-ins that were refused with the reason."""

    adapters: dict[str, AdapterEntry]
    refused: tuple[tuple[AdapterEntry, str], ...]


def _builtins() -> dict[str, AdapterEntry]:
    return {
        name: AdapterEntry(
            name=name,
            value=f"{module}:build",
            distribution=DISTRIBUTION,
            version=_APP_VERSION,
            builtin=True,
        )
        for name, module in BUILTIN_ADAPTERS.items()
    }


def _dist_of(ep: metadata.EntryPoint) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    try:
        return dist.metadata["Name"], dist.version
    except (KeyError, TypeError):  # a broken METADATA file
        return None, None


def _same_dist(name: str | None) -> bool:
    return name is not None and name.replace("_", "-").lower() == DISTRIBUTION


def find_adapters(
    entry_points: Callable[[], list[metadata.EntryPoint]] | None = None,
) -> Registry:
    """The built-in adapters plus every plug-in of ``caseledger.adapters``.

    caseledger's own entry points add nothing (the built-in table is the truth,
    whatever the metadata says). A plug-in is refused, with a reason, when it
    reuses a built-in's name or when two distributions declare the same name;
    the other adapters are unaffected. ``entry_points`` replaces the metadata
    scan (tests).
    """
    adapters = _builtins()
    found = (
        entry_points()
        if entry_points is not None
        else list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    )
    plugins: dict[str, list[AdapterEntry]] = {}
    for ep in found:
        dist, version = _dist_of(ep)
        if _same_dist(dist):
            continue
        entry = AdapterEntry(ep.name, ep.value, dist, version, builtin=False)
        if entry.value in {e.value for e in plugins.get(ep.name, [])}:
            continue  # the same distribution seen twice on sys.path
        plugins.setdefault(ep.name, []).append(entry)
    refused: list[tuple[AdapterEntry, str]] = []
    for name in sorted(plugins):
        entries = plugins[name]
        if name in adapters:
            refused += [
                (e, f"the name {name!r} is a built-in adapter; a plug-in may not replace it")
                for e in entries
            ]
        elif len(entries) > 1:
            others = ", ".join(e.origin() for e in entries)
            refused += [(e, f"the name {name!r} is declared by {others}") for e in entries]
        else:
            adapters[name] = entries[0]
    return Registry(adapters=adapters, refused=tuple(refused))


def lookup(kind: str, registry: Registry | None = None) -> AdapterEntry:
    """The entry of adapter ``kind``; UsageError naming the usable kinds otherwise."""
    registry = registry if registry is not None else find_adapters()
    entry = registry.adapters.get(kind)
    if entry is not None:
        return entry
    for refused, reason in registry.refused:
        if refused.name == kind:
            raise UsageError(
                f"adapter plug-in {kind!r} from {refused.origin()} is refused: {reason}",
                hint="uninstall one of the distributions; `caseledger adapters` lists them",
            )
    raise UsageError(
        f"unknown adapter kind {kind!r}",
        hint="use one of: " + ", ".join(sorted(registry.adapters)),
    )


def load_entry(entry: AdapterEntry) -> Callable[..., Any]:
    """Import an adapter's ``build`` callable.

    Raises:
        AdapterError: the plug-in could not be imported or names no callable; the
            message names the plug-in, its entry point and its distribution.
    """
    module_name, _, attr = entry.value.partition(":")
    try:
        obj: Any = importlib.import_module(module_name.strip())
        for part in attr.strip().split(".") if attr.strip() else ():
            obj = getattr(obj, part)
    except Exception as exc:
        detail = str(exc).splitlines()[0] if str(exc) else ""
        raise AdapterError(
            f"adapter plug-in {entry.name!r} ({entry.value}, from {entry.origin()}) failed "
            f"to load: {type(exc).__name__}: {detail}",
            hint=f"reinstall or upgrade {entry.distribution or 'the package that declares it'}, "
            "or uninstall it; the built-in adapters still work",
        ) from None
    if isinstance(obj, ModuleType):
        obj = getattr(obj, "build", None)
    if not callable(obj):
        raise AdapterError(
            f"adapter plug-in {entry.name!r} ({entry.value}, from {entry.origin()}) is not "
            "a build(options, ctx) callable",
            hint="its entry point must name a function build(options, ctx) -> Adapter "
            "(docs/adapters.md, 'Writing an adapter plug-in')",
        )
    return obj  # type: ignore[no-any-return]
