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
        // By the stored value: names that differ in their bytes are two categories, as in the store.
        var categories: [Value: ObjectID] = [:]
        return try links.map { link in
            var category: ObjectID?
            if let name = link.category {
                if let known = categories[.string(name)] {
                    category = known
                } else {
                    category = try context.insert("Category", [categoryName(context.container.model): .string(name)])
                    categories[.string(name)] = category
                }
            }
            // From version 3 the model's awakeFromInsert sets the creation date.
            guard context.container.model.version < 3 else {
                return try context.insert(
                    "Article", ["title": .string(link.title), "url": .string(link.url)],
                    relationships: ["category": category])
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
        if let c = link.category {
            try container.validate("Category", [categoryName(container.model): .string(c)], object: place)
        }
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
            if let link = try parseLine(line, number: i + 1, container: container) { links.append(link) }
        }
        return links
    }

    /// One line of a share-batch file, checked against the model's rules (unless the caller's
    /// save checks them anyway: `validate` false); nil for a blank line.
    ///
    /// - Throws: `.validation` naming the line's number.
    public static func parseLine(_ line: Substring, number: Int, container: Container, validate check: Bool = true)
        throws
        -> Link?
    {
        try parseLine(bytes: Array(line.utf8)[...], number: number, container: container, validate: check)
    }

    /// ``parseLine(_:number:container:validate:)`` over the line's bytes (UTF-8, checked): the
    /// fields are split at tab bytes, not Characters — a file of a million lines spends its time
    /// saving, not splitting.
    static func parseLine(bytes: ArraySlice<UInt8>, number: Int, container: Container, validate check: Bool) throws
        -> Link?
    {
        guard let (url, title, category) = try fields(bytes, number: number) else { return nil }
        let link = Link(url: url, title: title, category: category.map { String(decoding: $0, as: UTF8.self) })
        if check { try validate(link, in: container, place: "line \(number)") }
        return link
    }

    /// The fields of a share-batch line, each checked to be UTF-8: its URL and title, and its
    /// category's bytes (nil: none, or empty); nil for a blank line.
    ///
    /// - Throws: `.validation` naming the line's number.
    static func fields(_ bytes: ArraySlice<UInt8>, number: Int) throws
        -> (url: String, title: String, category: ArraySlice<UInt8>?)?
    {
        if bytes.allSatisfy({ $0 == 32 || $0 == 9 }) { return nil }  // blank: spaces and tabs only
        // Two or three fields, split at tab bytes (no UTF-8 sequence holds one): found by
        // position, with no list of them per line.
        let tab1 = bytes.firstIndex(of: 9)
        let tab2 = tab1.flatMap { bytes[($0 + 1)...].firstIndex(of: 9) }
        guard let tab1, tab2.flatMap({ bytes[($0 + 1)...].firstIndex(of: 9) }) == nil else {
            // A line that is no UTF-8 is named for that first, whatever its fields.
            if String(validating: bytes, as: UTF8.self) == nil {
                throw StoreError(.validation, "line \(number) is not UTF-8 text")
            }
            throw StoreError(
                .validation,
                "line \(number): expected url<TAB>title[<TAB>category], found \(bytes.count { $0 == 9 } + 1) field(s)")
        }
        func checked(_ field: ArraySlice<UInt8>) throws -> ArraySlice<UInt8> {
            // ASCII, the common case, is UTF-8 as it is: no validation pass.
            guard field.allSatisfy({ $0 < 0x80 }) || String(validating: field, as: UTF8.self) != nil else {
                throw StoreError(.validation, "line \(number) is not UTF-8 text")
            }
            return field
        }
        let url = String(decoding: try checked(bytes[..<tab1]), as: UTF8.self)
        let title = String(decoding: try checked(bytes[(tab1 + 1)..<(tab2 ?? bytes.endIndex)]), as: UTF8.self)
        let category = try tab2.map { try checked(bytes[($0 + 1)...]) }
        return (url, title, category?.isEmpty == false ? category : nil)
    }

    /// Shares every line of `input` (a share-batch file) in one transaction, as the lines are
    /// read: memory stays that of one line, the categories and the history being recorded.
    /// A bad line rejects the whole batch, naming its number; nothing is saved.
    /// - Returns: how many articles were shared, and the batch's token.
    public static func shareBatch(
        _ input: FileHandle, name: String, context: ObjectContext,
        progress: (Int) -> Void = { _ in }
    ) throws -> (articles: Int, token: HistoryToken?) {
        let container = context.container
        let now = Date()
        var articles = 0
        let nameKey = categoryName(container.model)
        // Each distinct name is looked up (or made) once: a file of a million lines names few.
        var categories = CategoryNames()
        let result = try context.batch { batch in
            // By position: a line's values are put in place, not hashed by name.
            let article = try batch.layout(
                Article.self,
                [
                    Key(\Article.title), Key(\Article.url), Key(\Article.createdAt), Key(\Article.isRead),
                    Key(\Article.category),
                ])
            try LineReader(input, name: name).forEachLine { bytes, number in
                // The batch's inserts check every value, naming the line: no second check here.
                guard let (url, title, name) = try fields(bytes, number: number) else { return }
                let category = try name.map { name in
                    try categories.id(of: name) { name in
                        try batch.uniqueObject("Category", [nameKey: .string(name)], object: "line \(number)")
                    }
                }
                _ = try batch.insert(
                    article, values: [.string(title), .string(url), .date(now), .bool(false)],
                    relationships: [category], object: "line \(number)")
                articles += 1
                progress(number)
            }
        }
        return (articles, result.token)
    }

    /// The articles, oldest first, as they are read: `body` gets one `main-app list` line of
    /// CLI.md at a time (an indexed scan; memory is that of one article and the categories).
    public static func listArticles(
        _ context: ObjectContext, unreadOnly: Bool = false, search: String? = nil, limit: Int? = nil, offset: Int = 0,
        _ body: (JSONValue) throws -> Void
    ) throws {
        try forEachListed(context, unreadOnly: unreadOnly, search: search, limit: limit, offset: offset) {
            row, category, keys in
            try body(
                .object([
                    ("id", .string(row.id.description)),
                    ("gid", row.globalID.map { .string(GlobalID.text($0)) } ?? .null),
                    ("title", row[keys.title].jsonValue),
                    ("url", row[keys.url].jsonValue),
                    ("isRead", row[keys.isRead].jsonValue),
                    ("category", category.map(JSONValue.string) ?? .null),
                    ("createdAt", row[keys.createdAt].jsonValue),
                ]))
        }
    }

    /// The same lines as ``listArticles(_:unreadOnly:search:limit:offset:_:)``, each written
    /// straight as JSON: `object` is called once per article with what writes its fields (a list
    /// of a million articles builds no ``JSONValue`` per row, and its texts are copied from the
    /// rows as they are read). The text is the same.
    public static func listArticleObjects(
        _ context: ObjectContext, unreadOnly: Bool = false, search: String? = nil, limit: Int? = nil, offset: Int = 0,
        _ object: ((inout JSONObjectWriter) -> Void) throws -> Void
    ) throws {
        try forEachListed(context, unreadOnly: unreadOnly, search: search, limit: limit, offset: offset) {
            row, category, keys in
            try object { o in
                o.string("id", row.id.description)
                if let gid = row.globalID { o.uuid("gid", gid) } else { o.null("gid") }
                o.field("title", row, keys.title)
                o.field("url", row, keys.url)
                o.field("isRead", row, keys.isRead)
                o.string("category", category)
                o.field("createdAt", row, keys.createdAt)
            }
        }
    }

    /// The stored names a list reads an article by.
    private typealias ListedKeys = (title: String, url: String, isRead: String, createdAt: String)

    /// The articles of `main-app list`, oldest first, as they are read: each row with its
    /// category's name and the stored names to read it by.
    private static func forEachListed(
        _ context: ObjectContext, unreadOnly: Bool, search: String?, limit: Int?, offset: Int,
        _ body: (borrowing StreamedRow, String?, ListedKeys) throws -> Void
    ) throws {
        // By primary key: an article's category is a Category of this store, and a key hashes
        // in a fraction of an id's time (a list looks one up per row).
        var names: [Int64: String] = [:]
        let nameKey = categoryName(context.container.model)
        try context.forEach(FetchRequest("Category")) { names[$0.id.primaryKey] = $0[nameKey].stringValue ?? "" }
        var condition: Condition = unreadOnly ? \Article.isRead == false : .always
        if let search { condition = condition && searchCondition(search, context.container.model) }
        let request = FetchRequest(
            Article.self, where: condition, sortedBy: [.ascending(\Article.createdAt)], limit: limit, offset: offset)
        // The stored names once, each row read by them.
        let keys = (
            title: Key(\Article.title).path, url: Key(\Article.url).path, isRead: Key(\Article.isRead).path,
            createdAt: Key(\Article.createdAt).path
        )
        let category = Key(\Article.category).path
        try context.forEachRow(request) { row in
            try body(row, row.target(category).flatMap { names[$0.primaryKey] }, keys)
        }
    }

    /// Articles whose title holds `text`, ignoring case and diacritics: through the derived
    /// `searchTitle` from version 3 (folded once, by the save), the title folded row by row before.
    static func searchCondition(_ text: String, _ model: Model) -> Condition {
        guard model.version >= 3 else {
            return Key(\Article.title).contains(text, .caseInsensitive, .diacriticInsensitive)
        }
        return Key(\Records.Article.searchTitle).contains(Attribute.canonical(text))
    }

    /// Each category's name with its article count (the derived `Category.articleCount` from
    /// version 3); nil before.
    public static func articleCounts(_ context: ObjectContext) throws -> [(String, Int64)]? {
        let model = context.container.model
        guard model.version >= 3 else { return nil }
        let nameKey = categoryName(model)
        return try context.fetch(FetchRequest("Category", sortedBy: [Key(nameKey).ascending])).map {
            ($0[nameKey].stringValue ?? "", $0["articleCount"].integerValue ?? 0)
        }
    }

    /// Whether `transaction` changes what `main-app list` shows — every article with its
    /// category's name: a change of an article, or a category renamed or deleted. Decided from the
    /// transaction alone, as a live query decides (a new empty category, a highlight: no).
    public static func changesList(_ transaction: HistoryTransaction, model: Model) -> Bool {
        let nameKey = categoryName(model)
        return transaction.changes.contains { change in
            switch change.objectID.entity {
            case "Article": return true
            case "Category": return change.kind == .delete || change.updatedProperties.contains(nameKey)
            default: return false
            }
        }
    }

    /// The widget's summary: unread and total counts, the three newest articles — two counts and
    /// a three-row fetch, each on an index.
    public static func widgetLine(_ context: ObjectContext) throws -> JSONValue {
        let unread = try context.count(Article.self, where: \Article.isRead == false)
        let total = try context.count(Article.self)
        var latest: [JSONValue] = []
        let title = Key(\Article.title).path
        try context.forEach(FetchRequest(Article.self, sortedBy: [.descending(\Article.createdAt)], limit: 3)) { a in
            latest.append(.object([("id", .string(a.id.description)), ("title", a[title].jsonValue)]))
        }
        return .object([
            ("unread", .number(Double(unread))), ("total", .number(Double(total))), ("latest", .array(latest)),
        ])
    }
}

