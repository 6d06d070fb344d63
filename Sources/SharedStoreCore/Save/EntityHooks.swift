import Foundation
import SharedStoreSupport
import Synchronization

/// An object as `awakeFromInsert` and `willSave` see it: its values as they will be saved, which
/// the hook may change (stored attributes only: a derived attribute is the save's to compute,
/// the seed's first pitfall).
public struct ObjectDraft: Sendable {
    /// The name of the object's entity.
    public let entity: String
    /// Nil for an object being inserted (its key comes with the save).
    public let id: ObjectID?
    /// Whether the object is being inserted by this save (it has no id yet).
    public var isInserted: Bool { id == nil }
    /// The values given, by position (an attribute not given reads as its default), and the
    /// to-one relationships' keys.
    private(set) var row: InsertRow
    private let storeID: UUID
    private let model: Entity
    /// The names the hook set.
    private(set) var changed: Set<String> = []

    /// A draft of `row`'s object (an insert hands its row over: the hook's changes go into it
    /// in place).
    init(entity: Entity, id: ObjectID?, storeID: UUID, row: InsertRow) {
        self.entity = entity.name
        self.model = entity
        self.id = id
        self.storeID = storeID
        self.row = row
    }

    init(entity: Entity, id: ObjectID?, storeID: UUID, values: [String: Value], relationships: [String: Int64?]) {
        self.init(
            entity: entity, id: id, storeID: storeID,
            row: InsertRow(entity, PropertyChanges(values: values, relationships: relationships)))
    }

    /// The value of attribute `name` (its default when none was given; `.null` for no attribute).
    public subscript(name: String) -> Value {
        guard let i = model.attributeIndex(name) else { return .null }
        return row.value(i, of: model)
    }

    /// The object a to-one relationship points at.
    public func related(_ name: String) -> ObjectID? {
        guard let r = model.relationship(named: name), let key = row.target(name, of: model) else { return nil }
        return ObjectID(storeID: storeID, entity: r.destination, primaryKey: key)
    }

    /// Sets attribute `name`.
    ///
    /// - Throws: `.unknownProperty` for a name the entity lacks; `.validation` for a derived
    ///   attribute (the save computes it).
    public mutating func set(_ name: String, _ value: Value) throws {
        try model.checkAttribute(name, object: id?.description ?? "new \(entity)")
        row.set(name, value, of: model)
        changed.insert(name)
    }
}

/// A rule over a whole object (the seed's cross-property rules: a due date after the start
/// date), checked by the save after `willSave`. A broken rule fails the save, naming the object
/// and the rule.
public struct ValidationRule: Sendable {
    /// When a rule is checked: on the object as it will be inserted or updated, or as it was before
    /// a delete.
    public enum Event: Sendable, Hashable { case insert, update, delete }
    /// The rule's name, in words: the `.validation` error of a broken rule quotes it.
    public let name: String
    /// The saves that check the rule (inserts and updates by default).
    public let events: Set<Event>
    let check: @Sendable (Snapshot) -> Bool

    /// A rule named `name`, checked on `events`, that holds when `check` returns true for the
    /// object (a ``Snapshot`` of all its attributes and to-one relationships).
    ///
    /// For example:
    /// ```swift
    /// ValidationRule("a due date comes after the start date") { object in
    ///     guard let start = object["start"].dateValue, let due = object["due"].dateValue else { return true }
    ///     return due > start
    /// }
    /// ```
    public init(
        _ name: String, on events: Set<Event> = [.insert, .update], _ check: @escaping @Sendable (Snapshot) -> Bool
    ) {
        self.name = name
        self.events = events
        self.check = check
    }
}

/// Code an entity runs in the save (Core Data's validation and lifecycle methods), registered
/// with ``Container/register(_:_:)``. All but `awakeFromFetch` run inside the save's
/// transaction: one that throws rolls the whole save back, history included.
///
/// What each may do, enforced by what it is given:
/// - `awakeFromInsert(&draft)`: once, when an object is first saved; may set attributes
///   (defaults such as a UUID or a creation date).
/// - `willSave(&draft)`: before every insert and update is written; may change attributes, never
///   derived ones (they are computed after it).
/// - `rules`: checked on the object as it will be stored (insert, update) or as it was (delete).
/// - `didSave(snapshot)`: after the object is written, inside the transaction; reads only.
/// - `prepareForDeletion(snapshot)`: before an object is deleted (cascades included); reads
///   only, may throw to refuse. It must not delete files: the transaction may still roll back.
/// - `awakeFromFetch(snapshot)`: when a context fetches an object; reads only.
public struct EntityHooks: Sendable {
    /// Runs once per object, when the save inserts it: it may set attributes (a UUID, a creation
    /// date). What it throws fails the save.
    public var awakeFromInsert: (@Sendable (inout ObjectDraft) throws -> Void)?
    /// Runs before each inserted or updated object is written: it may change stored attributes,
    /// never derived ones. What it throws fails the save.
    public var willSave: (@Sendable (inout ObjectDraft) throws -> Void)?
    /// Rules over the whole object, checked after `willSave`; the first broken one fails the save
    /// with `.validation` naming the object and the rule.
    public var rules: [ValidationRule]
    /// Runs after an object is written, inside the save's transaction, with the object as stored;
    /// it cannot fail the save.
    public var didSave: (@Sendable (Snapshot) -> Void)?
    /// Runs before an object is deleted (cascaded deletes included), with the object as it was; it
    /// may throw to refuse the delete, which fails the save. It must not delete files: the
    /// transaction can still roll back.
    public var prepareForDeletion: (@Sendable (Snapshot) throws -> Void)?
    /// Runs when a context fetches an object, outside any save; it only reads.
    public var awakeFromFetch: (@Sendable (Snapshot) -> Void)?

