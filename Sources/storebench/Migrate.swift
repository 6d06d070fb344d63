import Foundation
import SharedStore

/// The bench's Item model at `version`: each version after the first adds one optional
/// attribute (`extra1`, `extra2`, …), the lightweight migration an app update makes most.
func migrateModel(version: Int) throws -> Model {
    var entity = itemModel(indexes: [Index("isRead", "createdAt")]).entities[0]
    entity.attributes += (1..<version).map { Attribute("extra\($0)", .string, optional: true) }
    return try Model(version: version, [entity])
}

/// `migrate-add-attribute-1m`: a store of `readRows` items opened by a model one version newer
/// that adds an optional attribute (the migration runs inside the open, in one transaction),
/// against SQLite's own `ALTER TABLE … ADD COLUMN` on the same table in the same run, and an
/// open that migrates nothing. Milliseconds, medians of the rounds.
func migrateCase(_ s: Settings) throws -> Report {
    let dir = scratch()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let group = dir + "/group"
    do {
        let container = try openStore(group: group, model: try migrateModel(version: 1))
        try fillItems(container.newContext(author: "Filler"), rows: s.readRows)
    }
    var migrate: [Double] = []
    var open: [Double] = []
    var raw: [Double] = []
    for round in 1...s.rounds {
        let model = try migrateModel(version: round + 1)
        var t0 = now()
        _ = try Container(group: group, model: model)
        migrate.append(now() - t0)
        t0 = now()
        _ = try Container(group: group, model: model)
        open.append(now() - t0)
        let baseline = try Baseline(path: group + "/" + Container.storeFileName)
        t0 = now()
        try baseline.addColumn("raw\(round)")
        raw.append(now() - t0)
    }
    let ms = { (xs: [Double]) in JSONValue.number(round3(median(xs) * 1000)) }
    return .object([
        ("case", .string("migrate-add-attribute-1m")), ("rows", .number(Double(s.readRows))),
        ("median_ms", ms(migrate)), ("open_without_migration_ms", ms(open)), ("raw_add_column_ms", ms(raw)),
        ("goal_ms", .number(50)),
    ])
}
