import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Checks values against their attributes' rules (required, type, length, single line,
/// pattern, range): for every save, ``Container/validate(_:_:object:)``, `storectl verify` and the
/// mirror's check of what it uploads. One per container: it keeps the patterns it compiled.
final class Validator: Sendable {
    /// Compiled patterns by their text: a pattern is compiled once, not for every save.
    private let patterns = Protected<[String: Regex]>([:])

    /// The compiled form of `pattern` (nil: it does not compile; the model refuses such a model).
    func regex(_ pattern: String) -> Regex? {
        patterns.withLock { cache in
            if let r = cache[pattern] { return r }
            guard let r = Regex(pattern) else { return nil }
            cache[pattern] = r
            return r
        }
    }

    /// Checks a value against its attribute's rules; returns its stored form.
    ///
    /// - Throws: `.validation` naming the object, the attribute and the rule.
    func validate(_ value: Value, _ a: Attribute, object: @autoclosure () -> String) throws -> SQLValue {
        // Names are built only when a rule fails: this runs for every attribute of every save.
        var name: String { "\(object()).\(a.name)" }
        if value.isNull {
            guard a.isOptional else { throw StoreError(.validation, "\(name) is required") }
            return .null
        }
        let sql = try SQLMapping.sqlValue(value, a.type, name: name)
        switch value {
        case .string(let s):
            try validate(s, a, name: name)
        case .date(let d) where !d.timeIntervalSince1970.isFinite:
            throw StoreError(.validation, "\(name) is not a valid date")
        case .double(let d) where !d.isFinite:
            throw StoreError(.validation, "\(name) is not a finite number")
        case .integer, .double:
            let d = value.doubleValue ?? 0
            if let min = a.minValue, d < min {
                throw StoreError(.validation, "\(name) is \(value), at least \(min) required")
            }
            if let max = a.maxValue, d > max {
                throw StoreError(.validation, "\(name) is \(value), at most \(max) allowed")
            }
        default: break
        }
        return sql
    }

    /// The rules of a string attribute: length, single line, pattern.
    private func validate(_ s: String, _ a: Attribute, name: @autoclosure () -> String) throws {
        // Counting characters walks the whole string: only for a length rule.
        if a.minLength != nil || a.maxLength != nil {
            let n = s.count
            if let min = a.minLength, n < min {
                throw StoreError(.validation, "\(name()) is \(n) characters long, at least \(min) required")
            }
            if let max = a.maxLength, n > max {
                throw StoreError(.validation, "\(name()) is \(n) characters long, at most \(max) allowed")
            }
        }
        if a.isSingleLine, TextSafety.containsControl(s, allowingTab: true) {
            let shown = TextSafety.visible(s)
            throw StoreError(.validation, "\(name()) '\(shown)' holds a control character (a newline, an escape…)")
        }
        if let p = a.pattern {
            guard let re = regex(p), re.matches(s) else {
                throw StoreError(.validation, "\(name()) '\(TextSafety.visible(s))' does not match the pattern \(p)")
            }
        }
    }
}

/// A compiled validation pattern that matches a whole string. NSRegularExpression is immutable
/// once made and safe to share between threads, which Foundation on Linux does not declare.
struct Regex: @unchecked Sendable {
    private let expression: NSRegularExpression

    /// `pattern` anchored at both ends; nil when it does not compile.
    init?(_ pattern: String) {
        guard let e = try? NSRegularExpression(pattern: "^(?:\(pattern))$") else { return nil }
        expression = e
    }

    /// Whether the whole of `s` matches.
    func matches(_ s: String) -> Bool {
        expression.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) != nil
    }
}
