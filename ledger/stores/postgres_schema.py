"""The PostgreSQL ledger's schema: its tables, triggers and functions, as SQL text.

Part of ``ledger.stores.postgres``: ``_DDL`` creates a ledger (schema 1), ``SCHEMA_2``
adds what schema 2 checks on the server (issue 29: the writer of each row, a Merkle
node per row, checkpoints checked against the log, the append lock), and
``_FILL_NODES`` fills in the nodes of rows stored before it, for an upgrade.
"""

from __future__ import annotations

__all__ = ["SCHEMA", "SCHEMA_2", "SCHEMA_VERSION"]

SCHEMA = "caseledger"
#: The schema version this code writes (``meta`` row ``schema``; absent means 1).
SCHEMA_VERSION = 2

# The events row check, written once: schema 1 made it as it is without the two
# lines after the chain check (its search_path unset); schema 2 replaces it.
_CHECK_APPEND = """
CREATE OR REPLACE FUNCTION caseledger.check_append() RETURNS trigger
LANGUAGE plpgsql{settings} AS $$
DECLARE
    last_seq   BIGINT;
    last_chain BYTEA;
BEGIN
    SELECT seq, chain INTO last_seq, last_chain
        FROM caseledger.events ORDER BY seq DESC LIMIT 1;
    IF NEW.seq IS DISTINCT FROM coalesce(last_seq + 1, 0) THEN
        RAISE EXCEPTION 'caseledger events: seq % refused: the next seq is %',
            NEW.seq, coalesce(last_seq + 1, 0) USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.leaf_hash IS DISTINCT FROM sha256(decode('00', 'hex') || NEW.body) THEN
        RAISE EXCEPTION 'caseledger events: seq %: leaf_hash is not SHA-256(0x00 || body)',
            NEW.seq USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.chain IS DISTINCT FROM sha256(
        coalesce(last_chain, decode(repeat('00', 32), 'hex')) || NEW.leaf_hash
    ) THEN
        RAISE EXCEPTION 'caseledger events: seq %: chain is not SHA-256(previous chain || leaf)',
            NEW.seq USING ERRCODE = 'integrity_constraint_violation';
    END IF;{schema_2}
    RETURN NEW;
END $$;
"""

# The schema name is spelled out: it is SCHEMA.
_DDL = """
CREATE SCHEMA caseledger;
REVOKE ALL ON SCHEMA caseledger FROM PUBLIC;
CREATE TABLE caseledger.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE caseledger.events (
    seq        BIGINT PRIMARY KEY CHECK (seq >= 0),
    body       BYTEA NOT NULL,
    leaf_hash  BYTEA NOT NULL CONSTRAINT events_leaf_hash_key UNIQUE,
    chain      BYTEA NOT NULL,
    key_id     TEXT NOT NULL,
    sig        BYTEA NOT NULL,
    stream     TEXT NOT NULL,
    stream_seq BIGINT NOT NULL,
    type       TEXT NOT NULL
);
CREATE INDEX events_by_stream ON caseledger.events (stream, stream_seq);
CREATE INDEX events_by_type ON caseledger.events (type, seq);
CREATE TABLE caseledger.checkpoints (size BIGINT PRIMARY KEY CHECK (size > 0), note TEXT NOT NULL);
REVOKE ALL ON ALL TABLES IN SCHEMA caseledger FROM PUBLIC;

CREATE FUNCTION caseledger.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'caseledger % are append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;

-- check_append --

CREATE TRIGGER events_check_append BEFORE INSERT ON caseledger.events
    FOR EACH ROW EXECUTE FUNCTION caseledger.check_append();
CREATE TRIGGER events_refuse_change BEFORE UPDATE OR DELETE ON caseledger.events
    FOR EACH ROW EXECUTE FUNCTION caseledger.refuse_change();
CREATE TRIGGER events_refuse_truncate BEFORE TRUNCATE ON caseledger.events
    FOR EACH STATEMENT EXECUTE FUNCTION caseledger.refuse_change();
CREATE TRIGGER checkpoints_refuse_change BEFORE UPDATE OR DELETE ON caseledger.checkpoints
    FOR EACH ROW EXECUTE FUNCTION caseledger.refuse_change();
CREATE TRIGGER checkpoints_refuse_truncate BEFORE TRUNCATE ON caseledger.checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION caseledger.refuse_change();
CREATE TRIGGER meta_refuse_change BEFORE UPDATE OR DELETE ON caseledger.meta
    FOR EACH ROW EXECUTE FUNCTION caseledger.refuse_change();
CREATE TRIGGER meta_refuse_truncate BEFORE TRUNCATE ON caseledger.meta
    FOR EACH STATEMENT EXECUTE FUNCTION caseledger.refuse_change();
"""
_DDL = _DDL.replace("-- check_append --", _CHECK_APPEND.format(settings="", schema_2="").strip())

