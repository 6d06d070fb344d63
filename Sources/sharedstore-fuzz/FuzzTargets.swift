import Foundation
import ReadLater
import SharedStore
import SharedStoreCore
import SharedStoreMirror
import StoreCLI
import StoreCLIMirror

/// The parsers that read what comes from outside — files in the group directory, command-line
/// arguments, share-batch files — each as a function of raw bytes that must never crash, hang or
/// allocate without bound. libFuzzer drives them (`Scripts/fuzz.sh`); without it, this executable
/// replays files through them (the committed seed corpus, in the tests).
enum FuzzTarget: String, CaseIterable {
    case historyBlob = "history-blob"
    case token
    case objectID = "object-id"
    case shareBatch = "share-batch"
    case arguments
    case mirrorPayload = "mirror-payload"
    case json

    private static let storeID = UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))

    /// One in-memory store for the batch parser's validation, made once.
    private static let container: Container? = {
        var options = Container.Options()
        options.inMemory = true
        return try? Container(group: "", model: ReadLater.model, options: options)
    }()

    /// History numberings to decode with: the model's own order, and a store's after migrations
    /// (an entity and properties removed, the rest numbered out of order).
    private static let numberings: [HistoryNumbering] = {
        var migrated = HistoryCatalog(ReadLater.model)
        migrated.entities.insert(HistoryCatalog.Entry(name: nil, properties: [nil, nil]), at: 0)
        migrated.entities[1].properties.insert(nil, at: 1)
        migrated.entities[2].properties.reverse()
        return [HistoryCatalog(ReadLater.model), migrated].compactMap {
            try? HistoryNumbering(model: ReadLater.model, catalog: $0, path: "fuzz")
        }
    }()

    /// The parser of every executable, for the argument parser.
    private static let parsers: [CommandLineParser] = [
        Targets.mainApp, Targets.shareExtension, Targets.widget,
        Targets.historyCleaner, Targets.storectlWithMirror,
    ].map(\.parser)

    /// Runs the target on `bytes`. Errors are the expected answer to bad input; only a crash,
    /// a hang or an allocation without bound is a finding.
    func run(_ bytes: [UInt8]) {
        switch self {
        case .historyBlob:
            for numbering in Self.numberings {
                for filter in [nil, [1]] as [Set<Int>?] {
                    _ = try? HistoryCodec.decode(
                        bytes, model: ReadLater.model, numbering: numbering, storeID: Self.storeID, entityFilter: filter
                    )
                }
            }
        case .token:
            let text = String(decoding: bytes, as: UTF8.self)
            if let token = try? HistoryToken(parsing: text) {
                // What parses prints back as something that parses to the same token.
                // A parsed token that does not print back is a library bug: the fuzzer's finding.
                precondition(
                    (try? HistoryToken(parsing: token.description)) == token, "token does not round-trip: \(text)")
            }
        case .objectID:
            let text = String(decoding: bytes, as: UTF8.self)
            if let id = try? ObjectID(parsing: text, storeID: Self.storeID) {
                precondition(
                    (try? ObjectID(parsing: id.description, storeID: Self.storeID)) == id,
                    "id does not round-trip: \(text)")
            }
        case .shareBatch:
            guard let container = Self.container else { return }
            _ = try? ReadLater.parseBatch(String(decoding: bytes, as: UTF8.self), container: container)
        case .arguments:
            // The first byte picks an executable; NUL bytes separate the words after its name.
            guard let first = bytes.first, !Self.parsers.isEmpty else { return }
            let parser = Self.parsers[Int(first) % Self.parsers.count]
            let words = bytes.dropFirst().split(separator: 0, omittingEmptySubsequences: false).map {
                String(decoding: $0, as: UTF8.self)
            }
            switch try? parser.parse(words) {
            case .run(let parsed):
                _ = try? parsed.integer("limit", in: 0...Int.max)
                _ = try? parsed.seconds("for", in: 0...31_536_000)
            case .help(let command):
                _ = parser.help(command)
            case nil:
                break
            }
        case .mirrorPayload:
            // A server row another program may have written: decoded, or refused with an error.
            guard let (model, changes) = try? MirrorPayload.decode(String(decoding: bytes, as: UTF8.self), sequence: 1)
            else { return }
            // What decodes encodes back to the same changes.
            let again = try? MirrorPayload.decode(MirrorPayload.encode(changes, modelVersion: model), sequence: 1)
            precondition(again?.changes == changes, "a mirror payload does not round-trip")
        case .json:
            // Any text: parsed or refused; what parses writes text that parses to the same text.
            guard let value = try? JSONValue(parsing: String(decoding: bytes, as: UTF8.self)) else { return }
            let text = value.serialized
            precondition((try? JSONValue(parsing: text))?.serialized == text, "JSON does not read back as written")
        }
    }
}
