/// Paths taken apart without Foundation's `NSString` path methods, whose
/// `deletingLastPathComponent` traps on a one-character name (`--group a`) in the Linux
/// Foundation: a process must never die by a signal because of a path it was given.
public enum PathName {
    /// The directory part of `path`, as `deletingLastPathComponent` means it: `""` for a bare
    /// name (`a`, `a/`), `"/"` for a name in the root, else everything before the last name with
    /// the slashes after it dropped (`x//y/` → `x`).
    public static func parent(of path: String) -> String {
        var bytes = Array(path.utf8)
        while bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        var end = slash
        while end > 0, bytes[end - 1] == UInt8(ascii: "/") { end -= 1 }
        if end == 0 { return "/" }
        return String(decoding: bytes[..<end], as: UTF8.self)
    }

    /// The directory `path` names a file in: its ``parent(of:)``, `"."` for a bare name.
    public static func directory(of path: String) -> String {
        let parent = parent(of: path)
        return parent.isEmpty ? "." : parent
    }
}
