import Foundation
import SharedStoreSupport

/// The model's derived attributes (``Derivation``), arranged for the save path: what an insert
/// or update of an entity computes for itself, which counts and sums it feeds, and which copies
/// of its attributes live in other entities. Made once per container.
struct DerivationMap: Sendable {
    /// A derived attribute an object computes from itself (or the object it points at).
    enum Own: Sendable {
        case now(String)
        case canonical(String, from: String)
        case related(String, via: String, entity: Int, source: String)
        /// A count or sum: starts at zero; the objects it aggregates feed it.
        case zero(String, AttributeType)
    }

    /// A count or sum of entity `target` fed by an entity through its to-one `via`.
    struct Feed: Sendable {
        let target: Int
        /// The count's or sum's index among the target entity's attributes.
        let attribute: Int
        let via: String
        /// The summed attribute (nil: a count).
        let sum: String?
    }

    /// A copy (`related`) of an attribute of this entity, held by objects of `entity`
    /// through their to-one `via`.
    struct Dependent: Sendable {
        let entity: Int
        let attribute: String
        let via: String
    }

    let own: [[Own]]
    /// Where each of ``own`` goes in its entity's attributes, and where a `canonical` one's source
    /// is: an insert writes them by position, not by comparing names per row.
    let ownPlaces: [[(attribute: Int, source: Int?)]]
    let feeds: [[Feed]]
    /// By entity index, then by the attribute copied.
    let dependents: [[String: [Dependent]]]
    let isEmpty: Bool

    init(_ model: Model) {
        var own = Array(repeating: [Own](), count: model.entities.count)
        var feeds = Array(repeating: [Feed](), count: model.entities.count)
        var dependents = Array(repeating: [String: [Dependent]](), count: model.entities.count)
        for (i, e) in model.entities.enumerated() {
            for a in e.attributes {
                guard let d = a.derivation else { continue }
                switch d {
                case .now: own[i].append(.now(a.name))
                case .canonical(let source): own[i].append(.canonical(a.name, from: source))
                case .related(let via, let source):
                    guard let r = e.relationship(named: via), let target = model.entityIndex[r.destination] else {
                        continue
                    }
                    own[i].append(.related(a.name, via: via, entity: target, source: source))
                    dependents[target][source, default: []].append(Dependent(entity: i, attribute: a.name, via: via))
                case .count(let rel), .sum(let rel, of: _):
                    guard let r = e.relationship(named: rel), let x = model.entityIndex[r.destination] else { continue }
                    own[i].append(.zero(a.name, a.type))
                    var summed: String?
                    if case .sum(_, let source) = d { summed = source }
                    let position = e.attributes.firstIndex { $0.name == a.name } ?? 0
                    feeds[x].append(Feed(target: i, attribute: position, via: r.inverse, sum: summed))
                }
            }
        }
        self.own = own
        ownPlaces = zip(model.entities, own).map { e, own in
            own.map { o in
                switch o {
                case .now(let a), .related(let a, _, _, _), .zero(let a, _): (e.attributeIndex(a) ?? 0, nil)
                case .canonical(let a, let source): (e.attributeIndex(a) ?? 0, e.attributeIndex(source))
                }
            }
        }
        self.feeds = feeds
        self.dependents = dependents
        isEmpty = own.allSatisfy(\.isEmpty)
    }

    /// The `related` copies entity `index` makes through its to-one `via` (cleared with it).
    func copies(_ index: Int, via: String) -> [String] {
        own[index].compactMap { if case .related(let a, via, _, _) = $0 { return a } else { return nil } }
    }

    /// Lowercased, diacritics removed: the text a `canonical` attribute holds.
    static func canonical(_ s: String) -> String {
        // ASCII text has no diacritics: lowercasing it is all (and costs a fraction of folding).
        if s.utf8.allSatisfy({ $0 < 0x80 }) { return s.lowercased() }
        return s.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil).lowercased()
    }
}

/// The counts and sums one write transaction changes, by object, written once before it commits.
struct AggregateDeltas {
    /// An object's count or sum, by the attribute's index in its entity.
    struct Target: Hashable {
        let object: ObjectKey
        let attribute: Int
    }

    private(set) var deltas: [Target: Value] = [:]

    var isEmpty: Bool { deltas.isEmpty }

    /// Adds `amount` (an integer or a double; negative to take away) to `attribute` of `target`.
    mutating func add(_ target: ObjectKey, _ attribute: Int, _ amount: Value) {
        // One lookup: the delta is changed in place.
        let key = Target(object: target, attribute: attribute)
        Self.add(amount, to: &deltas[key, default: .integer(0)])
    }

    private static func add(_ amount: Value, to total: inout Value) {
        total = plus(total, amount)
    }

    /// The changes by object, in the order of their entities and keys (history lists them so:
    /// the same saves record the same transaction in every process, whatever a dictionary's
    /// order), each object's attributes in order.
    var byObject: [(key: ObjectKey, value: [(Int, Value)])] {
        var out: [ObjectKey: [(Int, Value)]] = [:]
        for (key, amount) in deltas { out[key.object, default: []].append((key.attribute, amount)) }
        return out.map { (key: $0.key, value: $0.value.sorted { $0.0 < $1.0 }) }
            .sorted { ($0.key.entity, $0.key.pk) < ($1.key.entity, $1.key.pk) }
    }

    /// An object of entity `index` that feeds counts or sums comes (`sign` 1) or goes (-1):
    /// `target` and `value` say where it points and what it holds.
    mutating func feed(
        _ map: DerivationMap, _ index: Int, sign: Int64, target: (String) -> Int64?, value: (String) -> Value
    ) {
        for f in map.feeds[index] {
            guard let t = target(f.via) else { continue }
            let amount = f.sum.map { value($0) } ?? .integer(1)
            add(ObjectKey(entity: f.target, pk: t), f.attribute, sign < 0 ? Self.negated(amount) : amount)
        }
    }

    static func plus(_ a: Value, _ b: Value) -> Value {
        switch (a, b) {
        case (.integer(let x), .integer(let y)): return .integer(x &+ y)
        case (.null, let y): return y
        case (let x, .null): return x
        default: return .double((a.doubleValue ?? 0) + (b.doubleValue ?? 0))
        }
    }

    static func negated(_ v: Value) -> Value {
        switch v {
        case .integer(let i): return .integer(-i)
        case .double(let d): return .double(-d)
        default: return .integer(0)
        }
    }
}
