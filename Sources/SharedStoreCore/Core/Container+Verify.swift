import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// The checks `storectl verify` and the repairs run, each in one transaction.
extension Container {
    /// SQLite's structural check: `["ok"]`, or the first problems.
    package func quickCheck() throws -> [String] { try read { s in try s.quickCheck() } }

    /// What history holds: the floor, the newest token ever, and the rows' extent.
    package func historyExtent() throws -> (
        floor: Int64, newest: Int64, lowest: Int64, highest: Int64, rows: Int64, belowFloor: Int64
    ) {
        try read { s in
            let floor = try s.historyMeta().floor
            let e = try s.historyExtent(floor: floor)
            return (floor, try s.currentToken(), e.lowest, e.highest, e.rows, e.belowFloor)
        }
    }

    /// Each relationship with objects or links that point nowhere, and how many.
    package func danglingRelationships() throws -> [String] {
        try read { s in
            var dangling: [String] = []
            for e in model.entities {
                for r in e.toOneRelationships {
                    let n = try s.danglingReferences(e, r)
                    if n > 0 { dangling.append("\(n) \(e.name).\(r.name)") }
                }
                for r in e.toManyRelationships {
                    guard let join = model.joinTable(e, r) else { continue }
                    let n = try s.danglingLinks(e, r, join)
                    if n > 0 { dangling.append("\(n) links of \(e.name).\(r.name)") }
                }
            }
            return dangling
        }
    }

    /// Each attribute and to-one relationship whose column holds values of another SQLite type
    /// than the model stores there (another tool's `UPDATE … SET n = 'abc'`), or text of another
    /// form than a save writes for its type (``textForm(_:)``), with how many and the first: a
    /// read takes such a value for another one (`'abc'` as 0, `'yes'` as false, a date's text as
    /// 1970, `'1,5'` as 1), so the copy a program reads differs from the one on disk.
    package func mistypedValues() throws -> [String] {
        try read { s in
            var found: [String] = []
            for e in model.entities {
                var columns = e.attributes.map { a -> (String, [String], String) in
                    switch SQLMapping.columnType(a.type) {
                    case "INTEGER": return (a.name, ["integer", "null"], "an integer")
                    case "REAL": return (a.name, ["real", "integer", "null"], "a number")
                    case "BLOB": return (a.name, ["blob", "null"], "bytes")
                    default: return (a.name, ["text", "null"], "text")
                    }
                }
                columns += e.toOneRelationships.map { ($0.name, ["integer", "null"], "an object's key") }
                let counted = try s.mistyped(e, columns.map { ($0.0, $0.1) })
                let forms = e.attributes.compactMap(Self.textForm)
                let malformed = try s.malformedTexts(e, forms.map { ($0.name, $0.isWellFormed) })
                let named =
                    Array(zip(columns.map { ($0.0, $0.2) }, counted)) + zip(forms.map { ($0.name, $0.what) }, malformed)
                for ((column, what), (n, first)) in named {
                    guard n > 0, let (key, shown) = first else { continue }
                    found.append(
                        "\(n) \(e.name).\(column) not \(what) (\(e.name)/\(key) holds \(TextSafety.visible(shown)))")
                }
            }
            return found
        }
    }

    /// The text an attribute stored as text must hold, as a save writes it, for its read to
    /// give that value and a fetch by it to find it: a UUID in lowercase (a read takes another
    /// text for nil, and a fetch by the UUID misses one in capitals), a decimal number a
    /// `Decimal` reads exactly (`'1,5'` reads as 1), an absolute URL as `URL` writes it (a fetch
    /// by the URL misses `'https://e.com/a b'`, stored as `a%20b`), JSON; all of it, a string's
    /// too, UTF-8 (a read repairs other bytes, and a mirror sends what it read). Nil for an
    /// attribute of another type.
    private static func textForm(_ a: Attribute) -> (name: String, isWellFormed: ((String) -> Bool)?, what: String)? {
        switch a.type {
        case .uuid: return (a.name, { UUID(uuidString: $0)?.uuidString.lowercased() == $0 }, "a UUID in lowercase")
        case .decimal: return (a.name, { DecimalText.parse($0) != nil }, "a decimal number")
        case .url:
            // As a save writes it: `URL(string:)`'s own text (a space is `%20` there).
            return (
                a.name, { text in URL(string: text).map { $0.scheme != nil && $0.absoluteString == text } ?? false },
                "an absolute URL as a save writes it"
            )
        case .json:
            return (
                a.name,
                { (try? JSONSerialization.jsonObject(with: Data($0.utf8), options: [.fragmentsAllowed])) != nil },
                "JSON"
            )
        // Any text, as long as it is UTF-8 (which `malformedTexts` checks of every column).
        case .string: return (a.name, nil, "UTF-8 text")
        default: return nil
        }
    }

    /// Each uniqueness constraint that does not hold, and how many values are duplicated.
    package func brokenUniqueness() throws -> [String] {
        try read { s in
            var broken: [String] = []
            for e in model.entities {
                for u in e.uniquenessConstraints {
                    let n = try s.duplicates(e, u)
                    if n > 0 { broken.append("\(n) duplicate \(e.name)(\(u.joined(separator: ",")))") }
                }
            }
            return broken
        }
    }

