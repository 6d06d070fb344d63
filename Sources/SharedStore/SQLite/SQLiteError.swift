import CSQLite
import Foundation

/// An error reported by SQLite: the result code, SQLite's message and the SQL that failed.
///
/// Internal: the library maps it to ``StoreError`` before it reaches users.
struct SQLiteError: Error, CustomStringConvertible {
    /// The extended result code (`SQLITE_CONSTRAINT_UNIQUE`, `SQLITE_BUSY`, …).
    let extendedCode: Int32
    let message: String
    let sql: String?
    /// The operating system's errno behind an I/O error (ENOSPC for a full disk), or 0.
    var systemErrno: Int32 = 0

    /// The primary result code (the low byte of the extended code).
    var code: Int32 { extendedCode & 0xff }

    var isBusy: Bool { code == SQLITE_BUSY || code == SQLITE_LOCKED }
    // Extended codes are C expressions Swift does not import: SQLITE_CONSTRAINT | (n << 8).
    var isUniqueViolation: Bool { extendedCode == SQLITE_CONSTRAINT | (8 << 8) || extendedCode == SQLITE_CONSTRAINT | (6 << 8) }
    var isDiskFull: Bool { code == SQLITE_FULL || (code == SQLITE_IOERR && systemErrno == ENOSPC) }
    var isReadOnly: Bool { code == SQLITE_READONLY || code == SQLITE_CANTOPEN || code == SQLITE_PERM }
    var isNotADatabase: Bool { code == SQLITE_NOTADB || code == SQLITE_CORRUPT }

    init(code: Int32, message: String, sql: String? = nil) {
        self.extendedCode = code
        self.message = message
        self.sql = sql
    }

    var description: String {
        var text = "SQLite error \(extendedCode): \(message)"
        if let sql { text += " (in \(sql))" }
        return text
    }
}
