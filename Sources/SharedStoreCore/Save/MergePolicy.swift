import SharedStoreSQLite
import SharedStoreSupport

/// How a save resolves a conflict with what is in the store: Core Data's five merge policies.
///
/// Uniqueness: inserting an object whose unique key already exists (saved earlier, by this
/// process or another) is resolved inside the save's write transaction, so two processes racing
/// to create the same key end with one object.
public enum MergePolicy: String, Sendable, Hashable, CaseIterable {
    /// The save fails, naming the conflict (NSErrorMergePolicy; the default).
    case error
    /// The store's values win; the context's other changes are saved
    /// (NSMergeByPropertyStoreTrumpMergePolicy). A duplicate insert becomes the stored object.
    case storeTrump
    /// The context's values win for what it changed; the store's other changes stay
    /// (NSMergeByPropertyObjectTrumpMergePolicy). A duplicate insert updates the stored object.
    case objectTrump
    /// The context's whole object replaces the store's (NSOverwriteMergePolicy).
    case overwrite
    /// The context's changes to conflicting objects are dropped (NSRollbackMergePolicy).
    case rollback
}

/// An object that changed in the store after a context read it, as the `.error` policy reports it.
public struct MergeConflict: Sendable, Hashable, CustomStringConvertible {
    /// One property: the value the context read, the value now in the store, the value it saves.
    /// To-one relationships show as `Entity/N` strings (or nil).
    public struct Property: Sendable, Hashable {
        public let name: String
        public let read: Value
        public let stored: Value
        public let saving: Value
    }

    public let objectID: ObjectID
    /// The object was deleted from the store.
    public let deletedInStore: Bool
    /// The properties this context changes; with the ones the store changed too first.
    public let properties: [Property]
    public let versionRead: Int64
    public let versionStored: Int64?

    public var description: String {
        if deletedInStore { return "\(objectID) was deleted from the store after it was read" }
        let parts = properties.map { "\($0.name): read \($0.read), store \($0.stored), saving \($0.saving)" }
        return "\(objectID) changed in the store (version \(versionRead) read, \(versionStored ?? 0) stored): "
            + parts.joined(separator: "; ")
    }
}
