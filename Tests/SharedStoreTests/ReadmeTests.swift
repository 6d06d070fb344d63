// swift-format-ignore-file
// The Swift blocks of README.md, line for line (Scripts/lint.sh checks it): formatting would change them.
import Foundation
import SharedStore
import Synchronization
import Testing

// Every Swift block of README.md, as written. A block that uses names of an earlier one runs
// after it in the same test, as a reader reads them. What a block says it prints — the comment
// after a `print(…)` line, `// 1 1` — is what that line printed (`expectPrintedAsTheReadmeSays`).

@Suite struct ReadmeTests {
    @Test func theLibraryTourInOrder() async throws {
        let first = #line
        // README block 1: the tour, a types-first model
        // A types-first model: record types, their properties the attributes, their schemas the rest,
        // each naming a property by a key path (a misspelled one does not compile).
        struct Article: Record {
            static let entityName = "Article"
            static let schema = RecordSchema<Article>([
                .attribute(\.title, minLength: 1, maxLength: 500, preservedInHistory: true),
                .attribute(\.isRead, default: false),
                .canonical(\.searchTitle, of: \.title),                  // kept by every save
                .toOne(\.category, Category.self, inverse: "articles"),
                .index(\.searchTitle),
            ])
            var id: ObjectID?
            var title: String
            var isRead = false
            var searchTitle: String?                                   // derived: read, never written
            var category: ObjectID?
        }
        struct Category: Record {
            static let entityName = "Category"
            static let articles = ToMany<Category, Article>("articles")
            static let schema = RecordSchema<Category>([
                .unique(\.name), .derived(\.articleCount, .count("articles")), .toMany(articles, inverse: \.category),
            ])
            var id: ObjectID?
            var name: String
            var articleCount: Int?
        }
        let model = try Model(records: [Article.self, Category.self])

        // Any process opens the group directory (created 0700; Store.sqlite 0600), and attaches the
        // change signal so that its commits wake the other processes at once.
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString).path
        let container = try Container(group: dir, model: model)
        try ChangeSignal.attach(to: container)
        let lastToken = try container.currentToken()          // what a consumer would have merged

        // A context carries a name and a transaction author; a save is one SQLite transaction
        // holding the rows and one history transaction.
        let share = container.newContext(name: "share", author: "ShareExtension")
        let swift = try share.insert(Category(name: "Swift"))
        let id = try share.insert(Article(title: "Café Swift", category: swift))
        let saved = try share.save()
        print(saved.permanentID(for: id), saved.token?.description ?? "-")

        // Typed conditions: [cd] string matching, to-one key paths, to-many predicates.
        let cafes = try share.fetch(Article.self,
            where: Key(\Article.title).contains("cafe", .caseInsensitive, .diacriticInsensitive)
                && \Article.isRead == false,
            sortedBy: [.ascending(\Article.searchTitle)], limit: 20)
        let busy = try share.fetch(Category.self, where: Category.articles.any(\Article.isRead == false))
        print(cafes.count, busy.first?.articleCount ?? 0)     // 1 1

        // Another process reads what others saved after its last token.
        for t in try container.fetchHistory(HistoryRequest(after: lastToken, excludingAuthors: ["MainApp"])) {
            print(t.token, t.author ?? "-", t.changes.map { "\($0.kind) \($0.objectID)" })
        }
        if let everyoneMerged = saved.token { try container.deleteHistory(through: everyoneMerged) }

        // README block 2: the same model described by entities
        let described = try Model([
            Entity("Article", attributes: [
                Attribute("title", .string, minLength: 1, maxLength: 500, preservedInHistory: true),
                Attribute("isRead", .bool, default: false),
                Attribute.derived("searchTitle", .string, .canonical("title")),
            ], relationships: [.toOne("category", "Category", inverse: "articles")],
               indexes: [Index("searchTitle")]),
            Entity("Category", attributes: [
                Attribute("name", .string),
                Attribute.derived("articleCount", .integer, .count("articles")),
            ], relationships: [.toMany("articles", "Article", inverse: "category")],
               uniquenessConstraints: [["name"]]),
        ])
        print(model == described, model.differences(from: described))       // true []
        let older = try Container(group: dir, model: described)           // another process, say
        print(try older.newContext().count(Article.self))                 // 1

        // README block 3: rules, hooks, a record's update, aggregates
        try container.register("Article", EntityHooks(
            willSave: { draft in                               // may change the object, never a derived value
                if let title = draft[\Article.title].stringValue, title.hasPrefix(" ") {
                    try draft.set(\Article.title, title.trimmingCharacters(in: .whitespaces))
                }
            },
            rules: [ValidationRule("a read article has a title") {
                $0[\Article.isRead] != true || $0[\Article.title] != ""
            }]))

        let main = container.newContext(author: "MainApp")
        main.mergePolicy = .objectTrump
        if var article = try main.fetchOne(Article.self, where: \Article.searchTitle == "cafe swift") {
            article.isRead = true
            try main.update(article)                         // writes isRead only
            try main.save()
        }
        let byName = Key(\Article.category, \Category.name)
        let perCategory = try main.aggregate(Article.self, [.count], groupedBy: [byName])
        print(perCategory.map { "\($0.group[0].stringValue ?? "-"): \($0.values[0])" })   // ["Swift: 1"]