/// Reads a file line by line in blocks of 64 KiB: a line ends with "\n" (a "\r" before it is
/// dropped, so CRLF files read as LF ones), the last may end without one.
struct LineReader {
    let handle: FileHandle
    /// How errors name the input.
    let name: String

    init(_ handle: FileHandle, name: String) {
        self.handle = handle
        self.name = name
    }

    private func read() throws -> Data? {
        do {
            return try handle.read(upToCount: 1 << 16)
        } catch {
            throw StoreError(.fileAccess, "cannot read \(name): \(error.localizedDescription)")
        }
    }

    /// The longest line taken, in bytes. A line of a share batch is a few hundred bytes; a file
    /// with no newline for a mebibyte is not one (a binary given by mistake), and its line would
    /// otherwise grow in memory with the file.
    static let maxLineBytes = 1 << 20

    /// Calls `body` with each line's bytes and its number (from 1).
    ///
    /// - Throws: `.validation` for a line longer than ``maxLineBytes``, naming it.
    func forEachLine(_ body: (ArraySlice<UInt8>, Int) throws -> Void) throws {
        var buffer: [UInt8] = []
        var number = 0
        func emit(_ line: ArraySlice<UInt8>) throws {
            number += 1
            try body(line.last == 13 ? line.dropLast() : line, number)
        }
        while true {
            guard let chunk = try read(), !chunk.isEmpty else { break }
            // What the buffer holds has no newline: only the new bytes are searched (searching a
            // long line again from its start after every chunk was quadratic in its length).
            var searched = buffer.count
            buffer.append(contentsOf: chunk)
            var start = buffer.startIndex
            while let newline = buffer[searched...].firstIndex(of: 10) {
                try emit(buffer[start..<newline])
                start = newline + 1
                searched = start
            }
            buffer.removeSubrange(..<start)
            guard buffer.count <= Self.maxLineBytes else {
                let limit = Self.maxLineBytes
                throw StoreError(
                    .validation,
                    "line \(number + 1) of \(name) is longer than \(limit) bytes: not a line of a share batch")
            }
        }
        if !buffer.isEmpty { try emit(buffer[...]) }
    }
}
