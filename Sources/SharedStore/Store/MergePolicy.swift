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