    /// Hooks for one entity, any of them nil; register them with ``Container/register(_:_:)``.
    ///
    /// A hook that throws a ``StoreError`` fails the save with that code, its message prefixed with
    /// the object and the hook's name; any other error fails it with `.validation`.
    public init(
        awakeFromInsert: (@Sendable (inout ObjectDraft) throws -> Void)? = nil,
        willSave: (@Sendable (inout ObjectDraft) throws -> Void)? = nil, rules: [ValidationRule] = [],
        didSave: (@Sendable (Snapshot) -> Void)? = nil,
        prepareForDeletion: (@Sendable (Snapshot) throws -> Void)? = nil,
        awakeFromFetch: (@Sendable (Snapshot) -> Void)? = nil
    ) {
        self.awakeFromInsert = awakeFromInsert
        self.willSave = willSave
        self.rules = rules
        self.didSave = didSave
        self.prepareForDeletion = prepareForDeletion
        self.awakeFromFetch = awakeFromFetch
    }

    /// Runs hook `name` of `entity`, turning what it throws into an error naming the object.
    static func run<T>(_ name: String, _ object: @autoclosure () -> String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as StoreError {
            // What the hook's error is about stays with it (a draft's derived attribute, say).
            throw StoreError(error.code, "\(object()): \(name): \(error.message)", details: error.details)
        } catch {
            let object = object()
            throw StoreError.validation(
                "\(object): \(name) failed: \(error)", object: object, property: nil, rule: .hook(name))
        }
    }

    /// Fails with `.validation` naming `object` and the first rule of `event` that `snapshot`
    /// breaks.
    func check(_ snapshot: Snapshot, _ event: ValidationRule.Event, object: String) throws {
        for rule in rules where rule.events.contains(event) && !rule.check(snapshot) {
            throw StoreError.validation(
                "\(object) breaks the rule '\(rule.name)'", object: object, property: nil, rule: .objectRule(rule.name))
        }
    }
}

/// One entity's hooks, shared by reference (a save looks them up per object: no copy of every
/// closure each time).
final class HookSet: Sendable {
    let awakeFromInsert: (@Sendable (inout ObjectDraft) throws -> Void)?
    let willSave: (@Sendable (inout ObjectDraft) throws -> Void)?
    let hooks: EntityHooks
    /// Whether inserts and updates need the object as stored (rules or didSave).
    let readsSaved: Bool

    init(_ hooks: EntityHooks) {
        self.hooks = hooks
        awakeFromInsert = hooks.awakeFromInsert
        willSave = hooks.willSave
        readsSaved = !hooks.rules.isEmpty || hooks.didSave != nil
    }
}

/// Hooks by entity index, as a save looks them up for every object it writes: a place in a
/// list, not a hashed key.
struct HookTable: Sendable {
    private var sets: [HookSet?] = []

    /// The hooks of entity `index` (nil: none, or no such entity).
    subscript(index: Int) -> HookSet? {
        get { sets.indices.contains(index) ? sets[index] : nil }
        set {
            guard index >= 0 else { return }
            while sets.count <= index { sets.append(nil) }
            sets[index] = newValue
        }
    }

    /// Each entity index with hooks, and its hooks.
    var registered: [(index: Int, set: HookSet)] {
        sets.indices.compactMap { i in sets[i].map { (i, $0) } }
    }
}

/// The hooks registered with a container, by entity index.
final class HookRegistry: Sendable {
    private let hooks = Protected<HookTable>(HookTable())
    private let any = Atomic<Bool>(false)

    var isEmpty: Bool { !any.load(ordering: .relaxed) }

    func set(_ index: Int, _ h: EntityHooks) {
        hooks.withLock { $0[index] = HookSet(h) }
        any.store(true, ordering: .relaxed)
    }

    /// Every registered hook, for one save (nil when none is).
    func all() -> HookTable? { isEmpty ? nil : hooks.withLock { $0 } }
}

extension Container {
    /// Registers the hooks of `entity` (replacing any earlier ones): from now on every save of
    /// this container runs them; other processes run their own.
    ///
    /// - Throws: `.unknownEntity`.
    public func register(_ entity: String, _ hooks: EntityHooks) throws {
        let e = try model.entity(entity)
        hookRegistry.set(model.index(of: e), hooks)
    }

    /// The `awakeFromFetch` of `entity`, if one is registered.
    func awakeFromFetch(_ entity: String) -> (@Sendable (Snapshot) -> Void)? {
        guard let all = hookRegistry.all(), let i = model.entityIndex[entity] else { return nil }
        return all[i]?.hooks.awakeFromFetch
    }

    /// Calls `awakeFromFetch` of each fetched object's entity. The entities with one are found
    /// once per fetch, and a fetch's objects (of one entity, mostly) look theirs up by comparing
    /// names with the last one's: nothing per object when no entity has the hook.
    func awake(_ snapshots: [Snapshot]) {
        guard let all = hookRegistry.all() else { return }
        var awakers: [String: @Sendable (Snapshot) -> Void] = [:]
        for (i, set) in all.registered where i < model.entities.count {
            if let awake = set.hooks.awakeFromFetch { awakers[model.entities[i].name] = awake }
        }
        guard !awakers.isEmpty else { return }
        var last: (entity: String, awake: (@Sendable (Snapshot) -> Void)?)?
        for i in snapshots.indices {
            let entity = snapshots[i].id.entity
            if last?.entity != entity { last = (entity, awakers[entity]) }
            last?.awake?(snapshots[i])
        }
    }
}
