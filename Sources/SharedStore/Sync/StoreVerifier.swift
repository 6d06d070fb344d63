import Foundation

/// One check of ``StoreVerifier``.
public struct VerifyCheck: Sendable, Hashable {
    public let name: String
    public let ok: Bool
    public let detail: String
}

/// Checks at rest what DESIGN.md's invariants promise about the files of a group directory.
public enum StoreVerifier {
    /// Runs every check. `registry` is nil when it could not be opened; `registryProblem` says why.
    public static func verify(container: Container, registry: TokenRegistry?, registryProblem: String? = nil) -> [VerifyCheck] {
        var checks: [VerifyCheck] = []
        func run(_ name: String, _ body: () throws -> (Bool, String)) { checks.append(check(name, body)) }
        let model = container.model
        run("sqlite-integrity") {
            let result = try container.read { c in try c.cached("PRAGMA quick_check").rows { $0.text(0) } }
            return (result == ["ok"], result.prefix(3).joined(separator: "; "))
        }
        run("schema") { (true, "store \(container.storeID.uuidString.lowercased()) matches the model (\(model.entities.count) entities)") }
        run("history-order") {
            try container.read { c in
                let (floor, _) = try container.deletedThrough(c)
                let newest = try container.currentTokenValue(c)
                let (lo, hi, n, old) = try c.cached("SELECT coalesce(min(token), 0), coalesce(max(token), 0), count(*), coalesce(sum(token <= ?), 0) FROM ss_history")
                    .firstRow([.integer(floor)]) { ($0.int64(0), $0.int64(1), $0.int64(2), $0.int64(3)) } ?? (0, 0, 0, 0)
                // At most one row at or below the floor: the newest-row marker that keeps tokens from being reused.
                let ok = old <= 1 && hi <= newest && (n == 0 || hi >= floor)
                return (ok, "\(n - old) transactions, tokens \(n - old == 0 ? "-" : "\(max(lo, floor + 1))…\(hi)"), deleted through \(floor), newest ever \(newest)")
            }
        }
        run("history-records") {
            var count = 0
            try container.history(HistoryRequest()) { count += $0.count }
            return (true, "\(count) transactions decode and name known entities and properties")
        }
        run("relationships") {
            try container.read { c in
                var dangling: [String] = []
                for e in model.entities {
                    for r in e.toOneRelationships {
                        let n = try c.cached("""
                            SELECT count(*) FROM \(SQLMapping.quote(e.name)) AS s WHERE s.\(SQLMapping.quote(r.name)) IS NOT NULL
                            AND NOT EXISTS (SELECT 1 FROM \(SQLMapping.quote(r.destination)) AS d WHERE d.Z_PK = s.\(SQLMapping.quote(r.name)))
                            """).firstRow { $0.int64(0) } ?? 0
                        if n > 0 { dangling.append("\(n) \(e.name).\(r.name)") }
                    }
                    for r in e.toManyRelationships {
                        guard let join = model.joinTable(e, r) else { continue }
                        let n = try c.cached("""
                            SELECT count(*) FROM \(SQLMapping.quote(join.name)) AS j
                            WHERE NOT EXISTS (SELECT 1 FROM \(SQLMapping.quote(e.name)) WHERE Z_PK = j.\(join.mine))
                               OR NOT EXISTS (SELECT 1 FROM \(SQLMapping.quote(r.destination)) WHERE Z_PK = j.\(join.theirs))
                            """).firstRow { $0.int64(0) } ?? 0
                        if n > 0 { dangling.append("\(n) links of \(e.name).\(r.name)") }
                    }
                }
                return (dangling.isEmpty, dangling.isEmpty ? "no dangling relationship or link" : "dangling: " + dangling.joined(separator: ", "))
            }
        }
        run("uniqueness") {
            try container.read { c in
                var broken: [String] = []
                for e in model.entities {
                    for u in e.uniquenessConstraints {
                        let cols = u.map(SQLMapping.quote).joined(separator: ", ")
                        let notNull = u.map { "\(SQLMapping.quote($0)) IS NOT NULL" }.joined(separator: " AND ")
                        let n = try c.cached("SELECT count(*) FROM (SELECT 1 FROM \(SQLMapping.quote(e.name)) WHERE \(notNull) GROUP BY \(cols) HAVING count(*) > 1)")
                            .firstRow { $0.int64(0) } ?? 0
                        if n > 0 { broken.append("\(n) duplicate \(e.name)(\(u.joined(separator: ",")))") }
                    }
                }
                return (broken.isEmpty, broken.isEmpty ? "every uniqueness constraint holds" : broken.joined(separator: ", "))
            }
        }
        run("values") {
            var n = 0
            var bad: [String] = []
            try container.read { c in
                for e in model.entities {
                    for s in try container.fetch(FetchRequest(e.name), c) {
                        n += 1
                        for a in e.attributes {
                            do { _ = try container.validate(s[a.name], a, object: s.id.description) } catch let err as StoreError {
                                if bad.count < 3 { bad.append(err.message) }
                            }
                        }
                    }
                }
            }
            return (bad.isEmpty, bad.isEmpty ? "\(n) objects obey the model's rules" : bad.joined(separator: "; "))
        }
        run("timeline") {
            let lost = try container.lostTokenRanges()
            return (true, lost.isEmpty ? "no token was lost"
                : "tokens " + lost.map { "\($0.lowerBound)…\($0.upperBound)" }.joined(separator: ", ")
                    + " were lost when the store was put back to an older copy; they are never handed out again")
        }
        guard let registry else {
            checks.append(VerifyCheck(name: "registry", ok: false, detail: registryProblem ?? "the token registry cannot be opened"))
            return checks + rest(container)
        }
        run("registry") {
            let current = try container.currentToken().value
            let lost = try container.lostTokenRanges()
            var problems: [String] = []
            let consumers = try registry.consumers()
            for c in consumers {
                guard let t = c.token else { continue }
                if t.storeID != container.storeID {
                    problems.append("\(c.name) holds a token of another store (it reloads in full at its next sync)")
                } else if let range = lost.first(where: { $0.contains(t.value) }) {
                    problems.append("\(c.name) holds token \(t.value), lost when the store was put back to an older copy "
                        + "(tokens \(range.lowerBound)…\(range.upperBound)); it reloads in full at its next sync "
                        + "(or run 'storectl reset-consumer \(c.name)')")
                } else if t.value > current {
                    problems.append("\(c.name) is ahead of the store (\(t.value) > \(current)): the store was put back to an older "
                        + "copy or lost its last commits; any target that opens the group moves the tokens past it")
                }
            }
            let high = try registry.highWater(storeID: container.storeID)
            if high > current {
                problems.append("the registry has seen token \(high), the store's newest is \(current): the store was put back to an "
                    + "older copy; any target that opens the group moves the tokens past it")
            }
            let evicted = consumers.filter(\.isEvicted).map(\.name)
            return (problems.isEmpty, problems.isEmpty
                ? "\(consumers.count) consumers, tokens within the store" + (evicted.isEmpty ? "" : "; evicted: \(evicted.joined(separator: ", "))")
                : problems.joined(separator: "; "))
        }
        run("registry-readers") {
            let cleared = try registry.clearStaleReaders()
            return (true, "no stale reader slot left (\(registry.clearedStaleReaders + cleared) cleared from dead processes)")
        }
        return checks + rest(container)
    }

