"""The floor's schema and roles in PostgreSQL: what `tablectl floor init` creates.

One table, `floor.journal_rows`, holds every table's rows keyed by (table_id, seq), each with
the columns the local journal hashed (so the floor can verify the chain on its own) and, in
`columns`, any further column of the local row by name: a new journal column or row kind flows
without a change here. The store is append-only three times over: roles (writers hold INSERT
only, readers SELECT only), row-level security (a table's writer may insert only rows of its
own table), and triggers (no UPDATE, DELETE or TRUNCATE, even for a role granted them by
mistake; an insert must continue the table's chain: the next seq, its prev_hash the floor's
last hash). Re-sending a row the floor already holds, identical, is a no-op: shipping is
idempotent by (table_id, seq), and a different row under a shipped seq is refused loudly.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.controller.config import TABLE_ID_PATTERN

SCHEMA = "floor"
WRITER_GROUP = "tablectl_floor_writer"
READER_GROUP = "tablectl_floor_reader"
#: the regulator's lab: reads every row, a round in play included (H7: grant it sparingly)
AUDITOR_GROUP = "tablectl_floor_auditor"
#: what readers query: the rows of ended rounds (and table rows), joined on the release mark
RELEASED_VIEW = "released_rows"
#: the SQLSTATE the floor's triggers raise (class "TF": tablectl floor)
SQLSTATE_DIVERGED = "TF001"
SQLSTATE_CHAIN = "TF002"
SQLSTATE_APPEND_ONLY = "TF003"
#: the columns every journal row has, hashed into its chain (docs/journal.md)
CHAIN_COLUMNS = ("seq", "kind", "round", "recorded_at", "body", "prev_hash", "hash")

_DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
REVOKE ALL ON SCHEMA {SCHEMA} FROM PUBLIC;

CREATE TABLE IF NOT EXISTS {SCHEMA}.tables (
    table_id text PRIMARY KEY,
    writer_role name NOT NULL UNIQUE,
    registered_at timestamptz NOT NULL DEFAULT now()
);
-- The last seq a reader may see: the end of the table's last ended round (H7).
ALTER TABLE {SCHEMA}.tables ADD COLUMN IF NOT EXISTS released_seq bigint NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS {SCHEMA}.journal_rows (
    table_id text NOT NULL REFERENCES {SCHEMA}.tables (table_id),
    seq bigint NOT NULL CHECK (seq >= 1),
    kind text NOT NULL,
    round bigint,
    recorded_at text NOT NULL,
    body text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    columns jsonb NOT NULL DEFAULT '{{}}'::jsonb,
    shipped_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, seq)
);
CREATE INDEX IF NOT EXISTS journal_rows_kind ON {SCHEMA}.journal_rows (table_id, kind, seq);
-- The rows that can end a round (a collection): found without reading the rounds' cards.
CREATE INDEX IF NOT EXISTS journal_rows_collections ON {SCHEMA}.journal_rows (table_id, seq)
    WHERE kind = 'event' AND body LIKE '%"type":"hands_collected"%';

-- H7 on the floor: a round's rows reach readers once the round is over. A round ends at an
-- accepted collection (hands_collected, not refused by a `rejected` decision naming it); its
-- rows are released up to the first row after the collection's own decisions. Everything
-- later (the between-round rows, a burn card, the next round) waits for the next collection:
-- a round that ends without one (voided and followed by the next deal) is released with the
-- next round's collection, late rather than early.
CREATE OR REPLACE FUNCTION {SCHEMA}.advance_release(tid text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    released bigint;
    collected bigint;
    after_decisions bigint;
BEGIN
    SELECT released_seq INTO released FROM {SCHEMA}.tables WHERE table_id = tid;
    FOR collected IN
        SELECT seq FROM {SCHEMA}.journal_rows
            WHERE table_id = tid AND seq > released AND kind = 'event'
              AND body LIKE '%"type":"hands_collected"%'
              AND (body::jsonb ->> 'type') = 'hands_collected'
            ORDER BY seq DESC
    LOOP
        SELECT min(seq) INTO after_decisions FROM (
            SELECT seq, kind FROM {SCHEMA}.journal_rows
                WHERE table_id = tid AND seq > collected ORDER BY seq LIMIT 256
        ) AS following WHERE kind <> 'decision';
        CONTINUE WHEN after_decisions IS NULL;  -- its decisions may not all be here yet
        CONTINUE WHEN EXISTS (
            SELECT 1 FROM {SCHEMA}.journal_rows
                WHERE table_id = tid AND seq > collected AND seq < after_decisions
                  AND kind = 'decision' AND body LIKE '%"decision":"rejected"%'
        );  -- the collection was refused: that round goes on
        UPDATE {SCHEMA}.tables SET released_seq = after_decisions - 1 WHERE table_id = tid;
        RETURN;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION {SCHEMA}.release_ended_rounds() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    tid text;
BEGIN
    FOR tid IN SELECT DISTINCT table_id FROM inserted LOOP
        PERFORM {SCHEMA}.advance_release(tid);
    END LOOP;
    RETURN NULL;
END
$$;

-- The table a writer role writes for (used by the row-level security policies).
CREATE OR REPLACE FUNCTION {SCHEMA}.table_of(role name) RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
    AS $$ SELECT table_id FROM {SCHEMA}.tables WHERE writer_role = role $$;

-- An insert continues the table's chain; an identical re-send is skipped (idempotent).
CREATE OR REPLACE FUNCTION {SCHEMA}.continue_chain() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    held text;
BEGIN
    -- A table's role inserts its own table's rows only: refused before any other table's
    -- chain is looked at, so the error says nothing of another table (row-level security
    -- would refuse it too, but after this trigger has run).
    IF pg_has_role(session_user, '{WRITER_GROUP}', 'MEMBER')
       AND NEW.table_id IS DISTINCT FROM {SCHEMA}.table_of(session_user) THEN
        RAISE EXCEPTION 'a table''s role inserts only its own table''s rows'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT hash INTO held FROM {SCHEMA}.journal_rows
        WHERE table_id = NEW.table_id AND seq = NEW.seq;
    IF FOUND THEN
        IF held = NEW.hash THEN
            RETURN NULL;  -- shipped already: nothing to do
        END IF;
        RAISE EXCEPTION 'table %: row % differs from the floor''s copy (hash % here, % sent):'
            ' the local journal diverged from what it shipped', NEW.table_id, NEW.seq,
            left(held, 12), left(NEW.hash, 12) USING ERRCODE = '{SQLSTATE_DIVERGED}';
    END IF;
    IF NEW.seq = 1 THEN
        IF NEW.prev_hash <> repeat('0', 64) THEN
            RAISE EXCEPTION 'table %: row 1 must follow the genesis hash', NEW.table_id
                USING ERRCODE = '{SQLSTATE_CHAIN}';
        END IF;
    ELSE
        SELECT hash INTO held FROM {SCHEMA}.journal_rows
            WHERE table_id = NEW.table_id AND seq = NEW.seq - 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'table %: row % sent before row %: the floor keeps no gap',
                NEW.table_id, NEW.seq, NEW.seq - 1 USING ERRCODE = '{SQLSTATE_CHAIN}';
        END IF;
        IF held <> NEW.prev_hash THEN
            RAISE EXCEPTION 'table %: row % does not follow row % on the floor (prev_hash % is'
                ' not %)', NEW.table_id, NEW.seq, NEW.seq - 1, left(NEW.prev_hash, 12),
                left(held, 12) USING ERRCODE = '{SQLSTATE_DIVERGED}';
        END IF;
    END IF;
    NEW.shipped_at := now();
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION {SCHEMA}.refuse_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the floor store is append-only: % refused', TG_OP
        USING ERRCODE = '{SQLSTATE_APPEND_ONLY}';
END
$$;

DROP TRIGGER IF EXISTS continue_chain ON {SCHEMA}.journal_rows;
CREATE TRIGGER continue_chain BEFORE INSERT ON {SCHEMA}.journal_rows
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.continue_chain();
DROP TRIGGER IF EXISTS release_ended_rounds ON {SCHEMA}.journal_rows;
CREATE TRIGGER release_ended_rounds AFTER INSERT ON {SCHEMA}.journal_rows
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.release_ended_rounds();
DROP TRIGGER IF EXISTS append_only ON {SCHEMA}.journal_rows;
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {SCHEMA}.journal_rows
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.refuse_change();
DROP TRIGGER IF EXISTS append_only_truncate ON {SCHEMA}.journal_rows;
CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON {SCHEMA}.journal_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.refuse_change();

ALTER TABLE {SCHEMA}.journal_rows ENABLE ROW LEVEL SECURITY;
ALTER TABLE {SCHEMA}.tables ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON ALL TABLES IN SCHEMA {SCHEMA} FROM PUBLIC;
REVOKE ALL ON FUNCTION {SCHEMA}.table_of(name) FROM PUBLIC;
REVOKE ALL ON FUNCTION {SCHEMA}.continue_chain() FROM PUBLIC;
REVOKE ALL ON FUNCTION {SCHEMA}.advance_release(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION {SCHEMA}.release_ended_rounds() FROM PUBLIC;

-- What readers query: a join on the release mark (the planner's, not a check per row).
CREATE OR REPLACE VIEW {SCHEMA}.{RELEASED_VIEW} WITH (security_barrier) AS
    SELECT rows.* FROM {SCHEMA}.journal_rows AS rows
        JOIN {SCHEMA}.tables AS released USING (table_id)
        WHERE rows.seq <= released.released_seq OR rows.round IS NULL;
REVOKE ALL ON {SCHEMA}.{RELEASED_VIEW} FROM PUBLIC;
"""

