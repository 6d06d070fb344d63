import Foundation
import ReadLater
import SharedStore

// A second process for the tests and the demo: writes articles under an author, or prints the
// history after a token. Usage:
//   sharedstore-helper write --group DIR --author A --count N
//   sharedstore-helper history --group DIR [--after TOKEN] [--exclude-author A]

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    exit(code)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else { fail("usage: sharedstore-helper write|history --group DIR …", code: 2) }
arguments.removeFirst()
var options: [String: String] = [:]
while !arguments.isEmpty {
    let flag = arguments.removeFirst()
    guard flag.hasPrefix("--"), !arguments.isEmpty else { fail("bad argument '\(flag)'", code: 2) }
    options[String(flag.dropFirst(2))] = arguments.removeFirst()
}
guard let group = options["group"] else { fail("missing --group", code: 2) }

do {
    let container = try Container(group: group, model: ReadLater.model)
    switch command {
    case "write":
        guard let author = options["author"], let count = Int(options["count"] ?? "") else { fail("write needs --author and --count", code: 2) }
        let context = container.newContext(name: "helper", author: author)
        var last: HistoryToken?
        for i in 0..<count {
            try context.insert(ReadLater.Article(title: "\(author)-\(i)", url: "https://example.com/\(author)/\(i)"))
            last = try context.save().token
        }
        print(JSONValue.object([("written", .number(Double(count))), ("token", last.map { .string($0.description) } ?? .null)]).serialized)
    case "history":
        var request = HistoryRequest()
        if let after = options["after"] { request.start = .after(try container.token(parsing: after)) }
        if let excluded = options["exclude-author"] { request.excludedAuthors = [excluded] }
        try container.history(request) { batch in
            for t in batch { print(t.json.serialized) }
        }
    default:
        fail("unknown command '\(command)'", code: 2)
    }
} catch let error as StoreError {
    fail(error.message, code: 1)
} catch {
    fail("\(error)", code: 1)
}
