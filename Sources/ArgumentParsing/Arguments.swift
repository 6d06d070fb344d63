// The one argument parser of every executable: the targets and storectl (through StoreCLI),
// sharedstore-helper and storebench. Hand-written: no package outside the toolchain.
import Foundation

/// A usage error: exit status 2, one line naming the offending argument.
public struct UsageError: Error, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// One flag a command accepts.
public struct Option: Sendable {
    public let name: String
    public let valueName: String?
    public let help: String
    /// Shown without brackets in usage lines; the command checks it (``Arguments/required(_:)``).
    public var isRequired = false

    /// A flag with a value: `--name VALUE` or `--name=VALUE`.
    public static func value(_ name: String, _ valueName: String, _ help: String, required: Bool = false) -> Option {
        Option(name: name, valueName: valueName, help: help, isRequired: required)
    }

    /// A flag without a value.
    public static func flag(_ name: String, _ help: String) -> Option {
        Option(name: name, valueName: nil, help: help)
    }

    /// `--name VALUE` as help shows it.
    public var display: String { "--\(name)\(valueName.map { " \($0)" } ?? "")" }
}

/// A command of a tool: its flags and positional arguments, and its help text.
public struct Command: Sendable {
    public let name: String
    public let summary: String
    public let positionals: [String]
    public let options: [Option]
    /// Flags every command of the tool takes that this one does not (`storectl top` reads only:
    /// no `--durable`, no `--model-version`): refused, and left out of its help and completion.
    public let notTaking: Set<String>

    public init(
        _ name: String, _ summary: String, positionals: [String] = [], options: [Option] = [],
        notTaking: Set<String> = []
    ) {
        self.name = name
        self.summary = summary
        self.positionals = positionals
        self.options = options
        self.notTaking = notTaking
    }

    /// The flags every command takes that this one takes too.
    public func common(_ all: [Option]) -> [Option] { all.filter { !notTaking.contains($0.name) } }

    public var usageLine: String {
        var parts = [name]
        parts += positionals
        parts += options.map { o in
            let flag = "--\(o.name)\(o.valueName.map { " \($0)" } ?? "")"
            return o.isRequired ? flag : "[\(flag)]"
        }
        return parts.filter { !$0.isEmpty }.joined(separator: " ")
    }
}

/// The parsed arguments of one command.
public struct Arguments {
    public let command: Command
    private(set) var values: [String: String] = [:]
    private(set) var flags: Set<String> = []
    public private(set) var positionals: [String] = []

    /// Parses `arguments` (after the command name) against `command` and the flags every
    /// command of the tool takes (`common`).
    ///
    /// - Throws: ``UsageError`` for an unknown flag, a flag given twice, a missing value or a
    ///   wrong number of positional arguments.
    public init(_ arguments: [String], command: Command, tool: String, common: [Option] = []) throws {
        self.command = command
        let known = Dictionary(
            (command.options + command.common(common)).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        let label = command.name.isEmpty ? tool : "\(tool) \(command.name)"
        var i = 0
        var onlyPositionals = false
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            if onlyPositionals || !arg.hasPrefix("--") || arg == "-" {
                if arg.hasPrefix("-"), arg.count > 1, !onlyPositionals {
                    throw UsageError("unknown flag '\(arg)' for '\(label)' (flags start with --)")
                }
                positionals.append(arg)
                continue
            }
            if arg == "--" {
                onlyPositionals = true
                continue
            }
            var name = String(arg.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            guard let option = known[name] else {
                if command.notTaking.contains(name) {
                    throw UsageError("'\(label)' does not take --\(name); see '\(label) --help'")
                }
                throw UsageError("unknown flag '--\(name)' for '\(label)'; see '\(label) --help'")
            }
            guard !flags.contains(name), values[name] == nil else {
                throw UsageError("flag '--\(name)' is given twice for '\(label)'")
            }
            if option.valueName == nil {
                guard inline == nil else { throw UsageError("flag '--\(name)' takes no value") }
                flags.insert(name)
            } else if let inline {
                values[name] = inline
            } else {
                // The next word is this flag's value, unless it is another flag: `--url --title t`
                // lacks a URL (a value that starts with "--" is given as `--url=--value`).
                guard i < arguments.count, !Self.isFlag(arguments[i], known: known) else {
                    throw UsageError("flag '--\(name)' needs a value (\(option.valueName ?? "VALUE"))")
                }
                values[name] = arguments[i]
                i += 1
            }
        }
        if flags.contains("help") { return }
        if positionals.count != command.positionals.count {
            if positionals.count < command.positionals.count {
                throw UsageError("'\(label)' needs \(command.positionals[positionals.count])")
            }
            throw UsageError("unexpected argument '\(positionals[command.positionals.count])' for '\(label)'")
        }
    }

    /// True when `word` is a flag this command knows (`--name` or `--name=value`), or `--`.
    static func isFlag(_ word: String, known: [String: Option]) -> Bool {
        guard word.hasPrefix("--") else { return false }
        if word == "--" { return true }
        let name = word.dropFirst(2).split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
        return known[name] != nil
    }

    public func has(_ flag: String) -> Bool { flags.contains(flag) }

    public func value(_ name: String) -> String? { values[name] }

    public func required(_ name: String) throws -> String {
        guard let v = values[name] else { throw UsageError("'\(command.name)' needs --\(name)") }
        return v
    }

    /// An integer flag within `range`.
    public func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = values[name] else { return nil }
        guard let v = Int(text), range.contains(v) else {
            throw UsageError(
                "--\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
        }
        return v
    }

    /// A number of seconds within `range`.
    public func seconds(_ name: String, in range: ClosedRange<Double>) throws -> Double? {
        guard let text = values[name] else { return nil }
        // Decimal only: Double("0x10") is 16, and "1e3" or "inf" are no way to write seconds.
        let decimal = !text.isEmpty && text.allSatisfy { $0.isASCII && ($0.isNumber || $0 == ".") }
        guard decimal, let v = Double(text), v.isFinite, range.contains(v) else {
            throw UsageError(
                "--\(name) must be a number of seconds from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
        }
        return v
    }
}
