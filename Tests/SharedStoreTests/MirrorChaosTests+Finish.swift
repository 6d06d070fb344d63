import Foundation
import ReadLater
import SharedStore
import SharedStoreMirror
import SharedStorePostgres
import SharedStoreSupport
import Testing

@testable import SharedStoreCore

/// The end of a chaos run: every machine settled, then convergence, the server's state and
/// every acknowledged save checked (evidence kept when one fails).
extension Chaos {
    /// Settles every machine (rounds of `storectl mirror --once` until one pass moves nothing
    /// and reports no lag), then checks convergence, the server's state and the saves.
    mutating func finish() throws {
        stopFollowers()
        if !upgraded { try upgrade(machines[2]) }
        stopFollowers()
        let deadline = Date().addingTimeInterval(120)
        var quiet = false
        while !quiet && Date() < deadline {
            quiet = true
            for m in machines {
                let once = try Child(
                    "storectl", ["mirror", "--group", m.group.path, "--json"], environment: database.environment)
                #expect(try once.waitForExit() == 0, "\(once.lines)")
                let round = json(once.lines.last ?? "{}")
                if round["pushed"] as? Int != 0 || round["pulled"] as? Int != 0 || round["lag"] as? Int != 0 {
                    quiet = false
                }
            }
        }
        #expect(quiet, "the mirrors did not settle within 120 s")
        let states = try machines.map { try articles($0) }
        for (i, m) in machines.enumerated() {
            print("mirror chaos: store \(i) is \(try m.open().storeID) in \(m.group.path)")
        }
        var differing = Set<UUID>()
        for (i, s) in states.enumerated().dropFirst() {
            #expect(s == states[0], "stores 0 and \(i) differ: \(Self.difference(states[0], s))")
            differing.formUnion(Set(s.keys).union(states[0].keys).filter { s[$0] != states[0][$0] })
        }
        if !differing.isEmpty {
            let rows = try PostgresConnection(database.conninfo).execute(
                "SELECT sequence, origin, payload, token FROM sharedstore_mirror.transactions ORDER BY sequence")
            try keepEvidence("the stores differ on \(differing.count) articles", articles: differing, rows: rows)
        }
        let names = try machines.map { try categoryNames($0) }
        for (i, n) in names.enumerated().dropFirst() {
            #expect(n == names[0], "categories of stores 0 and \(i) differ: \(Self.difference(names[0], n))")
        }
        for m in machines { try mirrorOnce(m, verify: true) }
        try checkAcknowledged(final: states[0])
    }

    /// What two states hold differently (a failure names only those entries).
    static func difference<V: Equatable>(_ a: [UUID: V], _ b: [UUID: V]) -> String {
        let keys = Set(a.keys).union(b.keys).filter { a[$0] != b[$0] }.sorted { $0.uuidString < $1.uuidString }
        func text(_ v: V?) -> String { v.map { String("\($0)".prefix(60)) } ?? "-" }
        return keys.prefix(20).map { "\($0): \(text(a[$0])) / \(text(b[$0]))" }
            .joined(separator: "; ") + (keys.count > 20 ? " … (\(keys.count) in all)" : "")
    }

    /// Every article of `m`'s store: global id → "title|isRead".
    func articles(_ m: ChaosMachine) throws -> [UUID: String] {
        let c = try m.open()
        let context = c.newContext()
        var out: [UUID: String] = [:]
        for a in try context.fetch(FetchRequest("Article")) {
            out[try context.globalID(of: a.id)] = "\(a["title"].stringValue ?? "")|\(a["isRead"].boolValue ?? false)"
        }
        return out
    }

    /// Every category of `m`'s store by global id, with its name and the articles in it (by
    /// global id): what a rename onto another's name merges.
    func categoryNames(_ m: ChaosMachine) throws -> [UUID: String] {
        let context = try m.open().newContext()
        let label = ReadLater.categoryName(context.container.model)
        var members: [ObjectID: [String]] = [:]
        for a in try context.fetch(FetchRequest("Article")) {
            if let c = a.relationships["category"] {
                members[c, default: []].append(GlobalID.text(try context.globalID(of: a.id)))
            }
        }
        var out: [UUID: String] = [:]
        for c in try context.fetch(FetchRequest("Category")) {
            out[try context.globalID(of: c.id)] =
                "\(c[label].stringValue ?? "")|\(members[c.id]?.count ?? 0)|"
                + (members[c.id] ?? []).sorted().joined(separator: ",")
        }
        return out
    }

