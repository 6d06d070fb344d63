import Foundation
import SharedStore
import Testing

@testable import SharedStoreCore

/// What a save leaves a context read, from a hostile review: a save without derivations or
/// deletes does not read back the rows it updated but knows them from what it bound
/// (``SQLMapping/storedValue(_:_:)``), and updates are kept per connection by entity and property
/// numbers. Edge values of every type, columns a custom migration step left of another type,
/// to-ones, hooks, duplicates and a randomized run over three containers (its seed printed;
/// `SHAREDSTORE_SAVE_READS_SEED` replays one): what a context keeps is what the store holds.
@Suite struct SaveReadsHostileTests {
    /// Two entities of one shape (the statement cache keys them by entity index), every type, a
    /// to-one relationship each; no derivations.
    static let model: Model = {
        func attributes() -> [Attribute] {
            [
                Attribute("s", .string, optional: true), Attribute("i", .integer, optional: true),
                Attribute("d", .double, optional: true), Attribute("b", .bool, default: false),
                Attribute("t", .date, optional: true), Attribute("bin", .data, optional: true),
                Attribute("u", .uuid, optional: true), Attribute("link", .url, optional: true),
                Attribute("dec", .decimal, optional: true), Attribute("js", .json, optional: true),
                Attribute("key", .string, optional: true),
            ]
        }
        do {
            return try Model([
                Entity(
                    "Box", attributes: attributes(),
                    relationships: [
                        .toOne("crate", "Crate", inverse: "boxes"), .toMany("crates", "Crate", inverse: "box"),
                    ], uniquenessConstraints: [["key"]]),
                Entity(
                    "Crate", attributes: attributes(),
                    relationships: [
                        .toOne("box", "Box", inverse: "crates"), .toMany("boxes", "Box", inverse: "crate"),
                    ]),
            ])
        } catch { preconditionFailure("\(error)") }
    }()

    static let names = ["s", "i", "d", "b", "t", "bin", "u", "link", "dec", "js"]

    /// Edge values per attribute (what a hostile user may give).
    static let pool: [String: [Value]] = [
        "s": [
            .string(""), .string("a\u{0}b"), .string("e\u{301}"), .string("\u{e9}"), .string("😀\u{FEFF}"),
            .string(String(repeating: "x", count: 5000)), .string("  "), .null, .string("123"), .string("1.50"),
        ],
        "i": [.integer(.min), .integer(.max), .integer(0), .integer(-1), .null, .integer(1 << 53 + 1)],
        "d": [
            .double(-0.0), .double(0.0), .double(.greatestFiniteMagnitude), .double(.leastNonzeroMagnitude),
            .double(0.1 + 0.2), .double(-9_223_372_036_854_775_808.0), .double(9_223_372_036_854_775_808.0),
            .integer(3), .integer(.max), .integer((1 << 53) + 1), .double(.leastNormalMagnitude / 4), .null,
            .double(-1.5),
        ],
        "b": [.bool(true), .bool(false)],
        "t": [
            .date(Date(timeIntervalSinceReferenceDate: 0.1)), .date(Date(timeIntervalSince1970: 0)),
            .date(Date(timeIntervalSince1970: -0.0)), .date(.distantPast), .date(.distantFuture),
            .date(Date(timeIntervalSinceReferenceDate: 123_456_789.123_456_789)), .null,
            .date(Date(timeIntervalSince1970: 1e-300)),
        ],
        "bin": [.data(Data()), .data(Data([0])), .data(Data(repeating: 7, count: 3000)), .null],
        "u": [.uuid(UUID()), .uuid(UUID(uuidString: "DEADBEEF-0000-4000-8000-00000000ABCD")!), .null],
        "link": [
            .string("HTTP://Example.COM/a/../b?q=%7e#f"), .string("https://x.example/\u{e9}"),
            .string("file:///tmp/a%20b"), .string("mailto:a@b"), .null,
        ],
        "dec": [.string("1.50"), .string("-0"), .string("1e3"), .string("007"), .null, .string("0.000")],
        "js": [.string(" {\"a\": 1} "), .string("1"), .string("\"x\""), .string("[1.0, 2e1]"), .null],
    ]

