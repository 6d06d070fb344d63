import Foundation
import SharedStoreCore
import SharedStoreLMDB
import SharedStoreSupport

/// One check of ``StoreVerifier``.
public struct VerifyCheck: Sendable, Hashable {
    /// The check's name, as `storectl verify` prints it (`sqlite-integrity`, `schema`, …).
    public let name: String
    /// Whether the check passed.
    public let ok: Bool
    /// What the check found, in words.
    public let detail: String
}

/// Checks at rest what DESIGN.md's invariants promise about the files of a group directory.
public enum StoreVerifier {
    /// Runs every check. `registry` is nil when it could not be opened; `registryProblem` says why.
    public static func verify(container: Container, registry: TokenRegistry?, registryProblem: String? = nil)
        -> [VerifyCheck]
    {
        verify(container: container, registry: registry, registryProblem: registryProblem, progress: nil)
    }

    /// ``verify(container:registry:registryProblem:)``, telling `progress` the name of each check
    /// as it starts (a long verify on a large store shows where it is).
    public static func verify(
        container: Container, registry: TokenRegistry?, registryProblem: String? = nil,
        progress: (@Sendable (String) -> Void)?
    ) -> [VerifyCheck] {
        $starting.withValue(progress.map(CheckListener.init)) { checks(container, registry, registryProblem) }
    }

    /// Every check of a store that has no registry file yet, as a command that only looks finds
    /// it (it opens none: opening makes one). The registry check fails only when the store had
    /// consumers before (the file was deleted: they reload in full).
    package static func verifyWithoutRegistry(container: Container, progress: (@Sendable (String) -> Void)?)
        -> [VerifyCheck]
    {
        $starting.withValue(progress.map(CheckListener.init)) {
            var checks = storeChecks(container)
            checks.append(
                check("registry") {
                    guard try container.registryWasInUse() else {
                        return (true, "no token registry yet: no consumer has synced")
                    }
                    return (
                        false,
                        "tokens.lmdb is gone, but it held this store's consumers before: targets that read refuse an "
                            + "empty registry until 'storectl repair-registry' starts one (every consumer then reloads "
                            + "in full)"
                    )
                })
            return checks + rest(container)
        }
    }

    /// Told the name of each check as it starts, while ``verify(container:registry:registryProblem:progress:)`` runs
    /// (an object: a task-local of a function type crashes release builds of Swift 6.3 on Linux
    /// once the optimizer specializes its binding into another module).
    @TaskLocal private static var starting: CheckListener?

    /// The `progress` handler of a verify.
    private final class CheckListener: Sendable {
        let tell: @Sendable (String) -> Void
        init(_ tell: @escaping @Sendable (String) -> Void) { self.tell = tell }
    }

    private static func checks(_ container: Container, _ registry: TokenRegistry?, _ registryProblem: String?)
        -> [VerifyCheck]
    {
        var checks = storeChecks(container)
        if let registry {
            checks += registryChecks(container, registry)
        } else {
            checks.append(
                VerifyCheck(
                    name: "registry", ok: false, detail: registryProblem ?? "the token registry cannot be opened"))
        }
        return checks + rest(container)
    }

    /// The store's own structure, history, relationships, constraints, values and timeline.
    private static func storeChecks(_ container: Container) -> [VerifyCheck] {
        var checks: [VerifyCheck] = []
        func run(_ name: String, _ body: () throws -> (Bool, String)) { checks.append(check(name, body)) }
        let model = container.model
        run("sqlite-integrity") {
            let result = try container.quickCheck()
            return (result == ["ok"], result.prefix(3).joined(separator: "; "))
        }
        run("schema") {
            (
                true,
                "store \(container.storeID.uuidString.lowercased()) is at model version \(model.version) "
                    + "(\(model.entities.count) entities)"
            )
        }
        run("history-order") { try historyOrder(container) }
        run("history-records") {
            var count = 0
            try container.history(HistoryRequest()) { count += $0.count }
            return (true, "\(count) transactions decode and name known entities and properties")
        }
        run("relationships") {
            let dangling = try container.danglingRelationships()
            return (
                dangling.isEmpty,
                dangling.isEmpty ? "no dangling relationship or link" : "dangling: " + dangling.joined(separator: ", ")
            )
        }
        run("uniqueness") {
            let broken = try container.brokenUniqueness()
            return (
                broken.isEmpty, broken.isEmpty ? "every uniqueness constraint holds" : broken.joined(separator: ", ")
            )
        }
        run("global-ids") { try globalIDs(container) }
        run("mirror-quarantine") { try quarantine(container) }
        run("value-types") { try valueTypes(container) }
        run("values") {
            let (n, bad) = try container.invalidValues()
            return (bad.isEmpty, bad.isEmpty ? "\(n) objects obey the model's rules" : bad.joined(separator: "; "))
        }
        run("kept-counts") { try keptCounts(container) }
        run("derived") { try derived(container) }
        run("timeline") {
            let lost = try container.lostTokenRanges()
            return (
                true,
                lost.isEmpty
                    ? "no token was lost"
                    : "tokens " + lost.map { "\($0.lowerBound)…\($0.upperBound)" }.joined(separator: ", ")
                        + " were lost when the store was put back to an older copy; they are never handed out again"
            )
        }
        return checks
    }

