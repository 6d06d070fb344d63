import CSQLite
import Foundation

/// An SQLite result code, primary or extended, as a value callers can match on.
///
/// For example:
/// ```swift
/// catch let error as StoreError where error.resultCode == .busy { … }
/// switch code { case .constraint: …; default: … }   // matches every constraint code
/// ```
/// `~=` matches an extended code (`SQLITE_CONSTRAINT_UNIQUE`) against its primary code
/// (`.constraint`), as GRDB's `ResultCode` does. See https://sqlite.org/rescode.html.
public struct ResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The C value: a primary code (`SQLITE_BUSY`) or an extended one (`SQLITE_CONSTRAINT_UNIQUE`).
    public let rawValue: Int32
    /// The code with C value `rawValue`; any value is accepted.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The primary code: the low byte of an extended code.
    public var primary: ResultCode { ResultCode(rawValue: rawValue & 0xff) }

    /// `SQLITE_OK`: success.
    public static let ok = ResultCode(rawValue: SQLITE_OK)
    /// `SQLITE_ERROR`: a generic error (an SQL error, a missing table).
    public static let error = ResultCode(rawValue: SQLITE_ERROR)
    /// `SQLITE_PERM`: the access mode asked for cannot be granted.
    public static let permission = ResultCode(rawValue: SQLITE_PERM)
    /// `SQLITE_BUSY`: another connection holds a lock past the busy timeout (a `StoreError` with
    /// code `.busy`).
    public static let busy = ResultCode(rawValue: SQLITE_BUSY)
    /// `SQLITE_LOCKED`: a conflict within the same connection or shared cache.
    public static let locked = ResultCode(rawValue: SQLITE_LOCKED)
    /// `SQLITE_READONLY`: the file or directory cannot be written (a `StoreError` with code
    /// `.fileAccess`).
    public static let readOnly = ResultCode(rawValue: SQLITE_READONLY)
    /// `SQLITE_IOERR`: the operating system reported an I/O error.
    public static let ioError = ResultCode(rawValue: SQLITE_IOERR)
    /// `SQLITE_CORRUPT`: the database file is malformed.
    public static let corrupt = ResultCode(rawValue: SQLITE_CORRUPT)
    /// `SQLITE_FULL`: the disk is full (a `StoreError` with code `.diskFull`).
    public static let full = ResultCode(rawValue: SQLITE_FULL)
    /// `SQLITE_CANTOPEN`: the file cannot be opened.
    public static let cantOpen = ResultCode(rawValue: SQLITE_CANTOPEN)
    /// `SQLITE_CONSTRAINT`: a constraint failed; as a pattern it matches each extended constraint
    /// code.
    public static let constraint = ResultCode(rawValue: SQLITE_CONSTRAINT)
    /// `SQLITE_NOTADB`: the file is not a database (a `StoreError` with code `.notAStore`).
    public static let notADatabase = ResultCode(rawValue: SQLITE_NOTADB)
    // Extended codes are C expressions Swift does not import: SQLITE_CONSTRAINT | (n << 8).
    /// `SQLITE_CONSTRAINT_PRIMARYKEY`: a primary key is not unique.
    public static let constraintPrimaryKey = ResultCode(rawValue: SQLITE_CONSTRAINT | (6 << 8))
    /// `SQLITE_CONSTRAINT_UNIQUE`: a UNIQUE constraint failed.
    public static let constraintUnique = ResultCode(rawValue: SQLITE_CONSTRAINT | (8 << 8))

    /// A primary code matches every extended code of its kind; an extended code only itself.
    public static func ~= (pattern: ResultCode, code: ResultCode) -> Bool {
        pattern.rawValue & ~0xff == 0 ? pattern.rawValue == code.primary.rawValue : pattern == code
    }

    /// SQLite's English text for the code, then its number: `database is locked (5)`.
    public var description: String { "\(String(cString: sqlite3_errstr(rawValue))) (\(rawValue))" }
}

/// An error reported by SQLite: the result code, SQLite's message and the SQL that failed.
///
/// Package-internal: the store maps it to its `StoreError` (keeping the ``ResultCode``) before
/// it reaches users.
package struct SQLiteError: Error, CustomStringConvertible {
    /// The extended result code (`SQLITE_CONSTRAINT_UNIQUE`, `SQLITE_BUSY`, …).
    package let resultCode: ResultCode
    package let message: String
    package let sql: String?
    /// The operating system's errno behind an I/O error (ENOSPC for a full disk), or 0.
    package var systemErrno: Int32 = 0

    package var isBusy: Bool { resultCode.primary == .busy || resultCode.primary == .locked }
    package var isUniqueViolation: Bool { resultCode == .constraintUnique || resultCode == .constraintPrimaryKey }
    package var isDiskFull: Bool {
        resultCode.primary == .full || (resultCode.primary == .ioError && systemErrno == ENOSPC)
    }
    package var isReadOnly: Bool { [.readOnly, .cantOpen, .permission].contains(resultCode.primary) }
    package var isNotADatabase: Bool { resultCode.primary == .notADatabase || resultCode.primary == .corrupt }

    package init(code: Int32, message: String, sql: String? = nil) {
        self.resultCode = ResultCode(rawValue: code)
        self.message = message
        self.sql = sql
    }

    package var description: String {
        var text = "SQLite error \(resultCode.rawValue): \(message)"
        if let sql { text += " (in \(sql))" }
        return text
    }
}
