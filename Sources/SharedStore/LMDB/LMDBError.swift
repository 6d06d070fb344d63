import CLMDB
import Foundation

/// An error reported by LMDB: the return code, `mdb_strerror`'s text and the call that failed.
struct LMDBError: Error, CustomStringConvertible {
    let code: Int32
    let call: String
    let path: String

    var message: String { String(cString: mdb_strerror(code)) }
    var isMapFull: Bool { code == MDB_MAP_FULL }

    var description: String { "\(call) failed on \(path): \(message) (\(code))" }

    /// The funnel every LMDB call goes through: success passes, anything else throws.
    static func check(_ rc: Int32, _ call: String, path: String) throws {
        guard rc == MDB_SUCCESS else { throw LMDBError(code: rc, call: call, path: path) }
    }
}

extension StoreError {
    init(_ error: LMDBError) {
        switch error.code {
        case ENOSPC, MDB_MAP_FULL:
            self.init(.diskFull, "token registry \(error.path) is full: \(error.message)", context: error.call)
        case EACCES, EROFS, EPERM:
            self.init(.fileAccess, "cannot write token registry \(error.path): \(error.message)", context: error.call)
        case MDB_INVALID, MDB_VERSION_MISMATCH, MDB_CORRUPTED, MDB_PAGE_NOTFOUND:
            self.init(.notAStore, "\(error.path) is not a SharedStore token registry: \(error.message)", context: error.call)
        default:
            self.init(.storage, "token registry error: \(error.description)", context: error.call)
        }
    }

    static func wrapLMDB<T>(_ body: () throws -> T) throws -> T {
        do { return try body() }
        catch let e as LMDBError { throw StoreError(e) }
    }
}
