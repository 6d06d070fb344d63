import Foundation
import SharedStore
import Testing

@testable import SharedStoreCore

/// The migration planner alone: which actions a model change becomes, in which order, and what
/// it refuses (the migration tests run the plans against real stores).
@Suite struct MigrationPlannerTests {
    func plan(_ old: Model, _ new: Model, customSteps: Bool = false) -> MigrationPlanner {
        MigrationPlanner(old: StoredSchema(old), catalog: HistoryCatalog(old), model: new, hasCustomSteps: customSteps)
    }

    static let v1: Model = {
        do {
            return try Model(
                version: 1,
                [
                    Entity("Series", attributes: [Attribute("name", .string)]),
                    Entity(
                        "Book",
                        attributes: [
                            Attribute("genre", .string, optional: true), Attribute("old", .string, optional: true),
                        ]),
                    Entity("Gone", attributes: [Attribute("x", .integer)]),
                ])
        } catch {
            preconditionFailure("fixture model: \(error)")
        }
    }()

    @Test func eachLightweightChangeIsOneActionNamedAsDryRunPrintsIt() throws {
        let v2 = try Model(
            version: 2,
            [
                Entity("Saga", attributes: [Attribute("name", .string)], renamedFrom: "Series"),
                Entity(
                    "Book",
                    attributes: [
                        Attribute("kind", .string, optional: true, renamedFrom: "genre"),
                        Attribute("pages", .integer, default: .integer(0)),
                    ]),
                Entity("Shelf", attributes: [Attribute("label", .string, optional: true)]),
            ])
        let p = plan(Self.v1, v2)
        #expect(p.refused.isEmpty)
        #expect(
            p.actions.map(\.description) == [
                "rename entity Series to Saga (constant time)",
                "remove entity Gone and its objects",
                "rename attribute Book.genre to Book.kind (constant time)",
                "remove attribute Book.old (rewrites the table)",
                "add attribute Book.pages integer with default 0 (constant time)",
                "add entity Shelf",
            ])
        #expect(p.entityNames["Series"] == "Saga")
        #expect(p.attributeNames["Book"]?["genre"] == "kind")
    }

    @Test func theSameModelPlansNothing() {
        let p = plan(Self.v1, Self.v1)
        #expect(p.actions.isEmpty)
        #expect(p.refused.isEmpty)
        #expect(p.checks.isEmpty)
    }

    @Test func aTypeChangeIsRefusedUnlessACustomStepMakesIt() throws {
        let v2 = try Model(
            version: 2,
            [
                Entity("Series", attributes: [Attribute("name", .integer)]),
                Entity(
                    "Book",
                    attributes: [
                        Attribute("genre", .string, optional: true), Attribute("old", .string, optional: true),
                    ]),
                Entity("Gone", attributes: [Attribute("x", .integer)]),
            ])
        let refused = plan(Self.v1, v2).refused
        #expect(refused.count == 1)
        #expect(refused.first?.contains("Series.name") == true, "\(refused)")
        #expect(plan(Self.v1, v2, customSteps: true).refused.isEmpty)
    }

    @Test func anOptionalAttributeMadeRequiredIsCheckedOrFilled() throws {
        let v2 = try Model(
            version: 2,
            [
                Entity("Series", attributes: [Attribute("name", .string)]),
                Entity(
                    "Book",
                    attributes: [
                        Attribute("genre", .string, default: .string("none")), Attribute("old", .string),
                    ]),
                Entity("Gone", attributes: [Attribute("x", .integer)]),
            ])
        let p = plan(Self.v1, v2)
        // With a default, the objects without a value take it; without one, they must have none.
        #expect(p.actions.map(\.description) == [#"set Book.genre to its default "none" where it has no value"#])
        #expect(p.checks.count == 1, "\(p.checks)")
    }
}
