import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// A custom migration step (GRDB's registered migration), for a change lightweight migration
/// cannot make (a type change, say): run when a store is migrated from below `version` to
/// `version` or above, after the lightweight steps, in the same transaction.
///
/// For example:
/// ```swift
/// let rating = MigrationStep(version: 3, "ratings become doubles") { db in
///     try db.execute(ratingsAsDoubles)  // SQL over the new schema's tables
/// }
/// let container = try Container(group: path, model: v3, migrations: [rating])
/// ```
public struct MigrationStep: Sendable {
    /// The model version the step belongs to: it runs when a store below this version is migrated
    /// to this version or above; steps run in the order of their versions.
    public let version: Int
    /// What the step does, in words: the migration's plan lists it (`storectl migrate --dry-run`).
    public let name: String
    let body: @Sendable (borrowing MigrationDatabase) throws -> Void

    /// A step of `version` named `name` whose `body` runs SQL over the new schema
    /// (``MigrationDatabase``).
    ///
    /// When `body` throws, the whole migration rolls back, the store stays at its old version and
    /// ``Container/init(group:model:options:migrations:)`` throws that error (an SQL failure as a
    /// ``StoreError``).
    public init(version: Int, _ name: String, _ body: @escaping @Sendable (borrowing MigrationDatabase) throws -> Void)
    {
        self.version = version
        self.name = name
        self.body = body
    }
}

/// What a migration does, or would do (`storectl migrate --dry-run`): the steps in order, and
/// what stops it (changes lightweight migration cannot make, stored objects that break the new
/// model). A plan with reasons is refused before anything is touched.
public struct MigrationPlan: Sendable, Hashable {
    /// The store's model version before the migration.
    public let fromVersion: Int
    /// The model version it migrates to.
    public let toVersion: Int
    /// Each step in words, in the order it runs: renames, drops, additions, defaults, duplicates
    /// resolved, indexes, custom steps, recomputed derived attributes and counts, the history record.
    public let steps: [String]
    /// Why it cannot run (empty: it can).
    public let refusals: [String]

    /// Whether the migration cannot run (``refusals`` says why).
    public var isRefused: Bool { !refusals.isEmpty }
}

/// Where a migration is (``Container/withMigrationProgress(_:_:)``): its phase, and within a phase that
/// goes over a table's rows (derived values, global ids), how many of them are done.
public struct MigrationProgress: Sendable, Hashable {
    /// The phase, from 1.
    public var phase: Int
    /// How many phases a migration has.
    public var phases: Int
    /// The phase's name: "renames", "indexes", "derived values"…
    public var name: String
    /// The rows of the table the phase goes over that are done (0 as the phase starts).
    public var done: Int
    /// The rows of that table; nil for a phase that does not count them.
    public var total: Int?

    /// Creates a report.
    public init(phase: Int, phases: Int, name: String, done: Int = 0, total: Int? = nil) {
        self.phase = phase
        self.phases = phases
        self.name = name
        self.done = done
        self.total = total
    }
}

/// A handler of ``MigrationProgress`` bound by ``Container/withMigrationProgress(_:_:)`` (an
/// object: see there why).
final class MigrationListener: Sendable {
    let tell: @Sendable (MigrationProgress) -> Void
    init(_ tell: @escaping @Sendable (MigrationProgress) -> Void) { self.tell = tell }
}

/// Who a migration's history transaction is by, and its context name.
public enum MigrationHistory {
    /// The author of a migration's history transaction: consumers that exclude it skip migrations.
    public static let author = "Migration"
    /// The context name of a migration's history transaction, followed by the versions
    /// (`migration.1-2`).
    public static let context = "migration"
}

/// Runs a migration in one write transaction under SQLite's write lock: the first process that
/// opens an older store with a newer model migrates it; another one opening at the same moment
/// waits for the lock and finds it done. A process killed midway leaves the old store as it was
/// (SQLite rolls the transaction back).
struct MigrationRunner {
    let c: SQLiteConnection
    let model: Model
    let steps: [MigrationStep]
    let duplicates: DuplicateResolution
    let path: String
    /// Told each phase of the migration as it starts, and the rows a phase over a table has done
    /// (``Container/withMigrationProgress(_:_:)``).
    var progress: (@Sendable (MigrationProgress) -> Void)? = nil

    /// The phases ``apply(_:from:)`` reports, in order.
    static let phases = [
        "renames", "global ids", "indexes that go", "columns and tables that go", "new tables and columns",
        "duplicates", "indexes", "custom steps", "derived values", "kept counts",
    ]

