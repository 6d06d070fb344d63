import Foundation
import SharedStoreCore
import SharedStorePostgres
import SharedStoreSupport
import SharedStoreSync

/// What one round of a mirror did: `storectl mirror`'s line.
public struct MirrorRound: Sendable, Hashable {
    /// Local transactions uploaded (new to the server) and remote ones applied here.
    public var pushed = 0
    public var pulled = 0
    /// Transactions not yet mirrored after the round: local ones not uploaded plus remote ones
    /// not applied (nil: not known, the server was unreachable).
    public var lag: Int64?
    /// The server, or why it could not be reached.
    public var server = ""
    public var error: String?

    public init(pushed: Int = 0, pulled: Int = 0, lag: Int64? = nil, server: String = "", error: String? = nil) {
        self.pushed = pushed
        self.pulled = pulled
        self.lag = lag
        self.server = server
        self.error = error
    }

    public var json: JSONValue {
        var fields: [(String, JSONValue)] = [
            ("pushed", .number(Double(pushed))), ("pulled", .number(Double(pulled))),
            ("lag", lag.map { .number(Double($0)) } ?? .null), ("server", .string(server)),
        ]
        if let error { fields.append(("error", .string(error))) }
        return .object(fields)
    }
}

/// Mirrors one store through a PostgreSQL server, as Core Data's CloudKit mirroring does
/// through CloudKit, on persistent history (issue 14).
///
/// - It is a consumer of the token registry (``consumer``): the cleaner keeps what it has not
///   pushed.
/// - **Push** uploads each local transaction after its token (its own imports aside) with the
///   changed objects' current state, keyed by (store id, token): repeated after a crash, an
///   upload is not doubled.
/// - **Pull** applies the other stores' transactions in the server's order, each in one local
///   transaction of author ``author`` (context `mirror.import`) that also moves the pull cursor:
///   applied exactly once, even across kill -9. Local targets see them like any other save.
///
/// Every machine applies the same order; an object's state is the last one in that order (a
/// change not pushed yet is pushed later, so it wins later). A delete and an update of the same
/// object: the later in the server's order wins — an update after a delete brings the object
/// back, with the same global id. Two objects that collide on a uniqueness constraint become
/// one, the smaller global id, on every machine.
public final class Mirror {
    public static let author = "Mirror"
    public static let consumer = "Mirror"
    public static let contextName = "mirror.import"

    public let container: Container
    public let registry: TokenRegistry
    private let server: MirrorServer
    /// Transactions per upload or pull batch.
    public var batchSize = 500
    /// Local history after this token holds no unpushed change (see ``Container/mirrorImport``).
    private var cleanThrough: Int64 = 0

    /// Prepares the store (the mirror's tables, global id indexes) and the server's schema, and
    /// registers the mirror as a consumer.
    public init(container: Container, registry: TokenRegistry, connection: PostgresConnection) throws {
        self.container = container
        self.registry = registry
        server = try MirrorServer(connection: connection)
        try server.prepare()
        try container.prepareMirroring()
        try registry.register(Self.consumer)
    }

    public var serverDescription: String { server.connection.serverDescription }

    /// Starts receiving the server's wake-ups (``wait(timeout:wake:)``).
    public func listen() throws { try server.listen() }

    /// Waits up to `timeout` for an upload by another mirror, or for `wake` to become readable.
    public func wait(timeout: TimeInterval, wake: Int32?) throws {
        _ = try server.connection.notifications(timeout: timeout, wake: wake)
    }

    /// Pushes, then pulls, until both are done; returns what it did and the lag after.
    public func round() throws -> MirrorRound {
        var round = MirrorRound(server: serverDescription)
        while true {
            let n = try push()
            round.pushed += n
            if n < batchSize { break }
        }
        while true {
            let n = try pull()
            round.pulled += n
            if n < batchSize { break }
        }
        // Moves the mirror's token past its own imports (and pushes what came meanwhile), so
        // that the cleaner is not held back by them.
        if round.pulled > 0 { round.pushed += try push() }
        round.lag = try lag()
        return round
    }

    /// The local token the mirror has pushed through (nil: nothing yet).
    private func pushedToken() throws -> HistoryToken? {
        guard let token = try registry.consumer(Self.consumer)?.token, token.storeID == container.storeID else {
            return nil
        }
        return token
    }

    /// Uploads up to ``batchSize`` local transactions; returns how many were new to the server.
    @discardableResult
    public func push() throws -> Int {
        let newest = try container.currentToken()
        let start = try pushedToken()
        let transactions: [HistoryTransaction]
        do {
            transactions = try container.fetchHistory(
                HistoryRequest(
                    start: start.map { .after($0) } ?? .beginning, excludingAuthors: [Self.author], limit: batchSize))
        } catch let error as StoreError where error.code == .historyExpired {
            throw MirrorError(
                "history after the mirror's token was cleaned before it was pushed (the mirror was evicted?): "
                    + "its changes cannot be uploaded one by one; \(error.message)")
        }
        let changes = try container.mirrorExport(transactions)
        let uploads = zip(transactions, changes).map { t, c in
            MirrorUpload(
                token: t.token.value, author: t.author,
                payload: MirrorPayload.encode(c, modelVersion: container.model.version))
        }
        let results = try server.upload(origin: container.storeID, uploads)
        var objects: [(UUID, Int64)] = []
        for (result, c) in zip(results, changes) {
            for change in c { objects.append((change.globalID, result.sequence)) }
        }
        try container.noteMirrorUploads(objects)
        // Everything through `newest` not of this mirror is pushed when the batch was not full.
        let through = transactions.count < batchSize ? newest : transactions.last?.token
        if let through, through.value > (start?.value ?? 0) {
            try registry.advance(Self.consumer, to: through)
            cleanThrough = max(cleanThrough, through.value)
        } else {
            try registry.advance(Self.consumer, to: start ?? newest)
        }
        return results.filter(\.isNew).count
    }

    /// Applies up to ``batchSize`` remote transactions; returns how many.
    @discardableResult
    public func pull() throws -> Int {
        let cursor = try container.mirrorValue(MirrorKeys.pullCursor) ?? 0
        let remote = try server.transactions(after: cursor, excluding: container.storeID, limit: batchSize)
        cleanThrough = max(cleanThrough, try pushedToken()?.value ?? 0)
        var applied = 0
        for t in remote {
            let (model, changes) = try MirrorPayload.decode(t.payload, sequence: t.sequence)
            guard model <= container.model.version else {
                throw MirrorError(
                    "server transaction \(t.sequence) was made with model \(model), newer than this app's "
                        + "(\(container.model.version)): update the app to pull further")
            }
            let result = try container.mirrorImport(
                sequence: t.sequence, changes: changes, unpushedAfter: cleanThrough, author: Self.author,
                contextName: Self.contextName)
            if result.applied { applied += 1 }
            if !result.foundUnpushed, let token = result.token { cleanThrough = max(cleanThrough, token.value) }
        }
        return applied
    }

    /// Local transactions not pushed (counted up to 10,000) plus remote ones not applied.
    public func lag() throws -> Int64 {
        let start = try pushedToken()
        var unpushed = 0
        try container.history(
            HistoryRequest(
                start: start.map { .after($0) } ?? .beginning, excludingAuthors: [Self.author], limit: 10_000)
        ) { unpushed += $0.count }
        let cursor = try container.mirrorValue(MirrorKeys.pullCursor) ?? 0
        return Int64(unpushed) + (try server.count(after: cursor, excluding: container.storeID))
    }
}