    /// Every save a machine's app was told succeeded is in the final state, or another machine
    /// changed the same article later in the server's order.
    func checkAcknowledged(final: [UUID: String]) throws {
        let rows = try PostgresConnection(database.conninfo).execute(
            "SELECT sequence, origin, payload, token FROM sharedstore_mirror.transactions ORDER BY sequence")
        // Each row's change of each article: its sequence, origin and the state it carries
        // ("title|isRead", nil: a deletion).
        var touched: [UUID: [(Int64, String, String?)]] = [:]
        // Each origin's full-upload rows: their sequences, when they were made, and the newest local
        // token the upload compared (its rows share it; merges and rekeyed rows have none).
        var fullUploads: [String: [(sequence: Int64, at: Double, highWater: String)]] = [:]
        for row in rows {
            guard let s = row[0].flatMap({ Int64($0) }), let origin = row[1], let payload = row[2],
                let object = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any],
                let changes = object["changes"] as? [[String: Any]]
            else { continue }
            if let token = row[3].flatMap({ Int64($0) }), token < 0,
                let at = (object["at"] as? String).flatMap(Double.init), let highWater = object["hw"] as? String
            {
                fullUploads[origin, default: []].append((s, at, highWater))
            }
            for c in changes {
                guard let g = (c["g"] as? String).flatMap(UUID.init(uuidString:)) else { continue }
                let values = c["a"] as? [String: Any]
                let title = (values?["title"] as? [Any])?.last as? String
                let read = (values?["isRead"] as? [Any])?.last as? Bool
                let state = c["k"] as? String == "d" ? nil : "\(title ?? "")|\(read ?? false)"
                touched[g, default: []].append((s, origin, state))
            }
        }
        var lost: [String] = []
        var lostIDs = Set<UUID>()
        for (i, m) in machines.enumerated() {
            let origin = try m.open().storeID.uuidString.lowercased()
            for (gid, state) in m.acknowledged where final[gid] != state {
                let rowsOf = touched[gid] ?? []
                // The save went up in a row of this machine that carries it, or a full upload of
                // this machine made after it found the log already holding it (another machine
                // made the same change); a row of another machine after that overwrote it.
                let carried =
                    rowsOf.filter { $0.1 == origin && $0.2 == state }.map(\.0).max()
                    ?? Self.comparedEqual(
                        rowsOf, state: state, uploads: fullUploads[origin] ?? [],
                        after: log.last { $0.machine == i && $0.article == gid }?.at.timeIntervalSince1970)
                if carried == nil || !rowsOf.contains(where: { $0.1 != origin && $0.0 > carried ?? 0 }) {
                    lostIDs.insert(gid)
                    lost.append(
                        "\(GlobalID.text(gid)) saved on \(origin.prefix(4)): \(state ?? "deleted"), "
                            + "now \(final[gid] ?? "absent"); rows \(rowsOf.map { "\($0.0)@\($0.1.prefix(4))" })")
                }
            }
        }
        #expect(lost.isEmpty, "acknowledged saves lost: \(lost.prefix(10))")
        if !lost.isEmpty { try keepEvidence("acknowledged saves lost: \(lost)", articles: lostIDs, rows: rows) }
    }

    /// The last row of the first full upload of a machine made after its save (at `after`), when
    /// the log's state of the object there (the last of `rows` through it) already was the saved
    /// `state`: the upload compared and had nothing to send, and the save stands in the server's
    /// order there. (The check cannot see the store's own state at the upload: a save lost on its
    /// machine while another machine made the same change is taken for this one.)
    static func comparedEqual(
        _ rows: [(Int64, String, String?)], state: String?,
        uploads: [(sequence: Int64, at: Double, highWater: String)], after: Double?
    ) -> Int64? {
        guard let after, let first = uploads.filter({ $0.at >= after }).min(by: { $0.sequence < $1.sequence })
        else { return nil }
        let last =
            uploads.filter { $0.highWater == first.highWater && $0.sequence >= first.sequence }
            .map(\.sequence).max() ?? first.sequence
        let there = rows.filter { $0.0 <= last }.max { $0.0 < $1.0 }
        return there?.2 == state && there != nil ? last : nil
    }

    /// A failed run leaves what it failed on: the stores (kept), and a report of the steps on
    /// the articles it names (with the evictions, kills, restarts and restores of the run) and
    /// the server's rows, in `SHAREDSTORE_CHAOS_DUMP` or the temporary directory. A failure that
    /// replays rarely can still be read.
    func keepEvidence(_ why: String, articles: Set<UUID>, rows: [[String?]]) throws {
        for m in machines { m.group.keep = true }
        let start = log.first?.at ?? Date()
        func line(_ e: (at: Date, machine: Int, what: String, article: UUID?)) -> String {
            String(format: "%8.3f s", e.at.timeIntervalSince(start)) + " machine \(e.machine) \(e.what)"
                + (e.article.map { " " + GlobalID.text($0) } ?? "")
        }
        var text = "mirror chaos seed \(seed): \(why)\n"
        for (i, m) in machines.enumerated() {
            text += "machine \(i): store \((try? m.open().storeID.uuidString.lowercased()) ?? "?") in \(m.group.path)\n"
        }
        text += "\n== steps on those articles, and the run's evictions, kills, restarts, backups, restores\n"
        let events = ["evict", "kill", "server-restart", "backup", "restore", "upgrade"]
        for e in log where e.article.map(articles.contains) ?? events.contains(e.what) {
            text += line(e) + "\n"
        }
        text += "\n== the server's rows (sequence | origin | payload | token)\n"
        text += rows.map { $0.map { $0 ?? "NULL" }.joined(separator: " | ") }.joined(separator: "\n") + "\n"
        let path =
            ProcessInfo.processInfo.environment["SHAREDSTORE_CHAOS_DUMP"]
            ?? (NSTemporaryDirectory() + "/sharedstore-chaos-\(seed).txt")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        print("mirror chaos: the stores are kept and the run is described in \(path)")
    }
}