        // README block 4: the async DAO
        actor Library {
            let container: Container
            init(container: Container) { self.container = container }

            func add(_ title: String) async throws -> ObjectID {
                try await container.write(author: "MainApp") { context in
                    try context.insert(Article(title: title))
                }
            }

            func unread() async throws -> [Article] {
                try await container.read { context in
                    try context.fetch(Article.self, where: \Article.isRead == false)
                }
            }
        }
        let library = Library(container: container)
        _ = try await library.add("Structured concurrency")
        print(try await library.unread().count)                 // 1

        // README block 6: a live query
        let registry = try TokenRegistry(group: dir)
        let unread = FetchRequest(Article.self, where: \Article.isRead == false,
                                  sortedBy: [.ascending(\Article.searchTitle)], limit: 50)
        let query = try LiveQuery<Article>(container: container, registry: registry, consumer: "UnreadList",
                                           request: unread)
        for try await result in query.results() {   // the first result, then one per change
            let d = result.diff                      // removed, inserted, moved, updated positions
            let titles = result.objects.map(\.title)   // result.objects: [Article]
            print(titles, d.inserted, d.removed, d.moved, d.updated)  // ["Structured concurrency"] [0] [] [] []
            break                                    // (a list keeps following)
        }

        // README block 7: a view kept in sync
        let view = try ViewContext(container: container, registry: registry, consumer: "Widget")
        let observer = try ChangeObserver(container: container)     // inotify, plus a slow poll
        let changes = observer.changes()
        try view.sync()                                             // catch up first
        Task.detached {                                             // another process's save, say
            _ = try await container.write(author: "MainApp") { try $0.insert(Article(title: "New")) }
        }
        for try await _ in changes {
            try view.sync { transaction in print(transaction.token) } // merge, then advance the token
            break                                                     // (a widget keeps watching)
        }
        observer.stop()
        let report = try HistoryCleaner.clean(container: container, registry: registry, evictAfter: 86_400)
        print(report.deleted)
        try expectPrintedAsTheReadmeSays(lines: first...#line)
        // The README's blocks make their directories in the temporary one: removed here, after them.
        try? FileManager.default.removeItem(atPath: dir)
    }

    @Test func aCustomMigrationStep() throws {
        let first = #line
        // README block 5
        enum V1 { struct Book: Record { static let entityName = "Book"; var id: ObjectID?; var rating: Int } }
        struct Book: Record { static let entityName = "Book"; var id: ObjectID?; var rating: Double }
        let books = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString).path
        let old = try Container(group: books, model: try Model(records: [V1.Book.self])).newContext(author: "App")
        try old.insert(V1.Book(rating: 4))
        try old.save()
        let step = MigrationStep(version: 2, "ratings become doubles") { db in
            try db.execute(#"UPDATE "Book" SET "rating" = "rating" * 1.0"#)   // over the new schema
        }
        let v2 = try Model(version: 2, records: [Book.self])
        let upgraded = try Container(group: books, model: v2, migrations: [step])
        print(try upgraded.newContext().fetch(Book.self)[0].rating)   // 4.0
        try expectPrintedAsTheReadmeSays(lines: first...#line)
        try? FileManager.default.removeItem(atPath: books)
    }
}

/// What the blocks printed, by the line of this file that printed it: `print` here stands in for
/// the standard one (and still prints).
private let printed = Mutex<[Int: [String]]>([:])

private func print(_ items: Any..., line: Int = #line) {
    let text = items.map { "\($0)" }.joined(separator: " ")
    printed.withLock { $0[line, default: []].append(text) }
    Swift.print(text)
}

/// Every README line `print(…) // what it prints` that sits in `lines` of this file printed
/// exactly that, once; and every such README line is somewhere in this file.
private func expectPrintedAsTheReadmeSays(lines: ClosedRange<Int>, sourceLocation: SourceLocation = #_sourceLocation)
    throws
{
    let here = URL(fileURLWithPath: #filePath)
    let readme = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("README.md")
    let test = try String(contentsOf: here, encoding: .utf8).components(separatedBy: "\n")
    for claim in try String(contentsOf: readme, encoding: .utf8).components(separatedBy: "\n") {
        let code = claim.trimmingCharacters(in: .whitespaces)
        guard code.hasPrefix("print("), let comment = code.range(of: "//", options: .backwards) else { continue }
        let expected = code[comment.upperBound...].trimmingCharacters(in: .whitespaces)
        let matches = test.indices.filter { test[$0].trimmingCharacters(in: .whitespaces) == code }
        #expect(!matches.isEmpty, "README line not in ReadmeTests: \(code)", sourceLocation: sourceLocation)
        for index in matches where lines.contains(index + 1) {
            let got = printed.withLock { $0[index + 1] ?? [] }
            #expect(got == [expected], "README says `\(code)` prints \(expected)", sourceLocation: sourceLocation)
        }
    }
}