    /// Every object has a global id, and no two objects (of one entity or of two) share one.
    private static func globalIDs(_ container: Container) throws -> (Bool, String) {
        let missing = try container.objectsWithoutGlobalID()
        let shared = try container.duplicateGlobalIDs()
        var problems: [String] = []
        if !missing.isEmpty {
            problems.append("no global id: " + missing.joined(separator: ", ") + " (inserted by a foreign tool?)")
        }
        if !shared.isEmpty {
            problems.append(
                "global ids held by more than one object: "
                    + shared.map { "\(GlobalID.text($0.0)) (\($0.1) objects)" }.joined(separator: ", "))
        }
        return (
            problems.isEmpty, problems.isEmpty ? "every object has its own global id" : problems.joined(separator: "; ")
        )
    }

    /// No mirrored row waits in quarantine (a server row not applied here, or a local change
    /// that did not go up: this store and the others differ until it is applied).
    private static func quarantine(_ container: Container) throws -> (Bool, String) {
        let rows = try container.quarantinedMirrorRows()
        guard !rows.isEmpty else { return (true, "no mirrored row is quarantined") }
        let shown = rows.prefix(5).map { q in
            (q.sequence.map { "server transaction \($0)" } ?? "local token \(q.token)") + ": " + q.reason
        }
        return (
            false,
            "\(rows.count) quarantined: " + shown.joined(separator: "; ") + (rows.count > shown.count ? "; …" : "")
                + " ('storectl mirror --retry-quarantined' applies them again)"
        )
    }

    /// Every column holds values of its attribute's SQLite type, and a text column of a UUID,
    /// decimal, URL or JSON attribute the form a save writes (a read takes another for a value of
    /// the attribute's: another tool's 'abc' in an integer column reads as 0, '1,5' as a decimal 1).
    private static func valueTypes(_ container: Container) throws -> (Bool, String) {
        let wrong = try container.mistypedValues()
        return (
            wrong.isEmpty,
            wrong.isEmpty
                ? "every column holds its attribute's type"
                : wrong.joined(separator: "; ")
                    + " (written by another tool: a read takes such a value for another one)"
        )
    }

    /// Every derived attribute holds what computing it again gives.
    private static func derived(_ container: Container) throws -> (Bool, String) {
        let all = try container.derivedMismatches()
        let wrong = all.filter { $0.objects > 0 }.map { "\($0.name) is wrong in \($0.objects) object(s)" }
        return (
            wrong.isEmpty,
            wrong.isEmpty
                ? "\(all.count) derived attributes hold what they derive from"
                : wrong.joined(separator: "; ") + " ('storectl recount' computes them again)"
        )
    }

    /// Every kept count equals counting its table.
    private static func keptCounts(_ container: Container) throws -> (Bool, String) {
        let counts = try container.keptCounts()
        let wrong = counts.filter { $0.kept != $0.counted }.map {
            "\($0.name) is \($0.kept.map(String.init) ?? "missing"), counting gives \($0.counted)"
        }
        return (
            wrong.isEmpty,
            wrong.isEmpty
                ? "\(counts.count) kept counts equal counting"
                : wrong.joined(separator: "; ")
                    + " (the store was written without keeping them; 'storectl recount' counts again)"
        )
    }

    /// Tokens in order, retained history above the floor (at most one row at or below it: the
    /// newest-row marker that keeps tokens from being reused).
    private static func historyOrder(_ container: Container) throws -> (Bool, String) {
        let h = try container.historyExtent()
        let ok = h.belowFloor <= 1 && h.highest <= h.newest && (h.rows == 0 || h.highest >= h.floor)
        let retained = h.rows - h.belowFloor
        let range = retained == 0 ? "-" : "\(max(h.lowest, h.floor + 1))…\(h.highest)"
        return (ok, "\(retained) transactions, tokens \(range), deleted through \(h.floor), newest ever \(h.newest)")
    }

