import Foundation

/// String comparison operators of conditions, with Core Data's `[c]` and `[d]` options.
enum StringMatch {
    static let equal = 0, contains = 1, beginsWith = 2, endsWith = 3, like = 4
    static let caseInsensitive = 0x10, diacriticInsensitive = 0x20

    static func fold(_ s: String, code: Int) -> String {
        var options: String.CompareOptions = []
        if code & caseInsensitive != 0 { options.insert(.caseInsensitive) }
        if code & diacriticInsensitive != 0 { options.insert(.diacriticInsensitive) }
        guard !options.isEmpty else { return s }
        var folded = s.folding(options: options, locale: nil)
        // `folding` keeps case on some platforms; lowercasing makes it certain.
        if code & caseInsensitive != 0 { folded = folded.lowercased() }
        return folded
    }

    static func matches(_ text: String, _ pattern: String, code: Int) -> Bool {
        let a = fold(text, code: code)
        let b = fold(pattern, code: code)
        switch code & 0x0f {
        case equal: return a == b
        case contains: return b.isEmpty || a.contains(b)
        case beginsWith: return a.hasPrefix(b)
        case endsWith: return a.hasSuffix(b)
        case like: return wildcard(Array(a), Array(b))
        default: return false
        }
    }

    /// Core Data's LIKE: `*` matches any run, `?` one character.
    private static func wildcard(_ s: [Character], _ p: [Character]) -> Bool {
        var si = 0, pi = 0, star = -1, mark = 0
        while si < s.count {
            if pi < p.count, p[pi] == "?" || p[pi] == s[si] { si += 1; pi += 1 }
            else if pi < p.count, p[pi] == "*" { star = pi; mark = si; pi += 1 }
            else if star >= 0 { pi = star + 1; mark += 1; si = mark }
            else { return false }
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }
}
