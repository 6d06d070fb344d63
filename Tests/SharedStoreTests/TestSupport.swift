import Foundation
import ReadLater
@testable import SharedStore
import Testing

/// A private temporary group directory per test, removed when the test ends.
final class TemporaryGroup {
    let root: String
    let path: String

    init() {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("sharedstore-tests-\(UUID().uuidString)")
        root = base.path
        path = base.appendingPathComponent("group").path
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func open(_ model: Model = ReadLater.model, options: Container.Options = Container.Options()) throws -> Container {
        try Container(group: path, model: model, options: options)
    }

    var storePath: String { (path as NSString).appendingPathComponent(Container.storeFileName) }
}

/// An entity with one attribute of every type, and a parent/child pair with each delete rule.
enum Fixtures {
    static let allTypes: Model = {
        do {
            return try Model([
                Entity("Thing", attributes: [
                    Attribute("s", .string, optional: true),
                    Attribute("i", .integer, optional: true),
                    Attribute("d", .double, optional: true),
                    Attribute("b", .bool, default: true),
                    Attribute("t", .date, optional: true),
                    Attribute("bin", .data, optional: true),
                    Attribute("u", .uuid, optional: true),
                    Attribute("code", .string, optional: true, minLength: 2, maxLength: 4, pattern: "[A-Z]+"),
                    Attribute("score", .integer, optional: true, minValue: 0, maxValue: 10),
                ]),
                Entity("Folder", attributes: [Attribute("name", .string)], relationships: [
                    .toMany("notes", "Note", inverse: "folder", deleteRule: .cascade),
                    .toMany("pins", "Pin", inverse: "folder", deleteRule: .deny),
                ]),
                Entity("Note", attributes: [Attribute("text", .string, preservedInHistory: true)],
                       relationships: [.toOne("folder", "Folder", inverse: "notes", deleteRule: .nullify)]),
                Entity("Pin", attributes: [Attribute("x", .integer)],
                       relationships: [.toOne("folder", "Folder", inverse: "pins", deleteRule: .nullify)]),
                Entity("Seat", attributes: [Attribute("row", .string), Attribute("number", .integer)],
                       uniquenessConstraints: [["row", "number"]]),
            ])
        } catch {
            preconditionFailure("fixture model: \(error)")
        }
    }()

    static func article(_ title: String, _ n: Int = 0) -> ReadLater.Article {
        ReadLater.Article(title: title, url: "https://example.com/\(n)")
    }
}

/// Runs a built executable of this package and waits for it to exit.
enum Executable {
    static var directory: URL {
        // Tests run from .build/<config>/; the executables sit beside the test bundle.
        var url = Bundle.main.bundleURL
        if url.pathExtension == "xctest" { url.deleteLastPathComponent() }
        return url
    }

    static func start(_ name: String, _ arguments: [String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = directory.appendingPathComponent(name)
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        return (process, out)
    }
}

func expectStoreError(_ code: StoreError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) {
    do {
        try body()
        Issue.record("expected StoreError .\(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as StoreError {
        #expect(error.code == code, "got .\(error.code): \(error.message)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected StoreError .\(code), got \(error)", sourceLocation: sourceLocation)
    }
}