    /// One check: a failure to run it is a failed check naming the error.
    private static func check(_ name: String, _ body: () throws -> (Bool, String)) -> VerifyCheck {
        do {
            let (ok, detail) = try body()
            return VerifyCheck(name: name, ok: ok, detail: detail)
        } catch {
            return VerifyCheck(name: name, ok: false, detail: "\(error)")
        }
    }

    /// The checks that need no registry.
    private static func rest(_ container: Container) -> [VerifyCheck] {
        var checks: [VerifyCheck] = []
        func run(_ name: String, _ body: () throws -> (Bool, String)) { checks.append(check(name, body)) }
        run("store-lock") {
            try container.write { _ in }
            return (true, "the write lock is free")
        }
        run("files") {
            var wrong: [String] = []
            func mode(_ path: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? NSNumber)?.intValue ?? -1 }
            if !container.options.inMemory {
                if mode(container.directory) & 0o077 != 0 { wrong.append("directory is \(String(mode(container.directory), radix: 8))") }
                for f in (try? FileManager.default.contentsOfDirectory(atPath: container.directory)) ?? [] {
                    let m = mode((container.directory as NSString).appendingPathComponent(f))
                    if m & 0o077 != 0 { wrong.append("\(f) is \(String(m, radix: 8))") }
                }
            }
            return (wrong.isEmpty, wrong.isEmpty ? "group directory and files are private" : wrong.joined(separator: ", "))
        }
        return checks
    }
}

extension Container {
    /// Transactions and changes retained in history.
    public func historyStatistics() throws -> (transactions: Int, changes: Int) {
        try read { c in
            var transactions = 0, changes = 0
            // The change count is the varint right after the format byte: read only that prefix.
            let (floor, _) = try deletedThrough(c)
            try c.cached("SELECT substr(changes, 1, 10) FROM ss_history WHERE token > ?").forEachRow([.integer(floor)]) { row in
                transactions += 1
                var r = HistoryCodec.Reader(bytes: row.blob(0))
                // The plain varint: `count()` bounds a count by the bytes that follow, and only a
                // prefix of them was read here.
                if (try? r.byte()) == HistoryCodec.version, let n = try? r.varint(), n <= UInt64(Int.max) { changes += Int(n) }
            }
            return (transactions, changes)
        }
    }

    /// Sizes of the files of the group directory: store, write-ahead log, token registry.
    public func fileSizes() -> (store: Int, wal: Int, tokens: Int) {
        func size(_ name: String) -> Int {
            ((try? FileManager.default.attributesOfItem(atPath: (directory as NSString).appendingPathComponent(name))[.size]) as? NSNumber)?.intValue ?? 0
        }
        return (size(Container.storeFileName), size(Container.storeFileName + "-wal"), size(TokenRegistry.fileName))
    }
}
