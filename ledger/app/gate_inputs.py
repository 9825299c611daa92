"""What the gate reads: a side (report file, ledger run, frozen baseline) and the configuration.

A side is written ``PATH`` or ``PATH:RUN``:

* a frozen baseline folder: its pinned ``scorecard.json``;
* a ``caseledger-report/3``, ``/2`` or ``/1`` JSON file (``:RUN`` needed when it
  holds several runs);
* a ``caseledger-scorecard/1`` JSON file (a pinned scorecard copied elsewhere);
* a ledger file (SQLite): the report of that run at the ledger's current size.

Configuration: ``[tool.caseledger.gate]`` in ``pyproject.toml`` of the working
directory, else the ``gate:`` mapping of ``caseledger.yaml`` there. Both at
once is refused (one source of truth).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import msgspec
import yaml

from ledger.app.baseline import SCORECARD_FILE, read_bundle, rescored_state, verify_bundle
from ledger.app.snapshot import read_state
from ledger.errors import UsageError
from ledger.store import Ledger
from projections import gate
from projections.report import schema as S
from projections.report.build import build_report

__all__ = ["load_config", "load_side", "load_side_entry", "split_spec"]

#: A side's report run entry (its per-case results; issue 32), or None for a scorecard file.
Entry = S.RunEntry | None

_SQLITE_MAGIC = b"SQLite format 3\x00"


def split_spec(spec: str) -> tuple[Path, str | None]:
    """``PATH`` or ``PATH:RUN`` -> (path, run). An existing path wins (run ids may hold ':').

    Raises:
        UsageError: no prefix of the spec names an existing file or folder.
    """
    if Path(spec).exists():
        return Path(spec), None
    for i, ch in enumerate(spec):
        if ch == ":" and i > 0 and Path(spec[:i]).exists():
            return Path(spec[:i]), spec[i + 1 :] or None
    raise UsageError(
        f"{spec}: no such report, ledger or baseline folder",
        hint="write REPORT.json, REPORT.json:RUN, LEDGER.db:RUN or a baseline folder",
    )


def _entry(report: S.Report, run: str) -> Entry:
    found = [e for s in report.sections for e in s.runs if e.run == run]
    return found[0] if found and isinstance(found[0], S.RunEntry) else None


def _from_ledger(path: Path, run: str | None, include_withdrawn: bool) -> tuple[S.Scorecard, Entry]:
    with Ledger.open(path, readonly=True) as ledger:
        snap = read_state(ledger, runs=[run] if run else None)
        state = snap.state
        if run is None:
            # A withdrawn run is left out unless asked for (docs/gate.md).
            runs = [r for r, i in state.runs.items() if include_withdrawn or i.withdrawn is None]
            if len(runs) != 1:
                left_out = len(state.runs) - len(runs)
                also = f" (and {left_out} withdrawn)" if left_out else ""
                raise UsageError(
                    f"{path} holds {len(runs)} runs{also}; name one as {path}:RUN",
                    hint="list them with `caseledger runs`",
                )
            run = runs[0]
        info = state.runs.get(run)
        if info is not None and info.withdrawn is not None and not include_withdrawn:
            raise UsageError(
                f"run {run} of {path} is withdrawn (reason: {info.withdrawn.reason}); "
                "the gate leaves withdrawn runs out",
                hint="add --include-withdrawn to judge it anyway",
            )
    report = build_report(state, root_hash=snap.root, runs=[run], include_withdrawn=True)
    return gate.scorecard(report, run, include_withdrawn=True), _entry(report, run)


def _from_baseline(folder: Path, card: S.Scorecard) -> Entry:
    """The run entry of a frozen baseline's bundle, under the scorer its pinned scorecard
    names (re-derived as ``baseline pin`` does); the bundle is verified first."""
    bundle = read_bundle(folder)
    verify_bundle(bundle)
    version = card.scorer_version
    state = rescored_state(bundle, version)
    report = build_report(state, root_hash=bytes(32), scorer=version, runs=[bundle.run_id])
    return _entry(report, bundle.run_id)


def _from_report(data: dict[str, Any], run: str) -> Entry:
    """The run entry of a report file's run (None when the entry does not read as one)."""
    for section in data.get("sections") or []:
        for entry in section.get("runs") or []:
            if isinstance(entry, dict) and entry.get("run") == run:
                try:
                    found = msgspec.convert(entry, S.AnyRunEntry)
                except msgspec.ValidationError:
                    return None
                return found if isinstance(found, S.RunEntry) else None
    return None