# Schema 2 (issue 29): who wrote each row, a Merkle node per row, checkpoints the server
# checks against the log, and an append lock readers cannot take. New ledgers get _DDL
# then this; a schema-1 ledger gets this from PostgresBackend.upgrade (with the nodes of
# its stored rows filled in). The trigger functions set their search_path: a trigger
# runs in the inserting role's session, which must not be able to put its own sha256()
# first. tree_node and tree_root run under that path when the triggers call them (a
# SET clause of their own would cost a settings change per row); called directly,
# they only compute for the caller.
SCHEMA_2 = """
ALTER TABLE caseledger.events ADD COLUMN writer TEXT, ADD COLUMN node BYTEA;
ALTER TABLE caseledger.checkpoints ADD COLUMN writer TEXT, ADD COLUMN added BIGINT;
CREATE INDEX checkpoints_by_added ON caseledger.checkpoints (added);
CREATE TABLE caseledger.append_lock (id INT PRIMARY KEY CHECK (id = 1));
INSERT INTO caseledger.append_lock VALUES (1);
REVOKE ALL ON caseledger.append_lock FROM PUBLIC;
CREATE TRIGGER append_lock_refuse_change BEFORE UPDATE OR DELETE ON caseledger.append_lock
    FOR EACH ROW EXECUTE FUNCTION caseledger.refuse_change();
CREATE TRIGGER append_lock_refuse_truncate BEFORE TRUNCATE ON caseledger.append_lock
    FOR EACH STATEMENT EXECUTE FUNCTION caseledger.refuse_change();

-- The root of the largest complete subtree ending at leaf `at` (RFC 9162 node hashes):
-- its width is the lowest set bit of at + 1, and its left half is the node stored at
-- seq at - width/2. One hash per row on average.
CREATE FUNCTION caseledger.tree_node(at BIGINT, leaf BYTEA) RETURNS BYTEA
LANGUAGE plpgsql STABLE AS $$
DECLARE
    node      BYTEA := leaf;
    width     BIGINT := 1;
    left_node BYTEA;
BEGIN
    WHILE (at + 1) % (width * 2) = 0 LOOP
        SELECT e.node INTO left_node FROM caseledger.events e WHERE e.seq = at - width;
        IF left_node IS NULL THEN
            RAISE EXCEPTION 'caseledger events: seq %: no tree node stored', at - width
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        node := sha256(decode('01', 'hex') || left_node || node);
        width := width * 2;
    END LOOP;
    RETURN node;
END $$;

-- The RFC 9162 tree head over the first `size` leaves: the nodes ending at each prefix
-- of size's binary expansion (largest first), folded from the right. NULL when a node
-- is missing.
CREATE FUNCTION caseledger.tree_root(size BIGINT) RETURNS BYTEA
LANGUAGE plpgsql STABLE AS $$
DECLARE
    peaks BYTEA[] := '{}';
    pos   BIGINT := 0;
    node  BYTEA;
    root  BYTEA;
BEGIN
    IF size < 1 THEN
        RETURN NULL;
    END IF;
    FOR b IN REVERSE 62..0 LOOP
        IF (size >> b) & 1 = 1 THEN
            pos := pos + (1::BIGINT << b);
            SELECT e.node INTO node FROM caseledger.events e WHERE e.seq = pos - 1;
            IF node IS NULL THEN
                RETURN NULL;
            END IF;
            peaks := array_append(peaks, node);
        END IF;
    END LOOP;
    root := peaks[array_length(peaks, 1)];
    FOR i IN REVERSE array_length(peaks, 1) - 1 .. 1 LOOP
        root := sha256(decode('01', 'hex') || peaks[i] || root);
    END LOOP;
    RETURN root;
END $$;

-- check_append --

CREATE FUNCTION caseledger.check_checkpoint() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    events  BIGINT;
    genesis BYTEA;
    head    TEXT;
BEGIN
    -- Serialised with appends: `added` is then the log's size for as long as the row
    -- is uncommitted, which is what lets writers find the rows added since they looked.
    PERFORM 1 FROM caseledger.append_lock WHERE id = 1 FOR UPDATE;
    SELECT coalesce(max(seq) + 1, 0) INTO events FROM caseledger.events;
    IF NEW.size > events THEN
        RAISE EXCEPTION 'caseledger checkpoints: size % refused: the log holds % events',
            NEW.size, events USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    SELECT leaf_hash INTO genesis FROM caseledger.events WHERE seq = 0;
    head := 'caseledger/' || substr(encode(genesis, 'hex'), 1, 16) || E'\n' || NEW.size
        || E'\n' || encode(caseledger.tree_root(NEW.size), 'base64') || E'\n\n';
    IF head IS NULL OR left(NEW.note, length(head)) IS DISTINCT FROM head THEN
        RAISE EXCEPTION 'caseledger checkpoints: size % refused: the note is not this '
            'log''s tree head at that size (origin, size and root must be %)',
            NEW.size, replace(coalesce(head, '?'), E'\n', ' ')
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    NEW.writer := session_user;
    NEW.added := events;
    RETURN NEW;
END $$;

CREATE TRIGGER checkpoints_check_insert BEFORE INSERT ON caseledger.checkpoints
    FOR EACH ROW EXECUTE FUNCTION caseledger.check_checkpoint();
"""
SCHEMA_2 = SCHEMA_2.replace(
    "-- check_append --",
    _CHECK_APPEND.format(
        settings=" SET search_path = pg_catalog, pg_temp",
        schema_2="\n    NEW.writer := session_user;  -- set by the server, never by the client"
        "\n    NEW.node := caseledger.tree_node(NEW.seq, NEW.leaf_hash);",
    ).strip(),
)

# The nodes of rows stored before schema 2, in seq order (each reads earlier ones).
_FILL_NODES = """
ALTER TABLE caseledger.events DISABLE TRIGGER events_refuse_change;
DO $$
DECLARE r RECORD;
BEGIN
    FOR r IN SELECT seq, leaf_hash FROM caseledger.events ORDER BY seq LOOP
        UPDATE caseledger.events SET node = caseledger.tree_node(r.seq, r.leaf_hash)
            WHERE seq = r.seq;
    END LOOP;
END $$;
ALTER TABLE caseledger.events ENABLE TRIGGER events_refuse_change;
"""
