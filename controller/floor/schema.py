"""The floor's schema and roles in PostgreSQL: what `tablectl floor init` creates.

One table, `floor.journal_rows`, holds every table's rows keyed by (table_id, seq), each with
the columns the local journal hashed (so the floor can verify the chain on its own) and, in
`columns`, any further column of the local row by name: a new journal column or row kind flows
without a change here. The store is append-only three times over: roles (writers hold INSERT
only, readers SELECT of the released view only), a check on every row (a table's login may
insert only rows of its own table), and triggers (no UPDATE, DELETE or TRUNCATE, even for a
role granted them by mistake; an insert must continue the table's chain: the next seq, its
prev_hash the floor's last hash). A row the floor already holds is refused (the shipper sends
only rows after the floor's head, which it verified on connecting), and a different row under
a shipped seq is refused loudly.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.controller.common.config import TABLE_ID_PATTERN
from tablectl.controller.record.durable import write_private_file

SCHEMA = "floor"
WRITER_GROUP = "tablectl_floor_writer"
READER_GROUP = "tablectl_floor_reader"
#: the regulator's lab: reads every row, a round in play included (H7: grant it sparingly)
AUDITOR_GROUP = "tablectl_floor_auditor"
#: what readers call for rows: a table's rows up to its release mark (ended rounds only), by
#: a function whose plan no reader sees (a view's EXPLAIN ANALYZE counted the rows it hid)
RELEASED_ROWS = "released_rows"
#: what readers read of rounds: the spans of ended rounds only, written at each release
ENDED_ROUNDS = "ended_rounds"
#: what a table's shipper calls with each cosigned checkpoint (floor prove's anchors)
SHIP_CHECKPOINT = "ship_checkpoint"
#: what `floor prove` reads: cosigned checkpoints and leaf hashes, released rows only
RELEASED_CHECKPOINTS = "released_checkpoints"
RELEASED_LEAVES = "released_leaves"
#: a signed note of a checkpoint with a few cosignatures is ~300-600 bytes; larger is refused
MAX_CHECKPOINT_NOTE_BYTES = 8192
#: notes kept per table and tree size (one per witness that cosigned it, or a merge of them)
MAX_NOTES_PER_SIZE = 16
#: the columns of floor.tables a reader may read: none moves while a round is played
READER_TABLE_COLUMNS = (
    "table_id",
    "registered_at",
    "released_seq",
    "released_hash",
    "released_verified_seq",
    "released_verified_hash",
    "table_row",
)
#: the SQLSTATE the floor's triggers raise (class "TF": tablectl floor)
SQLSTATE_DIVERGED = "TF001"
SQLSTATE_CHAIN = "TF002"
SQLSTATE_APPEND_ONLY = "TF003"
#: the rows table's check that a table's login inserts its own table's rows only
OWN_TABLE_CHECK = "table_role_writes_own_table"
#: the columns every journal row has, hashed into its chain (docs/journal.md)
CHAIN_COLUMNS = ("seq", "kind", "round", "recorded_at", "body", "prev_hash", "hash")
#: recorded_at as the journal writes it (Python's isoformat of a UTC time, microseconds
#: always): the floor keeps a timestamptz and, only when the journal's text is not this form
#: of it, that text beside it (recorded_at_text); readers rebuild the hashed text with this
RECORDED_AT_SQL = (
    "coalesce(recorded_at_text, to_char(recorded_at AT TIME ZONE 'UTC',"
    " 'YYYY-MM-DD\"T\"HH24:MI:SS.US') || '+00:00')"
)
RECORDED_AT_SQL_DOC = "YYYY-MM-DDTHH:MM:SS.ffffff+00:00"
#: a table role's statement_timeout on the server (the shipper asks the same at connecting)
STATEMENT_TIMEOUT_MS = 30_000
#: gaming days made ahead (the current one, the day before, and these many after)
DAYS_AHEAD = 3
#: the most days ahead ensure_partitions_ahead makes for anyone (the DBA's `floor maintain`
#: calls ensure_partitions for more): a writer's login cannot fill the catalog
MAX_DAYS_AHEAD = 7
#: a table's login gets the work of ensure_partitions_ahead done at most once in this long
#: (a shipper asks at each connection; reconnecting faster changes nothing on the floor)
PARTITIONS_CALL_SECONDS = 10

_DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
REVOKE ALL ON SCHEMA {SCHEMA} FROM PUBLIC;

-- The casino's gaming day: the partitions' boundaries (one partition per gaming day).
CREATE TABLE IF NOT EXISTS {SCHEMA}.settings (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    gaming_day_start time NOT NULL DEFAULT '06:00',
    time_zone text NOT NULL DEFAULT 'UTC'
);
INSERT INTO {SCHEMA}.settings DEFAULT VALUES ON CONFLICT DO NOTHING;

CREATE TABLE IF NOT EXISTS {SCHEMA}.tables (
    table_id text PRIMARY KEY,
    writer_role name NOT NULL UNIQUE,
    registered_at timestamptz NOT NULL DEFAULT now(),
    -- the chain's head on the floor (what an insert must continue; what a shipper resumes from)
    head_seq bigint NOT NULL DEFAULT 0,
    head_hash text NOT NULL DEFAULT repeat('0', 64),
    -- the last row of the table's last ended round, and its hash: what a reader may see (H7)
    released_seq bigint NOT NULL DEFAULT 0,
    released_hash text NOT NULL DEFAULT repeat('0', 64),
    pending_collection bigint,
    -- the last row `floor verify` proved (a later verify starts after it)
    verified_seq bigint NOT NULL DEFAULT 0,
    verified_hash text NOT NULL DEFAULT repeat('0', 64),
    verified_at timestamptz,
    -- the table's row 1 (its game): kept when row 1's partition is retired
    table_row text
);
-- a floor made before these columns
ALTER TABLE {SCHEMA}.tables ADD COLUMN IF NOT EXISTS released_hash text NOT NULL
    DEFAULT repeat('0', 64);
-- the verified mark as far as it lies within the released rows (what a reader's verify
-- starts from): never past the release mark, so it never names a row of a round in play
ALTER TABLE {SCHEMA}.tables ADD COLUMN IF NOT EXISTS released_verified_seq bigint NOT NULL
    DEFAULT 0;
ALTER TABLE {SCHEMA}.tables ADD COLUMN IF NOT EXISTS released_verified_hash text NOT NULL
    DEFAULT repeat('0', 64);
-- durable_elsewhere(): the last row the floor holds on two machines (a synchronous standby
-- flushed it, or the WAL archive holds it), and the mark it is proving next (a head and the
-- WAL position after its commit), checked at most once a second
ALTER TABLE {SCHEMA}.tables ADD COLUMN IF NOT EXISTS durable_elsewhere_seq bigint NOT NULL
    DEFAULT 0;
ALTER TABLE {SCHEMA}.tables ADD COLUMN IF NOT EXISTS durable_mark_seq bigint;
ALTER TABLE {SCHEMA}.tables ADD COLUMN IF NOT EXISTS durable_mark_lsn pg_lsn;
ALTER TABLE {SCHEMA}.tables ADD COLUMN IF NOT EXISTS durable_checked_at timestamptz;

-- One partition per gaming day (by recorded_at, the table's UTC clock at the row's commit),
-- made ahead by `floor init`/`floor maintain` and by every shipper as it connects; a row
-- outside every day made (a table clock far off) goes to the default partition.
CREATE TABLE IF NOT EXISTS {SCHEMA}.journal_rows (
    table_id text NOT NULL,
    seq bigint NOT NULL CHECK (seq >= 1),
    kind text NOT NULL,
    round bigint,
    recorded_at timestamptz NOT NULL,
    -- the journal's own text of recorded_at when it is not {RECORDED_AT_SQL_DOC}
    recorded_at_text text,
    body text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    columns jsonb NOT NULL DEFAULT '{{}}'::jsonb,
    shipped_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, seq, recorded_at)
) PARTITION BY RANGE (recorded_at);
CREATE TABLE IF NOT EXISTS {SCHEMA}.journal_rows_default
    PARTITION OF {SCHEMA}.journal_rows DEFAULT;
-- A table's login inserts its own table's rows only, checked on each row before it reaches
-- an index (so a forged row for another table meets no unique key that would confirm the
-- other table's row): an expression on the row and the login (a table's role is named after
-- its table, writer_role()), not a function call. session_user, not current_user: a SET ROLE
-- does not change it, and the chain's trigger runs as its definer. Other logins (the DBA's,
-- `floor migrate`) are not table roles. Row-level security is not the tool here: the rows
-- table has none (COPY, the shippers' statement, refuses a table with it); readers read the
-- released view, writers read nothing.
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_constraint
                   WHERE conrelid = '{SCHEMA}.journal_rows'::regclass
                     AND conname = '{OWN_TABLE_CHECK}') THEN
        ALTER TABLE {SCHEMA}.journal_rows ADD CONSTRAINT {OWN_TABLE_CHECK}
            CHECK (session_user::text NOT LIKE 'tablectl\\_table\\_%'
                   OR session_user::text = 'tablectl_table_' || table_id);
    END IF;
END $$;
-- a dispute: a table's round (its seqs and times from floor.rounds, read by the primary
-- key); the floor at a moment; a day's report: one table's rows by time. No index by
-- (table_id, round): floor.rounds gives the same rows by the key, and 400 tables inserting
-- into one more index at once cost their shipping a quarter of its rate (docs/floor.md).
DROP INDEX IF EXISTS {SCHEMA}.journal_rows_round;
CREATE INDEX IF NOT EXISTS journal_rows_time ON {SCHEMA}.journal_rows (recorded_at);
CREATE INDEX IF NOT EXISTS journal_rows_landmarks ON {SCHEMA}.journal_rows (table_id, seq)
    WHERE kind IN ('table', 'checkpoint', 'segment');

-- Each round's span per table (kept by check_batch, one upsert per round a batch touches): a
-- dispute names a table and a round; this gives its rows' seqs and time span, so the lookup
-- reads them by the primary key in the one or two gaming days' partitions that hold them.
CREATE TABLE IF NOT EXISTS {SCHEMA}.rounds (
    table_id text NOT NULL,
    round bigint NOT NULL,
    first_seq bigint NOT NULL,
    last_seq bigint NOT NULL,
    first_at timestamptz NOT NULL,
    last_at timestamptz NOT NULL,
    PRIMARY KEY (table_id, round)
);

-- The spans of ended rounds (what readers read of floor.rounds): a round is written here by
-- check_batch when the release mark passes its last row, so nothing in this table moves while
-- a round is played (floor.rounds' last_seq and last_at of a live round move with every row).
CREATE TABLE IF NOT EXISTS {SCHEMA}.{ENDED_ROUNDS} (
    table_id text NOT NULL,
    round bigint NOT NULL,
    first_seq bigint NOT NULL,
    last_seq bigint NOT NULL,
    first_at timestamptz NOT NULL,
    last_at timestamptz NOT NULL,
    PRIMARY KEY (table_id, round)
);

-- Retired gaming days: archived (a verified COPY with its hashes), then detached and dropped.
CREATE TABLE IF NOT EXISTS {SCHEMA}.retired (
    partition name PRIMARY KEY,
    gaming_day date NOT NULL,
    rows bigint NOT NULL,
    archive text NOT NULL,
    sha256 text NOT NULL,
    retired_at timestamptz NOT NULL DEFAULT now()
);

-- The partitions of the gaming days from `first_day` on, `days` of them (idempotent); a day
-- retired is not made again; a day whose rows already sit in the default partition is left
-- to `floor maintain` (said in a notice). Returns how many were made.
CREATE OR REPLACE FUNCTION {SCHEMA}.ensure_partitions(first_day date, days integer)
    RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    cfg {SCHEMA}.settings;
    day date;
    name text;
    made integer := 0;
BEGIN
    SELECT * INTO cfg FROM {SCHEMA}.settings;
    FOR offset_days IN 0 .. days - 1 LOOP
        day := first_day + offset_days;
        name := 'journal_rows_' || to_char(day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass('{SCHEMA}.' || name) IS NOT NULL;
        CONTINUE WHEN EXISTS (SELECT 1 FROM {SCHEMA}.retired r WHERE r.partition = name);
        BEGIN
            EXECUTE format(
                'CREATE TABLE {SCHEMA}.%I PARTITION OF {SCHEMA}.journal_rows'
                ' FOR VALUES FROM (%L) TO (%L)', name,
                (day + cfg.gaming_day_start) AT TIME ZONE cfg.time_zone,
                (day + 1 + cfg.gaming_day_start) AT TIME ZONE cfg.time_zone);
            made := made + 1;
        EXCEPTION WHEN check_violation THEN
            RAISE NOTICE 'gaming day %: its rows are in the default partition', day;
        END;
    END LOOP;
    RETURN made;
END
$$;

-- When a table's login last had a function's work done (writer_calls: the rate limit).
CREATE TABLE IF NOT EXISTS {SCHEMA}.writer_calls (
    role name NOT NULL,
    function text NOT NULL,
    last_at timestamptz NOT NULL,
    PRIMARY KEY (role, function)
);

-- The current gaming day (the floor's clock) and the next ones: what a shipper makes ahead.
-- Bounded: at most {MAX_DAYS_AHEAD} days ahead (the DBA's ensure_partitions makes more), and for a
-- table's login the work at most once in {PARTITIONS_CALL_SECONDS} s (0 made when asked sooner).
DROP FUNCTION IF EXISTS {SCHEMA}.ensure_partitions_ahead(integer);
CREATE FUNCTION {SCHEMA}.ensure_partitions_ahead(days integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    cfg {SCHEMA}.settings;
BEGIN
    IF days IS NULL OR days < 0 OR days > {MAX_DAYS_AHEAD} THEN
        RAISE EXCEPTION 'ensure_partitions_ahead(%): from 0 to {MAX_DAYS_AHEAD} days ahead'
            ' (the DBA''s floor maintain makes more)', days
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF session_user::text LIKE 'tablectl\\_table\\_%' THEN
        IF EXISTS (SELECT 1 FROM {SCHEMA}.writer_calls
                   WHERE role = session_user AND function = 'ensure_partitions_ahead'
                     AND last_at > clock_timestamp()
                         - interval '{PARTITIONS_CALL_SECONDS} seconds') THEN
            RETURN 0;
        END IF;
        INSERT INTO {SCHEMA}.writer_calls AS c (role, function, last_at)
            VALUES (session_user, 'ensure_partitions_ahead', clock_timestamp())
            ON CONFLICT (role, function) DO UPDATE SET last_at = excluded.last_at;
    END IF;
    SELECT * INTO cfg FROM {SCHEMA}.settings;
    RETURN {SCHEMA}.ensure_partitions(
        ((now() AT TIME ZONE cfg.time_zone) - cfg.gaming_day_start)::date - 1, days + 2);
END
$$;

-- H7 on the floor: a round's rows reach readers once the round is over. A round ends at an
-- accepted collection (hands_collected, not refused by a `rejected` decision naming it); its
-- rows are released up to the first row after the collection's own decisions. Everything
-- later (the between-round rows, a burn card, the next round) waits for the next collection:
-- a round that ends without one (voided and followed by the next deal) is released with the
-- next round's collection, late rather than early. Computed in check_batch below over the
-- statement's rows (and a collection the previous batch ended on), in one pass.
-- One check per statement (a shipper's COPY of a batch, or an INSERT), over its rows at once
-- (a transition table): the rows of each table are its own (a table's role), continue the
-- floor's head (the next seq, prev_hash its hash), form one run and link to each other; then
-- the head and the release mark advance. A row the floor holds already is refused (the
-- shipper never sends one: it sends the rows after the head it verified on connecting).
-- Four reads of the batch's rows per table (its span; its links, last hash and row 1; its
-- rounds; its release marks) and one update of its floor.tables row.
CREATE OR REPLACE FUNCTION {SCHEMA}.check_batch() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    own text;
    batch record;
    held {SCHEMA}.tables;
    chain record;
    released bigint;
    waiting bigint;
    head_released text;
BEGIN
    SELECT table_id INTO own FROM {SCHEMA}.tables WHERE writer_role = session_user;
    FOR batch IN
        SELECT table_id, min(seq) AS first, max(seq) AS last, count(*) AS n
            FROM inserted GROUP BY table_id
    LOOP
        -- a table's role: its own rows only, refused before another table is looked at
        IF own IS NOT NULL AND batch.table_id IS DISTINCT FROM own THEN
            RAISE EXCEPTION 'a table''s role inserts only its own table''s rows'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        SELECT * INTO held FROM {SCHEMA}.tables WHERE table_id = batch.table_id FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'table %: not registered on the floor (tablectl floor init --table)',
                batch.table_id USING ERRCODE = '{SQLSTATE_CHAIN}';
        END IF;
        IF batch.first <= held.head_seq THEN
            RAISE EXCEPTION 'table %: row % differs from or repeats the floor''s copy (the floor'
                ' holds rows up to %): the local journal diverged from what it shipped',
                batch.table_id, batch.first, held.head_seq USING ERRCODE = '{SQLSTATE_DIVERGED}';
        END IF;
        IF batch.first > held.head_seq + 1 THEN
            RAISE EXCEPTION 'table %: row % sent before row %: the floor keeps no gap',
                batch.table_id, batch.first, held.head_seq + 1 USING ERRCODE = '{SQLSTATE_CHAIN}';
        END IF;
        IF batch.n <> batch.last - batch.first + 1 THEN
            RAISE EXCEPTION 'table %: rows % to % are not one run of seqs: the floor keeps no gap',
                batch.table_id, batch.first, batch.last USING ERRCODE = '{SQLSTATE_CHAIN}';
        END IF;
        -- one read: the first row whose prev_hash is not the hash before it, the last row's
        -- hash (the new head), and row 1's body (the table's game, kept past retirement)
        SELECT min(seq) FILTER (WHERE prev_hash <> before) AS broken,
               min(hash) FILTER (WHERE seq = batch.last) AS last_hash,
               min(body) FILTER (WHERE seq = 1) AS first_body
            INTO chain
            FROM (SELECT seq, prev_hash, hash, body,
                         coalesce(lag(hash) OVER (ORDER BY seq), held.head_hash) AS before
                      FROM inserted WHERE table_id = batch.table_id) AS links;
        IF chain.broken IS NOT NULL THEN
            RAISE EXCEPTION 'table %: row % does not follow row % on the floor (its prev_hash is'
                ' not that row''s hash)', batch.table_id, chain.broken, chain.broken - 1
                USING ERRCODE = '{SQLSTATE_DIVERGED}';
        END IF;
        INSERT INTO {SCHEMA}.rounds AS r (table_id, round, first_seq, last_seq, first_at, last_at)
            SELECT table_id, round, min(seq), max(seq), min(recorded_at), max(recorded_at)
                FROM inserted WHERE table_id = batch.table_id AND round IS NOT NULL
                GROUP BY table_id, round
            ON CONFLICT (table_id, round) DO UPDATE SET
                first_seq = least(r.first_seq, excluded.first_seq),
                last_seq = greatest(r.last_seq, excluded.last_seq),
                first_at = least(r.first_at, excluded.first_at),
                last_at = greatest(r.last_at, excluded.last_at);
        -- H7: the release mark (see above)
        WITH marks AS (
            SELECT held.pending_collection AS seq, true AS collected, false AS refusal
                WHERE held.pending_collection IS NOT NULL
            UNION ALL
            SELECT seq,
                   kind = 'event' AND body LIKE '%"type":"hands_collected"%',
                   kind = 'decision'
                FROM inserted
                WHERE table_id = batch.table_id
                  AND (kind <> 'decision' OR body LIKE '%"decision":"rejected"%')
        ), followed AS (
            SELECT seq, collected, lead(seq) OVER w AS next_seq, lead(refusal) OVER w AS refused
                FROM marks WINDOW w AS (ORDER BY seq)
        )
        SELECT max(next_seq - 1) FILTER (WHERE next_seq IS NOT NULL AND NOT refused),
               max(seq) FILTER (WHERE next_seq IS NULL)
            INTO released, waiting
            FROM followed WHERE collected;
        -- what readers see moves here only: the released head's hash, and the rounds whose
        -- last row the release passed (into ended_rounds)
        released := greatest(held.released_seq, coalesce(released, 0));
        head_released := held.released_hash;
        IF released > held.released_seq THEN
            head_released := CASE WHEN released = held.head_seq THEN held.head_hash
                ELSE (SELECT hash FROM inserted
                          WHERE table_id = batch.table_id AND seq = released) END;
            INSERT INTO {SCHEMA}.{ENDED_ROUNDS} AS e
                    (table_id, round, first_seq, last_seq, first_at, last_at)
                SELECT table_id, round, first_seq, last_seq, first_at, last_at
                    FROM {SCHEMA}.rounds
                    WHERE table_id = batch.table_id AND last_seq <= released
                      AND last_seq > held.released_seq
                ON CONFLICT (table_id, round) DO UPDATE SET
                    first_seq = excluded.first_seq, last_seq = excluded.last_seq,
                    first_at = excluded.first_at, last_at = excluded.last_at;
        END IF;
        UPDATE {SCHEMA}.tables
            SET head_seq = batch.last, head_hash = chain.last_hash,
                table_row = coalesce(table_row, chain.first_body),
                released_seq = released, released_hash = head_released,
                pending_collection = waiting
            WHERE table_id = batch.table_id;
    END LOOP;
    RETURN NULL;
END
$$;

-- `floor verify` (the DBA's or the auditor's) marks the last row it proved: the next verify
-- starts after it, and a gaming day is retired only once its rows are behind the mark.
CREATE OR REPLACE FUNCTION {SCHEMA}.record_verified(tid text, upto bigint, digest text)
    RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {SCHEMA}.journal_rows
                   WHERE table_id = tid AND seq = upto AND hash = digest) THEN
        RAISE EXCEPTION 'table %: no row % with that hash on the floor', tid, upto;
    END IF;
    UPDATE {SCHEMA}.tables SET verified_seq = upto, verified_hash = digest, verified_at = now()
        WHERE table_id = tid AND verified_seq < upto;
    -- a reader's verify starts from the mark only where it lies within the released rows
    UPDATE {SCHEMA}.tables SET released_verified_seq = upto, released_verified_hash = digest
        WHERE table_id = tid AND released_verified_seq < upto AND upto <= released_seq;
END
$$;

-- The WAL position held on a second machine: the least a synchronous standby has flushed
-- (pg_stat_replication, sync or quorum standbys), or the end of the last WAL segment the
-- archiver stored (pg_stat_archiver, with archive_mode on), the greater; NULL when neither.
CREATE OR REPLACE FUNCTION {SCHEMA}.wal_durable_elsewhere() RETURNS pg_lsn
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    standby pg_lsn;
    segment text;
    archived pg_lsn;
    size numeric := pg_size_bytes(current_setting('wal_segment_size'));
BEGIN
    SELECT min(flush_lsn) INTO standby FROM pg_stat_replication
        WHERE sync_state IN ('sync', 'quorum');
    IF current_setting('archive_mode') <> 'off' THEN
        SELECT last_archived_wal INTO segment FROM pg_stat_archiver;
        IF segment ~ '^[0-9A-F]{{24}}$' THEN
            archived := '0/0'::pg_lsn
                + ('x' || substr(segment, 9, 8))::bit(32)::bigint::numeric * 4294967296
                + (('x' || substr(segment, 17, 8))::bit(32)::bigint + 1)::numeric * size;
        END IF;
    END IF;
    RETURN greatest(standby, archived);
END
$$;

-- What a table may remove locally without an archive: the last of its rows the floor holds
-- durable on two machines. Two steps: a mark (the head now, and the WAL position now, after
-- the head's commit) is proved once that position is held elsewhere (wal_durable_elsewhere),
-- then a new mark is taken. A table's login asks for its own table only; answered from the
-- last check within a second (a login cannot make the floor write faster than that).
CREATE OR REPLACE FUNCTION {SCHEMA}.durable_elsewhere(tid text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    own text;
    held {SCHEMA}.tables;
    elsewhere pg_lsn;
    durable bigint;
BEGIN
    SELECT table_id INTO own FROM {SCHEMA}.tables WHERE writer_role = session_user;
    IF session_user::text LIKE 'tablectl\\_table\\_%' AND own IS DISTINCT FROM tid THEN
        RAISE EXCEPTION 'a table''s role asks for its own table only'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT * INTO held FROM {SCHEMA}.tables WHERE table_id = tid FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    IF held.durable_checked_at > now() - interval '1 second' THEN
        RETURN held.durable_elsewhere_seq;
    END IF;
    elsewhere := {SCHEMA}.wal_durable_elsewhere();
    durable := held.durable_elsewhere_seq;
    IF held.durable_mark_lsn IS NOT NULL AND elsewhere >= held.durable_mark_lsn THEN
        durable := greatest(durable, held.durable_mark_seq);
    END IF;
    IF held.head_seq > durable
       AND (held.durable_mark_lsn IS NULL OR durable >= held.durable_mark_seq) THEN
        held.durable_mark_seq := held.head_seq;
        held.durable_mark_lsn := pg_current_wal_insert_lsn();
    END IF;
    UPDATE {SCHEMA}.tables
        SET durable_elsewhere_seq = durable, durable_mark_seq = held.durable_mark_seq,
            durable_mark_lsn = held.durable_mark_lsn, durable_checked_at = clock_timestamp()
        WHERE table_id = tid;
    RETURN durable;
END
$$;

CREATE OR REPLACE FUNCTION {SCHEMA}.refuse_change() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the floor store is append-only: % refused', TG_OP
        USING ERRCODE = '{SQLSTATE_APPEND_ONLY}';
END
$$;

DROP TRIGGER IF EXISTS check_batch ON {SCHEMA}.journal_rows;
CREATE TRIGGER check_batch AFTER INSERT ON {SCHEMA}.journal_rows
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.check_batch();
DROP TRIGGER IF EXISTS append_only ON {SCHEMA}.journal_rows;
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {SCHEMA}.journal_rows
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.refuse_change();
DROP TRIGGER IF EXISTS append_only_truncate ON {SCHEMA}.journal_rows;
CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON {SCHEMA}.journal_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.refuse_change();

-- no row-level security on the rows table (COPY refuses it; see the check above): nobody
-- but the auditor and the DBA may SELECT it, readers get the released view below
DROP POLICY IF EXISTS writer_inserts_own_table ON {SCHEMA}.journal_rows;
DROP POLICY IF EXISTS writer_sees_own_head ON {SCHEMA}.journal_rows;
DROP POLICY IF EXISTS reader_reads_ended_rounds ON {SCHEMA}.journal_rows;
DROP POLICY IF EXISTS auditor_reads_all ON {SCHEMA}.journal_rows;
ALTER TABLE {SCHEMA}.journal_rows DISABLE ROW LEVEL SECURITY;
ALTER TABLE {SCHEMA}.tables ENABLE ROW LEVEL SECURITY;
REVOKE ALL ON ALL TABLES IN SCHEMA {SCHEMA} FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {SCHEMA} FROM PUBLIC;

-- What readers call for rows: one table's rows after `after_seq`, up to `upto_seq` and its
-- release mark (ended rounds only), recorded in [from_at, to_at), of one kind when given, in
-- seq order; and its row 1 when it is the table row (the game: no card). The release mark
-- bounds the index scan itself, so no row of a round in play is read, and no reader sees the
-- plan (a function is not inlined into the caller's EXPLAIN; the view before it was, and its
-- EXPLAIN ANALYZE counted the rows it filtered out: the rows of the round in play).
DROP VIEW IF EXISTS {SCHEMA}.released_rows;
CREATE OR REPLACE FUNCTION {SCHEMA}.{RELEASED_ROWS}(
        tid text, after_seq bigint DEFAULT 0, upto_seq bigint DEFAULT NULL,
        from_at timestamptz DEFAULT NULL, to_at timestamptz DEFAULT NULL,
        of_kind text DEFAULT NULL)
    RETURNS SETOF {SCHEMA}.journal_rows
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
    ROWS 2000
AS $$
DECLARE
    upper bigint;
BEGIN
    SELECT greatest(t.released_seq, 1) INTO upper FROM {SCHEMA}.tables AS t
        WHERE t.table_id = tid;
    IF upper IS NULL THEN
        RETURN;
    END IF;
    upper := least(upper, coalesce(upto_seq, upper));
    RETURN QUERY
        SELECT r.* FROM {SCHEMA}.journal_rows AS r, {SCHEMA}.tables AS t
            WHERE t.table_id = tid AND r.table_id = tid
              AND r.seq > coalesce(after_seq, 0) AND r.seq <= upper
              AND r.recorded_at >= coalesce(from_at, '-infinity')
              AND r.recorded_at < coalesce(to_at, 'infinity')
              AND (of_kind IS NULL OR r.kind = of_kind)
              AND (r.seq <= t.released_seq OR (r.seq = 1 AND r.kind = 'table'))
            ORDER BY r.seq;
END
$$;
REVOKE ALL ON FUNCTION {SCHEMA}.{RELEASED_ROWS}(text, bigint, bigint, timestamptz, timestamptz,
    text) FROM PUBLIC;

-- A table's cosigned checkpoints (C2SP signed notes: the table's signature and its witnesses'
-- cosignatures over origin, tree size and root), shipped by the table's shipper through
-- ship_checkpoint() only once every row of the tree is released (H7): what `floor prove`
-- proves a round against. Append-only like the rows; nobody reads the table itself but the
-- DBA and the auditor: readers call released_checkpoints().
CREATE TABLE IF NOT EXISTS {SCHEMA}.checkpoints (
    table_id text NOT NULL,
    tree_size bigint NOT NULL CHECK (tree_size >= 1),
    note_sha256 bytea NOT NULL,
    note text NOT NULL,
    shipped_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, tree_size, note_sha256)
);
DROP TRIGGER IF EXISTS append_only ON {SCHEMA}.checkpoints;
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {SCHEMA}.checkpoints
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.refuse_change();
DROP TRIGGER IF EXISTS append_only_truncate ON {SCHEMA}.checkpoints;
CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON {SCHEMA}.checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.refuse_change();
REVOKE ALL ON {SCHEMA}.checkpoints FROM PUBLIC;

-- A table's login ships its own table's cosigned checkpoints only: each a signed note of a
-- checkpoint (origin, tree size, base64 root, a blank line, signature lines), bounded
-- (MAX_CHECKPOINT_NOTE_BYTES, MAX_NOTES_PER_SIZE per tree size). One whose tree reaches past the
-- table's release mark is not stored ('held': the shipper offers it again after later rows),
-- so no checkpoint on the floor covers a row of a round in play. 'stored', or 'known' when
-- the floor holds that note already. The signatures are checked by `proof verify`, not here.
CREATE OR REPLACE FUNCTION {SCHEMA}.{SHIP_CHECKPOINT}(tid text, signed_note text) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    own text;
    released bigint;
    body text[];
    size bigint;
    digest bytea;
BEGIN
    SELECT table_id INTO own FROM {SCHEMA}.tables WHERE writer_role = session_user;
    IF session_user::text LIKE 'tablectl\\_table\\_%' AND own IS DISTINCT FROM tid THEN
        RAISE EXCEPTION 'a table''s role ships its own table''s checkpoints only'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF signed_note IS NULL OR octet_length(signed_note) > {MAX_CHECKPOINT_NOTE_BYTES} THEN
        RAISE EXCEPTION 'table %: a checkpoint note of at most {MAX_CHECKPOINT_NOTE_BYTES} bytes',
            tid USING ERRCODE = 'invalid_parameter_value';
    END IF;
    body := regexp_match(signed_note, '^([^\n]+)\n([1-9][0-9]{{0,17}})\n([A-Za-z0-9+/]{{43}}=)\n'
        '(?:[^\n]*\n)*?\n(?:\u2014 [^\n]+\n)+$');
    IF body IS NULL THEN
        RAISE EXCEPTION 'table %: not a signed checkpoint note (origin, tree size, root, a'
            ' blank line, signature lines)', tid USING ERRCODE = 'invalid_parameter_value';
    END IF;
    size := body[2]::bigint;
    SELECT t.released_seq INTO released FROM {SCHEMA}.tables AS t WHERE t.table_id = tid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table %: not registered on the floor (tablectl floor init --table)',
            tid USING ERRCODE = '{SQLSTATE_CHAIN}';
    END IF;
    IF size > released THEN
        RETURN 'held';
    END IF;
    digest := sha256(convert_to(signed_note, 'UTF8'));
    IF EXISTS (SELECT 1 FROM {SCHEMA}.checkpoints AS c
               WHERE c.table_id = tid AND c.tree_size = size AND c.note_sha256 = digest) THEN
        RETURN 'known';
    END IF;
    IF (SELECT count(*) FROM {SCHEMA}.checkpoints AS c
        WHERE c.table_id = tid AND c.tree_size = size) >= {MAX_NOTES_PER_SIZE} THEN
        RAISE EXCEPTION 'table %: {MAX_NOTES_PER_SIZE} notes of the tree of % rows held already',
            tid, size USING ERRCODE = 'program_limit_exceeded';
    END IF;
    INSERT INTO {SCHEMA}.checkpoints (table_id, tree_size, note_sha256, note)
        VALUES (tid, size, digest, signed_note) ON CONFLICT DO NOTHING;
    RETURN 'stored';
END
$$;
REVOKE ALL ON FUNCTION {SCHEMA}.{SHIP_CHECKPOINT}(text, text) FROM PUBLIC;

-- What `floor prove` reads (any reader: nothing here is past the release mark): a table's
-- cosigned checkpoints whose tree lies within its released rows, smallest tree first ...
CREATE OR REPLACE FUNCTION {SCHEMA}.{RELEASED_CHECKPOINTS}(tid text, covering bigint DEFAULT 1)
    RETURNS TABLE (tree_size bigint, note text)
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
    SELECT c.tree_size, c.note FROM {SCHEMA}.checkpoints AS c, {SCHEMA}.tables AS t
        WHERE t.table_id = tid AND c.table_id = tid AND c.tree_size >= covering
          AND c.tree_size <= t.released_seq
        ORDER BY c.tree_size, c.shipped_at, c.note_sha256
$$;
REVOKE ALL ON FUNCTION {SCHEMA}.{RELEASED_CHECKPOINTS}(text, bigint) FROM PUBLIC;

-- ... and the hashes of its rows 1..upto (the Merkle log's leaves; NULL: every released row),
-- released rows only. As released_rows: the bound is computed first and goes into the index
-- scan, so no row of a round in play is read (a join's filter read them: a reader's EXPLAIN
-- counted their pages).
CREATE OR REPLACE FUNCTION {SCHEMA}.{RELEASED_LEAVES}(tid text, upto bigint DEFAULT NULL)
    RETURNS TABLE (seq bigint, hash text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    upper bigint;
BEGIN
    SELECT t.released_seq INTO upper FROM {SCHEMA}.tables AS t WHERE t.table_id = tid;
    IF upper IS NULL THEN
        RETURN;
    END IF;
    upper := least(upper, coalesce(upto, upper));
    RETURN QUERY
        SELECT r.seq, r.hash FROM {SCHEMA}.journal_rows AS r
            WHERE r.table_id = tid AND r.seq <= upper
            ORDER BY r.seq;
END
$$;
REVOKE ALL ON FUNCTION {SCHEMA}.{RELEASED_LEAVES}(text, bigint) FROM PUBLIC;
"""

