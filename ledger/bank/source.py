"""Read a bank folder: normalise its files, parse YAML/JSON exactly, and hash the manifest.

Normalisation (DESIGN.md "Question bank"): UTF-8 (a leading BOM is dropped),
LF line endings, Unicode NFC. ``cases.yaml``, ``semantic.json`` and
``calibration.yaml`` are parsed and re-encoded as canonical JSON (sorted keys,
no whitespace, numbers written from their exact Decimal value, never through
a float). The normalised bytes are what is hashed, stored beside the ledger
and built, so a stored bank folder is itself a bank with the same hash.
A bank's data files (``data.sqlite``, ``data/``) are found here (:func:`find_data`)
and hashed by content (``ledger.engines.data_files``).
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ledger.bank.problems import Problems
from ledger.bounds import MAX_DEPTH, MAX_INT_DIGITS, json_depth
from ledger.codec import sha256_hex
from ledger.engines.data_files import DATA_DIR, DATA_SQLITE, DataFiles, file_sha256
from ledger.engines.sqlite import canonical_digest

__all__ = [
    "BANK_FILES",
    "CALIBRATION_FILE",
    "TEXT_FILES",
    "BankSource",
    "canonical_text",
    "content_hash",
    "find_data",
    "normalise_text",
    "read_source",
]

BANK_FILES = ("cases.yaml", "prompt.md", "schema.sql", "seed.sql", "semantic.json")
#: The text files every bank has (its rows are in seed.sql or in data files).
TEXT_FILES = ("cases.yaml", "prompt.md", "schema.sql", "semantic.json")
CALIBRATION_FILE = "calibration.yaml"
# Domain separation: a bank manifest hash can never collide with another caseledger hash.
_MANIFEST_HEADER = "caseledger/bank-manifest/v1\n"
_MAX_DEPTH = MAX_DEPTH
#: Largest bank file read (bytes): a bank is text a person reviews, not a data dump.
MAX_FILE_BYTES = 64 * 1024 * 1024

Lines = dict[tuple[Any, ...], int]
_DATA_SUFFIXES = {".csv": "csv", ".parquet": "parquet"}


@dataclass(frozen=True)
class BankSource:
    """A bank folder after normalisation: the bytes that are hashed, and their parse trees."""

    folder: Path
    files: dict[str, bytes]
    file_hashes: dict[str, str]
    content_sha256: str
    calibration: bytes | None
    calibration_sha256: str | None
    cases_doc: Any
    cases_lines: Lines
    semantic_doc: Any
    # The data files when the rows are not in seed.sql (issue 16).
    data: DataFiles | None = None

    @property
    def hexhash(self) -> str:
        """The content hash without its ``sha256:`` prefix (used in file names)."""
        return self.content_sha256.removeprefix("sha256:")

    def text(self, name: str) -> str:
        """A normalised file as text ("" for a seed.sql the bank does not have)."""
        if name == "seed.sql" and name not in self.files:
            return ""
        return self.files[name].decode("utf-8")

    def write_to(self, folder: Path, *, calibration: bool = True) -> None:
        """Write the bank's normalised files and data files into ``folder`` (read-only):
        a folder that is itself this bank, with the same hash. ``calibration``: with
        its calibration.yaml, when it has one."""
        import shutil

        for name, data in sorted(self.files.items()):
            (folder / name).write_bytes(data)
        if calibration and self.calibration is not None:
            (folder / CALIBRATION_FILE).write_bytes(self.calibration)
        if self.data is not None:
            for name, path in sorted(self.data.paths.items()):
                (folder / name).parent.mkdir(exist_ok=True)
                shutil.copyfile(path, folder / name)
        for child in folder.rglob("*"):
            if child.is_file():
                child.chmod(0o444)


def normalise_text(raw: bytes, name: str, problems: Problems) -> str | None:
    """Decode UTF-8 (dropping a BOM), turn CRLF/CR into LF and apply NFC."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        problems.add(name, f"not valid UTF-8 (byte {exc.start})", line=line)
        return None
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return unicodedata.normalize("NFC", text)


# ------------------------------------------------------------------ canonical JSON

