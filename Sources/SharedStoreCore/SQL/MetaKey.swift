/// The keys of `ss_meta`, the store's own facts.
enum MetaKey: String, CaseIterable {
    /// The layout of SharedStore's own tables.
    case format
    case storeID = "store_id"
    /// The model's description (stores of format 2; format 3 keeps `schema`).
    case model
    /// The version of the model that made or last migrated the store.
    case modelVersion = "model_version"
    /// The canonical JSON of the store's schema (``StoredSchema``).
    case schema
    /// The store's numbering of entities and properties for history (``HistoryCatalog``).
    case catalog
    case createdAt = "created_at"
    /// Through which token history was deleted (the floor), and the newest time deleted.
    case historyDeletedThrough = "history_deleted_through"
    case historyDeletedTime = "history_deleted_time"
    /// Token numbers lost when the store was put back to an older copy.
    case lostTokens = "lost_tokens"
    /// Set once a token registry held consumers of this store: an empty registry beside it
    /// since (not repaired) lost them.
    case registryInUse = "registry_in_use"
    /// The token lease: `THROUGH BOOT`, the highest token a save may take before the lease is
    /// extended, and the boot it was taken in (``Container/leaseSpan``).
    case tokenLease = "token_lease"
    /// The next token lease, taken ahead of need: `THROUGH BOOT`, committed without a sync and
    /// then made durable by a sync of the WAL outside the write lock. After a reboot, every
    /// number through the larger of the two leases counts as leased.
    case tokenLeaseAhead = "token_lease_ahead"
    /// The cleaner's last runs, `TIME THROUGH NEWEST` each, separated by `;` (oldest first, at
    /// most ``CleanerRun/kept``): how fast history is made and cleaned.
    case cleanerRuns = "cleaner_runs"
}
