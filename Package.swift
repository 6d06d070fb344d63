// swift-tools-version:6.0
import PackageDescription

// What a module that imports SharedStore depends on, named target by target: SharedStore only
// re-exports them, and SwiftPM rebuilds a module when one of its direct dependencies changes.
let library: [Target.Dependency] = [
    "SharedStore", "SharedStoreCore", "SharedStoreSync", "SharedStoreSupport", "SharedStoreSQLite",
]

let package = Package(
    name: "SharedStore",
    products: [
        .library(name: "SharedStore", targets: ["SharedStore"])
    ],
    targets: [
        // C libraries from Debian's packages: a module map and a shim header each, nothing else.
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLMDB", providers: [.apt(["liblmdb-dev"])]),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // The layers, bottom up; each may only import those below it (the compiler enforces it).
        .target(name: "SharedStoreSupport"),
        .target(name: "SharedStoreSQLite", dependencies: ["CSQLite", "SharedStoreSupport"]),
        .target(name: "SharedStoreLMDB", dependencies: ["CLMDB", "SharedStoreSupport"]),
        .target(name: "SharedStoreCore", dependencies: ["SharedStoreSQLite", "SharedStoreSupport"]),
        .target(name: "SharedStoreSync", dependencies: ["SharedStoreCore", "SharedStoreLMDB", "SharedStoreSupport"]),
        // PostgreSQL through libpq: the server that mirrors stores across machines (issue 14).
        .target(name: "SharedStorePostgres", dependencies: ["CLibPQ", "SharedStoreSupport"]),
        // The mirror: a store's history through a PostgreSQL server, both ways.
        .target(
            name: "SharedStoreMirror",
            dependencies: ["SharedStoreCore", "SharedStoreSync", "SharedStorePostgres", "SharedStoreSupport"]),
        // The one module users import.
        .target(name: "SharedStore", dependencies: ["SharedStoreCore", "SharedStoreSync", "SharedStoreSupport"]),
        // The read-later model the targets, the demo and the scenarios share.
        .target(name: "ReadLater", dependencies: library),
        // The one argument parser of every executable.
        .target(name: "ArgumentParsing"),
        // Output and the commands of the targets, written once.
        .target(name: "StoreCLI", dependencies: library + ["ReadLater", "ArgumentParsing"]),
        // storectl's mirror command: only storectl links PostgreSQL's client library.
        .target(
            name: "StoreCLIMirror", dependencies: library + ["StoreCLI", "SharedStoreMirror", "SharedStorePostgres"]),
        // The targets of shared/docs/CLI.md: thin executables over StoreCLI.
        .executableTarget(name: "main-app", dependencies: ["StoreCLI"]),
        .executableTarget(name: "share-extension", dependencies: ["StoreCLI"]),
        .executableTarget(name: "widget", dependencies: ["StoreCLI"]),
        .executableTarget(name: "history-cleaner", dependencies: ["StoreCLI"]),
        .executableTarget(name: "storectl", dependencies: ["StoreCLI", "StoreCLIMirror"]),
        // The benchmark: SharedStore against raw SQLite in the same run.
        .executableTarget(
            name: "storebench",
            dependencies: library + [
                "CSQLite", "ArgumentParsing", "ReadLater", "SharedStoreMirror", "SharedStorePostgres",
            ]),
        // The parsers of outside input as fuzz targets (libFuzzer with -DFUZZING; else a corpus replayer).
        .executableTarget(
            name: "sharedstore-fuzz",
            dependencies: library + ["ReadLater", "StoreCLI", "StoreCLIMirror", "SharedStoreMirror"]),
        // A small executable the tests and the demo drive as a real second process.
        .executableTarget(name: "sharedstore-helper", dependencies: library + ["ReadLater", "ArgumentParsing"]),
        .testTarget(
            name: "SharedStoreTests",
            dependencies: [
                "SharedStore", "SharedStoreCore", "SharedStoreSync", "SharedStoreSQLite", "SharedStoreLMDB",
                "ReadLater", "CLMDB", "SharedStorePostgres", "SharedStoreMirror", "StoreCLI", "StoreCLIMirror",
                "ArgumentParsing",
            ]),
    ],
    swiftLanguageModes: [.v6]
)