    /// Entities with rows lacking a well-formed global id (a foreign tool's inserts), with how many.
    package func objectsWithoutGlobalID() throws -> [String] {
        try read { s in
            try model.entities.compactMap { e in
                let n = try s.objectsWithoutGlobalID(e)
                return n > 0 ? "\(n) \(e.name) object(s)" : nil
            }
        }
    }

    /// Gives a new global id to every object a foreign tool inserted without one (`storectl
    /// recount`); returns how many. No history: no object changed for the app.
    package func assignMissingGlobalIDs() throws -> Int {
        try write { s in try model.entities.reduce(0) { $0 + (try s.assignMissingGlobalIDs($1)) } }
    }

    /// Every kept count with its stored value (nil: its row is missing) and a real count of the
    /// table, read in one snapshot.
    package func keptCounts() throws -> [(name: String, kept: Int64?, counted: Int64)] {
        try read { s in
            var result: [(name: String, kept: Int64?, counted: Int64)] = []
            for e in model.entities {
                for k in e.keptCounts {
                    let name = SchemaSQL.keptCountName(e, k)
                    result.append((name, try s.keptCount(name), try s.recount(e, k)))
                }
            }
            return result
        }
    }

    /// How many derived values computing them again would change, over every derived attribute.
    package func derivedMismatchCount() throws -> Int64 { try derivedMismatches().reduce(0) { $0 + $1.objects } }

    /// Each derived attribute with how many objects hold a value that computing it again would
    /// change (`now` attributes are not computed again).
    package func derivedMismatches() throws -> [(name: String, objects: Int64)] {
        try read { s in
            var result: [(name: String, objects: Int64)] = []
            for e in model.entities {
                for a in e.derivedAttributes {
                    result.append(("\(e.name).\(a.name)", try SchemaSQL.derivedMismatches(s.c, model: model, e, a)))
                }
            }
            return result
        }
    }

    /// Computes every derived attribute again (a store written by a tool that does not keep
    /// them); returns the attributes that were wrong, with how many objects changed.
    package func recomputeDerived() throws -> [(name: String, objects: Int)] {
        try write { s in
            var fixed: [(name: String, objects: Int)] = []
            for e in model.entities {
                for a in e.derivedAttributes {
                    let n = try SchemaSQL.recomputeDerived(s.c, model: model, entity: e.name, attribute: a.name)
                    if n > 0 { fixed.append(("\(e.name).\(a.name)", n)) }
                }
            }
            return fixed
        }
    }

    /// Counts every kept count again from its table and stores the result (a store written by a
    /// tool that does not keep them, say); returns the counts that were wrong, with both values.
    package func recountKeptCounts() throws -> [(name: String, was: Int64?, now: Int64)] {
        try write { s in
            var fixed: [(name: String, was: Int64?, now: Int64)] = []
            for e in model.entities {
                for k in e.keptCounts {
                    let name = SchemaSQL.keptCountName(e, k)
                    let (was, now) = (try s.keptCount(name), try s.recount(e, k))
                    if was != now {
                        try s.setKeptCount(name, now)
                        fixed.append((name, was, now))
                    }
                }
            }
            return fixed
        }
    }

    /// Every stored object checked against its attributes' rules: how many, and the first
    /// problems (at most `limit`).
    package func invalidValues(limit: Int = 3) throws -> (objects: Int, problems: [String]) {
        try read { s in
            var n = 0
            var problems: [String] = []
            for e in model.entities {
                for object in try s.fetch(FetchRequest(e.name)) {
                    n += 1
                    for a in e.attributes {
                        do {
                            _ = try validator.validate(object[a.name], a, object: object.id.description)
                        } catch let error as StoreError {
                            if problems.count < limit { problems.append(error.message) }
                        }
                    }
                }
            }
            return (n, problems)
        }
    }

    /// Whether another process holds the store's write lock past the busy timeout (a frozen
    /// writer): asked of the kernel's locks on the WAL index, which never takes the lock, so a
    /// read-only container sees it too. Throws `.busy` naming the process.
    package func checkWriteLock() throws {
        guard !options.inMemory else { return }
        let deadline = Monotonic.seconds() + options.busyTimeout
        while let pid = WALReaders.writer(storePath: storePath) {
            guard Monotonic.seconds() < deadline else {
                let name = WALReaders.executable(of: pid).map(TextSafety.visible) ?? "?"
                let state =
                    WALReaders.isStopped(pid) == true
                    ? "stopped (SIGSTOP or a debugger): it holds the lock until it runs again"
                    : "running: a long write transaction, or one frozen in it"
                throw StoreError(
                    .busy,
                    "the store's write lock is held by pid \(pid) (\(name), \(state)) past the busy timeout "
                        + "(\(options.busyTimeout) s): every write waits for it")
            }
            usleep(10_000)
        }
    }
}