    /// Whether two values are the same down to the bits of a double (== calls -0.0 and 0.0 equal).
    static func same(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
        case (.date(let x), .date(let y)):
            return x.timeIntervalSinceReferenceDate.bitPattern == y.timeIntervalSinceReferenceDate.bitPattern
        default: return a == b
        }
    }

    /// What the context keeps as the base of its next save of `id` is what the store holds.
    static func checkRemembered(
        _ context: ObjectContext, _ container: Container, _ id: ObjectID, _ note: String, bits: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let fresh = try container.newContext().object(with: id)
        guard let kept = context.registered.read(id) else { return }
        guard kept.version == fresh.version else { return }  // an older read: legitimately kept
        #expect(
            kept == fresh, "\(note): remembered \(kept) but the store holds \(fresh)", sourceLocation: sourceLocation)
        for name in fresh.attributeNames where bits && !same(kept[name], fresh[name]) {
            Issue.record(
                "\(note): \(name) remembered as \(kept[name]) (bits differ) but stored as \(fresh[name])",
                sourceLocation: sourceLocation)
        }
    }

    // MARK: - Edge values, one at a time

    /// Each edge value: saved, remembered as stored; then, after another container changes
    /// another property, a `.storeTrump` save of this property again is not dropped.
    @Test func edgeValuesAreRememberedAsStored() throws {
        let group = TemporaryGroup()
        let container = try group.open(Self.model)
        let otherContainer = try group.open(Self.model)
        let setup = container.newContext()
        let temp = try setup.insert("Box", ["s": "start"])
        let id = try setup.save().permanentID(for: temp)
        for name in Self.names {
            for value in Self.pool[name] ?? [] {
                let mine = container.newContext(author: "Mine")
                mine.mergePolicy = .storeTrump
                try mine.update(id, [name: value])
                try mine.save()
                try Self.checkRemembered(mine, container, id, "\(name) = \(value)")
                // No other writer: a strict save of another property is no conflict.
                mine.mergePolicy = .error
                try mine.update(
                    id, ["b": .bool(!(try container.newContext().object(with: id)["b"].boolValue ?? false))])
                try mine.save()
                mine.mergePolicy = .storeTrump
                // Another writer changes another property; this context sets `name` again.
                let other = otherContainer.newContext(author: "Other")
                try other.update(id, ["key": .string("k\(UUID().uuidString.prefix(6))")])
                try other.save()
                let again: Value =
                    name == "b" ? .bool(false) : (Self.pool[name]?.first { $0 != value && !$0.isNull } ?? .null)
                try mine.update(id, [name: again])
                try mine.save()
                let stored = try container.newContext().object(with: id)[name]
                let expected = try Self.asStored(again, name, container)
                #expect(
                    stored == expected,
                    "\(name): set \(value), then \(again) after another's change: store has \(stored)")
            }
        }
    }

    /// `value` as a read of attribute `name` gives it (saved on a scratch object).
    static func asStored(_ value: Value, _ name: String, _ container: Container) throws -> Value {
        let c = container.newContext()
        let t = try c.insert("Crate", [name: value])
        let id = try c.save().permanentID(for: t)
        return try container.newContext().object(with: id)[name]
    }

    // MARK: - Relationships and the statement cache

    /// To-one set, cleared, set again, across the two entities, with different property subsets:
    /// every save writes the columns it bound (compared with a model of what was set) and is
    /// remembered as stored.
    @Test func relationshipsAndSubsetsWriteTheirOwnColumns() throws {
        let seed =
            ProcessInfo.processInfo.environment["SHAREDSTORE_SAVE_READS_SEED"].flatMap { UInt64($0) }
            ?? (UInt64(Date().timeIntervalSince1970 * 1000) & 0xffff_ffff)
        print("relationshipsAndSubsetsWriteTheirOwnColumns seed \(seed)")
        var random = TestRandom(state: seed)
        let group = TemporaryGroup()
        let container = try group.open(Self.model)
        let setup = container.newContext()
        var temps: [ObjectID] = []
        for n in 0..<4 {
            temps.append(try setup.insert("Box", ["s": .string("b\(n)")]))
            temps.append(try setup.insert("Crate", ["s": .string("c\(n)")]))
        }
        let saved = try setup.save()
        let ids = temps.map { saved.permanentID(for: $0) }
        var expected: [ObjectID: [String: Value]] = [:]
        var links: [ObjectID: ObjectID?] = [:]
        let mine = container.newContext(author: "Mine")
        mine.mergePolicy = .error
        for step in 0..<300 {
            var touched: [ObjectID] = []
            for _ in 0..<(1 + random.next(3)) {
                let id = random.pick(ids)
                var values: [String: Value] = [:]
                for name in Self.names where random.next(3) == 0 {
                    values[name] = random.pick(Self.pool[name] ?? [.null])
                }
                var rels: [String: ObjectID?] = [:]
                if random.next(2) == 0 {
                    let r = id.entity == "Box" ? "crate" : "box"
                    let targets = ids.filter { $0.entity != id.entity }
                    let target: ObjectID? = random.next(3) == 0 ? nil : random.pick(targets)
                    rels[r] = target
                    links[id] = target
                }
                try mine.update(id, values, relationships: rels)
                for (k, v) in values { expected[id, default: [:]][k] = try Self.asStored(v, k, container) }
                touched.append(id)
            }
            try mine.save()
            for id in Set(touched) {
                let fresh = try container.newContext().object(with: id)
                for (k, v) in expected[id] ?? [:] {
                    #expect(fresh[k] == v, "step \(step) seed \(seed): \(id).\(k) is \(fresh[k]), set \(v)")
                }
                let r = id.entity == "Box" ? "crate" : "box"
                if let link = links[id] {
                    #expect(fresh.relationships[r] == link, "step \(step) seed \(seed): \(id).\(r)")
                }
                try Self.checkRemembered(mine, container, id, "step \(step) seed \(seed)")
            }
        }
    }

    /// A to-one set to an object inserted in the same save, then cleared, then set in one save
    /// with an attribute: remembered as stored, no conflict next.
    @Test func toOneSetAndClearedInOneSave() throws {
        let container = try TemporaryGroup().open(Self.model)
        let setup = container.newContext()
        let b = try setup.insert("Box", ["s": "b"])
        let c = try setup.insert("Crate", ["s": "c"])
        let saved = try setup.save()
        let (bid, cid) = (saved.permanentID(for: b), saved.permanentID(for: c))
        let mine = container.newContext(author: "Mine")
        mine.mergePolicy = .error
        let newCrate = try mine.insert("Crate", ["s": "new"])
        try mine.update(bid, ["s": "x"], relationships: ["crate": newCrate])
        try mine.set("crate", of: bid, to: nil)
        try mine.set("crate", of: bid, to: cid)
        try mine.set("crate", of: bid, to: nil)
        try mine.save()
        try Self.checkRemembered(mine, container, bid, "cleared")
        try mine.set("crate", of: bid, to: cid)
        try mine.save()
        try Self.checkRemembered(mine, container, bid, "set")
        #expect(try container.newContext().object(with: bid).relationships["crate"] == cid)
        try mine.update(bid, ["s": "y"])
        try mine.save()  // no conflict
    }

    // MARK: - Hooks, duplicates

    /// A willSave hook that changes the values being saved (and one not being saved).
    @Test func willSaveThatChangesValues() throws {
        let container = try TemporaryGroup().open(Self.model)
        try container.register(
            "Box",
            EntityHooks(willSave: { draft in
                if let s = draft["s"].stringValue, !s.hasSuffix("!") { try draft.set("s", .string(s + "!")) }
                try draft.set("d", .integer(7))
                try draft.set("t", .date(Date(timeIntervalSinceReferenceDate: 0.3)))
                try draft.set("u", .uuid(UUID(uuidString: "AAAAAAAA-0000-4000-8000-00000000ABCD")!))
            }))
        let setup = container.newContext()
        let b = try setup.insert("Box", ["s": "b"])
        let bid = try setup.save().permanentID(for: b)
        let mine = container.newContext(author: "Mine")
        mine.mergePolicy = .storeTrump
        try mine.update(bid, ["i": 1])
        try mine.save()
        try Self.checkRemembered(mine, container, bid, "willSave")
        let other = container.newContext(author: "Other")
        try other.update(bid, ["key": "k"])
        try other.save()
        try mine.update(bid, ["s": "mine"])
        try mine.save()
        #expect(try container.newContext().object(with: bid)["s"] == "mine!")
    }

    /// An insert that repeats a stored unique key becomes an update of the stored object (object
    /// trump), with edge values: remembered as stored, no conflict in the next strict save.
    @Test func aDuplicateInsertBecomesAnUpdate() throws {
        let container = try TemporaryGroup().open(Self.model)
        let setup = container.newContext()
        let b = try setup.insert("Box", ["key": "k", "s": "old"])
        let bid = try setup.save().permanentID(for: b)
        let mine = container.newContext(author: "Mine")
        mine.mergePolicy = .objectTrump
        _ = try mine.object(with: bid)
        let crate = try mine.insert("Crate", ["s": "c"])
        let dup = try mine.insert(
            "Box",
            ["key": "k", "d": .integer(5), "t": .date(Date(timeIntervalSinceReferenceDate: 0.1)), "s": "a\u{0}"],
            relationships: ["crate": crate])
        try mine.update(bid, ["i": 9])
        let saved = try mine.save()
        #expect(saved.permanentID(for: dup) == bid)
        try Self.checkRemembered(mine, container, bid, "duplicate")
        mine.mergePolicy = .error
        try mine.update(bid, ["s": "after"])
        try mine.save()  // no conflict
    }

    // MARK: - Records

    struct Box: Record {
        static let entityName = "Box"
        var id: ObjectID?
        var s: String?
        var d: Double?
        var t: Date?
        var key: String?
    }

    /// A record saved with a date and a double, saved again after another context changed another
    /// property (store trump): the record's second change is written.
    @Test func recordsSavedTwice() throws {
        let group = TemporaryGroup()
        let container = try group.open(Self.model)
        let other = try group.open(Self.model)
        let setup = container.newContext()
        let b = try setup.insert("Box", ["s": "b"])
        let bid = try setup.save().permanentID(for: b)
        let mine = container.newContext(author: "Mine")
        mine.mergePolicy = .storeTrump
        var record = try #require(try mine.fetch(Box.self).first { $0.id == bid })
        record.t = Date(timeIntervalSinceReferenceDate: 0.1)
        record.d = -0.0
        record.s = "e\u{301}"
        try mine.update(record)
        try mine.save()
        try Self.checkRemembered(mine, container, bid, "record")
        let o = other.newContext(author: "Other")
        try o.update(bid, ["key": "theirs"])
        try o.save()
        record.t = Date(timeIntervalSinceReferenceDate: 5)
        record.d = 2
        record.s = "\u{e9}"
        try mine.update(record)
        try mine.save()
        let stored = try container.newContext().object(with: bid)
        #expect(stored["key"] == "theirs")
        #expect(stored["t"] == .date(Date(timeIntervalSinceReferenceDate: 5)))
        #expect(stored["d"] == .double(2))
        #expect(stored["s"] == "\u{e9}")
    }

    // MARK: - Randomized, several containers

    /// Three containers on one group, random updates of random subsets (edge values, to-ones)
    /// under random policies. After each save: what the context keeps as its base equals the
    /// store at that version; under `.error`, a save right after its own save is no conflict;
    /// under `.storeTrump`, a property only this context changed is written.
    @Test func randomizedBaseEqualsStore() throws {
        let seed =
            ProcessInfo.processInfo.environment["SHAREDSTORE_SAVE_READS_SEED"].flatMap { UInt64($0) }
            ?? (UInt64(Date().timeIntervalSince1970 * 1000) & 0xffff_ffff)
        print("randomizedBaseEqualsStore seed \(seed)")
        var random = TestRandom(state: seed)
        let group = TemporaryGroup()
        let containers = try (0..<3).map { _ in try group.open(Self.model) }
        let setup = containers[0].newContext()
        var temps: [ObjectID] = []
        for n in 0..<3 {
            temps.append(try setup.insert("Box", ["s": .string("b\(n)")]))
            temps.append(try setup.insert("Crate", ["s": .string("c\(n)")]))
        }
        let saved = try setup.save()
        let ids = temps.map { saved.permanentID(for: $0) }
        let contexts = containers.enumerated().map { $1.newContext(author: "C\($0)") }
        let policies: [MergePolicy] = [.error, .storeTrump, .objectTrump, .overwrite, .rollback]
        var (strictChecks, mergeChecks, conflicts) = (0, 0, 0)
        defer {
            print(
                "randomizedBaseEqualsStore seed \(seed): \(strictChecks) strict and \(mergeChecks) store-trump "
                    + "follow-ups, \(conflicts) conflicts"
            )
        }
        for step in 0..<400 {
            let k = random.next(contexts.count)
            let ctx = contexts[k]
            let container = containers[k]
            ctx.mergePolicy = random.pick(policies)
            if random.next(5) == 0 { _ = try ctx.fetch(FetchRequest(random.pick(["Box", "Crate"]))) }
            var written: [ObjectID: [String: Value]] = [:]
            for _ in 0..<(1 + random.next(2)) {
                let id = random.pick(ids)
                var values: [String: Value] = [:]
                for name in Self.names where random.next(4) == 0 { values[name] = random.pick(Self.pool[name] ?? []) }
                var rels: [String: ObjectID?] = [:]
                if random.next(3) == 0 {
                    let targets = ids.filter { $0.entity != id.entity }
                    rels[id.entity == "Box" ? "crate" : "box"] = random.next(3) == 0 ? nil : random.pick(targets)
                }
                try ctx.update(id, values, relationships: rels)
                written[id, default: [:]].merge(values) { $1 }
            }
            do {
                try ctx.save()
            } catch let e as StoreError where e.code == .conflict {
                #expect(ctx.mergePolicy == .error, "step \(step) seed \(seed): conflict under \(ctx.mergePolicy)")
                ctx.rollback()
                conflicts += 1
                continue
            }
            for id in written.keys { try Self.checkRemembered(ctx, container, id, "step \(step) seed \(seed)") }
            // Right after its own save, with nobody else writing: no conflict, and (store trump)
            // what it sets is written, after another container changed another property.
            let id = random.pick(Array(written.keys))
            // Only when the save left this context at the store's version of the object (a
            // `.rollback` save skips a changed object and keeps its older read, legitimately).
            guard ctx.registered.read(id)?.version == (try container.newContext().object(with: id)).version else {
                continue
            }
            if random.next(2) == 0 {
                ctx.mergePolicy = .error
                strictChecks += 1
                try ctx.update(id, ["b": .bool(random.next(2) == 0)])
                do { try ctx.save() } catch {
                    Issue.record("step \(step) seed \(seed): a strict save after its own save: \(error)")
                    ctx.rollback()
                }
            } else {
                let otherContainer = containers[(k + 1) % containers.count]
                let o = otherContainer.newContext(author: "O")
                try o.update(id, ["key": .string("k\(step)")])
                try o.save()
                ctx.mergePolicy = .storeTrump
                let name = random.pick(Self.names.filter { $0 != "b" })
                let stored = try container.newContext().object(with: id)
                guard
                    let value = (Self.pool[name] ?? []).first(where: {
                        !$0.isNull && (try? Self.asStored($0, name, container)) != stored[name]
                    })
                else { continue }
                try ctx.update(id, [name: value])
                try ctx.save()
                mergeChecks += 1
                let after = try container.newContext().object(with: id)
                let want = try Self.asStored(value, name, container)
                #expect(
                    after[name] == want,
                    "step \(step) seed \(seed): \(id).\(name) = \(value) under storeTrump lost: \(after[name])")
                #expect(after["key"] == .string("k\(step)"))
            }
        }
    }

    // MARK: - A store whose column was given another type by a custom step

    static func typed(_ version: Int, _ type: AttributeType) throws -> Model {
        try Model(
            version: version,
            [
                Entity(
                    "Item", attributes: [Attribute("title", .string), Attribute("price", type, optional: true)])
            ])
    }

    /// README's way of a type change: a custom step over the new schema casts the price column's
    /// values to `cast` (the column keeps its declared type, of `from`). This context (store trump)
    /// sets the price to `first`, another context renames the item, then this one sets `then`.
    /// Checks what the context keeps after the first save; returns the item as stored at the end.
    static func priceRetyped(
        from: AttributeType, to: AttributeType, cast: String, initial: Value, first: Value, then: Value,
        note: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Snapshot {
        let group = TemporaryGroup()
        let v1 = try group.open(try Self.typed(1, from))
        let setup = v1.newContext()
        let t = try setup.insert("Item", ["title": "a", "price": initial])
        let id = try setup.save().permanentID(for: t)
        let step = MigrationStep(version: 2, "prices become \(to)") { db in
            try db.execute(#"UPDATE "Item" SET "price" = CAST("price" AS \#(cast))"#)
        }
        let container = try Container(group: group.path, model: try Self.typed(2, to), migrations: [step])
        let mine = container.newContext(author: "Mine")
        mine.mergePolicy = .storeTrump
        try mine.update(id, ["price": first])
        try mine.save()
        try Self.checkRemembered(mine, container, id, note, sourceLocation: sourceLocation)
        let other = container.newContext(author: "Other")
        try other.update(id, ["title": "renamed"])
        try other.save()
        try mine.update(id, ["price": then])
        try mine.save()
        return try container.newContext().object(with: id)
    }

    /// Prices were integers, are now decimals. A price this context saved, then saved again
    /// (store trump) after another context renamed the item, is written.
    @Test func aTypeChangedColumnIntegerToDecimal() throws {
        let stored = try Self.priceRetyped(
            from: .integer, to: .decimal, cast: "TEXT", initial: 19, first: "19.90", then: "24.90",
            note: "decimal in an INTEGER column")
        #expect(stored["title"] == "renamed")
        #expect(
            stored["price"] != "19.9",
            "the second price change was dropped as if the store had changed it: \(stored["price"])")
    }

    /// Scores were doubles, are now integers: an integer above 2^53 in the REAL column.
    @Test func aTypeChangedColumnDoubleToInteger() throws {
        let stored = try Self.priceRetyped(
            from: .double, to: .integer, cast: "INTEGER", initial: 1.0, first: .integer((1 << 53) + 1),
            then: .integer(5), note: "big integer in a REAL column")
        #expect(stored["title"] == "renamed")
        #expect(stored["price"] == .integer(5), "the second price change was dropped: \(stored["price"])")
    }
}