    private func phase(_ n: Int) {
        progress?(MigrationProgress(phase: n + 1, phases: Self.phases.count, name: Self.phases[n]))
    }

    /// What phase `n` tells of the rows it has done, or nil when nobody listens.
    private func rows(_ n: Int) -> SchemaSQL.RowProgress? {
        guard let progress else { return nil }
        return { done, total in
            progress(
                MigrationProgress(
                    phase: n + 1, phases: Self.phases.count, name: Self.phases[n], done: done, total: total))
        }
    }

    /// The plan from `state` to the model, with its checks of the stored objects run.
    func plan(_ state: StoreFormat.State) throws -> (MigrationPlan, MigrationPlanner) {
        let custom = steps.filter { $0.version > state.version && $0.version <= model.version }
        let planner = MigrationPlanner(
            old: state.schema, catalog: state.catalog, model: model, hasCustomSteps: !custom.isEmpty)
        var refusals = planner.refused.map { "\($0): lightweight migration cannot make this change" }
        var described = planner.actions.map(\.description)
        for check in planner.checks {
            let found = try problems(check)
            if case .unique(_, _, let shown) = check, !found.isEmpty, duplicates != .refuse {
                let which = duplicates == .keepOldest ? "oldest" : "newest"
                described.append(
                    "resolve duplicates of \(shown): keep the \(which) object of each group, move references to it, "
                        + "delete the others (recorded in history)")
            } else {
                refusals += found
            }
        }
        described += custom.sorted { $0.version < $1.version }.map { "custom step (version \($0.version)): \($0.name)" }
        described.append("record the migration in history (author \(MigrationHistory.author), no object changes)")
        let plan = MigrationPlan(
            fromVersion: state.version, toVersion: model.version, steps: described, refusals: refusals)
        return (plan, planner)
    }

    /// What breaks a check, in words (empty: it holds).
    private func problems(_ check: MigrationCheck) throws -> [String] {
        switch check {
        case .noNulls(let table, let column, let what):
            let n = try SchemaSQL.nullCount(c, table, column)
            return n == 0 ? [] : ["\(what), but \(n) stored object(s) have no value; give it a default"]
        case .empty(let table, let what):
            let n = try SchemaSQL.rowCount(c, table)
            return n == 0 ? [] : ["\(what), but \(table) holds \(n) object(s); make it optional or give it a default"]
        case .unique(let table, let columns, let shown):
            let dups = try SchemaSQL.duplicateValues(c, table, columns, limit: 5)
            guard !dups.isEmpty else { return [] }
            let list = dups.map { "(\($0.values.joined(separator: ", "))) × \($0.count)" }.joined(separator: ", ")
            return ["new uniqueness constraint \(shown): stored objects share \(list)"]
        }
    }

    /// Migrates the store (found older at open) inside one write transaction; returns its new
    /// state. Re-reads the store under the lock: another process may have migrated it.
    func run(_ stateBefore: StoreFormat.State, checkpoint: Bool = true) throws -> StoreFormat.State {
        try StoreError.wrap(path: path) {
            // Synced whatever the store's level: it takes a token, and with it the token lease.
            let level = try SchemaSQL.synchronousLevel(c)
            if level < 2 { try SchemaSQL.setSynchronous(c, .full) }
            defer { if level < 2 { try? SchemaSQL.setSynchronous(c, .normal) } }
            return try c.writeTransaction {
                let meta = try SchemaSQL.meta(c)
                let state = try StoreFormat.currentState(meta, id: stateBefore.storeID, model: model, path: path)
                if state.version == model.version && state.schema == StoredSchema(model) { return state }
                guard state.version < model.version else {
                    throw StoreError(
                        .modelNewer,
                        "this store was migrated by a newer version: model \(state.version); update the app "
                            + "(this one has model \(model.version))")
                }
                let (plan, planner) = try self.plan(state)
                if plan.isRefused {
                    throw StoreError(
                        .migrationRefused,
                        "migration from model \(state.version) to \(model.version) refused, nothing was touched: "
                            + plan.refusals.joined(separator: "; "))
                }
                try Container.leaseForMigration(c, meta: meta)
                let changes = try apply(planner, from: state)
                let catalog = planner.newCatalog
                let numbering = try HistoryNumbering(model: model, catalog: catalog, path: path)
                try SchemaSQL.finishMigration(
                    c, meta: StoreFormat.metaRows(model: model, catalog: catalog),
                    history: (MigrationHistory.author, "\(MigrationHistory.context).\(state.version)-\(model.version)"),
                    changes: changes.isEmpty ? HistoryCodec.empty : HistoryCodec.encode(changes, numbering))
                return StoreFormat.State(
                    storeID: state.storeID, version: model.version, schema: StoredSchema(model), catalog: catalog)
            }
        }
    }

