import ArgumentParsing
import Foundation
import ReadLater
import SharedStore

// The helper's types-first process: the same store, opened with `ReadLater.Records.model`
// (record types, typed keys) while the targets use the entity model — the coexistence scenario.

/// The commands of a process that opens the store with the types-first model.
enum TypedCLI {
    static let commands: [Command] = [
        Command(
            "typed-share", "save an article (and its category) as records, as author TypedApp",
            options: [
                .value("title", "T", "the title", required: true), .value("url", "URL", "the URL", required: true),
                .value("category", "NAME", "the category, made when missing"),
            ]),
        Command(
            "typed-list", "merge what others saved (as consumer TypedApp), then print every article as a record",
            options: [.flag("unread", "only unread articles")]),
        Command(
            "typed-mark-read", "mark an article read through update(record), as author TypedApp",
            options: [.value("id", "ID", "the article", required: true)]),
        Command(
            "typed-follow", "follow the articles as records with a live query until N of them are read",
            options: [.value("until-read", "N", "how many read articles end it", required: true)]),
    ]
}

typealias TypedArticle = ReadLater.Records.Article
typealias TypedCategory = ReadLater.Records.Category

/// Runs a `typed-` command and exits.
@MainActor
func typedCommand(_ group: String) -> Never {
    do {
        let container = try Container(group: group, model: ReadLater.Records.model)
        try ChangeSignal.attach(to: container)
        let context = container.newContext(name: "typed", author: "TypedApp")
        switch command {
        case "typed-share": try typedShare(context)
        case "typed-list": try typedList(container, context, group)
        case "typed-mark-read":
            guard let text = options["id"] else { fail("typed-mark-read needs --id", code: 2) }
            var article = try context.record(TypedArticle.self, with: try container.objectID(parsing: text))
            article.isRead = true
            try context.update(article)
            emit([("token", try context.save().token.map { .string($0.description) } ?? .null)])
        case "typed-follow": try typedFollow(container, group)
        default: fail("unknown command '\(command)'", code: 2)
        }
        exit(0)
    } catch let error as StoreError {
        fail(error.message, code: 1)
    } catch {
        fail("\(error)", code: 1)
    }
}

@MainActor
private func typedShare(_ context: ObjectContext) throws {
    guard let title = options["title"], let url = options["url"] else {
        fail("typed-share needs --title and --url", code: 2)
    }
    var category: ObjectID?
    if let name = options["category"] {
        category = try context.fetchOne(TypedCategory.self, where: \TypedCategory.name == name)?.id
        if category == nil { category = try context.insert(TypedCategory(name: name)) }
    }
    let temp = try context.insert(TypedArticle(title: title, url: url, category: category))
    let saved = try context.save()
    emit([
        ("id", .string(saved.permanentID(for: temp).description)),
        ("token", saved.token.map { .string($0.description) } ?? .null),
    ])
}

@MainActor
private func typedList(_ container: Container, _ context: ObjectContext, _ group: String) throws {
    // A consumer of its own, as a target is: what the others saved is merged first.
    let view = try ViewContext(container: container, registry: try TokenRegistry(group: group), consumer: "TypedApp")
    let merged = try view.sync { _ in }
    let condition: Condition = options["unread"] != nil ? \TypedArticle.isRead == false : .always
    for a in try context.fetch(TypedArticle.self, where: condition, sortedBy: [.ascending(\TypedArticle.createdAt)]) {
        let category = try a.category.map { try context.record(TypedCategory.self, with: $0).name }
        emit([
            ("id", .string(a.id?.description ?? "")), ("title", .string(a.title)), ("isRead", .bool(a.isRead)),
            ("searchTitle", a.searchTitle.map(JSONValue.string) ?? .null),
            ("category", category.map(JSONValue.string) ?? .null),
        ])
    }
    emit([("merged", .number(Double(merged.transactions)))])
}

@MainActor
private func typedFollow(_ container: Container, _ group: String) throws {
    guard let goal = Int(options["until-read"] ?? ""), goal > 0 else {
        fail("typed-follow needs --until-read N", code: 2)
    }
    // The observer first: a change after its start is seen, whenever the query runs.
    let observer = try ChangeObserver(container: container, pollInterval: 0.2)
    let query = try LiveQuery(
        container: container, registry: try TokenRegistry(group: group),
        request: FetchRequest(TypedArticle.self, sortedBy: [.ascending(\TypedArticle.createdAt)]))
    var read = 0
    let deadline = Date().addingTimeInterval(60)
    while read < goal {
        guard Date() < deadline else { fail("typed-follow: \(read) of \(goal) read in 60 s", code: 1) }
        if let result = try query.next(as: TypedArticle.self) {
            read = result.records.filter { $0.isRead }.count
            emit([
                ("titles", .array(result.records.map { JSONValue.string($0.title) })), ("read", .number(Double(read))),
            ])
            continue
        }
        _ = try observer.next(timeout: 5)
    }
}
