import Foundation
import SharedStore

extension ReadLater {
    /// The newest read-later model written types first: record types whose properties and
    /// schemas describe the same entities as ``ReadLater/model``, so that the two are one model
    /// (equal, with one store and one history) and a process may open the group directory with
    /// either (the coexistence scenario runs the targets on the entity model and a helper on this
    /// one).
    public enum Records {
        /// The types-first model of version 3: equal to `ReadLater.model(version: 3)`.
        public static let model: Model = {
            do {
                return try Model(version: 3, records: [Article.self, Category.self, Highlight.self])
            } catch {
                // The declarations below are constants; a test compares the model on every run.
                preconditionFailure("the types-first read-later model is inconsistent: \(error)")
            }
        }()

        /// An article of version 3, every attribute included.
        public struct Article: Record, Hashable {
            public static let entityName = "Article"
            /// The article's highlights (deleted with it).
            public static let highlights = ToMany<Article, Highlight>("highlights")
            public static let schema = RecordSchema<Article>(
                [
                    .attribute(\.title, minLength: 1, maxLength: 500, singleLine: true, preservedInHistory: true),
                    .attribute(\.url, pattern: ReadLater.urlPattern, preservedInHistory: true),
                    .attribute(\.isRead, default: false),
                    .attribute(\.note, maxLength: 2000),
                    .canonical(\.searchTitle, of: \.title),
                    .toOne(\.category, Category.self, inverse: "articles"),
                    .toMany(highlights, inverse: \.article, deleteRule: .cascade),
                    .index(\.createdAt), .index(\.isRead, \.createdAt), .index(\.searchTitle),
                    .keptCount("all"), .keptCount("unread", where: \Article.isRead == false),
                ], hooks: ReadLater.articleHooks)

            public var id: ObjectID?
            public var title: String
            public var url: String
            public var createdAt: Date
            public var isRead: Bool
            public var note: String?
            /// Derived: the title lowercased without diacritics (nil until the first save).
            public var searchTitle: String?
            public var tags: [String]?
            public var category: ObjectID?

            public init(
                title: String, url: String, createdAt: Date = Date(), isRead: Bool = false, note: String? = nil,
                tags: [String]? = nil, category: ObjectID? = nil
            ) {
                self.title = title
                self.url = url
                self.createdAt = createdAt
                self.isRead = isRead
                self.note = note
                self.tags = tags
                self.category = category
            }
        }

        /// A category of version 3: its Swift name is `name`, stored as `label` (renamed in
        /// version 2).
        public struct Category: Record, Hashable {
            public static let entityName = "Category"
            /// The category's articles.
            public static let articles = ToMany<Category, Article>("articles")
            public static let schema = RecordSchema<Category>([
                .attribute(
                    \.name, minLength: 1, maxLength: 200, singleLine: true, preservedInHistory: true,
                    renamedFrom: "name"),
                .derived(\.articleCount, .count("articles")),
                .toMany(articles, inverse: \.category),
                .unique(\.name),
            ])

            public var id: ObjectID?
            public var name: String
            /// Derived: how many articles the category holds.
            public var articleCount: Int?

            public init(name: String) { self.name = name }

            enum CodingKeys: String, CodingKey {
                case id
                case name = "label"
                case articleCount
            }
        }

        /// A highlight of an article (version 2 on).
        public struct Highlight: Record, Hashable {
            public static let entityName = "Highlight"
            public static let schema = RecordSchema<Highlight>([
                .attribute(\.text, minLength: 1, maxLength: 2000),
                .toOne(\.article, Article.self, inverse: "highlights"),
            ])

            public var id: ObjectID?
            public var text: String
            public var createdAt: Date
            public var article: ObjectID?

            public init(text: String, createdAt: Date = Date(), article: ObjectID?) {
                self.text = text
                self.createdAt = createdAt
                self.article = article
            }
        }
    }
}