# Roles are cluster-wide: created when missing (a second database on the server reuses them).
_ROLES = f"""
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{WRITER_GROUP}') THEN
        CREATE ROLE {WRITER_GROUP} NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{READER_GROUP}') THEN
        CREATE ROLE {READER_GROUP} NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{AUDITOR_GROUP}') THEN
        CREATE ROLE {AUDITOR_GROUP} NOLOGIN;
    END IF;
END $$;
"""

_GRANTS = f"""
GRANT USAGE ON SCHEMA {SCHEMA} TO {WRITER_GROUP}, {READER_GROUP}, {AUDITOR_GROUP};
-- writers: INSERT, and of their own rows only the chain's head (to resume after an outage)
GRANT INSERT ON {SCHEMA}.journal_rows TO {WRITER_GROUP};
GRANT SELECT (table_id, seq, hash) ON {SCHEMA}.journal_rows TO {WRITER_GROUP};
GRANT EXECUTE ON FUNCTION {SCHEMA}.table_of(name) TO {WRITER_GROUP};
-- readers (surveillance, the pit, reports): SELECT of ended rounds, nothing else (H7). They
-- may query the rows table itself (its policy below holds back the rounds in play) or the
-- released view (the same rows, joined once rather than checked row by row).
GRANT SELECT ON {SCHEMA}.journal_rows, {SCHEMA}.{RELEASED_VIEW}, {SCHEMA}.tables
    TO {READER_GROUP};
GRANT EXECUTE ON FUNCTION {SCHEMA}.table_of(name) TO {READER_GROUP};
-- the auditor (the regulator's lab): every row, a round in play included
GRANT SELECT ON {SCHEMA}.journal_rows, {SCHEMA}.{RELEASED_VIEW}, {SCHEMA}.tables
    TO {AUDITOR_GROUP};

DROP POLICY IF EXISTS writer_inserts_own_table ON {SCHEMA}.journal_rows;
CREATE POLICY writer_inserts_own_table ON {SCHEMA}.journal_rows FOR INSERT TO {WRITER_GROUP}
    WITH CHECK (table_id = {SCHEMA}.table_of(current_user));
DROP POLICY IF EXISTS writer_sees_own_head ON {SCHEMA}.journal_rows;
CREATE POLICY writer_sees_own_head ON {SCHEMA}.journal_rows FOR SELECT TO {WRITER_GROUP}
    USING (table_id = {SCHEMA}.table_of(current_user));
DROP POLICY IF EXISTS reader_reads_all ON {SCHEMA}.journal_rows;
DROP POLICY IF EXISTS reader_reads_ended_rounds ON {SCHEMA}.journal_rows;
CREATE POLICY reader_reads_ended_rounds ON {SCHEMA}.journal_rows FOR SELECT TO {READER_GROUP}
    USING (round IS NULL OR seq <= (
        SELECT released.released_seq FROM {SCHEMA}.tables AS released
            WHERE released.table_id = journal_rows.table_id));
DROP POLICY IF EXISTS auditor_reads_all ON {SCHEMA}.journal_rows;
CREATE POLICY auditor_reads_all ON {SCHEMA}.journal_rows FOR SELECT TO {AUDITOR_GROUP}
    USING (true);
DROP POLICY IF EXISTS reader_reads_tables ON {SCHEMA}.tables;
CREATE POLICY reader_reads_tables ON {SCHEMA}.tables FOR SELECT
    TO {READER_GROUP}, {AUDITOR_GROUP} USING (true);
"""