# Characters YAML may not carry raw (or reads as line breaks); escaped so that the
# canonical JSON of cases.yaml is also a YAML document that loads back unchanged.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def _string(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _number(value: Decimal) -> str:
    text = str(value)
    mantissa, sep, exponent = text.partition("E")
    if sep and "." not in mantissa:
        # YAML 1.1 reads "1E+3" as a string; "1.0E+3" stays a number on reload.
        text = f"{mantissa}.0E{exponent}"
    return text


def canonical_text(value: Any) -> str:
    """Canonical JSON of a parsed YAML/JSON tree: sorted keys, no spaces, exact numbers.

    >>> canonical_text({"b": [Decimal("1.50"), 2, None], "a": "é"})
    '{"a":"é","b":[1.50,2,null]}'
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return _number(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ",".join(canonical_text(v) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{_string(k)}:{canonical_text(value[k])}" for k in sorted(value))
        return "{" + ",".join(items) + "}"
    raise TypeError(f"not a canonical value: {type(value).__name__}")


# ------------------------------------------------------------------ YAML


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads floats as Decimal and timestamps as plain strings.

    It refuses aliases (``*name``): expanding them is how a few hundred bytes
    become billions of nodes. It also refuses nesting deeper than ``MAX_DEPTH``
    while composing (the composer recurses once per level).
    """

    _depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]  # types-PyYAML: untyped
            raise ComposerError(
                None,
                None,
                f"alias *{event.anchor} is not allowed in a bank file (write the value out)",
                event.start_mark,
            )
        self._depth += 1
        try:
            if self._depth > _MAX_DEPTH:
                raise ComposerError(
                    None,
                    None,
                    f"nested deeper than {_MAX_DEPTH} levels",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]  # as above
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _NonFinite(ValueError):
    pass


class _OutOfBounds(ValueError):
    pass


def _bounded_int(value: int) -> int:
    # Decimals need no bound here (they stay text-sized); a field that is a number
    # (weight, tolerances, max_rows) is bounded where it is validated.
    if abs(value) >= 10**MAX_INT_DIGITS:
        raise _OutOfBounds(f"integer has more than {MAX_INT_DIGITS} digits")
    return value


def _construct_float(loader: _Loader, node: ScalarNode) -> Decimal:
    text = str(loader.construct_scalar(node)).replace("_", "")
    if text.lower().lstrip("+-") in (".inf", ".nan"):
        raise _NonFinite(text)
    try:
        return Decimal(text)
    except InvalidOperation:
        raise _NonFinite(text) from None


def _construct_int(loader: _Loader, node: ScalarNode) -> int:
    # Checked before converting: "1:2:3:..." (base 60) or 5000 digits cost time or
    # raise ValueError inside int() itself.
    text = str(loader.construct_scalar(node))
    if len(text.replace("_", "").lstrip("+-")) > MAX_INT_DIGITS + 2:  # 0x / 0o prefixes
        raise _OutOfBounds(f"integer has more than {MAX_INT_DIGITS} digits")
    return _bounded_int(yaml.SafeLoader.construct_yaml_int(loader, node))


def _construct_timestamp(loader: _Loader, node: ScalarNode) -> str:
    return str(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)

_SCALAR_TYPES = (str, int, Decimal, bool, type(None))


def _walk(
    loader: _Loader, node: Node, path: tuple[Any, ...], ctx: tuple[str, Problems, Lines]
) -> Any:
    name, problems, lines = ctx
    line = node.start_mark.line + 1
    lines.setdefault(path, line)
    if len(path) > _MAX_DEPTH:
        problems.add(name, "nesting too deep (recursive alias?)", line=line)
        return None
    if isinstance(node, MappingNode):
        if node.tag != "tag:yaml.org,2002:map":
            problems.add(name, f"unsupported tag {node.tag}", line=line)
            return None
        loader.flatten_mapping(node)
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            key = _walk(loader, key_node, (*path, "<key>"), ctx)
            if not isinstance(key, str):
                problems.add(name, f"mapping key {key!r} is not a string (quote it)", line=key_line)
                continue
            if key in out:
                problems.add(name, f"duplicate key {key!r}", line=key_line)
                continue
            lines[(*path, key)] = key_line
            out[key] = _walk(loader, value_node, (*path, key), ctx)
        return out
    if isinstance(node, SequenceNode):
        if node.tag != "tag:yaml.org,2002:seq":
            problems.add(name, f"unsupported tag {node.tag}", line=line)
            return None
        return [_walk(loader, item, (*path, i), ctx) for i, item in enumerate(node.value)]
    try:
        value = loader.construct_object(node, deep=True)
    except _NonFinite as exc:
        problems.add(name, f"number {exc} is not a finite decimal", line=line)
        return None
    except _OutOfBounds as exc:
        problems.add(name, f"{exc} (see the bounds in docs/bank-format.md)", line=line)
        return None
    except (yaml.YAMLError, ValueError) as exc:
        problems.add(name, f"cannot read value: {getattr(exc, 'problem', exc)}", line=line)
        return None
    if not isinstance(value, _SCALAR_TYPES):
        problems.add(name, f"unsupported YAML value of type {type(value).__name__}", line=line)
        return None
    if isinstance(value, str):
        value = unicodedata.normalize("NFC", value)
    return value


