import Foundation
import ReadLater
import SharedStore
import Testing

/// Issue 23's smaller API fixes: ids that come back from an async write are the saved ones
/// whatever holds them, a diff has an empty value, a batch names its objects by itself.
@Suite struct SmallAPITests {
    @Test func anAsyncWriteHandsBackSavedIdsInArraysSetsAndDictionaries() async throws {
        let container = try TemporaryGroup().open()
        try ReadLater.registerHooks(container)
        @Sendable func article(_ context: ObjectContext, _ n: Int) throws -> ObjectID {
            try context.insert("Article", ["title": .string("t\(n)"), "url": .string("https://r.example/\(n)")])
        }
        let array = try await container.write(author: "A") { c in try (0..<3).map { try article(c, $0) } }
        let set = try await container.write(author: "A") { c in Set(try (3..<5).map { try article(c, $0) }) }
        let dictionary = try await container.write(author: "A") { c in ["x": try article(c, 5)] }
        let optionals = try await container.write(author: "A") { c in [try article(c, 6), nil] }
        let one = try await container.write(author: "A") { c in try article(c, 7) }
        let byNumber = try await container.write(author: "A") { c in [9: try article(c, 9)] }
        let all =
            array + Array(set) + Array(dictionary.values) + optionals.compactMap { $0 } + [one]
            + Array(byNumber.values)
        #expect(all.count == 9 && all.allSatisfy { !$0.isTemporary })
        let reader = container.newContext()
        for id in all { #expect(try reader.object(with: id)["title"].stringValue?.hasPrefix("t") == true) }
        // What holds no id comes back as it was.
        let text = try await container.write(author: "A") { c in "\(try article(c, 8).isTemporary)" }
        #expect(text == "true")
    }

    @Test func aDiffHasAnEmptyValue() {
        #expect(ResultDiff.empty.isEmpty && ResultDiff.empty == ResultDiff(from: [], to: []))
        var diff = ResultDiff()
        diff.inserted = [0]
        #expect(!diff.isEmpty && diff != .empty)
    }

    @Test func aBatchNamesItsObjectsByTheirPlaceWhenNotGivenNames() throws {
        let container = try TemporaryGroup().open()
        try ReadLater.registerHooks(container)
        let context = container.newContext(author: "Batch")
        #expect {
            try context.batch { b in
                let category = try b.uniqueObject("Category", ["label": "Swift"])
                _ = try b.insert(
                    "Article", ["title": "T", "url": "https://a.example"], relationships: ["category": category])
                _ = try b.insert("Article", ["title": "", "url": "https://b.example"])
            }
        } throws: { error in
            (error as? StoreError)?.validation?.object == "Article (batch object 3)"
        }
        #expect(try context.count(FetchRequest("Article")) == 0)
        // The place counts the calls, whatever the store holds: a stored category is place 1 too.
        try context.batch { b in _ = try b.uniqueObject("Category", ["label": "Kept"]) }
        #expect {
            try context.batch { b in
                _ = try b.uniqueObject("Category", ["label": "Kept"])
                _ = try b.insert("Article", ["title": "T", "url": "https://a.example"])
                _ = try b.insert("Article", ["title": "", "url": "https://b.example"])
            }
        } throws: { error in
            (error as? StoreError)?.validation?.object == "Article (batch object 3)"
        }
    }
}