class FloorSetupError(RuntimeError):
    """`floor init` cannot do what was asked; the message says what and where."""


def writer_role(table_id: str) -> str:
    """The login role a table's daemon ships with: `tablectl_table_<id>`."""
    if not TABLE_ID_PATTERN.match(table_id):
        raise FloorSetupError(
            f"table id {table_id!r}: expected 1-32 of [a-z0-9_-] starting with a letter or digit"
        )
    return f"tablectl_table_{table_id}"


@dataclass(frozen=True)
class Provisioned:
    table_id: str
    role: str
    password_written: bool


def create_schema(conn: Any) -> None:
    """Schema, functions, triggers, group roles, grants and policies (idempotent)."""
    with conn.transaction():
        conn.execute(_ROLES)
        conn.execute(_DDL)
        conn.execute(_GRANTS)


def add_table(conn: Any, table_id: str, *, passfile: Path | None, dbname: str) -> Provisioned:
    """Register a table and its login role (INSERT-only via the writer group).

    With `passfile`, a random password is set and a line for it appended to that libpq
    passfile (created 0600): the password never passes through a command line or the
    configuration. Without it, the role has no password (certificate or peer authentication,
    set up by the DBA in pg_hba.conf).
    """
    from psycopg import sql

    role = writer_role(table_id)
    password = secrets.token_urlsafe(24) if passfile is not None else None
    with conn.transaction():
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("GRANT {} TO {}").format(sql.Identifier(WRITER_GROUP), sql.Identifier(role))
        )
        if password is not None:
            conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(scram_verifier(conn, role, password))
                )
            )
        registered = conn.execute(
            f"SELECT writer_role FROM {SCHEMA}.tables WHERE table_id = %s", (table_id,)
        ).fetchone()
        if registered is None:
            conn.execute(
                f"INSERT INTO {SCHEMA}.tables (table_id, writer_role) VALUES (%s, %s)",
                (table_id, role),
            )
        elif registered[0] != role:
            raise FloorSetupError(f"table {table_id} is registered with role {registered[0]}")
    if passfile is not None and password is not None:
        append_passfile(passfile, dbname, role, password)
    return Provisioned(table_id, role, password is not None)


