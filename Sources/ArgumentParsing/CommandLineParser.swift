import Foundation

/// The commands of one executable and the flags all of them take: picks the command from the
/// first word (a tool with one command named "" takes none), parses the rest, writes help.
public struct CommandLineParser: Sendable {
    public let tool: String
    public let summary: String
    public let commands: [Command]
    /// Flags every command takes.
    public let common: [Option]

    public init(tool: String, summary: String, commands: [Command], common: [Option] = []) {
        self.tool = tool
        self.summary = summary
        self.commands = commands
        self.common = common
    }

    /// What the words ask for.
    public enum Parsed {
        /// Help, for one command or the tool.
        case help(Command?)
        case run(Arguments)
    }

    /// Parses the words after the executable's name.
    ///
    /// - Parameter interactive: standard input is a terminal (no command at all then shows help).
    /// - Throws: ``UsageError`` naming the offending word.
    public func parse(_ words: [String], interactive: Bool = false) throws -> Parsed {
        var rest = words
        let command: Command
        if let single = commands.first, commands.count == 1, single.name.isEmpty {
            command = single
        } else {
            // Flags every command takes may come first (`storectl --group DIR stats`), as git's do.
            let leading = leadingCommonFlags(rest)
            rest.removeFirst(leading.count)
            guard let word = rest.first, !word.hasPrefix("-") else {
                if rest.first == "--help" || words.isEmpty && interactive {
                    return try helpBeforeCommand(leading: leading, tail: Array(rest.dropFirst()))
                }
                throw beforeCommand(leading: leading, next: rest.first)
            }
            guard let found = commands.first(where: { $0.name == word }) else {
                throw UsageError(
                    "unknown command '\(word)' for '\(tool)'; commands: \(commands.map(\.name).joined(separator: ", "))"
                )
            }
            command = found
            rest = leading + rest.dropFirst()
        }
        let arguments = try Arguments(rest, command: command, tool: tool, common: common)
        return arguments.has("help") ? .help(command) : .run(arguments)
    }

    /// `--help` before the command: help with the command named after it (past the flags every
    /// command takes), once every other word parses for it; a word that is no command, or a flag
    /// that does not parse, is the usage error naming it.
    private func helpBeforeCommand(leading: [String], tail: [String]) throws -> Parsed {
        let skipped = leadingCommonFlags(tail)
        let after = tail.dropFirst(skipped.count)
        guard let named = after.first else {
            // The flags alone must parse (as flags every command takes).
            _ = try Arguments(leading + ["--help"] + skipped, command: Command("", ""), tool: tool, common: common)
            return .help(nil)
        }
        if named.hasPrefix("-") { throw beforeCommand(leading: leading + skipped, next: named) }
        guard let command = commands.first(where: { $0.name == named }) else {
            throw UsageError(
                "unknown command '\(named)' for '\(tool)'; commands: " + commands.map(\.name).joined(separator: ", "))
        }
        _ = try Arguments(
            leading + ["--help"] + skipped + after.dropFirst(), command: command, tool: tool, common: common)
        return .help(command)
    }

    /// The usage error of words that do not reach a command: a flag that is not one every command
    /// takes (or is only some command's), a common flag without its value, or no command at all.
    private func beforeCommand(leading: [String], next: String?) -> UsageError {
        let names = commands.map(\.name).joined(separator: ", ")
        if let next {
            let name = next.dropFirst(2).split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            if !next.hasPrefix("--") || next == "--" {
                return UsageError("unexpected '\(next)' before the command (flags start with --; commands: \(names))")
            }
            if let owner = commands.first(where: { c in c.options.contains { $0.name == name } }) {
                return UsageError("flag '--\(name)' goes after the command: '\(tool) \(owner.name) --\(name) …'")
            }
            return UsageError("unknown flag '--\(name)' for '\(tool)'; see '\(tool) --help'")
        }
        if let last = leading.last, let option = common.first(where: { "--" + $0.name == last }),
            let valueName = option.valueName
        {
            return UsageError("flag '\(last)' needs a value (\(valueName))")
        }
        if leading.count >= 2, commands.contains(where: { $0.name == leading.last }),
            let option = common.first(where: { "--" + $0.name == leading[leading.count - 2] }), option.valueName != nil
        {
            return UsageError(
                "'\(tool)' needs a command: '\(leading[leading.count - 1])' was taken as the value of "
                    + "\(leading[leading.count - 2])")
        }
        return UsageError("'\(tool)' needs a command: \(names); see '\(tool) --help'")
    }

    /// The words before the command that are flags every command takes, with their values
    /// (`--group DIR`, `--group=DIR`, `--json`); `--help` is left for the command word's check.
    func leadingCommonFlags(_ words: [String]) -> [String] {
        var i = 0
        while i < words.count, words[i].hasPrefix("--"), words[i] != "--", words[i] != "--help" {
            let name = words[i].dropFirst(2).split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
            guard let option = common.first(where: { $0.name == name }) else { break }
            i += 1
            // A value in the next word, unless given inline; a missing one is the command's error.
            if option.valueName != nil, !words[i - 1].contains("="), i < words.count, !words[i].hasPrefix("--") {
                i += 1
            }
        }
        return Array(words.prefix(i))
    }

    /// The position (1-based) of the first argument of this process that is not valid UTF-8
    /// (`CommandLine.arguments` would have replaced its bytes with U+FFFD).
    public static func invalidUTF8Argument() -> Int? {
        for i in 1..<Int(CommandLine.argc) {
            guard let p = CommandLine.unsafeArgv[i] else { continue }
            if String(validatingCString: p) == nil { return i }
        }
        return nil
    }

    /// Usage for one command (its flags, then the common ones), or for the tool.
    public func help(_ command: Command?) -> String {
        var text = ""
        if let command {
            let commonUsage = command.common(common).filter { $0.name != "help" }.map { "[\($0.display)]" }.joined(
                separator: " ")
            text += "usage: \(tool) \(command.usageLine) \(commonUsage)\n\n\(command.summary)\n\n"
            for o in command.options + command.common(common) {
                text += "  \(o.display.padding(toLength: 26, withPad: " ", startingAt: 0)) \(o.help)\n"
            }
        } else {
            text += "\(tool): \(summary)\n\nusage: \(tool) [common flags] COMMAND [flags]\n\ncommands:\n"
            for c in commands { text += "  \(c.usageLine)\n      \(c.summary)\n" }
            text +=
                "\ncommon flags: \(common.map(\.display).joined(separator: ", ")) ('\(tool) COMMAND --help' "
                + "for one command)\n"
        }
        return text
    }
}
