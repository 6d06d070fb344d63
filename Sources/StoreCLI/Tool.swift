import Foundation
import ReadLater
import SharedStore

/// An executable: its commands and what runs them. Each target's `main.swift` is one call to
/// ``run(_:)``.
public struct Tool: Sendable {
    public let name: String
    public let summary: String
    /// The commands; a tool with one command named "" takes no command word (history-cleaner).
    public let commands: [Command]
    /// The consumer name of a target in the token registry (nil: never a consumer).
    public let consumer: String?
    /// A target with no view (share-extension): it has nothing to merge, so after each command
    /// its token moves to the store's current one instead of holding history back.
    public let hasNoView: Bool
    let handler: @Sendable (Invocation) throws -> Void

    public init(name: String, summary: String, consumer: String? = nil, hasNoView: Bool = false, commands: [Command],
                handler: @escaping @Sendable (Invocation) throws -> Void) {
        self.name = name
        self.summary = summary
        self.consumer = consumer
        self.hasNoView = hasNoView
        self.commands = commands
        self.handler = handler
    }

    /// Parses `argv`, runs the command and returns the exit status: 0 success, 1 the operation
    /// failed (one `error:` line on stderr), 2 a usage error naming the argument.
    public func run(_ argv: [String]) -> Int32 {
        var rest = Array(argv.dropFirst())
        let command: Command
        if let single = commands.first, commands.count == 1, single.name.isEmpty {
            command = single
        } else {
            guard let word = rest.first, !word.hasPrefix("-") else {
                if rest.contains("--help") || rest.isEmpty && isatty(0) == 1 {
                    FileHandle.standardOutput.write(Data(help(nil).utf8))
                    return rest.contains("--help") ? 0 : 2
                }
                return usage("'\(name)' needs a command: \(commands.map(\.name).joined(separator: ", ")); see '\(name) --help'")
            }
            guard let found = commands.first(where: { $0.name == word }) else {
                return usage("unknown command '\(word)' for '\(name)'; commands: \(commands.map(\.name).joined(separator: ", "))")
            }
            command = found
            rest.removeFirst()
        }
        do {
            let args = try Arguments(rest, command: command, tool: name)
            if args.has("help") {
                FileHandle.standardOutput.write(Data(help(command).utf8))
                return 0
            }
            let invocation = Invocation(tool: name, arguments: args)
            try handler(invocation)
            if let consumer {
                // A target registers itself the first time it runs (reads also sync, in the handler).
                let registry = try invocation.registry()
                if hasNoView {
                    let entry = try registry.consumer(consumer)
                    let current = try invocation.container().currentToken()
                    if entry?.isEvicted == true { try registry.reset(consumer, to: current) } else { try registry.advance(consumer, to: current) }
                } else {
                    try registry.register(consumer)
                }
            }
            return 0
        } catch let e as UsageError {
            return usage(e.message)
        } catch let e as StoreError where e.code == .malformedID || e.code == .malformedToken {
            return usage(e.message)
        } catch let e as StoreError {
            return failure(e.message)
        } catch {
            return failure("\(error)")
        }
    }

    private func usage(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("error: \(message)\n".utf8))
        return 2
    }

    private func failure(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("error: \(message.replacingOccurrences(of: "\n", with: " "))\n".utf8))
        return 1
    }

    func help(_ command: Command?) -> String {
        var text = ""
        if let command {
            text += "usage: \(name) \(command.usageLine) [--group DIR] [--json]\n\n\(command.summary)\n\n"
            for o in command.options + commonOptions {
                let flag = "--\(o.name)\(o.valueName.map { " \($0)" } ?? "")"
                text += "  \(flag.padding(toLength: 26, withPad: " ", startingAt: 0)) \(o.help)\n"
            }
        } else {
            text += "\(name): \(summary)\n\nusage: \(name) COMMAND [flags]\n\ncommands:\n"
            for c in commands { text += "  \(c.usageLine)\n      \(c.summary)\n" }
            text += "\ncommon flags: --group DIR, --json, --help ('\(name) COMMAND --help' for one command)\n"
        }
        return text
    }
}

/// One run of a command: its arguments, its output, and the store it works on (opened lazily).
public final class Invocation {
    public let tool: String
    public let arguments: Arguments
    public let output: Output
    public let group: String
    private var openedContainer: Container?
    private var openedRegistry: TokenRegistry?

    init(tool: String, arguments: Arguments) {
        self.tool = tool
        self.arguments = arguments
        self.output = Output(json: arguments.has("json"))
        self.group = arguments.value("group") ?? Self.defaultGroup()
    }

    /// `$SHAREDSTORE_GROUP`, else `$XDG_DATA_HOME/sharedstore/default`, else
    /// `~/.local/share/sharedstore/default`.
    static func defaultGroup() -> String {
        let env = ProcessInfo.processInfo.environment
        if let g = env["SHAREDSTORE_GROUP"], !g.isEmpty { return g }
        if let xdg = env["XDG_DATA_HOME"], !xdg.isEmpty { return xdg + "/sharedstore/default" }
        return NSHomeDirectory() + "/.local/share/sharedstore/default"
    }

    public var command: String { arguments.command.name }

    public func container() throws -> Container {
        if let c = openedContainer { return c }
        guard !group.isEmpty else { throw UsageError("--group needs a directory") }
        let c = try Container(group: group, model: ReadLater.model)
        openedContainer = c
        return c
    }

    public func registry() throws -> TokenRegistry {
        if let r = openedRegistry { return r }
        let r = try TokenRegistry(group: group)
        openedRegistry = r
        return r
    }

    /// A context writing as `author`, resolving conflicts with store trump (the playbook's choice).
    public func context(author: String) throws -> ObjectContext {
        let context = try container().newContext(name: "\(tool).\(command)", author: author)
        context.mergePolicy = .storeTrump
        return context
    }

    /// The target's view, registered as consumer `name` and synced.
    public func syncedView(consumer name: String, _ each: (HistoryTransaction) throws -> Void = { _ in }) throws -> (ViewContext, SyncResult) {
        let view = try ViewContext(container: container(), registry: registry(), consumer: name)
        let result = try view.sync(each)
        return (view, result)
    }

    /// Parses an object id argument of `entity`.
    public func objectID(_ text: String, entity: String) throws -> ObjectID {
        let id = try container().objectID(parsing: text)
        guard id.entity == entity else { throw UsageError("'\(text)' is not an \(entity) id (expected \(entity)/N)") }
        return id
    }

    /// Parses a token argument: malformed is a usage error, another store's token a failure.
    public func token(_ text: String) throws -> HistoryToken {
        try container().token(parsing: text)
    }

    /// `{"id","token"}` after a save; the current token when the save changed nothing.
    public func saved(_ id: ObjectID, _ result: SaveResult, extra: [(String, JSONValue)] = []) throws {
        let token = try result.token ?? container().currentToken()
        output.record(.object([("id", .string(id.description))] + extra + [("token", .string(token.description))]))
    }
}