def scram_verifier(conn: Any, role: str, password: str) -> str:
    """The password as a SCRAM-SHA-256 verifier (RFC 5802/7677: salt, iterations, stored and
    server keys), computed here by libpq's own PQencryptPasswordConn (psycopg's `pq` binding):
    the server stores it as given and the password itself never crosses the wire, so no
    `log_statement` setting can write it to the server's log. libpq's implementation rather
    than our own hashlib one: the format and iteration count are the server's."""
    verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
    return bytes(verifier).decode("ascii")


def add_reader(conn: Any, role: str, *, group: str = READER_GROUP) -> None:
    """Grant the reader group (or the auditor group: every row, rounds in play included) to
    an existing role (a person's login, a report job's)."""
    from psycopg import sql

    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$", role):
        raise FloorSetupError(f"reader role {role!r}: expected a plain role name")
    with conn.transaction():
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
            raise FloorSetupError(f"reader role {role!r} does not exist: CREATE ROLE it first")
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(role)))


def _passfile_field(text: str) -> str:
    return text.replace("\\", "\\\\").replace(":", "\\:")


def append_passfile(path: Path, dbname: str, role: str, password: str) -> None:
    """One `host:port:dbname:user:password` line (libpq's format; any host and port), 0600.

    A line the file already holds for the same database and role is replaced (libpq takes the
    first line that matches: an old password left above would lock the table out).
    """
    fields = ("*", "*", dbname, role)
    line = ":".join(_passfile_field(part) for part in (*fields, password))
    prefix = ":".join(_passfile_field(part) for part in fields) + ":"
    kept: list[str] = []
    if path.exists():
        kept = [old for old in path.read_text().splitlines() if not old.startswith(prefix)]
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)
        os.write(descriptor, ("\n".join([*kept, line]) + "\n").encode())
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temporary, path)
