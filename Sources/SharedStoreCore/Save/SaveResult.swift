import Foundation

/// What a save did: its history token (nil when nothing changed or history is off) and the
/// permanent ids of the inserted objects.
public struct SaveResult: Sendable, Hashable {
    /// The save's history token: nil when nothing was saved or the container records no history.
    public let token: HistoryToken?
    /// The permanent id of each inserted object, in the order of the inserts.
    let ids: PermanentIDs
    /// ``ids`` as a table, made once for a save of more than a few inserts (see
    /// ``permanentIDs``); nil: made on each request, from a handful of ids.
    private let table: [ObjectID: ObjectID]?
    /// How many objects the save's history records as inserted.
    public let insertedCount: Int
    /// How many objects the save's history records as updated: those the context changed, and
    /// those a delete rule, a link or a derived attribute changed with them.
    public let updatedCount: Int
    /// How many objects the save's history records as deleted, cascades included.
    public let deletedCount: Int

    /// The permanent id of each inserted object, by its temporary id.
    ///
    /// For a save of a few objects the table is made on each call (a save of one object makes
    /// none); ``permanentID(for:)`` finds one id without it.
    public var permanentIDs: [ObjectID: ObjectID] { table ?? ids.dictionary }

    init(token: HistoryToken?, ids: PermanentIDs, insertedCount: Int, updatedCount: Int, deletedCount: Int) {
        self.token = token
        self.ids = ids
        // Looked up in a loop (`result.permanentIDs[id]` for each id), a table made per call
        // would cost the square of the inserts: past a few, it is made once.
        self.table = ids.count > Self.tableThreshold ? ids.dictionary : nil
        self.insertedCount = insertedCount
        self.updatedCount = updatedCount
        self.deletedCount = deletedCount
    }

    /// The most ids whose table is made on request rather than with the result.
    static let tableThreshold = 8

    /// The permanent id of an object inserted with temporary id `id` (or `id` itself).
    public func permanentID(for id: ObjectID) -> ObjectID { ids[id] ?? id }

    /// Whether the save inserted anything (a temporary id it was given became permanent).
    var insertedAny: Bool { !ids.isEmpty }
}