    /// Every consumer's token against the store, and the registry's reader table.
    private static func registryChecks(_ container: Container, _ registry: TokenRegistry) -> [VerifyCheck] {
        var checks: [VerifyCheck] = []
        func run(_ name: String, _ body: () throws -> (Bool, String)) { checks.append(check(name, body)) }
        run("registry") {
            let current = try container.currentToken().value
            let lost = try container.lostTokenRanges()
            var problems: [String] = []
            let consumers = try registry.consumers()
            if consumers.isEmpty, try registry.repairedAt() == nil, try container.registryWasInUse() {
                problems.append(
                    "the registry is empty, but it held this store's consumers before (a 0-byte or deleted "
                        + "tokens.lmdb started anew): run 'storectl repair-registry'")
            }
            var ahead: [String] = []
            for c in consumers {
                guard let t = c.token else { continue }
                if t.storeID != container.storeID {
                    problems.append("\(c.name) holds a token of another store (it reloads in full at its next sync)")
                } else if let range = lost.first(where: { $0.contains(t.value) }) {
                    problems.append(
                        "\(c.name) holds token \(t.value), lost when the store was put back to an older copy "
                            + "(tokens \(range.lowerBound)…\(range.upperBound)); it reloads in full at its next sync "
                            + "(or run 'storectl reset-consumer \(c.name)')")
                } else if t.value > current {
                    ahead.append("\(c.name) (\(t.value))")
                }
            }
            // Said once, with every consumer it concerns: a store that lost its last commits.
            let high = try registry.highWater(storeID: container.storeID)
            if high > current || !ahead.isEmpty {
                problems.append(
                    "the registry has seen token \(max(high, current)), the store's newest is \(current)"
                        + (ahead.isEmpty ? "" : ", and consumers are ahead of it: \(ahead.joined(separator: ", "))")
                        + ": the store was put back to an older copy or lost its last commits; any target that opens "
                        + "the group moves the tokens past it")
            }
            let evicted = consumers.filter(\.isEvicted).map(\.name)
            return (
                problems.isEmpty,
                problems.isEmpty
                    ? "\(consumers.count) consumers, tokens within the store"
                        + (evicted.isEmpty ? "" : "; evicted: \(evicted.joined(separator: ", "))")
                    : problems.joined(separator: "; ")
            )
        }
        run("registry-readers") {
            if registry.readsFileAsItIs {
                return (true, "not checked: the registry is read without its lock file, which holds the reader slots")
            }
            let cleared = try registry.clearStaleReaders()
            return (
                true,
                "no stale reader slot left (\(registry.clearedStaleReaders + cleared) cleared from dead processes)"
            )
        }
        return checks
    }

    /// One check: a failure to run it is a failed check naming the error.
    private static func check(_ name: String, _ body: () throws -> (Bool, String)) -> VerifyCheck {
        starting?.tell(name)
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
            try container.checkWriteLock()
            return (true, "the write lock is free")
        }
        run("files") {
            var wrong: [String] = []
            func mode(_ path: String) -> Int {
                ((try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? NSNumber)?.intValue
                    ?? -1
            }
            if !container.options.inMemory {
                if mode(container.directory) & 0o077 != 0 {
                    wrong.append("directory is \(String(mode(container.directory), radix: 8))")
                }
                for f in (try? FileManager.default.contentsOfDirectory(atPath: container.directory)) ?? [] {
                    let m = mode((container.directory as NSString).appendingPathComponent(f))
                    if m & 0o077 != 0 { wrong.append("\(f) is \(String(m, radix: 8))") }
                }
            }
            return (
                wrong.isEmpty, wrong.isEmpty ? "group directory and files are private" : wrong.joined(separator: ", ")
            )
        }
        return checks
    }
}

/// The sizes of a group directory's files.
public struct GroupFileSizes: Sendable, Hashable {
    /// The size of `Store.sqlite` in bytes (0 when absent).
    public let store: Int
    /// The size of `Store.sqlite-wal` in bytes (0 when absent).
    public let wal: Int
    /// The size of `tokens.lmdb` in bytes (0 when absent).
    public let tokens: Int
}

extension Container {
    /// Sizes of the files of the group directory: store, write-ahead log, token registry.
    public func fileSizes() -> GroupFileSizes {
        func size(_ name: String) -> Int {
            var st = stat()
            return lstat((directory as NSString).appendingPathComponent(name), &st) == 0 ? Int(st.st_size) : 0
        }
        return GroupFileSizes(
            store: size(Container.storeFileName), wal: size(Container.storeFileName + "-wal"),
            tokens: size(TokenRegistry.fileName))
    }
}
