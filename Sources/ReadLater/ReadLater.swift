import Foundation
import SharedStore

/// The shared read-later model of the targets (shared/docs/CLI.md): articles in categories.
public enum ReadLater {
    /// An absolute http(s) URL without white space or control characters.
    static let urlPattern = #"https?://[^\s/?#\p{Cc}]+[^\s\p{Cc}]*"#

    /// `Article` (title, url, createdAt, isRead, category) and `Category` (unique name).
    public static let model: Model = {
        do {
            return try Model([
                Entity(
                    "Article",
                    attributes: [
                        Attribute(
                            "title", .string, minLength: 1, maxLength: 500, singleLine: true, preservedInHistory: true),
                        // No white space and no control character (C0, DEL, C1) anywhere.
                        Attribute("url", .string, pattern: urlPattern, preservedInHistory: true),
                        Attribute("createdAt", .date),
                        Attribute("isRead", .bool, default: false),
                    ], relationships: [.toOne("category", "Category", inverse: "articles", deleteRule: .nullify)],
                    // What the targets sort and filter on: the list (oldest first), the widget's
                    // newest three and unread count, the unread list.
                    indexes: [Index("createdAt"), Index("isRead", "createdAt")],
                    // The widget's two numbers, kept by every save: reading them costs one row each.
                    keptCounts: [KeptCount("all"), KeptCount("unread", where: Key("isRead") == false)]),
                Entity(
                    "Category",
                    attributes: [
                        Attribute(
                            "name", .string, minLength: 1, maxLength: 200, singleLine: true, preservedInHistory: true)
                    ], relationships: [.toMany("articles", "Article", inverse: "category", deleteRule: .nullify)],
                    uniquenessConstraints: [["name"]]),
            ])
        } catch {
            // The declaration above is a constant; a test opens it on every run.
            preconditionFailure("the read-later model is inconsistent: \(error)")
        }
    }()

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

    public struct Category: Record, Hashable {
        public static let entityName = "Category"
        public var id: ObjectID?
        public var name: String

        public init(name: String) { self.name = name }
    }
}
