"""What the gate reads: a side (report file, ledger run, frozen baseline) and the configuration.

A side is written ``PATH`` or ``PATH:RUN``:

* a frozen baseline folder: its pinned ``scorecard.json``;
* a ``caseledger-report/2`` or ``caseledger-report/1`` JSON file (``:RUN`` needed when it
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

import yaml

from ledger.app.baseline import SCORECARD_FILE
from ledger.app.snapshot import read_state
from ledger.errors import UsageError
from ledger.store import Ledger
from projections import gate
from projections.report.build import build_report

__all__ = ["load_config", "load_side", "split_spec"]

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


def _from_ledger(path: Path, run: str | None, include_withdrawn: bool) -> dict[str, Any]:
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
    return gate.scorecard(report, run, include_withdrawn=True)


def load_side(spec: str, *, include_withdrawn: bool = False) -> tuple[dict[str, Any], str]:
    """(scorecard, a description of where it came from) of one side of the gate; a
    withdrawn run is refused unless ``include_withdrawn``."""
    path, run = split_spec(spec)
    if path.is_dir():
        card_path = path / SCORECARD_FILE
        if not card_path.is_file():
            raise UsageError(f"{path} is a folder without {SCORECARD_FILE}: not a baseline")
        card = _read_json(card_path)
        if card.get("contract") != gate.SCORECARD_CONTRACT:
            raise UsageError(f"{card_path}: not a {gate.SCORECARD_CONTRACT} scorecard")
        if run is not None and card.get("run") != run:
            raise UsageError(f"{path} is the baseline of run {card.get('run')}, not {run}")
        return card, f"frozen baseline {path} (pinned scorecard)"
    with path.open("rb") as fh:
        magic = fh.read(len(_SQLITE_MAGIC))
    if magic == _SQLITE_MAGIC:
        card = _from_ledger(path, run, include_withdrawn)
        return card, f"ledger {path} run {card['run']}"
    data = _read_json(path)
    if data.get("contract") == gate.SCORECARD_CONTRACT:
        if run is not None and data.get("run") != run:
            raise UsageError(f"{path} is the scorecard of run {data.get('run')}, not {run}")
        return data, f"scorecard {path}"
    card = gate.scorecard(data, run, include_withdrawn=include_withdrawn)
    return card, f"report {path} run {card['run']}"


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
