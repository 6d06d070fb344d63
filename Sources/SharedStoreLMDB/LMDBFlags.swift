import CLMDB

/// Flags of `mdb_env_open`. Each maps to the LMDB constant named in its comment.
package struct LMDBEnvironmentFlags: OptionSet, Sendable {
    package let rawValue: UInt32
    package init(rawValue: UInt32) { self.rawValue = rawValue }
    /// MDB_NOSUBDIR: the path is the data file; the lock file is `path-lock`.
    package static let noSubdirectory = LMDBEnvironmentFlags(rawValue: UInt32(MDB_NOSUBDIR))
    /// MDB_NOSYNC: no fsync on commit (survives a process crash, not a power loss).
    package static let noSync = LMDBEnvironmentFlags(rawValue: UInt32(MDB_NOSYNC))
    /// MDB_NOMETASYNC: fsync data but not the meta page on commit.
    package static let noMetaSync = LMDBEnvironmentFlags(rawValue: UInt32(MDB_NOMETASYNC))
    /// MDB_NOTLS: reader slots belong to transactions, not threads (Swift tasks hop threads).
    package static let noThreadLocalStorage = LMDBEnvironmentFlags(rawValue: UInt32(MDB_NOTLS))
    /// MDB_RDONLY
    package static let readOnly = LMDBEnvironmentFlags(rawValue: UInt32(MDB_RDONLY))
    /// MDB_NOLOCK: no lock file, no reader table (a reader that may not write the lock file).
    package static let noLock = LMDBEnvironmentFlags(rawValue: UInt32(MDB_NOLOCK))
}

/// Flags of `mdb_dbi_open` (not environment flags: MDB_CREATE shares its value with
/// MDB_NOMETASYNC, the mix-up a popular wrapper made).
package struct LMDBDatabaseFlags: OptionSet, Sendable {
    package let rawValue: UInt32
    package init(rawValue: UInt32) { self.rawValue = rawValue }
    /// MDB_CREATE: create the named database if it does not exist.
    package static let create = LMDBDatabaseFlags(rawValue: UInt32(MDB_CREATE))
}

/// Flags of `mdb_put`.
package struct LMDBWriteFlags: OptionSet, Sendable {
    package let rawValue: UInt32
    package init(rawValue: UInt32) { self.rawValue = rawValue }
    /// MDB_NOOVERWRITE: fail with MDB_KEYEXIST when the key exists.
    package static let noOverwrite = LMDBWriteFlags(rawValue: UInt32(MDB_NOOVERWRITE))
}
