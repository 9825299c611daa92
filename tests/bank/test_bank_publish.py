"""Publishing: one BankPublished with hashes and gold, idempotent, versions never change."""

from __future__ import annotations

import hashlib
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from banktest import edit

from ledger.bank.build import BUILD_SETTINGS
from ledger.bank.publish import publish
from ledger.bank.registry import find_published, list_published
from ledger.codec import digest
from ledger.errors import BankError
from ledger.events import BankPublished
from ledger.keys import Signer
from ledger.store import Ledger


def test_publish_appends_one_event_with_hashes_and_gold(
    tiny: Path, ledger: Ledger, signer: Signer, home: Path
) -> None:
    size = ledger.size()
    result = publish(ledger, signer, tiny, home)
    assert result.created
    assert ledger.size() == size + 1
    pb = result.published
    event = ledger.get(pb.seq).event()
    assert isinstance(event, BankPublished)
    assert event == pb.event
    assert (event.bank_id, event.version, event.stream) == ("tiny", "v1", "ledger")
    assert event.build == BUILD_SETTINGS
    assert event.build.duckdb_version == "1.5.5"
    assert event.build.timezone == "UTC"
    assert [t.name for t in event.tables] == ["customers", "orders"]
    assert [c.id for c in event.cases] == ["tiny-01", "tiny-02", "tiny-03"]
    assert [c.weight for c in event.cases] == [Decimal("1"), Decimal("1.5"), Decimal("2")]
    assert event.cases[2].required_ast == ("left_join", "distinct_count")
    # Stored files: the bytes that were hashed, each hash recomputed here independently.
    for name, file_hash in event.files.items():
        data = (pb.files_dir / name).read_bytes()
        assert file_hash == "sha256:" + hashlib.sha256(data).hexdigest()
    assert pb.db_path == home / "banks" / (event.content_sha256[7:] + ".duckdb")
    assert pb.files_dir == home / "banks" / event.content_sha256[7:]
    # reference SQL: only its hash in the event, the text in the stored cases.yaml.
    ref = pb.references()["tiny-01"]
    assert ref.startswith("SELECT customer_id, name\n")
    sha = "sha256:" + hashlib.sha256(ref.encode()).hexdigest()
    assert event.cases[0].reference_sql_sha256 == sha
    assert "SELECT customer_id" not in event.semantic_json + event.prompt_template
    gold = {g.case_id: g for g in event.gold}
    assert gold["tiny-01"].rows == ((3, "Chen"),)
    body = {
        "columns": [
            {"name": "customer_id", "type": "INTEGER"},
            {"name": "name", "type": "VARCHAR"},
        ],
        "rows": [[3, "Chen"]],
    }
    assert gold["tiny-01"].digest == digest(body)
    assert event.gold_digest == digest([[g.case_id, g.digest] for g in event.gold])
    # Read-only from then on.
    assert not pb.db_path.stat().st_mode & 0o222


def test_publishing_again_is_a_no_op(
    tiny: Path, ledger: Ledger, signer: Signer, home: Path
) -> None:
    first = publish(ledger, signer, tiny, home)
    size = ledger.size()
    (tiny / "seed.sql").write_bytes((tiny / "seed.sql").read_bytes().replace(b"\n", b"\r\n"))
    again = publish(ledger, signer, tiny, home)
    assert not again.created
    assert again.published.seq == first.published.seq
    assert again.published.event == first.published.event
    assert ledger.size() == size


def test_changed_bank_under_the_same_version_is_refused(
    tiny: Path, ledger: Ledger, signer: Signer, home: Path
) -> None:
    publish(ledger, signer, tiny, home)
    size = ledger.size()
    edit(tiny, "seed.sql", "80.50", "80.51")
    with pytest.raises(BankError) as info:
        publish(ledger, signer, tiny, home)
    assert "tiny@v1 is already published" in info.value.message
    assert info.value.hint is not None
    assert "bump `version`" in info.value.hint
    assert ledger.size() == size
    edit(tiny, "cases.yaml", "version: v1", "version: v2")
    second = publish(ledger, signer, tiny, home)
    assert second.created
    assert second.published.event.version == "v2"
    # Lookup: latest published version by default, or the one asked for.
    assert find_published(ledger, home, "tiny").event.version == "v2"
    assert find_published(ledger, home, "tiny@v1").event.version == "v1"
    h = second.published.event.content_sha256
    assert find_published(ledger, home, h).seq == second.published.seq
    assert [p.ref for p in list_published(ledger, home)] == ["tiny@v1", "tiny@v2"]
    with pytest.raises(BankError, match=r"no published bank 'tiny@v3'.*tiny@v1, tiny@v2"):
        find_published(ledger, home, "tiny@v3")


def test_missing_database_is_rebuilt_on_republish(
    tiny: Path, ledger: Ledger, signer: Signer, home: Path
) -> None:
    pb = publish(ledger, signer, tiny, home).published
    pb.db_path.unlink()
    for child in pb.files_dir.iterdir():
        child.chmod(0o644)
    shutil.rmtree(pb.files_dir)
    again = publish(ledger, signer, tiny, home)
    assert not again.created
    assert pb.db_path.is_file()
    assert pb.files_dir.is_dir()
    assert pb.stored_bank().content_sha256 == pb.event.content_sha256


def test_edited_stored_files_are_detected(
    tiny: Path, ledger: Ledger, signer: Signer, home: Path
) -> None:
    pb = publish(ledger, signer, tiny, home).published
    seed = pb.files_dir / "seed.sql"
    seed.chmod(0o644)
    seed.write_text(seed.read_text().replace("80.50", "80.51"))
    with pytest.raises(BankError, match="stored files of bank tiny@v1"):
        pb.references()
