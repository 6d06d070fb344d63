import Foundation

/// A string comparison of a condition: an operator with Core Data's `[c]` and `[d]` options.
///
/// It crosses into SQL as one integer argument of the `ss_strop` function (``code``), and comes
/// back from it through ``init(code:)``; both directions switch over every operator.
struct StringMatch: Hashable {
    let op: Condition.TextOperator
    let options: Condition.TextOptions

    init(_ op: Condition.TextOperator, _ options: Condition.TextOptions) {
        self.op = op
        self.options = options
    }

    /// The operator in the low four bits, the options above them.
    var code: Int64 {
        let operatorCode: Int64
        switch op {
        case .equal: operatorCode = 0
        case .contains: operatorCode = 1
        case .beginsWith: operatorCode = 2
        case .endsWith: operatorCode = 3
        case .like: operatorCode = 4
        }
        return operatorCode | Int64(options.rawValue) << 4
    }

    init?(code: Int64) {
        let op: Condition.TextOperator
        switch code & 0x0f {
        case 0: op = .equal
        case 1: op = .contains
        case 2: op = .beginsWith
        case 3: op = .endsWith
        case 4: op = .like
        default: return nil
        }
        let options = Condition.TextOptions(rawValue: Int(code >> 4))
        guard Condition.TextOptions.all.isSuperset(of: options) else { return nil }
        self.init(op, options)
    }

    private func fold(_ s: String) -> String {
        var compare: String.CompareOptions = []
        if options.contains(.caseInsensitive) { compare.insert(.caseInsensitive) }
        if options.contains(.diacriticInsensitive) { compare.insert(.diacriticInsensitive) }
        guard !compare.isEmpty else { return s }
        var folded = s.folding(options: compare, locale: nil)
        // `folding` keeps case on some platforms; lowercasing makes it certain.
        if options.contains(.caseInsensitive) { folded = folded.lowercased() }
        return folded
    }

    /// Whether `text` matches `pattern`. Without options the two are compared as stored, scalar
    /// by scalar (as SQLite compares text, and as `==` on an attribute does): `"e\u{301}"` does
    /// not begin with `"é"`. With `[c]` or `[d]` both are folded and compared as Swift compares
    /// strings (canonically equivalent forms are equal).
    func matches(_ text: String, _ pattern: String) -> Bool {
        if options.isEmpty { return Self.matchesScalars(op, Array(text.unicodeScalars), Array(pattern.unicodeScalars)) }
        let a = fold(text)
        let b = fold(pattern)
        switch op {
        case .equal: return a == b
        case .contains: return b.isEmpty || a.contains(b)
        case .beginsWith: return a.hasPrefix(b)
        case .endsWith: return a.hasSuffix(b)
        case .like: return Self.wildcard(Array(a), Array(b))
        }
    }

    /// ``matches(_:_:)`` without options: scalar by scalar.
    private static func matchesScalars(_ op: Condition.TextOperator, _ a: [Unicode.Scalar], _ b: [Unicode.Scalar])
        -> Bool
    {
        switch op {
        case .equal: return a == b
        case .contains:
            guard b.count <= a.count else { return false }
            return b.isEmpty || (0...(a.count - b.count)).contains { a[$0..<($0 + b.count)].elementsEqual(b) }
        case .beginsWith: return a.starts(with: b)
        case .endsWith: return b.count <= a.count && a.suffix(b.count).elementsEqual(b)
        case .like: return wildcard(a, b, star: "*", one: "?")
        }
    }

    /// Core Data's LIKE: `*` matches any run, `?` one character.
    private static func wildcard(_ s: [Character], _ p: [Character]) -> Bool { wildcard(s, p, star: "*", one: "?") }

    /// LIKE over any elements: `star` matches any run, `one` a single element.
    private static func wildcard<E: Equatable>(_ s: [E], _ p: [E], star: E, one: E) -> Bool {
        var si = 0
        var pi = 0
        var starAt = -1
        var mark = 0
        while si < s.count {
            // A star first: one matched as a literal against a `*` in the text left no place
            // to come back to ("a*b" LIKE "a*" was false).
            if pi < p.count, p[pi] == star {
                starAt = pi
                mark = si
                pi += 1
            } else if pi < p.count, p[pi] == one || p[pi] == s[si] {
                si += 1
                pi += 1
            } else if starAt >= 0 {
                pi = starAt + 1
                mark += 1
                si = mark
            } else {
                return false
            }
        }
        while pi < p.count, p[pi] == star { pi += 1 }
        return pi == p.count
    }
}
