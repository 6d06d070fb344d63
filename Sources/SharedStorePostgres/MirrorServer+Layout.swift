import Foundation
import SharedStoreSupport

/// The layout of a log's retention tables on the server: what each build makes, how an older
/// layout is brought up to date, and the triggers that stamp a member's rows and bind each store
/// id to one role.
extension MirrorServer {
    /// The layout of retention this build makes (1: the first, with snapshots keyed by their
    /// sequence and each origin's pruned keys as a range; 2: snapshots keyed by a random id,
    /// checked values, each pruned key kept; 3: each store's id bound to the role that uploads
    /// under it, `origins`; 4: each snapshot head stamped with the role that made it, `made_as`,
    /// and inserts into the log taking the upload lock; 5: that stamp kept from the row only for
    /// the owner's move).
    static let retentionLayout = 5

    /// The tables of retention, when missing or of an older layout: snapshots and their parts,
    /// the mirrors' cursors, and the keys of pruned rows. Two administrators bringing one log up
    /// to date (a prune and a move) take turns; once up to date, nothing is changed.
    static func createRetentionTables(_ connection: PostgresConnection, _ schema: String) throws {
        try connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", [schema])
        let layout =
            try connection.execute("SELECT value FROM \(schema).meta WHERE key = 'retention_layout'").first?[0]
            .flatMap { Int($0) } ?? 0
        guard layout < retentionLayout else { return }
        let first =
            try connection.execute("SELECT to_regclass(\(quoted(schema + ".snapshots"))) IS NOT NULL").first?[0] == "t"
        try createSnapshotTables(connection, schema)
        try createCursorTable(connection, schema)
        try createOriginTable(connection, schema)
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS \(schema).pruned_origins(
                origin uuid PRIMARY KEY, min_token bigint NOT NULL, max_token bigint NOT NULL)
            """)
        // Keys pruned by the first layout are known only as a range (`legacy_max`).
        try connection.execute(
            "ALTER TABLE \(schema).pruned_origins ADD COLUMN IF NOT EXISTS legacy_max bigint NOT NULL DEFAULT 0")
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS \(schema).pruned_keys(
                origin uuid NOT NULL, token bigint NOT NULL, PRIMARY KEY (origin, token))
            """)
        if first { try migrateFirstLayout(connection, schema) }
        try connection.execute(
            "INSERT INTO \(schema).meta(key, value) VALUES ('pruned_through', '0') ON CONFLICT (key) DO NOTHING")
        try connection.execute(
            """
            INSERT INTO \(schema).meta(key, value) VALUES ('retention_layout', $1)
            ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
            """, [String(retentionLayout)])
    }

    /// Snapshots: a head per snapshot, keyed by a random id (a row planted under the id of one
    /// being made cannot be, and stops nothing), and its numbered parts. A head is a snapshot
    /// only when every part from 0 to `parts - 1` is there (``whole(_:)``).
    private static func createSnapshotTables(_ connection: PostgresConnection, _ schema: String) throws {
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS \(schema).snapshot_heads(
                id uuid PRIMARY KEY, through bigint NOT NULL CHECK (through > 0),
                parts int NOT NULL CHECK (parts > 0), objects bigint NOT NULL CHECK (objects >= 0),
                made_by uuid, made_at timestamptz NOT NULL DEFAULT now())
            """)
        try connection.execute(
            "CREATE INDEX IF NOT EXISTS snapshot_heads_through ON \(schema).snapshot_heads(through)")
        // The role that made a head, stamped by the server (`made_by` is the store id a mirror
        // says it is): a snapshot is a member's word, and a wrong one is named by who wrote it.
        // Heads made before this layout have none. A move's copy keeps the stamp.
        try connection.execute("ALTER TABLE \(schema).snapshot_heads ADD COLUMN IF NOT EXISTS made_as name")
        try connection.execute(
            """
            CREATE OR REPLACE FUNCTION \(schema).snapshot_stamp() RETURNS trigger LANGUAGE plpgsql
            SET search_path = pg_catalog, pg_temp AS $$
            BEGIN
                IF TG_OP = 'UPDATE' THEN
                    NEW.made_as := OLD.made_as;
                ELSIF NOT (pg_catalog.current_setting('sharedstore.copying', true) IS NOT DISTINCT FROM 'on'
                    AND pg_catalog.pg_has_role(current_user,
                        (SELECT relowner FROM pg_catalog.pg_class WHERE oid = TG_RELID), 'USAGE')) THEN
                    -- (Only the owner's move keeps the stamp it copies: any role can set the setting.)
                    NEW.made_as := current_user;
                END IF;
                RETURN NEW;
            END $$
            """)
        try connection.execute("DROP TRIGGER IF EXISTS snapshot_stamp ON \(schema).snapshot_heads")
        try connection.execute(
            "CREATE TRIGGER snapshot_stamp BEFORE INSERT OR UPDATE ON \(schema).snapshot_heads "
                + "FOR EACH ROW EXECUTE FUNCTION \(schema).snapshot_stamp()")
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS \(schema).snapshot_parts(
                id uuid NOT NULL REFERENCES \(schema).snapshot_heads(id) ON DELETE CASCADE,
                part int NOT NULL CHECK (part >= 0), payload text NOT NULL, PRIMARY KEY (id, part))
            """)
    }

    /// The PL/pgSQL of a trigger on a row of store `NEW.origin` by a member: claims the id for
    /// the member's role when no role has it, and refuses the row when another role does (its
    /// first report or upload claims a store's id, before any member can read it).
    ///
    /// The owner (an administrator's own mirror) claims an id no role has, and is never refused;
    /// a move's copy (`sharedstore.copying` set in its transaction) claims nothing: the claims
    /// are copied. `stamp` runs first for a member's row. Every name is qualified, and the
    /// functions run with `search_path` set to `pg_catalog`: a member's own tables or functions
    /// (a temporary `pg_class`) cannot stand in for the catalog's.
    static func memberCheck(_ schema: String, what: String?, stamp: String = "") -> String {
        // (One indexed read a row once the id is claimed: a claim is written once per store.)
        let claim = """
            IF NOT EXISTS (SELECT 1 FROM \(schema).origins WHERE origin = NEW.origin) THEN
                INSERT INTO \(schema).origins(origin) VALUES (NEW.origin) ON CONFLICT (origin) DO NOTHING;
            END IF;
            """
        let refuse = """
            DECLARE
                claimed name := (SELECT role FROM \(schema).origins WHERE origin = NEW.origin);
            BEGIN
                IF claimed IS NULL THEN
                    INSERT INTO \(schema).origins(origin) VALUES (NEW.origin) ON CONFLICT (origin) DO NOTHING;
                    claimed := (SELECT role FROM \(schema).origins WHERE origin = NEW.origin);
                END IF;
                IF claimed IS DISTINCT FROM current_user THEN
                    RAISE EXCEPTION 'store % \(what ?? "") in this space as role %, but its id belongs to role %',
                        NEW.origin, current_user, claimed USING ERRCODE = '\(foreignOriginState)';
                END IF;
            END;
            """
        return """
            IF pg_catalog.pg_has_role(current_user,
                (SELECT relowner FROM pg_catalog.pg_class WHERE oid = TG_RELID), 'USAGE') THEN
                IF pg_catalog.current_setting('sharedstore.copying', true) IS DISTINCT FROM 'on' THEN
                    \(what == nil ? "NULL;" : claim)
                END IF;
            ELSE
                \(stamp)
                \(what == nil ? "" : refuse)
            END IF;
            """
    }

    /// Each store's id and the role that uploads under it: the first upload of a store claims
    /// its id for the role that makes it (the order trigger of a space), and a row under an id
    /// another role claimed is refused (SQLSTATE ``MirrorServer/foreignOriginState``). A member
    /// cannot write rows in another machine's name: those would be taken for that machine's
    /// uploads, and once pruned would make its later ones look old. Ids of a log made before
    /// are claimed by the one member role that reported a cursor for them (reported by several,
    /// an id is left to its machine's next round: any member could report any id then).
    private static func createOriginTable(_ connection: PostgresConnection, _ schema: String) throws {
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS \(schema).origins(
                origin uuid PRIMARY KEY, role name NOT NULL DEFAULT current_user,
                claimed_at timestamptz NOT NULL DEFAULT now())
            """)
        try connection.execute("ALTER TABLE \(schema).origins ENABLE ROW LEVEL SECURITY")
        for (policy, rule) in [
            ("origins_read", "FOR SELECT USING (true)"),
            ("origins_claim", "FOR INSERT WITH CHECK (role = current_user)"),
        ] {
            try connection.execute("DROP POLICY IF EXISTS \(policy) ON \(schema).origins")
            try connection.execute("CREATE POLICY \(policy) ON \(schema).origins \(rule)")
        }
        try connection.execute(
            """
            INSERT INTO \(schema).origins(origin, role)
            SELECT origin, min(role) FROM \(schema).cursors
            WHERE role <> (SELECT pg_get_userbyid(relowner) FROM pg_class
                WHERE oid = \(quoted(schema + ".cursors"))::regclass)
            GROUP BY origin HAVING count(DISTINCT role) = 1
            ON CONFLICT (origin) DO NOTHING
            """)
    }

    /// Brings a log of the first layout to the second: its whole snapshots become heads and
    /// parts (a head alone, or with no part, is no snapshot and is dropped), a negative cursor
    /// becomes 0, and each origin's pruned range is kept as `legacy_max`.
    private static func migrateFirstLayout(_ connection: PostgresConnection, _ schema: String) throws {
        let id = "md5('snapshot ' || s.through)::uuid"
        try connection.execute(
            """
            INSERT INTO \(schema).snapshot_heads(id, through, parts, objects, made_by, made_at)
            SELECT \(id), s.through, s.chunks, s.objects, s.made_by, s.made_at FROM \(schema).snapshots s
            WHERE s.through > 0 AND s.chunks > 0 AND s.objects >= 0 AND s.chunks = (SELECT count(*)
                FROM \(schema).snapshot_chunks c WHERE c.through = s.through AND c.chunk >= 0 AND c.chunk < s.chunks)
            ON CONFLICT (id) DO NOTHING
            """)
        try connection.execute(
            """
            INSERT INTO \(schema).snapshot_parts(id, part, payload)
            SELECT h.id, c.chunk, c.payload FROM \(schema).snapshot_chunks c
            JOIN \(schema).snapshot_heads h ON h.id = md5('snapshot ' || c.through)::uuid
            WHERE c.chunk >= 0 AND c.chunk < h.parts ON CONFLICT (id, part) DO NOTHING
            """)
        try connection.execute("DROP TABLE \(schema).snapshot_chunks, \(schema).snapshots")
        try connection.execute("UPDATE \(schema).pruned_origins SET legacy_max = max_token")
    }

    /// The mirrors' cursors, one row per store and role. A member's row is stamped by the server
    /// (its role, the time), and row-level security lets a member change only rows of its own
    /// role: no member can make another machine look gone, or seen in the future.
    private static func createCursorTable(_ connection: PostgresConnection, _ schema: String) throws {
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS \(schema).cursors(
                origin uuid NOT NULL, role name NOT NULL DEFAULT current_user, cursor bigint NOT NULL,
                seen_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (origin, role))
            """)
        // The very first layout had one row per store, without its role: its rows become the
        // administrator's (they count gone in time, and claim no store id), and each member's
        // next report its own.
        let roleless = try connection.execute(
            """
            SELECT NOT EXISTS (SELECT 1 FROM information_schema.columns
                WHERE table_schema = $1 AND table_name = 'cursors' AND column_name = 'role')
            """, [schema])
        if roleless.first?[0] == "t" {
            try connection.execute(
                "ALTER TABLE \(schema).cursors ADD COLUMN role name NOT NULL DEFAULT current_user")
            try connection.execute("ALTER TABLE \(schema).cursors DROP CONSTRAINT IF EXISTS cursors_pkey")
            try connection.execute("ALTER TABLE \(schema).cursors ADD PRIMARY KEY (origin, role)")
        }
        // A cursor below 0 names no sequence (the first layout took one).
        try connection.execute("UPDATE \(schema).cursors SET cursor = 0 WHERE cursor < 0")
        try connection.execute("ALTER TABLE \(schema).cursors DROP CONSTRAINT IF EXISTS cursor_not_negative")
        try connection.execute(
            "ALTER TABLE \(schema).cursors ADD CONSTRAINT cursor_not_negative CHECK (cursor >= 0)")
        try connection.execute(
            """
            CREATE OR REPLACE FUNCTION \(schema).cursor_stamp() RETURNS trigger LANGUAGE plpgsql
            SET search_path = pg_catalog, pg_temp AS $$
            BEGIN
                \(memberCheck(schema, what: schema.hasPrefix(spacePrefix) ? "reports a cursor" : nil,
                    stamp: "NEW.role := current_user; NEW.seen_at := pg_catalog.now();"))
                RETURN NEW;
            END $$
            """)
        try connection.execute("DROP TRIGGER IF EXISTS cursor_stamp ON \(schema).cursors")
        try connection.execute(
            "CREATE TRIGGER cursor_stamp BEFORE INSERT OR UPDATE ON \(schema).cursors "
                + "FOR EACH ROW EXECUTE FUNCTION \(schema).cursor_stamp()")
        try connection.execute("ALTER TABLE \(schema).cursors ENABLE ROW LEVEL SECURITY")
        for (policy, rule) in [
            ("cursors_read", "FOR SELECT USING (true)"),
            ("cursors_insert", "FOR INSERT WITH CHECK (role = current_user)"),
            ("cursors_update", "FOR UPDATE USING (role = current_user) WITH CHECK (role = current_user)"),
        ] {
            try connection.execute("DROP POLICY IF EXISTS \(policy) ON \(schema).cursors")
            try connection.execute("CREATE POLICY \(policy) ON \(schema).cursors \(rule)")
        }
    }
}
