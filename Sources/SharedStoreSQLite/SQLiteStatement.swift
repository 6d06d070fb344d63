import CSQLite
import Foundation

/// A prepared statement, owned by one ``SQLiteConnection`` and reset after each use.
///
/// No pointer leaves this type: values are copied into Swift memory as they are read.
package final class SQLiteStatement {
    @usableFromInline let handle: OpaquePointer
    package let sql: String
    @usableFromInline unowned let connection: SQLiteConnection
    /// How many rows its caller read the last time (a hint for the room of the next result: a
    /// query run again with other values mostly returns as many).
    package var rowsLastRead = 0
    /// Each parameter's own copy of the short text or blob bound to it last, bound with
    /// SQLITE_STATIC: SQLite's own copy (SQLITE_TRANSIENT) is a malloc and a free per value, a
    /// tenth of what an insert costs outside the B-tree. A buffer outlives every binding to it:
    /// the parameter is unbound before its buffer is written or freed (nothing is touched when
    /// SQLite refuses to unbind it), and the statement is finalized before the buffers are freed.
    ///
    /// A statement is used by its connection's one user at a time and calls out to no one while
    /// it binds: Swift's run-time exclusivity check (about 75 instructions a value) is skipped.
    @exclusivity(unchecked) private var owned: [UnsafeMutableRawBufferPointer?]
    /// Values longer than this are copied by SQLite (a statement keeps one buffer per
    /// parameter for as long as it is cached).
    static let ownedLimit = 1024

    init(connection: SQLiteConnection, sql: String) throws {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(connection.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else {
            sqlite3_finalize(stmt)
            throw connection.error(rc, sql: sql)
        }
        self.handle = stmt
        self.sql = sql
        self.connection = connection
        owned = Array(repeating: nil, count: Int(max(0, sqlite3_bind_parameter_count(stmt))))
        if SQLDebug.isOn { SQLDebug.notePlan(sql, on: connection.handle) }
    }

    deinit {
        // SQLite lets go of every bound value first, then the buffers they point at go.
        sqlite3_finalize(handle)
        for buffer in owned { buffer?.deallocate() }
    }

    // MARK: - Binding

    @inlinable
    package func bind(_ values: [SQLValue]) throws {
        try bind(values, andThen: 0)
    }

    /// Binds `values` from 1, leaving the `later` parameters after them to the caller. The last
    /// run's values are cleared only when some parameter would keep one (`sqlite3_clear_bindings`
    /// costs as much as binding them all again: 500 instructions for a row of seven).
    @inlinable
    package func bind(_ values: [SQLValue], andThen later: Int) throws {
        sqlite3_reset(handle)
        // More values than a statement has parameters (at most Int32.max): SQLite's range error,
        // with no parameter number that does not fit.
        guard values.count < Int(Int32.max) else {
            throw SQLiteError(code: SQLITE_RANGE, message: "\(values.count) values for one statement", sql: sql)
        }
        if values.count + later < Int(sqlite3_bind_parameter_count(handle)) { sqlite3_clear_bindings(handle) }
        for (offset, value) in values.enumerated() {
            try bind(value, at: Int32(truncatingIfNeeded: offset + 1))
        }
    }

    // Inlinable, like the row accessors below: the store binds and reads every column of every
    // row through them, across the module boundary (measured: 14% of a history fetch).
    @inlinable
    package func bind(_ value: SQLValue, at index: Int32) throws {
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(handle, index)
        case .integer(let v): rc = sqlite3_bind_int64(handle, index, v)
        case .double(let v): rc = sqlite3_bind_double(handle, index, v)
        case .text(let v): rc = bind(text: v, at: index)
        case .blob(let v): rc = v.withUnsafeBytes { bind($0, at: index, text: false) }
        }
        guard rc == SQLITE_OK else { throw connection.error(rc, sql: sql) }
    }

    /// Binds `text` from its UTF-8 in place: a String passed as a C string would first be copied
    /// into a new array with a NUL, for every value bound. Text longer than SQLite takes is
    /// SQLITE_TOOBIG, as SQLite says of any text past its limit.
    private func bind(text: String, at index: Int32) -> Int32 {
        let bound = text.utf8.withContiguousStorageIfAvailable {
            bind(UnsafeRawBufferPointer($0), at: index, text: true)
        }
        if let bound { return bound }
        // Not stored as contiguous UTF-8 (bridged): through a C string.
        guard let count = Int32(exactly: text.utf8.count) else { return SQLITE_TOOBIG }
        return sqlite3_bind_text(handle, index, text, count, sharedstore_sqlite_transient())
    }

    /// Binds the 16 bytes of `uuid` as a BLOB, with no array in between (one per inserted row).
    @inlinable
    package func bind(uuid: UUID, at index: Int32) throws {
        var value = uuid.uuid
        let rc = withUnsafeBytes(of: &value) { bind($0, at: index, text: false) }
        guard rc == SQLITE_OK else { throw connection.error(rc, sql: sql) }
    }

    /// Binds `bytes` as text (UTF-8) or a blob at `index`: a short value from the parameter's own
    /// buffer (``owned``), a long one copied by SQLite.
    @usableFromInline
    func bind(_ bytes: UnsafeRawBufferPointer, at index: Int32, text: Bool) -> Int32 {
        guard let count = Int32(exactly: bytes.count) else { return SQLITE_TOOBIG }
        let slot = Int(index) - 1
        guard bytes.count <= Self.ownedLimit, owned.indices.contains(slot) else {
            // Never a NULL pointer, which SQLite would bind as NULL: "" has no address.
            let base = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)
            return text
                ? sqlite3_bind_text(
                    handle, index, base?.assumingMemoryBound(to: CChar.self), count,
                    sharedstore_sqlite_transient())
                : sqlite3_bind_blob(handle, index, base, count, sharedstore_sqlite_transient())
        }
        // SQLite lets go of the buffer before it is overwritten or freed. A statement that runs,
        // or ran and was not reset, refuses every binding: then its buffer stays as it is (the
        // next step resets the statement and runs again with the values it holds).
        let unbound = sqlite3_bind_null(handle, index)
        guard unbound == SQLITE_OK else { return unbound }
        let buffer: UnsafeMutableRawBufferPointer
        if let kept = owned[slot], kept.count >= bytes.count {
            buffer = kept
        } else {
            owned[slot]?.deallocate()
            buffer = .allocate(byteCount: max(64, bytes.count), alignment: 8)
            owned[slot] = buffer
        }
        buffer.copyMemory(from: bytes)
        // A null destructor is SQLITE_STATIC: SQLite reads the bytes where they are.
        return text
            ? sqlite3_bind_text(handle, index, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), count, nil)
            : sqlite3_bind_blob(handle, index, buffer.baseAddress, count, nil)
    }

    /// Resets the statement and clears its bindings, before binding values one by one. (The
    /// reset's result repeats the last step's error, which that step already threw.)
    package func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Runs a statement whose values are bound, ignoring rows, and resets it.
    @inlinable
    package func run() throws {
        defer { sqlite3_reset(handle) }
        while try step() {}
    }

    /// Binds `values` from 1, then `blob` after them without copying it (SQLITE_STATIC: it is
    /// read where it is while the statement runs), runs the statement and unbinds the blob.
    /// For a large BLOB written once (a history record of a million inserts: no second copy).
    package func execute(_ values: [SQLValue], borrowing blob: [UInt8]) throws {
        try bind(values, andThen: 1)
        defer {
            sqlite3_reset(handle)
            // The statement lets go of the borrowed bytes (the other values are its own copies).
            sqlite3_bind_null(handle, Int32(truncatingIfNeeded: values.count + 1))
        }
        try blob.withUnsafeBytes { raw in
            // A blob longer than an Int32 counts is longer than SQLite takes: its own "too big".
            guard let count = Int32(exactly: raw.count) else {
                throw SQLiteError(code: SQLITE_TOOBIG, message: "a blob of \(raw.count) bytes", sql: sql)
            }
            // SQLITE_STATIC is a null destructor: SQLite neither copies nor frees the bytes.
            let rc = sqlite3_bind_blob(
                handle, Int32(truncatingIfNeeded: values.count + 1), raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1),
                count, nil)
            guard rc == SQLITE_OK else { throw connection.error(rc, sql: sql) }
            while try step() {}
        }
    }

    // MARK: - Stepping

    /// Runs the statement to completion, ignoring rows.
    @inlinable
    package func execute(_ values: [SQLValue] = []) throws {
        try bind(values)
        defer { sqlite3_reset(handle) }
        while try step() {}
    }

    /// Runs the statement and calls `body` for each row.
    @inlinable
    package func forEachRow(_ values: [SQLValue] = [], _ body: (SQLiteRow) throws -> Void) throws {
        try bind(values)
        defer { sqlite3_reset(handle) }
        while try step() {
            try body(SQLiteRow(handle: handle))
        }
    }

    /// The rows, each mapped by `transform`.
    @inlinable
    package func rows<T>(_ values: [SQLValue] = [], capacity: Int = 0, _ transform: (SQLiteRow) throws -> T) throws
        -> [T]
    {
        var result: [T] = []
        result.reserveCapacity(capacity)
        try forEachRow(values) { result.append(try transform($0)) }
        return result
    }

    /// The first row mapped by `transform`, or nil.
    @inlinable
    package func firstRow<T>(_ values: [SQLValue] = [], _ transform: (SQLiteRow) throws -> T) throws -> T? {
        try bind(values)
        defer { sqlite3_reset(handle) }
        guard try step() else { return nil }
        return try transform(SQLiteRow(handle: handle))
    }

    /// Steps once: true when a row is available, false when done.
    @inlinable
    package func step() throws -> Bool {
        while true {
            let rc = sqlite3_step(handle)
            switch rc {
            case SQLITE_ROW: return true
            case SQLITE_DONE: return false
            default: throw connection.error(rc, sql: sql)
            }
        }
    }
}