    /// The plan's steps, in order: renames, indexes that go, columns and tables that go, new
    /// tables and columns, defaults, duplicates resolved, indexes that come, custom steps, kept
    /// counts. Returns the object changes to record (only resolving duplicates makes any).
    private func apply(_ planner: MigrationPlanner, from state: StoreFormat.State) throws -> [RecordedChange] {
        try SchemaSQL.prepareMigration(c)
        phase(0)
        for action in planner.actions {
            switch action {
            case .renameTable(let from, let to, _): try SchemaSQL.renameTable(c, from, to)
            case .renameColumn(let table, let from, let to): try SchemaSQL.renameColumn(c, table, from, to)
            default: break
            }
        }
        phase(1)
        try addGlobalIDs()
        phase(2)
        try SchemaSQL.reconcileIndexes(c, model: model, phase: .drop)
        phase(3)
        for action in planner.actions {
            switch action {
            case .dropColumn(let table, let column, _): try SchemaSQL.dropColumn(c, table, column)
            case .dropTable(let name, _): try SchemaSQL.dropTable(c, name)
            default: break
            }
        }
        phase(4)
        try create(planner)
        phase(5)
        var resolver = DuplicateResolver(c: c, model: model, resolution: duplicates)
        var recount = Set<String>()
        if duplicates != .refuse {
            for check in planner.checks {
                guard case .unique(_, _, let shown) = check, let (entity, columns) = planner.uniqueConstraint(shown)
                else { continue }
                if try resolver.resolve(entity: entity, columns: columns) > 0 { recount.insert(entity) }
            }
        }
        phase(6)
        try SchemaSQL.reconcileIndexes(c, model: model, phase: .create)
        phase(7)
        let db = MigrationDatabase(c: c)
        for step in steps.sorted(by: { $0.version < $1.version })
        where step.version > state.version && step.version <= model.version {
            try step.body(db)
        }
        phase(8)
        for action in planner.actions {
            switch action {
            case .recompute(let entity, let attribute):
                try SchemaSQL.recomputeDerived(c, model: model, entity: entity, attribute: attribute, rows: rows(8))
            default: break
            }
        }
        phase(9)
        try keptCounts(planner, recount: recount)
        return resolver.changes
    }

    /// The kept counts the plan adds or removes, and every count of the entities whose
    /// duplicates were resolved.
    private func keptCounts(_ planner: MigrationPlanner, recount: Set<String>) throws {
        for action in planner.actions {
            switch action {
            case .recount(let entity, let count): try SchemaSQL.recount(c, model: model, entity: entity, count: count)
            case .removeCount(let name): try SchemaSQL.deleteKeptCount(c, name)
            default: break
            }
        }
        for entity in recount.sorted() {
            for k in try model.entity(entity).keptCounts {
                try SchemaSQL.recount(c, model: model, entity: entity, count: k.name)
            }
        }
    }

    /// Gives the objects of a store of format 2 or 3 their global ids (format 4), before
    /// anything else.
    private func addGlobalIDs() throws {
        let tables = try SchemaSQL.tableSet(c)
        try SchemaSQL.addGlobalIDs(c, tables: model.entities.map(\.name).filter(tables.contains), rows: rows(1))
    }

    private func create(_ planner: MigrationPlanner) throws {
        for action in planner.actions {
            switch action {
            case .createEntity(let name): try SchemaSQL.createEntityTable(c, try model.entity(name))
            case .addColumn(let table, let column, let type, let value):
                let stored =
                    try type.map { try SQLMapping.sqlValue(value, $0, object: table, property: column) } ?? .null
                try SchemaSQL.addColumn(c, table, column, type, stored)
            case .createJoinTable(let name): try SchemaSQL.createJoinTable(c, name)
            case .fillNulls(let table, let column, let value, let type):
                _ = try SchemaSQL.fillNulls(
                    c, table, column, try SQLMapping.sqlValue(value, type, object: nil, property: column))
            default: break
            }
        }
    }
}