#: `floor shuffle-check` (Q1 across the floor) keeps each run's fingerprint here, not in the
#: checking process (a year of 400 busy tables is ~3.65e9 runs, ~416 GB in a Python dict):
#: repeats are found by SQL over the fingerprint index. Unlogged: scratch, not replicated,
#: emptied by a crash (the check is run again). Written and read through functions only: a
#: reader may run the check, but never reads a row of the table (its transaction ids), nor
#: another login's check; a check left by a process that died is removed by that login's next
#: check once a week old. Bounded: SHUFFLE_RUNS_PER_CALL runs a call.
SHUFFLE_RUNS_PER_CALL = 100_000
SHUFFLE_CHECK_FUNCTIONS = (
    "shuffle_check_begin()",
    "shuffle_check_add(bigint, bigint[], bytea[], bigint[], integer[], bigint[])",
    "shuffle_check_repeats(bigint)",
    "shuffle_check_end(bigint)",
)
_SHUFFLE_RUNS = f"""
CREATE UNLOGGED TABLE IF NOT EXISTS {SCHEMA}.shuffle_checks (
    check_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    checked_by name NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNLOGGED TABLE IF NOT EXISTS {SCHEMA}.shuffle_runs (
    check_id bigint NOT NULL,
    ord bigint NOT NULL,          -- the order the check read the run in
    fingerprint bytea NOT NULL,   -- 80 bits of BLAKE2b over the run's cards, never a card
    shoe bigint NOT NULL,         -- the check's serial number of the shuffle it came out of
    table_index integer NOT NULL,
    round bigint NOT NULL         -- the round the run began in
);
CREATE INDEX IF NOT EXISTS shuffle_runs_by_fingerprint
    ON {SCHEMA}.shuffle_runs (check_id, fingerprint) INCLUDE (shoe);
REVOKE ALL ON {SCHEMA}.shuffle_checks, {SCHEMA}.shuffle_runs FROM PUBLIC;

CREATE OR REPLACE FUNCTION {SCHEMA}.shuffle_check_own(cid bigint) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {SCHEMA}.shuffle_checks
                   WHERE check_id = cid AND checked_by = session_user) THEN
        RAISE EXCEPTION 'shuffle check %: no check of login % by that number', cid, session_user;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION {SCHEMA}.shuffle_check_begin() RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    made bigint;
BEGIN
    DELETE FROM {SCHEMA}.shuffle_runs WHERE check_id IN (
        SELECT check_id FROM {SCHEMA}.shuffle_checks
        WHERE checked_by = session_user AND started_at < now() - interval '7 days');
    DELETE FROM {SCHEMA}.shuffle_checks
        WHERE checked_by = session_user AND started_at < now() - interval '7 days';
    INSERT INTO {SCHEMA}.shuffle_checks (checked_by) VALUES (session_user)
        RETURNING check_id INTO made;
    RETURN made;
END
$$;

CREATE OR REPLACE FUNCTION {SCHEMA}.shuffle_check_add(cid bigint, ords bigint[],
    fingerprints bytea[], shoes bigint[], table_indexes integer[], rounds bigint[])
    RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
BEGIN
    PERFORM {SCHEMA}.shuffle_check_own(cid);
    IF cardinality(ords) > {SHUFFLE_RUNS_PER_CALL} THEN
        RAISE EXCEPTION 'shuffle check %: % runs in one call (at most {SHUFFLE_RUNS_PER_CALL})',
            cid, cardinality(ords);
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(fingerprints) AS f WHERE octet_length(f) <> 10) THEN
        RAISE EXCEPTION 'shuffle check %: a fingerprint is not 10 bytes', cid;
    END IF;
    INSERT INTO {SCHEMA}.shuffle_runs (check_id, ord, fingerprint, shoe, table_index, round)
        SELECT cid, o, f, s, t, r FROM unnest(ords, fingerprints, shoes, table_indexes, rounds)
            AS run(o, f, s, t, r);
END
$$;

-- The repeats: each pair of shoes that share a run (a fingerprint first seen in one shoe,
-- found again in another), where the first such run was in each, and how many runs the later
-- shoe shares with the earlier one; in the order the check read them.
CREATE OR REPLACE FUNCTION {SCHEMA}.shuffle_check_repeats(cid bigint)
    RETURNS TABLE (first_table integer, first_round bigint, second_table integer,
                   second_round bigint, runs bigint, seen_at bigint)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
BEGIN
    PERFORM {SCHEMA}.shuffle_check_own(cid);
    RETURN QUERY
    WITH repeated AS (
        SELECT r.fingerprint FROM {SCHEMA}.shuffle_runs AS r WHERE r.check_id = cid
        GROUP BY r.fingerprint HAVING min(r.shoe) <> max(r.shoe)
    ), found AS (
        SELECT r.* FROM {SCHEMA}.shuffle_runs AS r JOIN repeated USING (fingerprint)
        WHERE r.check_id = cid
    ), firsts AS (
        SELECT DISTINCT ON (f.fingerprint) f.fingerprint, f.shoe, f.table_index, f.round
        FROM found AS f ORDER BY f.fingerprint, f.ord
    ), matches AS (
        SELECT e.shoe AS e_shoe, e.table_index AS e_table, e.round AS e_round,
               l.shoe AS l_shoe, l.table_index AS l_table, l.round AS l_round, l.ord AS l_ord,
               count(*) OVER (PARTITION BY e.shoe, l.shoe) AS shared
        FROM found AS l JOIN firsts AS e USING (fingerprint) WHERE l.shoe <> e.shoe
    )
    SELECT p.e_table, p.e_round, p.l_table, p.l_round, p.shared, p.l_ord FROM (
        SELECT DISTINCT ON (m.e_shoe, m.l_shoe) m.* FROM matches AS m
        ORDER BY m.e_shoe, m.l_shoe, m.l_ord
    ) AS p ORDER BY p.l_ord;
END
$$;

CREATE OR REPLACE FUNCTION {SCHEMA}.shuffle_check_end(cid bigint) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
BEGIN
    PERFORM {SCHEMA}.shuffle_check_own(cid);
    DELETE FROM {SCHEMA}.shuffle_runs WHERE check_id = cid;
    DELETE FROM {SCHEMA}.shuffle_checks WHERE check_id = cid;
END
$$;
REVOKE ALL ON FUNCTION {SCHEMA}.shuffle_check_own(bigint) FROM PUBLIC;
"""
_SHUFFLE_RUNS += "".join(
    f"REVOKE ALL ON FUNCTION {SCHEMA}.{f} FROM PUBLIC;\n"
    f"GRANT EXECUTE ON FUNCTION {SCHEMA}.{f} TO {READER_GROUP}, {AUDITOR_GROUP};\n"
    for f in SHUFFLE_CHECK_FUNCTIONS
)