def parse_yaml(text: str, name: str, problems: Problems) -> tuple[Any, Lines]:
    """Parse one YAML document into str/int/Decimal/bool/None/list/dict, with key lines."""
    lines: Lines = {}
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        problems.add(name, f"YAML syntax error: {problem}", line=line)
        return None, lines
    try:
        value = None if node is None else _walk(loader, node, (), (name, problems, lines))
    finally:
        loader.dispose()
    return value, lines


# ------------------------------------------------------------------ JSON


class _DuplicateKey(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _no_constant(text: str) -> Any:
    raise _NonFinite(text)


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _OutOfBounds(f"integer has more than {MAX_INT_DIGITS} digits")
    return int(text)


def _nfc_tree(value: Any) -> Any:
    # The file text is NFC already; this catches strings built from \u escapes.
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, list):
        return [_nfc_tree(v) for v in value]
    if isinstance(value, dict):
        return {unicodedata.normalize("NFC", k): _nfc_tree(v) for k, v in value.items()}
    return value


def parse_json(text: str, name: str, problems: Problems) -> Any:
    """Parse JSON with exact Decimal numbers, refusing duplicate keys and NaN/Infinity.

    Nesting deeper than ``MAX_DEPTH`` and numbers beyond the bounds of ``ledger.bounds``
    are problems too (checked before the recursive parser runs on the text).
    """
    if json_depth(text) > _MAX_DEPTH:
        problems.add(name, f"nested deeper than {_MAX_DEPTH} levels")
        return None
    try:
        return _nfc_tree(
            json.loads(
                text,
                parse_float=Decimal,
                parse_int=_json_int,
                object_pairs_hook=_pairs,
                parse_constant=_no_constant,
            )
        )
    except _OutOfBounds as exc:
        problems.add(name, f"{exc} (see the bounds in docs/bank-format.md)")
    except json.JSONDecodeError as exc:
        problems.add(name, f"JSON syntax error: {exc.msg}", line=exc.lineno)
    except _DuplicateKey as exc:
        problems.add(name, f"duplicate key {exc.args[0]!r}")
    except _NonFinite as exc:
        problems.add(name, f"{exc} is not a finite number")
    return None


# ------------------------------------------------------------------ the folder


def content_hash(file_hashes: dict[str, str], engine: str = "duckdb") -> str:
    """SHA-256 of the manifest: a header line, then ``<name> <sha256:hex>`` per bank file
    (data files included, by their bank-relative name) in name order, then
    ``engine <name>`` for a bank that runs on another engine than DuckDB.

    >>> content_hash({n: "sha256:" + "0" * 64 for n in BANK_FILES})[:15]
    'sha256:facf40e8'
    """
    lines = [_MANIFEST_HEADER] + [f"{n} {file_hashes[n]}\n" for n in sorted(file_hashes)]
    if engine != "duckdb":
        lines.append(f"engine {engine}\n")
    return sha256_hex("".join(lines).encode("utf-8"))


