import Foundation
import SharedStore

/// The shared read-later model of the targets (shared/docs/CLI.md): articles in categories.
public enum ReadLater {
    /// An absolute http(s) URL without white space or control characters.
    static let urlPattern = #"https?://[^\s/?#\p{Cc}]+[^\s\p{Cc}]*"#

    /// The newest model version this build knows (what the targets open by default).
    public static let newestVersion = 3

    /// The newest model (``newestVersion``).
    public static let model: Model = models[newestVersion - 1]

    /// The model of `version` (1 … ``newestVersion``).
    ///
    /// - Throws: `.invalidArgument` naming the versions this build knows.
    public static func model(version: Int) throws -> Model {
        guard (1...newestVersion).contains(version) else {
            throw StoreError(
                .invalidArgument, "unknown model version \(version): this build knows versions 1 to \(newestVersion)")
        }
        return models[version - 1]
    }

    /// The attribute that holds a category's name: `name` in version 1, `label` from version 2.
    public static func categoryName(_ model: Model) -> String { model.version >= 2 ? "label" : "name" }

    /// Version 1: `Article` (title, url, createdAt, isRead, category), `Category` (unique name).
    /// Version 2 adds `Article.note` (optional), the entity `Highlight` (text and date, to-one
    /// `article`; an article's highlights go with it), and renames `Category.name` to `label`.
    /// Version 3 adds derived attributes — `Article.searchTitle` (the title lowercased without
    /// diacritics, indexed: `main-app list --search`) and `Category.articleCount` (`storectl
    /// stats`) — and `Article.tags`, a list of strings kept as JSON.
    static let models: [Model] = {
        do {
            return [try version1(), try version2(), try version3()]
        } catch {
            // The declarations below are constants; a test opens both on every run.
            preconditionFailure("the read-later model is inconsistent: \(error)")
        }
    }()

    private static func version1() throws -> Model {
        try Model([
            Entity(
                "Article", attributes: articleAttributes,
                relationships: [.toOne("category", "Category", inverse: "articles", deleteRule: .nullify)],
                // What the targets sort and filter on: the list (oldest first), the widget's
                // newest three and unread count, the unread list.
                indexes: [Index("createdAt"), Index("isRead", "createdAt")],
                // The widget's two numbers, kept by every save: reading them costs one row each.
                keptCounts: articleCounts),
            Entity(
                "Category",
                attributes: [
                    Attribute("name", .string, minLength: 1, maxLength: 200, singleLine: true, preservedInHistory: true)
                ], relationships: [.toMany("articles", "Article", inverse: "category", deleteRule: .nullify)],
                uniquenessConstraints: [["name"]]),
        ])
    }

    private static func version2() throws -> Model {
        try Model(
            version: 2,
            [
                Entity(
                    "Article",
                    attributes: articleAttributes + [Attribute("note", .string, optional: true, maxLength: 2000)],
                    relationships: [
                        .toOne("category", "Category", inverse: "articles", deleteRule: .nullify),
                        .toMany("highlights", "Highlight", inverse: "article", deleteRule: .cascade),
                    ],
                    indexes: [Index("createdAt"), Index("isRead", "createdAt")], keptCounts: articleCounts),
                Entity(
                    "Category",
                    attributes: [
                        Attribute(
                            "label", .string, minLength: 1, maxLength: 200, singleLine: true, preservedInHistory: true,
                            renamedFrom: "name")
                    ], relationships: [.toMany("articles", "Article", inverse: "category", deleteRule: .nullify)],
                    uniquenessConstraints: [["label"]]),
                Entity(
                    "Highlight",
                    attributes: [
                        Attribute("text", .string, minLength: 1, maxLength: 2000), Attribute("createdAt", .date),
                    ],
                    relationships: [.toOne("article", "Article", inverse: "highlights", deleteRule: .nullify)]),
            ])
    }

    private static func version3() throws -> Model {
        var entities = try version2().entities
        entities[0].attributes += [
            Attribute.derived("searchTitle", .string, .canonical("title")),
            Attribute("tags", .json, optional: true),
        ]
        entities[0].indexes.append(Index("searchTitle"))
        entities[1].attributes.append(Attribute.derived("articleCount", .integer, .count("articles")))
        // The model carries its hook: every process that opens the store with it sets the
        // creation date, registered or not.
        return try Model(version: 3, entities, hooks: ["Article": articleHooks])
    }

    /// From version 3, an article made without a creation date gets the time it is inserted.
    static let articleHooks = EntityHooks(awakeFromInsert: { draft in
        if draft["createdAt"].isNull { try draft.set("createdAt", .date(Date())) }
    })

    /// The lifecycle events of the read-later model (version 3 on): an article saved without a
    /// creation date gets the save's time (`awakeFromInsert`). The model carries them now (every
    /// container opened with it runs them); registering them again changes nothing.
    public static func registerHooks(_ container: Container) throws {
        guard container.model.version >= 3 else { return }
        try container.register("Article", articleHooks)
    }

    private static let articleAttributes = [
        Attribute("title", .string, minLength: 1, maxLength: 500, singleLine: true, preservedInHistory: true),
        // No white space and no control character (C0, DEL, C1) anywhere.
        Attribute("url", .string, pattern: urlPattern, preservedInHistory: true),
        Attribute("createdAt", .date),
        Attribute("isRead", .bool, default: false),
    ]

    private static let articleCounts = [KeptCount("all"), KeptCount("unread", where: \Article.isRead == false)]

    public struct Article: Record, Hashable {
        public static let entityName = "Article"
        public var id: ObjectID?
        public var title: String
        public var url: String
        public var createdAt: Date
        public var isRead: Bool
        public var category: ObjectID?

        public init(
            title: String, url: String, createdAt: Date = Date(), isRead: Bool = false, category: ObjectID? = nil
        ) {
            self.title = title
            self.url = url
            self.createdAt = createdAt
            self.isRead = isRead
            self.category = category
        }
    }

    /// A category of the newest model: its Swift name stays `name` while the attribute was
    /// renamed `label` in version 2 (the coding key says so).
    public struct Category: Record, Hashable {
        public static let entityName = "Category"
        public var id: ObjectID?
        public var name: String

        public init(name: String) { self.name = name }

        enum CodingKeys: String, CodingKey {
            case id
            case name = "label"
        }
    }
}