#: Per-round summaries (floor/summary.py): each span's counts per gaming day and its ended
#: round's players' cards by position and rank, computed by the table's shipper and taken by
#: add_round_summaries in the transaction that ships the rows releasing them: a table's own
#: table only, only spans within its released rows (never anything of a round in play), each
#: after the last one held (a restarted shipper's repeats are skipped), SUMMARIES_PER_CALL a
#: call, SUMMARY_MAX_BYTES each. Readers may read them (released state, like ended_rounds);
#: `floor report` aggregates them in SQL, `floor report --recompute` checks them against the
#: rows. Append-only, as the rows.
SUMMARIES = "round_summaries"
SUMMARIES_PER_CALL = 1000
SUMMARY_MAX_BYTES = 65536
ADD_SUMMARIES = (
    "add_round_summaries(text, bigint[], bigint[], timestamptz[], timestamptz[],"
    " timestamptz[], jsonb[])"
)
_SUMMARIES = f"""
CREATE TABLE IF NOT EXISTS {SCHEMA}.{SUMMARIES} (
    table_id text NOT NULL,
    from_seq bigint NOT NULL,
    to_seq bigint NOT NULL,
    first_at timestamptz NOT NULL,  -- recorded_at of the span's first and last rows
    last_at timestamptz NOT NULL,
    ended_at timestamptz,           -- of the row that ended the round (Q3's day); NULL: none
    summary jsonb NOT NULL,
    shipped_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, to_seq),
    CHECK (1 <= from_seq AND from_seq <= to_seq)
);
CREATE INDEX IF NOT EXISTS round_summaries_by_last_at ON {SCHEMA}.{SUMMARIES} (last_at);
DROP TRIGGER IF EXISTS append_only ON {SCHEMA}.{SUMMARIES};
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {SCHEMA}.{SUMMARIES}
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.refuse_change();
DROP TRIGGER IF EXISTS append_only_truncate ON {SCHEMA}.{SUMMARIES};
CREATE TRIGGER append_only_truncate BEFORE TRUNCATE ON {SCHEMA}.{SUMMARIES}
    FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.refuse_change();
REVOKE ALL ON {SCHEMA}.{SUMMARIES} FROM PUBLIC;

CREATE OR REPLACE FUNCTION {SCHEMA}.add_round_summaries(
        tid text, from_seqs bigint[], to_seqs bigint[], first_ats timestamptz[],
        last_ats timestamptz[], ended_ats timestamptz[], bodies jsonb[])
    RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {SCHEMA}
AS $$
DECLARE
    own text;
    released bigint;
    stored bigint;
    handled bigint := 0;
    n integer := coalesce(array_length(to_seqs, 1), 0);
BEGIN
    SELECT table_id INTO own FROM {SCHEMA}.tables WHERE writer_role = session_user;
    IF session_user::text LIKE 'tablectl\\_table\\_%' AND own IS DISTINCT FROM tid THEN
        RAISE EXCEPTION 'a table''s role ships its own table''s summaries only'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF n > {SUMMARIES_PER_CALL} THEN
        RAISE EXCEPTION 'at most {SUMMARIES_PER_CALL} summaries a call, not %', n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(array_length(from_seqs, 1), 0) <> n OR coalesce(array_length(first_ats, 1), 0) <> n
       OR coalesce(array_length(last_ats, 1), 0) <> n
       OR coalesce(array_length(ended_ats, 1), 0) <> n
       OR coalesce(array_length(bodies, 1), 0) <> n THEN
        RAISE EXCEPTION 'summaries: arrays of different lengths'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT released_seq INTO released FROM {SCHEMA}.tables WHERE table_id = tid;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    SELECT coalesce(max(to_seq), 0) INTO stored FROM {SCHEMA}.{SUMMARIES} WHERE table_id = tid;
    FOR i IN 1 .. n LOOP
        -- never anything of a round in play: only spans the release mark has passed
        EXIT WHEN to_seqs[i] > released;
        handled := greatest(handled, to_seqs[i]);
        CONTINUE WHEN from_seqs[i] <= stored;  -- held already: a restarted shipper's repeat
        IF octet_length(bodies[i]::text) > {SUMMARY_MAX_BYTES} THEN
            RAISE EXCEPTION 'a summary of more than {SUMMARY_MAX_BYTES} bytes (rows % to %)',
                from_seqs[i], to_seqs[i] USING ERRCODE = 'invalid_parameter_value';
        END IF;
        INSERT INTO {SCHEMA}.{SUMMARIES}
                (table_id, from_seq, to_seq, first_at, last_at, ended_at, summary)
            VALUES (tid, from_seqs[i], to_seqs[i], first_ats[i], last_ats[i], ended_ats[i],
                    bodies[i]);
        stored := to_seqs[i];
    END LOOP;
    RETURN handled;
END
$$;
REVOKE ALL ON FUNCTION {SCHEMA}.{ADD_SUMMARIES} FROM PUBLIC;
GRANT EXECUTE ON FUNCTION {SCHEMA}.{ADD_SUMMARIES} TO {WRITER_GROUP};
GRANT SELECT ON {SCHEMA}.{SUMMARIES} TO {READER_GROUP}, {AUDITOR_GROUP};
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
-- writers: INSERT (by COPY) of their own table's rows, and of floor.tables their own row's
-- head (to resume after an outage) and table row (its game: the summaries' engine after a
-- restart, when the local row 1 is retired); nothing of the rows table. A floor made by an earlier
-- tablectl granted writers and readers SELECT on it: taken back here.
REVOKE ALL ON {SCHEMA}.journal_rows FROM {WRITER_GROUP}, {READER_GROUP}, {AUDITOR_GROUP};
GRANT INSERT ON {SCHEMA}.journal_rows TO {WRITER_GROUP};
GRANT SELECT (table_id, writer_role, head_seq, head_hash, table_row) ON {SCHEMA}.tables
    TO {WRITER_GROUP};
GRANT EXECUTE ON FUNCTION {SCHEMA}.ensure_partitions_ahead(integer) TO {WRITER_GROUP};
GRANT EXECUTE ON FUNCTION {SCHEMA}.durable_elsewhere(text) TO {WRITER_GROUP}, {AUDITOR_GROUP};
GRANT EXECUTE ON FUNCTION {SCHEMA}.record_verified(text, bigint, text) TO {AUDITOR_GROUP};
-- writers ship their own table's cosigned checkpoints (bounded: ship_checkpoint above);
-- `floor prove` is any reader's, the auditor's and the DBA's (released rows only)
GRANT EXECUTE ON FUNCTION {SCHEMA}.{SHIP_CHECKPOINT}(text, text) TO {WRITER_GROUP};
GRANT EXECUTE ON FUNCTION {SCHEMA}.{RELEASED_CHECKPOINTS}(text, bigint),
    {SCHEMA}.{RELEASED_LEAVES}(text, bigint) TO {READER_GROUP}, {AUDITOR_GROUP};
GRANT SELECT ON {SCHEMA}.checkpoints TO {AUDITOR_GROUP};
-- readers (surveillance, the pit, reports): released state only (H7): the released rows
-- (a function), the spans of ended rounds, of floor.tables the columns that move only when a
-- round ends (never the head, the pending collection or the verified mark past the release),
-- and the floor's bookkeeping. A floor made by an earlier tablectl granted readers all of
-- floor.tables and floor.rounds: taken back here. The auditor (the regulator's lab): every
-- row, a round in play included.
REVOKE ALL ON {SCHEMA}.tables, {SCHEMA}.rounds FROM {READER_GROUP};
GRANT SELECT ({", ".join(READER_TABLE_COLUMNS)}) ON {SCHEMA}.tables TO {READER_GROUP};
GRANT SELECT ON {SCHEMA}.{ENDED_ROUNDS}, {SCHEMA}.settings, {SCHEMA}.retired
    TO {READER_GROUP}, {AUDITOR_GROUP};
GRANT EXECUTE ON FUNCTION {SCHEMA}.{RELEASED_ROWS}(text, bigint, bigint, timestamptz,
    timestamptz, text) TO {READER_GROUP}, {AUDITOR_GROUP};
GRANT SELECT ON {SCHEMA}.journal_rows, {SCHEMA}.tables, {SCHEMA}.rounds TO {AUDITOR_GROUP};

DROP POLICY IF EXISTS writer_sees_own_table ON {SCHEMA}.tables;
CREATE POLICY writer_sees_own_table ON {SCHEMA}.tables FOR SELECT TO {WRITER_GROUP}
    USING (writer_role = current_user);
DROP POLICY IF EXISTS reader_reads_tables ON {SCHEMA}.tables;
CREATE POLICY reader_reads_tables ON {SCHEMA}.tables FOR SELECT
    TO {READER_GROUP}, {AUDITOR_GROUP} USING (true);
"""