extension SaveReadsHostileTests {
    /// -0.0 is kept by SQLite as 0 in a REAL column: the save remembers -0.0.
    @Test func negativeZeroIsRememberedAsStored() throws {
        let container = try TemporaryGroup().open(Self.model)
        let setup = container.newContext()
        let b = try setup.insert("Box", ["s": "b"])
        let bid = try setup.save().permanentID(for: b)
        let mine = container.newContext(author: "Mine")
        try mine.update(bid, ["d": .double(-0.0)])
        try mine.save()
        #expect(mine.registered.read(bid) != nil)
        try Self.checkRemembered(mine, container, bid, "-0.0", bits: true)
    }
}

extension SaveReadsHostileTests {
    /// Two inserts of one unique key in one save (object trump: the second becomes an update of the
    /// first), the first referring to an object inserted after both (set at the end of the inserts,
    /// without a version bump): what the context keeps of the object is what the store holds.
    @Test func aDuplicateOfAnInsertWithALaterReference() throws {
        let group = TemporaryGroup()
        let container = try group.open(Self.model)
        let mine = container.newContext(author: "Mine")
        mine.mergePolicy = .objectTrump
        let b = try mine.insert("Box", ["key": "k", "s": "first"])
        _ = try mine.insert("Box", ["key": "k", "s": "second", "d": .integer(2)])
        let c = try mine.insert("Crate", ["s": "c"])
        try mine.set("crate", of: b, to: c)
        let saved = try mine.save()
        let bid = saved.permanentID(for: b)
        try Self.checkRemembered(mine, container, bid, "duplicate of an insert")
        // Another container changes another property; this context clears the crate (store trump).
        let other = try group.open(Self.model).newContext(author: "Other")
        try other.update(bid, ["i": 1])
        try other.save()
        mine.mergePolicy = .storeTrump
        try mine.set("crate", of: bid, to: nil)
        try mine.save()
        #expect(try container.newContext().object(with: bid).relationships["crate"] == nil, "the clear was dropped")
    }
}
