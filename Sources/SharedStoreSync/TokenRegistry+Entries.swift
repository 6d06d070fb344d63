import Foundation
import SharedStoreCore
import SharedStoreLMDB
import SharedStoreSupport

// MARK: - A consumer's entry as stored, the reader table, and holds for tests

extension TokenRegistry {
    /// version 1 | flags (1 evicted, 2 has token) | store uuid (16) | token (8) | registered (8) | updated (8)
    static func encode(_ c: Consumer) -> [UInt8] {
        var out: [UInt8] = [1, (c.isEvicted ? 1 : 0) | (c.token != nil ? 2 : 0)]
        let uuid = c.token?.storeID.uuid ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)).uuid
        withUnsafeBytes(of: uuid) { out += $0 }
        withUnsafeBytes(of: (c.token?.value ?? 0).littleEndian) { out += $0 }
        withUnsafeBytes(of: c.registeredAt.timeIntervalSince1970.bitPattern.littleEndian) { out += $0 }
        withUnsafeBytes(of: c.updatedAt.timeIntervalSince1970.bitPattern.littleEndian) { out += $0 }
        return out
    }

    static func u64(_ b: [UInt8], _ at: Int) -> UInt64 {
        b[at..<(at + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    static func decode(_ name: String, _ b: [UInt8]) throws -> Consumer {
        guard b.count == 42, b[0] == 1 else {
            throw StoreError(
                .registryDamaged,
                "the entry for '\(TextSafety.visible(name))' is corrupt (\(b.count) bytes); "
                    + "run 'storectl repair-registry' to start an empty registry")
        }
        func u64(_ at: Int) -> UInt64 { Self.u64(b, at) }
        let uuid = UUID(
            uuid: (
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15], b[16], b[17]
            ))
        let token = b[1] & 2 != 0 ? HistoryToken(storeID: uuid, value: Int64(bitPattern: u64(18))) : nil
        return Consumer(
            name: name, token: token,
            registeredAt: Date(timeIntervalSince1970: Double(bitPattern: u64(26))),
            updatedAt: Date(timeIntervalSince1970: Double(bitPattern: u64(34))),
            isEvicted: b[1] & 1 != 0)
    }
}

extension TokenRegistry {
    /// Runs `body` inside a registry write transaction (tests: a process stopped in here must
    /// make the others fail with `.busy`, never hang them).
    package func holdWriteTransactionForTesting(_ body: () throws -> Void) throws {
        try Self.wrap(path) {
            try environment.write { t in
                _ = try t.all(in: Self.db)
                try body()
            }
        }
    }

    /// Runs `body` inside a registry read transaction (tests: a process killed in here must not
    /// leave a stuck reader slot).
    package func holdReadTransactionForTesting(_ body: () throws -> Void) throws {
        try Self.wrap(path) {
            try environment.read { t in
                _ = try t.all(in: Self.db)
                try body()
            }
        }
    }

    /// Reader slots in use, live or stale.
    public var readerSlotsInUse: Int { environment.readerSlotsInUse() }

    /// Clears the reader slots of dead processes; returns how many.
    ///
    /// - Throws: `.registryDamaged`, `.storage` when LMDB fails.
    public func clearStaleReaders() throws -> Int { try Self.wrap(path) { try environment.clearStaleReaders() } }
}
