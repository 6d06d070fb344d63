import Foundation

/// What the snapshots of a fetch can be delivered as: the snapshots themselves, records of a
/// type, or a type of your own. A live query (`LiveQuery<Element>`) delivers its results as its
/// `Element`: `LiveQuery<Snapshot>` as snapshots, `LiveQuery<Article>` as `[Article]`.
///
/// Every ``Record`` is one (its elements are the records decoded from the snapshots, each knowing
/// what it was read as); so is ``Snapshot``.
public protocol FetchedElement: Sendable {
    /// The entity whose objects the elements come from, or nil for any (snapshots).
    static var fetchedEntity: String? { get }
    /// The elements of one fetch's snapshots, in their order.
    ///
    /// - Throws: what makes a snapshot no element (a record's `.validation`).
    static func elements(from snapshots: [Snapshot]) throws -> [Self]
}

extension Snapshot: FetchedElement {
    /// Nil: snapshots of any entity.
    public static var fetchedEntity: String? { nil }
    /// The snapshots as they are.
    public static func elements(from snapshots: [Snapshot]) throws -> [Snapshot] { snapshots }
}

extension Record {
    /// ``entityName``.
    public static var fetchedEntity: String? { entityName }
    /// The records decoded from `snapshots`, each knowing what it was read as.
    ///
    /// - Throws: `.validation` naming the first object that cannot be decoded as `Self`.
    public static func elements(from snapshots: [Snapshot]) throws -> [Self] { try records(from: snapshots) }
}