#: What the server shows any login about relations, transactions and the WAL (pg_catalog's
#: statistics and size functions, the lock table, the transaction counter): each moves with
#: the rows a table ships, so a reader polling one counts the rows of a round in play. Taken
#: from PUBLIC in the floor's database (and given to pg_read_all_stats, the DBA's monitoring);
#: they belong to the bootstrap superuser, so only a superuser can (`floor init` run as one,
#: or the statements in docs/floor.md). Also taken: pg_class's tuple and page counts, and
#: temporary tables (a reader's own insert would read the transaction counter as its xmin).
HIDDEN_STATISTICS_FUNCTIONS = (
    "pg_relation_size",
    "pg_total_relation_size",
    "pg_table_size",
    "pg_indexes_size",
    "pg_database_size",
    "pg_tablespace_size",
    "pg_relation_filenode",
    "pg_lock_status",
    "pg_blocking_pids",
    "pg_safe_snapshot_blocking_pids",
    "pg_current_wal_lsn",
    "pg_current_wal_insert_lsn",
    "pg_current_wal_flush_lsn",
    "pg_last_wal_receive_lsn",
    "pg_last_wal_replay_lsn",
    "pg_last_xact_replay_timestamp",
    "pg_current_snapshot",
    "txid_current_snapshot",
    "pg_current_xact_id",
    "txid_current",
    "pg_current_xact_id_if_assigned",
    "txid_current_if_assigned",
    "pg_xact_status",
    "txid_status",
    "pg_xact_commit_timestamp",
    "pg_xact_commit_timestamp_origin",
    "pg_last_committed_xact",
    "pg_visible_in_snapshot",
    "txid_visible_in_snapshot",
    "mxid_age",
)
#: overloads taken by their signature (age(timestamp) stays: it reads no counter)
HIDDEN_STATISTICS_SIGNATURES = ("pg_catalog.age(xid)",)
#: pg_class's columns that count a relation's rows and pages (the rest stay readable)
HIDDEN_CLASS_COLUMNS = ("reltuples", "relpages", "relallvisible", "relfrozenxid", "relminmxid")


