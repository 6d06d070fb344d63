import Foundation
import SharedStoreCore
import SharedStoreLMDB
import SharedStoreSupport

/// The consumers of live queries: of one process alone, dropped once it is gone.
extension TokenRegistry {
    /// How many ephemeral consumers this process registered (each name is its own).
    static let ephemeralCount = Protected(0)

    /// Registers a consumer of this process alone and returns its name
    /// (`~label@pid.start.n`): a live query's, which needs no durable position. The process holds
    /// a lock on its pid in `live.lock`; once it is gone (its pid no longer names the process that
    /// started then, or, where `/proc` cannot tell, nobody holds that lock), the next clean drops
    /// the consumer (``HistoryCleaner/clean(container:registry:dryRun:evictAfter:chunkSize:)``),
    /// so that a dead process never holds history back.
    ///
    /// - Throws: like ``register(_:)``; `.fileAccess` when `live.lock` cannot be made or locked.
    public func registerEphemeral(_ label: String) throws -> String {
        let pid = getpid()
        let n = Self.ephemeralCount.withLock { count -> Int in
            count += 1
            return count
        }
        let name = "~\(label)@\(pid).\(ProcessLiveness.startTime(of: pid) ?? 0).\(n)"
        let lock = ProcessLiveness.lockPath(beside: path)
        try GroupDirectory.prepareFile(lock)
        do {
            try ProcessLiveness.hold(lock)
        } catch let error as LMDBError {
            throw StoreError(.fileAccess, "cannot lock \(TextSafety.visible(lock)): \(error)")
        }
        try registerAny(name)
        return name
    }

    /// The process an ephemeral consumer's name names (nil: a durable consumer's name).
    static func ephemeralOwner(_ name: String) -> (pid: Int32, start: UInt64)? {
        guard name.hasPrefix("~"), let at = name.lastIndex(of: "@") else { return nil }
        let parts = name[name.index(after: at)...].split(separator: ".")
        guard parts.count == 3, let pid = Int32(parts[0]), let start = UInt64(parts[1]) else { return nil }
        return (pid, start)
    }

    /// The ephemeral consumers whose process is gone (``registerEphemeral(_:)``).
    ///
    /// - Throws: `.registryDamaged` for a damaged registry.
    public func goneEphemeral() throws -> [String] {
        let lock = ProcessLiveness.lockPath(beside: path)
        return try consumers().compactMap { c in
            guard c.name.hasPrefix("~") else { return nil }
            // Only registerEphemeral makes ~ names, and always one that names its process: one
            // that names none was planted, and holds nothing back.
            guard let owner = Self.ephemeralOwner(c.name) else { return c.name }
            guard owner.pid != getpid() else { return nil }
            // The process that has the pid now, when /proc tells; else whether anyone holds the
            // pid's lock (a lock nobody can read about counts as held).
            if let started = ProcessLiveness.startTime(of: owner.pid) {
                return started == owner.start ? nil : c.name
            }
            return ProcessLiveness.holdsLock(owner.pid, in: lock) == false ? c.name : nil
        }
    }
}