/// A value as SQLite stores it.
package enum SQLValue: Equatable, Sendable {
    case null
    case integer(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])
}

/// The current row of a statement; valid only inside the closure that receives it.
package struct SQLiteRow {
    @usableFromInline let handle: OpaquePointer

    @inlinable @inline(__always) package func isNull(_ i: Int32) -> Bool {
        sqlite3_column_type(handle, i) == SQLITE_NULL
    }
    @inlinable @inline(__always) package func int64(_ i: Int32) -> Int64 { sqlite3_column_int64(handle, i) }
    @inlinable @inline(__always) package func double(_ i: Int32) -> Double { sqlite3_column_double(handle, i) }

    /// Column `i` as text, nil when it is NULL (one call: SQLite answers NULL with no pointer).
    @inlinable @inline(__always) package func textOrNil(_ i: Int32) -> String? {
        guard let p = sqlite3_column_text(handle, i) else { return nil }
        let n = Int(sqlite3_column_bytes(handle, i))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }

    /// `body` with column `i`'s bytes as ``textOrNil(_:)`` reads them (nil when NULL), valid only
    /// during the call: nothing is copied.
    @inlinable @inline(__always) package func withTextOrNil<R>(
        _ i: Int32, _ body: (UnsafeBufferPointer<UInt8>?) throws -> R
    ) rethrows -> R {
        guard let p = sqlite3_column_text(handle, i) else { return try body(nil) }
        return try body(UnsafeBufferPointer(start: p, count: Int(sqlite3_column_bytes(handle, i))))
    }

    @inlinable @inline(__always) package func text(_ i: Int32) -> String {
        guard let p = sqlite3_column_text(handle, i) else { return "" }
        let n = Int(sqlite3_column_bytes(handle, i))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }

    /// Column `i` as SQLite stores it.
    package func value(_ i: Int32) -> SQLValue {
        switch type(i) {
        case .integer: return .integer(int64(i))
        case .double: return .double(double(i))
        case .text: return .text(text(i))
        case .blob: return .blob(blob(i))
        case .null: return .null
        }
    }

    /// The number of columns of the row.
    package var columnCount: Int32 { sqlite3_column_count(handle) }

    /// The storage class of column `i` in this row.
    package enum StorageClass { case integer, double, text, blob, null }

    package func type(_ i: Int32) -> StorageClass {
        switch sqlite3_column_type(handle, i) {
        case SQLITE_INTEGER: return .integer
        case SQLITE_FLOAT: return .double
        case SQLITE_TEXT: return .text
        case SQLITE_BLOB: return .blob
        default: return .null
        }
    }

    @inlinable @inline(__always) package func blob(_ i: Int32) -> [UInt8] {
        let n = Int(sqlite3_column_bytes(handle, i))
        guard n > 0, let p = sqlite3_column_blob(handle, i) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }
}