def _sql_list(names: tuple[str, ...]) -> str:
    return ", ".join(f"'{name}'" for name in names)


#: as regprocedure prints them in the catalog's own schema
_SIGNATURES = tuple(name.removeprefix("pg_catalog.") for name in HIDDEN_STATISTICS_SIGNATURES)

_HIDE_STATISTICS = f"""
DO $$
DECLARE
    f record;
    visible text;
BEGIN
    FOR f IN SELECT p.oid::regprocedure AS signature FROM pg_proc AS p
                 JOIN pg_namespace AS n ON n.oid = p.pronamespace
             WHERE n.nspname = 'pg_catalog'
               AND (p.proname LIKE 'pg\\_stat\\_get\\_%'
                    OR p.proname = ANY(ARRAY[{_sql_list(HIDDEN_STATISTICS_FUNCTIONS)}])
                    OR p.oid::regprocedure::text = ANY(ARRAY[{_sql_list(_SIGNATURES)}]))
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f.signature);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO pg_read_all_stats', f.signature);
    END LOOP;
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO visible
        FROM pg_attribute
        WHERE attrelid = 'pg_catalog.pg_class'::regclass AND attnum > 0 AND NOT attisdropped
          AND attname <> ALL(ARRAY[{_sql_list(HIDDEN_CLASS_COLUMNS)}]);
    REVOKE SELECT ON pg_catalog.pg_class FROM PUBLIC;
    EXECUTE format('GRANT SELECT (%s) ON pg_catalog.pg_class TO PUBLIC', visible);
    GRANT SELECT ON pg_catalog.pg_class TO pg_read_all_stats;
    EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
END $$;
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


def create_schema(conn: Any) -> bool:
    """Schema, functions, triggers, group roles, grants and policies (idempotent), and the
    partitions of the gaming days around today; then the server's row counters hidden from
    readers when this login may (hide_statistics: whether it did). Refused, before anything
    is made, when the functions' owner could not see the standbys (ensure_monitoring_owner)."""
    refuse_old_layout(conn)
    ensure_monitoring_owner(conn)
    with conn.transaction():
        conn.execute(_ROLES)
        conn.execute(_DDL)
        conn.execute(_GRANTS)
        conn.execute(_SHUFFLE_RUNS)
        conn.execute(_SUMMARIES)
        conn.execute(f"SELECT {SCHEMA}.ensure_partitions_ahead(%s)", (DAYS_AHEAD,))
    return hide_statistics(conn)