def find_data(folder: Path, problems: Problems) -> DataFiles | None:
    """The data files of a bank folder, or None when its data is ``seed.sql``.

    Records a problem when a folder gives its data in more than one way, when a
    ``data/`` file has another suffix than .csv / .parquet, or mixes both kinds.
    """
    seed = (folder / "seed.sql").is_file()
    sqlite_file = folder / DATA_SQLITE
    data_dir = folder / DATA_DIR
    given = [n for n, there in (("seed.sql", seed), (DATA_SQLITE, sqlite_file.is_file()),
                                (f"{DATA_DIR}/", data_dir.is_dir())) if there]  # fmt: skip
    if len(given) > 1:
        problems.add(
            str(folder),
            f"gives its data in more than one way ({', '.join(given)}); keep exactly one",
        )
        return None
    if not given:
        problems.add(
            "seed.sql",
            f"missing (a bank's rows are in seed.sql, {DATA_SQLITE}, or {DATA_DIR}/<table>.csv "
            "or .parquet files)",
        )
        return None
    if seed:
        return None
    if sqlite_file.is_file():
        try:
            digest = canonical_digest(sqlite_file)
        except sqlite3.Error as exc:
            problems.add(DATA_SQLITE, f"cannot read it as a SQLite database: {exc}")
            return None
        return DataFiles(DATA_SQLITE, {DATA_SQLITE: sqlite_file}, {DATA_SQLITE: digest})
    before = len(problems.items)
    kinds: set[str] = set()
    paths: dict[str, Path] = {}
    for path in sorted(data_dir.iterdir()):
        kind = _DATA_SUFFIXES.get(path.suffix.lower())
        if kind is None or not path.is_file():
            problems.add(
                f"{DATA_DIR}/{path.name}",
                "is not a data file (the data folder holds <table>.csv or <table>.parquet)",
            )
            continue
        kinds.add(kind)
        paths[f"{DATA_DIR}/{path.name}"] = path
    if len(kinds) > 1:
        problems.add(f"{DATA_DIR}/", "mixes CSV and Parquet files; use one kind")
    if not paths and len(problems.items) == before:
        problems.add(f"{DATA_DIR}/", "is empty (one <table>.csv or <table>.parquet per table)")
    if len(problems.items) > before:
        return None
    stems = [Path(n).stem for n in paths]
    if len(set(stems)) != len(stems):
        problems.add(f"{DATA_DIR}/", "names a table twice")
        return None
    return DataFiles(kinds.pop(), paths, {n: file_sha256(p) for n, p in paths.items()})


def read_source(folder: Path) -> BankSource:
    """Read and normalise a bank folder. Raises BankError naming each file problem."""
    problems = Problems(str(folder))
    if not folder.is_dir():
        problems.add(str(folder), "not a folder")
        problems.raise_if_any()
    texts: dict[str, str] = {}
    data = find_data(folder, problems)
    for name in (*BANK_FILES, CALIBRATION_FILE):
        path = folder / name
        if not path.is_file():
            if name not in (CALIBRATION_FILE, "seed.sql"):
                problems.add(
                    name, "missing (a bank needs " + ", ".join(TEXT_FILES) + " and its data)"
                )
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            problems.add(name, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
            continue
        text = normalise_text(path.read_bytes(), name, problems)
        if text is not None:
            texts[name] = text
    problems.raise_if_any()

    cases_doc, cases_lines = parse_yaml(texts["cases.yaml"], "cases.yaml", problems)
    semantic_doc = parse_json(texts["semantic.json"], "semantic.json", problems)
    calibration_doc = None
    if CALIBRATION_FILE in texts:
        calibration_doc, _ = parse_yaml(texts[CALIBRATION_FILE], CALIBRATION_FILE, problems)
    problems.raise_if_any()

    texts_kept = ("prompt.md", "schema.sql", "seed.sql")
    files = {name: texts[name].encode("utf-8") for name in texts_kept if name in texts}
    files["cases.yaml"] = (canonical_text(cases_doc) + "\n").encode("utf-8")
    files["semantic.json"] = (canonical_text(semantic_doc) + "\n").encode("utf-8")
    file_hashes = {name: sha256_hex(files[name]) for name in sorted(files)}
    if data is not None:
        file_hashes.update(data.hashes)
    calibration = None
    if CALIBRATION_FILE in texts:
        calibration = (canonical_text(calibration_doc) + "\n").encode("utf-8")
    return BankSource(
        folder=folder,
        files=files,
        file_hashes=file_hashes,
        content_sha256=content_hash(file_hashes),
        calibration=calibration,
        calibration_sha256=sha256_hex(calibration) if calibration is not None else None,
        cases_doc=cases_doc,
        cases_lines=cases_lines,
        semantic_doc=semantic_doc,
        data=data,
    )
