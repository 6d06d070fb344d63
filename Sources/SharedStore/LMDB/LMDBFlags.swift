import CLMDB

/// Flags of `mdb_env_open`. Each maps to the LMDB constant named in its comment.
struct LMDBEnvironmentFlags: OptionSet, Sendable {
    let rawValue: UInt32
    /// MDB_NOSUBDIR: the path is the data file; the lock file is `path-lock`.
    static let noSubdirectory = LMDBEnvironmentFlags(rawValue: UInt32(MDB_NOSUBDIR))
    /// MDB_NOSYNC: no fsync on commit (survives a process crash, not a power loss).
    static let noSync = LMDBEnvironmentFlags(rawValue: UInt32(MDB_NOSYNC))
    /// MDB_NOMETASYNC: fsync data but not the meta page on commit.
    static let noMetaSync = LMDBEnvironmentFlags(rawValue: UInt32(MDB_NOMETASYNC))
    /// MDB_NOTLS: reader slots belong to transactions, not threads (Swift tasks hop threads).
    static let noThreadLocalStorage = LMDBEnvironmentFlags(rawValue: UInt32(MDB_NOTLS))
    /// MDB_RDONLY
    static let readOnly = LMDBEnvironmentFlags(rawValue: UInt32(MDB_RDONLY))
}

/// Flags of `mdb_dbi_open` (not environment flags: MDB_CREATE shares its value with
/// MDB_NOMETASYNC, the mix-up a popular wrapper made).
struct LMDBDatabaseFlags: OptionSet, Sendable {
    let rawValue: UInt32
    /// MDB_CREATE: create the named database if it does not exist.
    static let create = LMDBDatabaseFlags(rawValue: UInt32(MDB_CREATE))
}

/// Flags of `mdb_put`.
struct LMDBWriteFlags: OptionSet, Sendable {
    let rawValue: UInt32
    /// MDB_NOOVERWRITE: fail with MDB_KEYEXIST when the key exists.
    static let noOverwrite = LMDBWriteFlags(rawValue: UInt32(MDB_NOOVERWRITE))
}