#: the predefined role whose privileges let durable_elsewhere()'s owner read
#: pg_stat_replication's positions and the WAL position (pg_read_all_stats is within it)
MONITORING_ROLE = "pg_monitor"


def ensure_monitoring_owner(conn: Any) -> str | None:
    """The floor's SECURITY DEFINER functions run as their owner (this login when it makes
    them): without a superuser's or pg_monitor's privileges that owner sees no standby's
    position and may not read the WAL position, so durable_elsewhere() holds nothing on two
    machines and no table ever retires a segment, silently. The owner is given pg_monitor
    when this login may grant it (returned: the role it was granted to), else FloorSetupError
    names the role and the statement a superuser runs."""
    import psycopg
    from psycopg import sql

    owner, able = conn.execute(
        "SELECT r.rolname, r.rolsuper OR pg_has_role(r.oid, 'pg_read_all_stats', 'USAGE')"
        " FROM pg_roles AS r WHERE r.rolname = coalesce("
        "  (SELECT p.proowner::regrole::text FROM pg_proc AS p"
        "     JOIN pg_namespace AS n ON n.oid = p.pronamespace"
        "   WHERE n.nspname = %s AND p.proname = 'wal_durable_elsewhere' LIMIT 1),"
        "  current_user)",
        (SCHEMA,),
    ).fetchone()
    if able:
        return None
    try:
        with conn.transaction():
            conn.execute(
                sql.SQL("GRANT {} TO {}").format(
                    sql.Identifier(MONITORING_ROLE), sql.Identifier(owner)
                )
            )
    except psycopg.errors.InsufficientPrivilege as error:
        raise FloorSetupError(
            f"role {owner} would own the floor's functions but is neither a superuser nor in "
            f"{MONITORING_ROLE}, and this login may not grant it ({str(error).strip()}): "
            "durable_elsewhere() would see no standby and no table would ever retire a "
            f"segment; as a superuser run `GRANT {MONITORING_ROLE} TO {owner}` (or run "
            "`tablectl floor init` as one), then init again (docs/floor.md, Roles)"
        ) from error
    return str(owner)