def load_side(spec: str, *, include_withdrawn: bool = False) -> tuple[S.Scorecard, str]:
    """(scorecard, a description of where it came from) of one side of the gate; a
    withdrawn run is refused unless ``include_withdrawn``."""
    card, source, _ = load_side_entry(spec, include_withdrawn=include_withdrawn, entry=False)
    return card, source


def load_side_entry(
    spec: str, *, include_withdrawn: bool = False, entry: bool = True
) -> tuple[S.Scorecard, str, Entry]:
    """:func:`load_side` and the side's report run entry (its per-case results, for the
    intervals and ``--significance``; issue 32): None for a scorecard file, or when
    ``entry`` is false (a baseline's bundle is then not read)."""
    path, run = split_spec(spec)
    if path.is_dir():
        card_path = path / SCORECARD_FILE
        if not card_path.is_file():
            raise UsageError(f"{path} is a folder without {SCORECARD_FILE}: not a baseline")
        pinned = _read_json(card_path)
        if pinned.get("contract") != gate.SCORECARD_CONTRACT:
            raise UsageError(f"{card_path}: not a {gate.SCORECARD_CONTRACT} scorecard")
        if run is not None and pinned.get("run") != run:
            raise UsageError(f"{path} is the baseline of run {pinned.get('run')}, not {run}")
        card = gate.read_scorecard(str(card_path), pinned)
        found = _from_baseline(path, card) if entry else None
        return card, f"frozen baseline {path} (pinned scorecard)", found
    with path.open("rb") as fh:
        magic = fh.read(len(_SQLITE_MAGIC))
    if magic == _SQLITE_MAGIC:
        card, found = _from_ledger(path, run, include_withdrawn)
        return card, f"ledger {path} run {card.run}", found
    data = _read_json(path)
    if data.get("contract") == gate.SCORECARD_CONTRACT:
        if run is not None and data.get("run") != run:
            raise UsageError(f"{path} is the scorecard of run {data.get('run')}, not {run}")
        return gate.read_scorecard(str(path), data), f"scorecard {path}", None
    card = gate.scorecard(data, run, include_withdrawn=include_withdrawn)
    found = _from_report(data, card.run) if entry else None
    return card, f"report {path} run {card.run}", found


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not a JSON report, scorecard or ledger ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a JSON object")
    return data


def load_config(cwd: Path) -> gate.GateConfig:
    """The gate configuration of the working directory (defaults when there is none).

    Raises:
        UsageError: unreadable or invalid configuration, or configured in both files.
    """
    found: list[tuple[str, Any]] = []
    pyproject = cwd / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{pyproject}: not valid TOML ({exc})") from None
        table = data.get("tool", {}).get("caseledger", {})
        if isinstance(table, dict) and "gate" in table:
            found.append((f"{pyproject} [tool.caseledger.gate]", table["gate"]))
    config_yaml = cwd / "caseledger.yaml"
    if config_yaml.is_file():
        try:
            data = yaml.safe_load(config_yaml.read_text("utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise UsageError(f"{config_yaml}: not valid YAML ({exc})") from None
        if isinstance(data, dict) and "gate" in data:
            found.append((f"{config_yaml} gate:", data["gate"]))
    if len(found) > 1:
        raise UsageError(
            "the gate is configured twice: " + " and ".join(s for s, _ in found),
            hint="keep one of them",
        )
    if not found:
        return gate.GateConfig()
    source, raw = found[0]
    return gate.config_from_mapping(raw if raw is not None else {}, source)
