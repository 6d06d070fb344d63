import Foundation
import SharedStoreSQLite
import SharedStoreSupport

/// Checks values against their attributes' rules (required, type, length, single line,
/// pattern, range): for every save, ``Container/validate(_:_:object:)``, `storectl verify` and the
/// mirror's check of what it uploads. One per container: it keeps the patterns it compiled.
final class Validator: Sendable {
    /// The patterns of the container's model, compiled when it opens: read without a lock. A
    /// list, searched in order: a model has few patterns, and the attribute's text is the very
    /// string kept here (compared by its storage at once), where a table would hash the whole
    /// pattern for every value checked.
    private let compiled: [(pattern: String, regex: Regex?)]
    /// Other patterns by their text (another model's, a migration's): compiled once, not for
    /// every save.
    private let patterns = Protected<[String: Regex]>([:])
    /// The attributes of each entity of the model, by the entity's index, each with its pattern
    /// compiled: what a save checks row by row (``rules(_:)``).
    private let entityRules: [[CheckedAttribute]]

    /// A validator with the patterns of `model` compiled.
    init(model: Model? = nil) {
        var compiled: [(pattern: String, regex: Regex?)] = []
        for e in model?.entities ?? [] {
            for a in e.attributes {
                if let p = a.pattern, !compiled.contains(where: { $0.pattern == p }) { compiled.append((p, Regex(p))) }
            }
        }
        self.compiled = compiled
        entityRules = (model?.entities ?? []).map { e in
            e.attributes.map { a in
                CheckedAttribute(a, pattern: a.pattern.map { p in compiled.first { $0.pattern == p }?.regex })
            }
        }
    }

    /// The attributes of entity `index` of the validator's model, in their order, with their
    /// patterns compiled.
    func rules(_ index: Int) -> [CheckedAttribute] { entityRules[index] }

    /// The compiled form of `pattern` (nil: it does not compile; the model refuses such a model).
    func regex(_ pattern: String) -> Regex? {
        for c in compiled where c.pattern == pattern { return c.regex }
        return patterns.withLock { cache in
            if let r = cache[pattern] { return r }
            guard let r = Regex(pattern) else { return nil }
            cache[pattern] = r
            return r
        }
    }

    /// Checks a value against its attribute's rules; returns its stored form.
    ///
    /// - Throws: `.validation` naming the object, the attribute and the rule, with them as its
    ///   ``StoreError/validation``.
    func validate(_ value: Value, _ a: Attribute, object: @autoclosure () -> String) throws -> SQLValue {
        try validate(value, a, pattern: a.pattern.map { regex($0) }, object: object())
    }

    /// ``validate(_:_:object:)`` with the attribute's pattern compiled already: a row written
    /// through ``rules(_:)`` neither copies its attributes nor looks for their patterns.
    func validate(_ value: Value, _ rules: CheckedAttribute, object: @autoclosure () -> String) throws -> SQLValue {
        try validate(value, rules.attribute, pattern: rules.pattern, object: object())
    }

    /// `pattern`: nil when the attribute has none; .some(nil) when it does not compile.
    private func validate(
        _ value: Value, _ a: Attribute, pattern: Regex??, object: @autoclosure () -> String
    ) throws -> SQLValue {
        // Names are built only when a rule fails: this runs for every attribute of every save.
        func fail(_ what: String, _ rule: ValidationFailure.Rule) -> StoreError {
            let object = object()
            return .validation("\(object).\(a.name) \(what)", object: object, property: a.name, rule: rule)
        }
        if value.isNull {
            guard a.isOptional else { throw fail("is required", .required) }
            return .null
        }
        let sql = try SQLMapping.sqlValue(value, a.type, object: object(), property: a.name)
        switch value {
        case .string(let s):
            if let (what, rule) = textProblem(s, a, pattern) { throw fail(what, rule) }
        case .date(let d) where !d.timeIntervalSince1970.isFinite:
            throw fail("is not a valid date", .validDate)
        case .double(let d) where !d.isFinite:
            throw fail("is not a finite number", .finiteNumber)
        case .integer, .double:
            let d = value.doubleValue ?? 0
            if let min = a.minValue, d < min { throw fail("is \(value), at least \(min) required", .minValue(min)) }
            if let max = a.maxValue, d > max { throw fail("is \(value), at most \(max) allowed", .maxValue(max)) }
        default: break
        }
        return sql
    }

    /// The first rule of a string attribute (length, single line, pattern) that `s` breaks, with
    /// what the message says of it after the attribute's name; nil when it breaks none.
    private func textProblem(_ s: String, _ a: Attribute, _ pattern: Regex??) -> (String, ValidationFailure.Rule)? {
        // Counting characters walks the whole string: only for a length rule, and only when the
        // bytes cannot settle it (a string has at most as many characters as UTF-8 bytes, and a
        // non-empty one at least one).
        let bytes = s.utf8.count
        let settled = (a.maxLength.map { bytes <= $0 } ?? true) && (a.minLength.map { $0 <= min(bytes, 1) } ?? true)
        if !settled {
            let n = s.count
            if let min = a.minLength, n < min {
                return ("is \(n) characters long, at least \(min) required", .minLength(min))
            }
            if let max = a.maxLength, n > max {
                return ("is \(n) characters long, at most \(max) allowed", .maxLength(max))
            }
        }
        if a.isSingleLine, TextSafety.containsControl(s, allowingTab: true) {
            return ("'\(TextSafety.visible(s))' holds a control character (a newline, an escape…)", .singleLine)
        }
        if let p = a.pattern, let compiled = pattern {
            guard let re = compiled, re.matches(s) else {
                return ("'\(TextSafety.visible(s))' does not match the pattern \(p)", .pattern(p))
            }
        }
        return nil
    }
}

/// An attribute with its pattern compiled, as a save checks it (``Validator/rules(_:)``): one
/// reference, where a copy of an ``Attribute`` retains each of its strings.
final class CheckedAttribute: Sendable {
    let attribute: Attribute
    /// The compiled pattern: nil when the attribute has none, .some(nil) when it does not compile.
    let pattern: Regex??

    init(_ attribute: Attribute, pattern: Regex??) {
        self.attribute = attribute
        self.pattern = pattern
    }
}

/// A compiled validation pattern that matches a whole string: as a ``PatternProgram`` when the
/// pattern is in the part of ICU's syntax it runs (a pass over the scalars, several times faster
/// than ICU through Foundation), else by ICU. NSRegularExpression is immutable once made and safe
/// to share between threads, which Foundation on Linux does not declare. A class: a check that
/// holds one retains it, where a copy of a struct of it retained each of its tables.
final class Regex: @unchecked Sendable {
    private let expression: NSRegularExpression
    private let program: PatternProgram?

    /// `pattern` anchored at both ends; nil when ICU does not compile it (whether or not a
    /// program could run it: ICU decides what a valid pattern is).
    init?(_ pattern: String) {
        guard let e = try? NSRegularExpression(pattern: "^(?:\(pattern))\\z") else { return nil }
        expression = e
        program = PatternProgram(pattern)
    }

    /// Whether the whole of `s` matches.
    func matches(_ s: String) -> Bool {
        if let matched = program?.matches(s) { return matched }
        return expression.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) != nil
    }

    /// Whether the whole of `s` matches, by ICU (the reference ``PatternProgram`` is tested against).
    func matchesByICU(_ s: String) -> Bool {
        expression.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) != nil
    }

    /// Whether the pattern runs as a ``PatternProgram``.
    var isCompiled: Bool { program != nil }
}
