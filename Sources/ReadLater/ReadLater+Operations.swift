import Foundation
import SharedStore

extension ReadLater {
    /// One link to share: a line of a share-batch file.
    public struct Link: Sendable, Hashable {
        public var url: String
        public var title: String
        public var category: String?

        public init(url: String, title: String, category: String? = nil) {
            self.url = url
            self.title = title
            self.category = category
        }
    }

    /// Inserts articles (with their categories, found or created) in `context`; not saved.
    /// Categories are unique by name: with a trump merge policy an existing one is reused, also
    /// when another process creates it concurrently. Returns the articles' temporary ids.
    public static func insert(_ links: [Link], in context: ObjectContext, now: Date = Date()) throws -> [ObjectID] {
        var categories: [String: ObjectID] = [:]
        return try links.map { link in
            var category: ObjectID?
            if let name = link.category {
                if let known = categories[name] {
                    category = known
                } else {
                    category = try context.insert(Category(name: name))
                    categories[name] = category
                }
            }
            return try context.insert(Article(title: link.title, url: link.url, createdAt: now, category: category))
        }
    }

    /// Checks a link against the model's rules before anything is saved.
    ///
    /// - Throws: ``StoreError`` `.validation` naming `place` and the broken rule.
    public static func validate(_ link: Link, in container: Container, place: String) throws {
        try container.validate(
            "Article", ["title": .string(link.title), "url": .string(link.url), "createdAt": .date(Date())],
            object: place)
        if let c = link.category { try container.validate("Category", ["name": .string(c)], object: place) }
    }

    /// Parses a share-batch file: `url<TAB>title[<TAB>category]` per line; blank lines are skipped.
    ///
    /// - Throws: `.validation` naming the first bad line's number.
    public static func parseBatch(_ text: String, container: Container) throws -> [Link] {
        var links: [Link] = []
        // "\r\n" is one Character in Swift, not "\n" after "\r": split on both, so that a file
        // with CRLF endings gives the same articles as one with LF.
        for (i, line) in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
            .enumerated()
        {
            if line.trimmingCharacters(in: .whitespaces).isEmpty { continue }
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 2 || fields.count == 3 else {
                throw StoreError(
                    .validation, "line \(i + 1): expected url<TAB>title[<TAB>category], found \(fields.count) field(s)")
            }
            let link = Link(
                url: fields[0], title: fields[1], category: fields.count == 3 && !fields[2].isEmpty ? fields[2] : nil)
            try validate(link, in: container, place: "line \(i + 1)")
            links.append(link)
        }
        return links
    }

    /// The articles, oldest first, as they are read: `body` gets one `main-app list` line of
    /// CLI.md at a time (an indexed scan; memory is that of one article and the categories).
    public static func listArticles(
        _ context: ObjectContext, unreadOnly: Bool = false, limit: Int? = nil, offset: Int = 0,
        _ body: (JSONValue) throws -> Void
    ) throws {
        var names: [ObjectID: String] = [:]
        try context.forEach(FetchRequest("Category")) { names[$0.id] = $0["name"].stringValue ?? "" }
        let request = FetchRequest(
            "Article", where: unreadOnly ? Key("isRead") == false : .always,
            sortedBy: [Key("createdAt").ascending], limit: limit, offset: offset)
        try context.forEach(request) { a in
            try body(
                .object([
                    ("id", .string(a.id.description)),
                    ("title", a["title"].jsonValue),
                    ("url", a["url"].jsonValue),
                    ("isRead", a["isRead"].jsonValue),
                    ("category", a.relationships["category"].flatMap { names[$0] }.map(JSONValue.string) ?? .null),
                    ("createdAt", a["createdAt"].jsonValue),
                ]))
        }
    }

    /// The widget's summary: unread and total counts, the three newest articles — two counts and
    /// a three-row fetch, each on an index.
    public static func widgetLine(_ context: ObjectContext) throws -> JSONValue {
        let unread = try context.count(FetchRequest("Article", where: Key("isRead") == false))
        let total = try context.count(FetchRequest("Article"))
        var latest: [JSONValue] = []
        try context.forEach(FetchRequest("Article", sortedBy: [Key("createdAt").descending], limit: 3)) { a in
            latest.append(.object([("id", .string(a.id.description)), ("title", a["title"].jsonValue)]))
        }
        return .object([
            ("unread", .number(Double(unread))), ("total", .number(Double(total))), ("latest", .array(latest)),
        ])
    }
}
