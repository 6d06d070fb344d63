import Foundation
import SharedStoreSQLite
import SharedStoreSupport

extension ObjectContext {
    /// Inserts records in one transaction, recorded in history object by object, as
    /// ``batchInsert(_:_:relationships:)`` does with rows: a record's to-one relationships
    /// (`ObjectID?` properties) must point at stored objects. Needs no pending changes in the
    /// context; does not touch them.
    ///
    /// For example:
    /// ```swift
    /// let result = try context.batchInsert([Article(title: "WAL", url: wal), Article(title: "LMDB", url: lmdb)])
    /// ```
    ///
    /// A batch of 512 records or more is encoded on a second thread while this one writes (the
    /// records' `encode(to:)` runs there, a few hundred records ahead of the writer: one that
    /// reads task-local values sees none, and one with side effects may run for records after a
    /// bad one); a smaller batch is encoded by the writer.
    ///
    /// - Returns: how many were inserted, their ids (in order) and the token.
    /// - Throws: like ``save()``, naming the first record refused by its place
    ///   (`Article (batch row 3)`), its own encoding's failures included; nothing is saved then.
    @discardableResult
    public func batchInsert<R: Record>(_ records: [R]) throws -> BatchResult {
        var ids: [ObjectID] = []
        ids.reserveCapacity(records.count)
        guard records.count >= RecordEncodingPipeline<R>.threshold else {
            let result = try batch { batch in
                // By index: enumerated() over a generic element costs a tuple's metadata per record.
                for i in records.indices {
                    ids.append(try batch.insert(records[i], object: "\(R.entityName) (batch row \(i + 1))"))
                }
            }
            return BatchResult(count: result.count, token: result.token, objectIDs: ids)
        }
        // A large batch: its records are encoded on another thread while this one writes.
        let entity = try model.entity(R.entityName)
        let pipeline = RecordEncodingPipeline(records, entity: entity)
        defer { pipeline.stop() }
        let result = try batch { batch in
            while let chunk = pipeline.next() {
                for encoded in chunk {
                    let row = ids.count + 1
                    let encoded = try RecordEncoder.naming("\(R.entityName) (batch row \(row))") { try encoded.get() }
                    batch.placed += 1
                    ids.append(try batch.insertEncoded(entity, encoded, object: "\(R.entityName) (batch row \(row))"))
                }
            }
        }
        return BatchResult(count: result.count, token: result.token, objectIDs: ids)
    }
}

extension BatchWriter {
    /// Inserts a record (its to-one relationships point at stored objects or objects this batch
    /// made); returns its permanent id.
    ///
    /// - Throws: like ``insert(_:_:relationships:object:)``, naming `object`.
    public mutating func insert<R: Record>(_ record: R, object: @autoclosure () -> String) throws -> ObjectID {
        // What this batch learnt of R: its entity and the order its keys come in.
        let key = ObjectIdentifier(R.self)
        let memo: RecordEncoder.Memo
        if let last = lastMemo, last.type == key {
            memo = last.memo
        } else if let known = recordMemos[key] {
            memo = known
        } else {
            memo = RecordEncoder.Memo(entity: try writer.model.entity(R.entityName))
            recordMemos[key] = memo
        }
        lastMemo = (key, memo)
        let box = try RecordEncoder.naming(object()) { try RecordEncoder.encodeInBox(record, memo: memo) }
        placed += 1
        return try insertBoxed(memo.entity, box, object: object())
    }

    /// ``insert(_:object:)`` naming the record in errors by its place among the batch's calls of
    /// `insert` and `uniqueObject` (`Article (batch object 3)`).
    public mutating func insert<R: Record>(_ record: R) throws -> ObjectID {
        let place = placed + 1
        return try insert(record, object: "\(R.entityName) (batch object \(place))")
    }
}

extension BatchWriter {
    /// Inserts a record encoded by position (``RecordEncoder/encodeRow(_:memo:)``).
    mutating func insertEncoded(
        _ e: Entity, _ encoded: consuming RecordEncoder.EncodedRow, object: @autoclosure () -> String
    ) throws -> ObjectID {
        if let name = encoded.others.keys.first {
            throw StoreError(.unknownProperty, "\(object()): \(e.name) has no to-one relationship '\(name)'")
        }
        var row = writer.takeRow(for: e)
        defer { writer.keep(row) }
        row.values = encoded.values
        try resolve(encoded.targets, into: &row, e, object: object())
        let pk = try writer.insert(e, &row, object: object())
        count += 1
        return ObjectID(storeID: storeID, entity: e.name, primaryKey: pk)
    }

    /// Inserts the record encoded in `box` (a memo's, ``RecordEncoder/encodeInBox(_:memo:)``).
    /// The row's values change places with the writer's kept storage, which the box clears for
    /// its next record: a batch's records allocate no row.
    mutating func insertBoxed(_ e: Entity, _ box: RecordEncoder.Box, object: @autoclosure () -> String) throws
        -> ObjectID
    {
        if let name = box.relationships.keys.first {
            throw StoreError(.unknownProperty, "\(object()): \(e.name) has no to-one relationship '\(name)'")
        }
        // The values change places whole: only the to-one keys need clearing.
        var row = writer.takeRow(for: e, clearingValues: false)
        defer { writer.keep(row) }
        swap(&row.values, &box.row)
        try resolve(box.targets, into: &row, e, object: object())
        let pk = try writer.insert(e, &row, object: object())
        count += 1
        return ObjectID(storeID: storeID, entity: e.name, primaryKey: pk)
    }

    /// The keys of a record's to-one `targets` (by to-one index) in `row`.
    private mutating func resolve(
        _ targets: [ObjectID?], into row: inout InsertRow, _ e: Entity, object: @autoclosure () -> String
    ) throws {
        for i in targets.indices {
            guard let target = targets[i] else { continue }
            row.targets[i] = try key(of: target, e.toOneRelationships[i], object: object())
        }
    }
}

extension RecordEncoder {
    /// `body`'s result, or its failure as the failure of the record `object` names (a batch's
    /// row): a store error keeps its code and says the object, a record's own error (its
    /// `encode(to:)` threw) becomes a `.validation` error naming the object and quoting it.
    static func naming<T>(_ object: @autoclosure () -> String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let e as StoreError {
            let object = object()
            let details =
                e.code == .validation
                ? .validation(ValidationFailure(object: object, property: e.validation?.property, rule: .record))
                : e.details
            throw StoreError(
                e.code, "\(object): \(e.message)", context: e.context, conflicts: e.conflicts,
                resultCode: e.resultCode, details: details)
        } catch {
            let object = object()
            throw StoreError.validation(
                "\(object): its encode(to:) failed: \(error)", object: object, property: nil, rule: .record)
        }
    }
}
