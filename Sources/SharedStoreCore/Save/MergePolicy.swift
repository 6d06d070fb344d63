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
        /// The property's name (an attribute or a to-one relationship).
        public let name: String
        /// The value the context read.
        public let read: Value
        /// The value the store holds now.
        public let stored: Value
        /// The value the context is saving.
        public let saving: Value
    }

    /// The conflicting object.
    public let objectID: ObjectID
    /// The object was deleted from the store.
    public let deletedInStore: Bool
    /// The properties this context changes; with the ones the store changed too first.
    public let properties: [Property]
    /// The object's version when the context read it.
    public let versionRead: Int64
    /// The object's version in the store now (nil when it was deleted).
    public let versionStored: Int64?

    /// One line: the object, the versions and each property's three values.
    public var description: String {
        if deletedInStore { return "\(objectID) was deleted from the store after it was read" }
        let parts = properties.map { "\($0.name): read \($0.read), store \($0.stored), saving \($0.saving)" }
        return "\(objectID) changed in the store (version \(versionRead) read, \(versionStored ?? 0) stored): "
            + parts.joined(separator: "; ")
    }
}
