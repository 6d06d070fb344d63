import Foundation
import SharedStoreCore
import SharedStorePostgres
import SharedStoreSupport

/// One object whose state here differs from the state the server's log determines.
public struct MirrorDifference: Sendable, Hashable {
    /// The object, by global id (the same on every machine).
    public let globalID: UUID
    /// Its entity (on the side that has it).
    public let entity: String
    /// Each side's state in short (nil: the object is absent there).
    public let local: String?
    public let server: String?

    /// `storectl mirror --verify`'s line: `{"gid","entity","local","server"}`.
    public var json: JSONValue {
        .object([
            ("gid", .string(GlobalID.text(globalID))), ("entity", .string(entity)),
            ("local", local.map(JSONValue.string) ?? .null), ("server", server.map(JSONValue.string) ?? .null),
        ])
    }
}

extension MirrorQuarantine {
    /// A round's entry: `{"sequence","origin","token","reason"}` (sequence null: a local change
    /// that did not go up).
    package var json: JSONValue {
        var fields: [(String, JSONValue)] = [
            ("sequence", sequence.map { .number(Double($0)) } ?? .null),
            ("origin", .string(origin.uuidString.lowercased())), ("token", .number(Double(token))),
        ]
        if let globalID { fields.append(("gid", .string(GlobalID.text(globalID)))) }
        fields.append(("reason", .string(reason)))
        return .object(fields)
    }
}

extension Mirror {
    /// Compares every object here with the state the server's whole log determines, by global
    /// id: attributes (derived ones aside), to-one targets and owned links. Run after the
    /// mirrors settle (lag 0), it finds no difference; any it finds is a divergence.
    public func verify() throws -> [MirrorDifference] {
        try Self.mapAccess(server) { try unmappedVerify() }
    }

    private func unmappedVerify() throws -> [MirrorDifference] {
        let replayed = try replayLog(through: try self.server.maxSequence(), then: [], wholeLog: true)
        // Rows this app cannot read leave the log's state unknown here: no comparison says clean.
        if let sequence = replayed.newer {
            throw MirrorError(
                "server transaction \(sequence) was made with a newer model than this app's "
                    + "(\(container.model.version)): this app cannot tell the log's state; update it to verify",
                code: .newerModel)
        }
        let server = try replayed.shadow.mirrorExportEverything().objects
        let local = try container.mirrorExportEverything().objects
        var out: [MirrorDifference] = []
        for gid in Set(server.keys).union(local.keys).sorted(by: { $0.uuidString < $1.uuidString }) {
            let (l, s) = (local[gid].map(MirrorState.init), server[gid].map(MirrorState.init))
            guard l != s else { continue }
            out.append(
                MirrorDifference(
                    globalID: gid, entity: l?.entity ?? s?.entity ?? "?", local: l?.summary, server: s?.summary))
        }
        return out
    }

    /// Applies every quarantined server row again, behind the pull cursor: a change of an
    /// object that a later row in the server's order (applied here) changed too is left out,
    /// as it would have been in order. Returns how many rows were applied; those that still
    /// fail stay quarantined with their new reason.
    public func retryQuarantined() throws -> Int {
        try Self.mapAccess(server) { try unmappedRetryQuarantined() }
    }

    private func unmappedRetryQuarantined() throws -> Int {
        var applied = 0
        for q in try container.quarantinedMirrorRows() {
            guard let sequence = q.sequence else { continue }
            guard let t = try server.transaction(at: sequence) else {
                // Removed from the server (pruned: a snapshot holds its effect): nothing is left to
                // apply, and once settled the store takes the log's state.
                try container.releaseQuarantine(sequence: sequence)
                try container.setMirrorValue(MirrorKeys.reconcile, 1)
                continue
            }
            do {
                let (model, changes) = try decode(t)
                let cursor = try container.mirrorValue(MirrorKeys.pullCursor) ?? 0
                _ = try container.mirrorImport(
                    sequence: sequence, changes: changes, uploaded: try changedAfter(sequence, through: cursor),
                    unpushedAfter: cleanThrough, modelVersion: model, again: true, author: Self.author,
                    contextName: Self.contextName)
                try container.releaseQuarantine(sequence: sequence)
                applied += 1
            } catch let error where Self.isRowProblem(error) {
                var again = q
                again.reason = TextSafety.visible("\(error)")
                again.at = Date().timeIntervalSince1970
                try container.quarantineMirrorRow(again)
            }
        }
        return applied
    }

    /// The global ids rows after `sequence` through `through` changed, with the last such row:
    /// newer states than a row at `sequence`.
    private func changedAfter(_ sequence: Int64, through: Int64) throws -> [UUID: Int64] {
        var out: [UUID: Int64] = [:]
        var after = sequence
        while after < through {
            let rows = try server.log(after: after, through: through, limit: 1000)
            for t in rows {
                for c in (try? MirrorPayload.decode(t.payload, sequence: t.sequence).changes) ?? [] {
                    out[c.globalID] = t.sequence
                }
            }
            guard let last = rows.last else { break }
            after = last.sequence
        }
        return out
    }
}