def hide_statistics(conn: Any) -> bool:
    """Take the server's row counters from PUBLIC in the floor's database (see
    HIDDEN_STATISTICS_FUNCTIONS); False when this login is not a superuser (only one can:
    the catalog is the bootstrap superuser's), which `floor init` then says."""
    row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    if not row or not row[0]:
        return False
    with conn.transaction():
        conn.execute(_HIDE_STATISTICS)
    return True


def refuse_old_layout(conn: Any) -> None:
    """A floor made by an earlier tablectl (one unpartitioned rows table): refused with what
    to run, rather than changed in place under the tables shipping to it."""
    row = conn.execute(
        "SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = 'journal_rows'",
        (SCHEMA,),
    ).fetchone()
    if row is not None and row[0] != "p":
        raise FloorSetupError(
            f"{SCHEMA}.journal_rows is the earlier, unpartitioned layout: stop the tables' "
            "shipping, then `ALTER SCHEMA floor RENAME TO floor_v1`, run `tablectl floor init` "
            "again (with --table for every table), and `tablectl floor migrate --from floor_v1` "
            "(it copies every table's rows through the new chain check); the tables resume "
            "from the new floor's head"
        )


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
        # the role's own limit: it holds through a pooler that drops the client's startup
        # options (PgBouncer's ignore_startup_parameters = options)
        conn.execute(
            sql.SQL("ALTER ROLE {} SET statement_timeout = {}").format(
                sql.Identifier(role), sql.Literal(f"{STATEMENT_TIMEOUT_MS}ms")
            )
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
    # the one durable writer: 0600, temporary fsynced, renamed, directory fsynced
    write_private_file(path, "\n".join([*kept, line]) + "\n")
