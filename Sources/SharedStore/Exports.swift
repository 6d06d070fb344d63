// The library's one import: `import SharedStore` brings every public type of its layers.
//
//   SharedStoreSupport   JSON values (public); timestamps, safe text, the clock, Protected (package)
//   SharedStoreSQLite    the SQLite wrapper        (public: only ResultCode; the rest is package)
//   SharedStoreLMDB      the LMDB wrapper          (package: used by the sync layer only)
//   SharedStoreCore      model, store, history, the SQL owner
//   SharedStoreSync      token registry, change signal and observer, views, cleaner, verifier
@_exported import SharedStoreCore
@_exported import SharedStoreSQLite
@_exported import SharedStoreSupport
@_exported import SharedStoreSync
