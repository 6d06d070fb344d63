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
        let probe = """
            . '\(file)'
            COMP_WORDS=(storectl au); COMP_CWORD=1; _sharedstore_storectl; echo "${COMPREPLY[*]}"
            COMP_WORDS=(storectl audit --sql); COMP_CWORD=2; _sharedstore_storectl; echo "${COMPREPLY[*]}"
            COMP_WORDS=(history-cleaner --ev); COMP_CWORD=1; _sharedstore_history_cleaner; echo "${COMPREPLY[*]}"
            """
        let bash = Process()
        bash.executableURL = URL(fileURLWithPath: "/bin/bash")
        bash.arguments = ["-c", probe]
        let out = Pipe()
        bash.standardOutput = out
        try bash.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        bash.waitUntilExit()
        #expect(text.split(separator: "\n").map(String.init) == ["audit", "--sql-log", "--evict-after"], "\(text)")
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
