import Foundation
import SharedStoreSupport
import Testing

/// A group directory named by a relative path of one character (`--group a`) crashed every
/// target with SIGILL: Foundation's `deletingLastPathComponent` traps on such a name on Linux.
@Suite struct GroupPathTests {
    @Test func parentsAreTakenApartWithoutFoundation() {
        let cases: [(String, String)] = [
            ("a", ""), ("ab", ""), ("a/", ""), ("x/y", "x"), ("x//y/", "x"), ("/a", "/"), ("/", "/"),
            ("", ""), ("./a", "."), ("/tmp/g/Store.sqlite", "/tmp/g"), ("é/ü", "é"),
        ]
        for (path, parent) in cases { #expect(PathName.parent(of: path) == parent, "\(path)") }
        #expect(PathName.directory(of: "tokens.lmdb") == ".")
        #expect(PathName.directory(of: "a/tokens.lmdb") == "a")
    }

    @Test(.tags(.multiProcess)) func targetsTakeAOneCharacterRelativeGroup() throws {
        let cwd = TemporaryGroup()
        try FileManager.default.createDirectory(atPath: cwd.root, withIntermediateDirectories: true)
        let runs: [(String, [String])] = [
            ("main-app", ["--group", "a", "add", "--title", "t", "--url", "https://t.example/", "--json"]),
            ("main-app", ["--group", "a", "list", "--json"]),
            ("widget", ["--group", "b", "show"]),
            ("share-extension", ["--group", "x/y", "share", "--url", "https://t.example/2", "--title", "u", "--json"]),
        ]
        for (tool, arguments) in runs {
            let child = try Child(tool, arguments, directory: cwd.root)
            #expect(try child.waitForExit() == 0, "\(tool) \(arguments.joined(separator: " ")): \(child.lines)")
        }
        for dir in ["a", "b", "x/y"] {
            var st = stat()
            #expect(stat(cwd.root + "/" + dir, &st) == 0 && st.st_mode & 0o777 == 0o700, "\(dir)")
        }
    }
}
