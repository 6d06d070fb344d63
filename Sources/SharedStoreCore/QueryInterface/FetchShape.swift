import Foundation

/// What the SQL of a fetch request depends on: the request without its values, and the few facts
/// of its values that change the SQL (a nil compared, how many values `IN` has, a prefix that is
/// empty or has no end, a text that is not a URL). Requests of one shape share their SQL and
/// bind their own values: a date range asked at another date compiles nothing.
struct FetchShape: Hashable {
    let request: FetchRequest
    /// Whether the SQL leaves the order to SQLite (``TransactionSQL/sortsByKeyItself(_:)``).
    var unordered = false

    static func == (a: FetchShape, b: FetchShape) -> Bool {
        a.request.entity == b.request.entity && a.request.sort == b.request.sort && a.windowed == b.windowed
            && a.unordered == b.unordered && a.request.condition.hasShape(of: b.request.condition)
    }

    func hash(into h: inout Hasher) {
        h.combine(request.entity)
        h.combine(request.sort)
        h.combine(windowed)
        h.combine(unordered)
        request.condition.hashShape(into: &h)
    }

    /// Whether the SQL has a LIMIT and OFFSET (their values are bound).
    private var windowed: Bool { request.limit != nil || request.offset != 0 }
}

extension Condition {
    /// Whether `other` compiles to the same SQL: the same tree, paths and operators, and the same
    /// facts of the values the SQL depends on.
    func hasShape(of other: Condition) -> Bool {
        switch (node, other.node) {
        case (.always, .always):
            return true
        case (.compare(let p, let o, let v), .compare(let q, let r, let w)):
            return p == q && o == r && v.isNull == w.isNull
        case (.among(let p, let v), .among(let q, let w)):
            return p == q && v.count == w.count
        case (.between(let p, _, _), .between(let q, _, _)):
            return p == q
        case (.text(let p, let o, let v, let x), .text(let q, let r, let w, let y)):
            return p == q && o == r && x == y && Self.textFact(o, v, x) == Self.textFact(r, w, y)
        case (.related(let p, let a), .related(let q, let b)):
            return p == q && (a == nil) == (b == nil)
        case (.and(let a), .and(let b)), (.or(let a), .or(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.hasShape(of: $1) }
        case (.not(let a), .not(let b)):
            return a.hasShape(of: b)
        case (.quantified(let p, let k, let a), .quantified(let q, let l, let b)):
            return p == q && k == l && a.hasShape(of: b)
        case (.count(let p, let o, _), .count(let q, let r, _)):
            return p == q && o == r
        default:
            return false
        }
    }

    /// Hashes what ``hasShape(of:)`` compares.
    func hashShape(into h: inout Hasher) {
        switch node {
        case .always: h.combine(0)
        case .compare(let p, let o, let v): h.combine(1, p, o, v.isNull)
        case .among(let p, let v): h.combine(2, p, v.count)
        case .between(let p, _, _): h.combine(3, p)
        case .text(let p, let o, let v, let x):
            h.combine(4, p, o, x.rawValue)
            h.combine(Self.textFact(o, v, x))
        case .related(let p, let id): h.combine(5, p, id == nil)
        case .and(let cs), .or(let cs):
            h.combine(node.isAnd ? 6 : 7, cs.count)
            for c in cs { c.hashShape(into: &h) }
        case .not(let c):
            h.combine(8)
            c.hashShape(into: &h)
        case .quantified(let p, let q, let c):
            h.combine(9, p, q)
            c.hashShape(into: &h)
        case .count(let p, let o, _): h.combine(10, p, o)
        }
    }

    /// The fact of a text operator's pattern its SQL depends on: with no option, `==` is an
    /// equality whose SQL differs for a text that is no URL (on a URL attribute), and
    /// `BEGINSWITH` a range whose SQL differs for an empty prefix and one with no end.
    private static func textFact(_ op: TextOperator, _ pattern: Value, _ options: TextOptions) -> Int {
        guard options.isEmpty else { return 0 }
        let text = pattern.stringValue ?? ""
        switch op {
        case .equal:
            return (try? SQLMapping.sqlValue(.string(text), .url, object: nil, property: "")) == nil ? 1 : 2
        case .beginsWith:
            if text.isEmpty { return 3 }
            return text.unicodeScalars.allSatisfy { $0.value == 0x10FFFF } ? 4 : 5
        default:
            return 0
        }
    }
}

extension Condition.Node {
    /// Whether this is an AND (for hashing, against an OR of the same parts).
    fileprivate var isAnd: Bool {
        if case .and = self { return true }
        return false
    }
}

extension Hasher {
    /// Combines each of `values`.
    fileprivate mutating func combine<A: Hashable, B: Hashable>(_ a: A, _ b: B) {
        combine(a)
        combine(b)
    }

    fileprivate mutating func combine<A: Hashable, B: Hashable, C: Hashable>(_ a: A, _ b: B, _ c: C) {
        combine(a)
        combine(b)
        combine(c)
    }

    fileprivate mutating func combine<A: Hashable, B: Hashable, C: Hashable, D: Hashable>(
        _ a: A, _ b: B, _ c: C, _ d: D
    ) {
        combine(a)
        combine(b)
        combine(c)
        combine(d)
    }
}
