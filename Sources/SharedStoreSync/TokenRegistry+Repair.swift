import Foundation
import SharedStoreCore
import SharedStoreLMDB
import SharedStoreSupport

/// What ``TokenRegistry/repair(group:force:)`` did.
public struct RegistryRepair: Sendable, Hashable {
    /// Where the damaged registry was moved (nil: nothing was moved).
    public let moved: String?
    /// How many consumers the moved registry held, as far as it could be read.
    public let consumersLost: Int
    /// Why it was moved: the damage found, or nil for a healthy registry.
    public let damage: String?
}

extension TokenRegistry {
    /// Checks the store against what the registry knows: when the registry has seen a token of
    /// this store above the store's newest (the store was put back to an older copy, or lost its
    /// last commits), the numbers in between are recorded as lost and never handed out again
    /// (``Container/adoptHighWater(_:)``). Costs one registry read when all is well.
    ///
    /// - Returns: the token numbers recorded as lost now, or nil.
    /// - Throws: `.registryDamaged` when the registry is empty although it held consumers of
    ///   this store before (a 0-byte or deleted `tokens.lmdb` started anew) and was not
    ///   repaired: the consumers' positions and the restore detection are gone; otherwise
    ///   ``StoreError`` when the registry or the store cannot be read or written.
    @discardableResult
    public func reconcile(_ container: Container) throws -> ClosedRange<Int64>? {
        let highWater = try highWater(storeID: container.storeID)
        if try !consumers().isEmpty {
            try container.noteRegistryInUse()
        } else if highWater == 0, try repairedAt() == nil, try container.registryWasInUse() {
            throw Self.damaged(
                path, "it is empty, but it held this store's consumers before (a 0-byte or deleted file started anew)")
        }
        return try container.adoptHighWater(highWater)
    }

    /// Checks `tokens.lmdb` of `group` page by page and reads every entry; nil when it is healthy.
    public static func damage(group: String) -> String? {
        let path = path(group: group)
        do {
            try LMDBFileCheck.check(path: path)
            // The file's structure holds: let LMDB open it and decode every entry.
            let registry = try TokenRegistry(group: group)
            _ = try registry.consumers()
            return nil
        } catch let damage as LMDBFileCheck.Damage {
            return damage.description
        } catch let error as StoreError where [.registryDamaged, .notAStore, .storage].contains(error.code) {
            return error.message
        } catch {
            return nil
        }
    }

    /// Why a healthy but empty registry is a lost one: the store beside it says a registry held
    /// its consumers, and this one was not started by a repair (nil: it is not lost).
    static func lostBeside(group: String) -> String? {
        guard (try? Container.describeStore(group: group))??.registryInUse == true,
            let registry = try? TokenRegistry(group: group), (try? registry.consumers())?.isEmpty == true,
            (try? registry.repairedAt()) == nil
        else { return nil }
        return "it is empty, but it held this store's consumers before (a 0-byte or deleted file started anew)"
    }

    /// Moves a damaged `tokens.lmdb` aside as `tokens.lmdb.damaged-<UTC time>` and starts an
    /// empty registry that records when it was repaired: every consumer's next sync then
    /// reloads in full and reports `expired`. A healthy registry is left alone unless `force`.
    ///
    /// - Throws: `.fileAccess` when the file cannot be moved.
    public static func repair(group: String, force: Bool = false) throws -> RegistryRepair {
        try GroupDirectory.check(group)
        let path = path(group: group)
        var st = stat()
        guard lstat(path, &st) == 0 else {
            // None to move aside: a new one is made. When the store had consumers (the file was
            // deleted), it is marked repaired, so that they reload in full instead of every
            // target refusing an empty registry beside a store that had them.
            let fresh = try TokenRegistry(group: group)
            guard lostBeside(group: group) != nil else {
                return RegistryRepair(moved: nil, consumersLost: 0, damage: nil)
            }
            try fresh.markRepaired(at: Date())
            try fresh.makeDurable()
            return RegistryRepair(
                moved: nil, consumersLost: 0,
                damage:
                    "tokens.lmdb was missing, though the store had consumers: they reload in full at their next sync")
        }
        let damage =
            (st.st_mode & S_IFMT == S_IFREG)
            ? Self.damage(group: group) ?? lostBeside(group: group) : GroupDirectory.describe(st.st_mode & S_IFMT)
        guard damage != nil || force else { return RegistryRepair(moved: nil, consumersLost: 0, damage: nil) }
        let lost = LMDBFileCheck.entries(path: path, database: "consumers") ?? 0
        let stamp = ISO8601.string(Date()).replacingOccurrences(of: ":", with: "")
        let aside = path + ".damaged-" + stamp
        guard rename(path, aside) == 0 else {
            throw StoreError(.fileAccess, "cannot move \(path) aside: \(String(cString: strerror(errno)))")
        }
        // The lock file belongs to the old environment: the new one starts its own.
        if unlink(path + "-lock") != 0, errno != ENOENT {
            throw StoreError(.fileAccess, "cannot remove \(path)-lock: \(String(cString: strerror(errno)))")
        }
        GroupDirectory.syncDirectory(group)
        let fresh = try TokenRegistry(group: group)
        try fresh.markRepaired(at: Date())
        // The mark is the new registry's only commit: on disk before the repair is reported, or a
        // power loss takes it and the empty registry reads as a lost one.
        try fresh.makeDurable()
        return RegistryRepair(moved: aside, consumersLost: lost, damage: damage ?? "moved on request")
    }
}
