import ArgumentParsing
import Foundation
import StoreCLI
import StoreCLIMirror
import Testing

/// Issue 24, point 5: the bash completion and the manual pages come from the parser's own
/// definitions, so they cover every command and option of every executable.
@Suite(.tags(.multiProcess)) struct ConventionsTests {
    /// What `storectl ARGUMENTS` prints, and its status.
    func storectl(_ arguments: [String]) throws -> (Int32, String) {
        let child = try Child("storectl", arguments)
        let status = try child.waitForExit()
        return (status, child.lines.joined(separator: "\n"))
    }

    @Test func theCompletionCoversEveryCommandAndOption() throws {
        let (status, script) = try storectl(["completions", "bash"])
        #expect(status == 0)
        for tool in Targets.executables {
            let function = script.components(separatedBy: "complete -F ").first { $0.contains(tool.name) } ?? ""
            #expect(
                script.contains(
                    "complete -F _sharedstore_\(tool.name.replacingOccurrences(of: "-", with: "_")) \(tool.name)"))
            for command in tool.commands {
                if !command.name.isEmpty {
                    #expect(script.contains("\(command.name))"), "\(tool.name) \(command.name)")
                }
                for option in command.options + tool.parser.common {
                    #expect(script.contains("--\(option.name)"), "\(tool.name) \(command.name) --\(option.name)")
                }
            }
            #expect(!function.isEmpty)
        }
        // It is valid bash, and completes as bash would ask it to.
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("completion-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("sharedstore.bash").path
        try script.write(toFile: file, atomically: true, encoding: .utf8)
        let sub = dir.appendingPathComponent("sub-xyz").path
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        let spaced = dir.appendingPathComponent("my groups").path
        try FileManager.default.createDirectory(atPath: spaced, withIntermediateDirectories: true)
        // bash splits `--group=DIR` at '=' into three words; flags every command takes may come
        // before the command; a command is offered only the flags it takes.
        let probe = """
            . '\(file)'
            COMP_WORDS=(storectl au); COMP_CWORD=1; _sharedstore_storectl; echo "${COMPREPLY[*]}"
            COMP_WORDS=(storectl audit --sql); COMP_CWORD=2; _sharedstore_storectl; echo "${COMPREPLY[*]}"
            COMP_WORDS=(history-cleaner --ev); COMP_CWORD=1; _sharedstore_history_cleaner; echo "${COMPREPLY[*]}"
            COMP_WORDS=(storectl --group /tmp sta); COMP_CWORD=3; _sharedstore_storectl; echo "${COMPREPLY[*]}"
            COMP_WORDS=(storectl --group = /tmp --json sta); COMP_CWORD=5; _sharedstore_storectl; echo "${COMPREPLY[*]}"
            COMP_WORDS=(storectl --group = '\(dir.path)/sub-x'); COMP_CWORD=3; _sharedstore_storectl
            echo "${COMPREPLY[*]}"
            COMP_WORDS=(storectl --js); COMP_CWORD=1; _sharedstore_storectl; echo "${COMPREPLY[*]}"
            COMP_WORDS=(storectl top --d); COMP_CWORD=2; _sharedstore_storectl; echo "[${COMPREPLY[*]}]"
            COMP_WORDS=(storectl stats --model); COMP_CWORD=2; _sharedstore_storectl; echo "[${COMPREPLY[*]}]"
            COMP_WORDS=(main-app add --model); COMP_CWORD=2; _sharedstore_main_app; echo "${COMPREPLY[*]}"
            COMP_WORDS=(storectl completions --j); COMP_CWORD=2; _sharedstore_storectl; echo "[${COMPREPLY[*]}]"
            COMP_WORDS=(storectl --json c); COMP_CWORD=2; _sharedstore_storectl; echo "[${COMPREPLY[*]}]"
            COMP_WORDS=(storectl --durable st); COMP_CWORD=2; _sharedstore_storectl; echo "${COMPREPLY[*]}"
            COMP_WORDS=(storectl --group g stats --); COMP_CWORD=4; _sharedstore_storectl; echo "${COMPREPLY[*]}"
            COMP_WORDS=(storectl --group '\(dir.path)/my g'); COMP_CWORD=2; _sharedstore_storectl
            echo "${#COMPREPLY[@]} ${COMPREPLY[0]}"
            """
        let bash = Process()
        bash.executableURL = URL(fileURLWithPath: "/bin/bash")
        bash.arguments = ["-c", probe]
        let out = Pipe()
        bash.standardOutput = out
        try bash.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        bash.waitUntilExit()
        #expect(
            text.split(separator: "\n").map(String.init) == [
                "audit", "--sql-log", "--evict-after", "stats", "stats", sub, "--json", "[]", "[]", "--model-version",
                "[]", "[]", "stress stress-writer stress-consumer", "--json --help", "1 \(spaced)",
            ], "\(text)")
    }

    /// A command refuses a flag every other command takes when it has no use for it (saying so),
    /// leaves it out of its help, and those flags may come before the command.
    @Test func flagsACommandHasNoUseForAreRefusedAndCommonFlagsMayComeFirst() throws {
        let group = TemporaryGroup()
        _ = try group.open()
        for (command, flag) in [
            ("top", "--durable"), ("audit", "--model-version=2"), ("stats", "--durable"), ("verify", "--durable"),
            ("tokens", "--model-version=1"), ("history", "--durable"), ("schema", "--model-version=3"),
        ] {
            let (status, _) = try storectl([command, flag, "--group", group.path])
            #expect(status == 2, "\(command) \(flag)")
            let (_, help) = try storectl([command, "--help"])
            #expect(!help.contains(flag.split(separator: "=")[0]), "\(command) --help: \(help)")
        }
        let (status, help) = try storectl(["completions", "--help"])
        #expect(status == 0 && !help.contains("--group") && !help.contains("--json"), "\(help)")
        #expect(try storectl(["completions", "bash", "--json"]).0 == 2)
        #expect(try storectl(["manpage", "storectl", "--group", group.path]).0 == 2)
        // Before the command, with its value in the next word or after '='.
        var (first, out) = try storectl(["--group", group.path, "--json", "stats"])
        #expect(first == 0 && json(out)["objects"] != nil, "\(out)")
        (first, out) = try storectl(["--group=\(group.path)", "tokens", "--json"])
        #expect(first == 0, "\(out)")
        #expect(try storectl(["--json", "--durable", "top", "--group", group.path]).0 == 2)
        // Words that never reach a command: the error names the word.
        for (words, said) in [
            (["--group"], "flag '--group' needs a value (DIR)"), (["--bogus", "stats"], "unknown flag '--bogus'"),
            (["--group", group.path, "--bogus", "stats"], "unknown flag '--bogus'"),
            (["-g", group.path, "stats"], "unexpected '-g' before the command"),
            (["--interval", "1", "top"], "flag '--interval' goes after the command: 'storectl top --interval"),
            (["--group", "stats"], "'stats' was taken as the value of --group"),
            (["--bogus", "--help", "stats"], "unknown flag '--bogus'"), (["--help", "stat"], "unknown command 'stat'"),
            (["--help", "stats", "--bogus"], "unknown flag '--bogus'"),
            (["--group", "--help", "stats"], "flag '--group' needs a value"),
        ] {
            let looker = Looker("storectl", words)
            let (status, error) = looker.finish()
            #expect(
                status == 2 && error.contains(said) && error.split(separator: "\n").count == 1, "\(words): \(error)")
        }
        for words in [
            ["--help", "stats"], ["--help", "--group", group.path, "stats"], ["--json", "--help", "stats"],
        ] {
            let (helped, text) = try storectl(words)
            #expect(helped == 0 && text.contains("usage: storectl stats"), "\(words): \(text)")
        }
        #expect(try storectl(["--group", group.path, "--group", group.path, "stats"]).0 == 2)
    }

    @Test func theManualPagesCoverEveryCommandAndOption() throws {
        for tool in Targets.executables {
            let (status, page) = try storectl(["manpage", tool.name])
            #expect(status == 0)
            #expect(page.hasPrefix(".TH \(tool.name.uppercased().replacingOccurrences(of: "-", with: "\\-")) 1"))
            for command in tool.commands {
                if !command.name.isEmpty {
                    #expect(page.contains(command.name.replacingOccurrences(of: "-", with: "\\-")), "\(tool.name)")
                }
                for option in command.options + tool.parser.common {
                    let flag = "\\-\\-" + option.name.replacingOccurrences(of: "-", with: "\\-")
                    #expect(page.contains(flag), "\(tool.name) \(command.name) --\(option.name)")
                }
            }
        }
        let (status, _) = try storectl(["manpage", "nothing"])
        #expect(status == 2)
    }
}
