import CLMDB
import Foundation

/// An error reported by LMDB: the return code, `mdb_strerror`'s text and the call that failed.
package struct LMDBError: Error, CustomStringConvertible {
    package let code: Int32
    package let call: String
    package let path: String

    package init(code: Int32, call: String, path: String) {
        self.code = code
        self.call = call
        self.path = path
    }

    package var message: String { String(cString: mdb_strerror(code)) }
    package var isMapFull: Bool { code == MDB_MAP_FULL }
    /// The file is not an LMDB environment of this version, or is damaged.
    package var isDamage: Bool { [MDB_INVALID, MDB_VERSION_MISMATCH, MDB_CORRUPTED, MDB_PAGE_NOTFOUND].contains(code) }
    package var isDiskFull: Bool { code == ENOSPC || code == MDB_MAP_FULL }
    package var isAccessDenied: Bool { [EACCES, EROFS, EPERM].contains(code) }

    package var description: String { "\(call) failed on \(path): \(message) (\(code))" }

    /// The funnel every LMDB call goes through: success passes, anything else throws.
    package static func check(_ rc: Int32, _ call: String, path: String) throws {
        guard rc == MDB_SUCCESS else { throw LMDBError(code: rc, call: call, path: path) }
    }
}
