/// The columns SharedStore gives every entity's table besides its properties, named once: the
/// SQL of this folder and the model's check of property names read them from here, so that no
/// statement can spell one differently from the others.
enum StoreColumn {
    /// The primary key: the number of an object id (`Article/42`), never given twice
    /// (AUTOINCREMENT). Core Data's name.
    static let primaryKey = "Z_PK"
    /// The object's version, bumped by every write of the object: how a save finds that another
    /// changed it since it was read. Core Data's name.
    static let version = "Z_OPT"
    /// The object's global id (16 bytes, ``GlobalID``), the same on every machine a mirror
    /// reaches; filled by every insert.
    static let globalID = "Z_GID"
    /// `Z_OPT = Z_OPT + 1`: the SET clause every write of an object adds.
    static let bumpVersion = "\(version) = \(version) + 1"
    /// `Z_PK = ?`: the condition of a statement about one row of a table.
    static let isKey = "\(primaryKey) = ?"
    /// Every column above. SQLite compares column names without case, so no property may take
    /// one of them in any case (``Model``).
    static let all = [primaryKey, version, globalID]
}
