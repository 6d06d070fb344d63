import Foundation

/// Checks an LMDB data file with `pread` before LMDB maps it.
///
/// LMDB trusts its file: a truncated file makes the first access past its end a SIGBUS, and a
/// damaged meta page or tree page a SIGSEGV or an `IS_LEAF` assertion. None of that may happen to
/// a process because of what it finds in the group directory (invariant 7), so the registry is
/// read once as plain bytes first: both meta pages, then every page of every tree reachable from
/// the newer valid meta page, each checked for its number, kind and bounds. A registry holds a
/// few consumers, so this reads a handful of pages.
///
/// The layout is LMDB 0.9's on a 64-bit machine (`mdb.c`: `MDB_page`, `MDB_meta`, `MDB_db`,
/// `MDB_node`), the format Debian's liblmdb0 writes.
package struct LMDBFileCheck {
    /// What is wrong with the file, in words for an error message.
    package struct Damage: Error, CustomStringConvertible {
        package let description: String
    }

    private static let magic: UInt32 = 0xBEEF_C0DE
    private static let dataVersion: UInt32 = 1
    private static let pageHeader = 16
    private static let nodeHeader = 8
    private static let invalidPage = UInt64.max
    // Page flags (mdb.c).
    private static let branch: UInt16 = 0x01, leaf: UInt16 = 0x02, overflow: UInt16 = 0x04, meta: UInt16 = 0x08
    private static let leaf2: UInt16 = 0x20
    // Node flags.
    private static let bigData: UInt16 = 0x01, subData: UInt16 = 0x02, dupData: UInt16 = 0x04

    private let fd: Int32
    private var size: UInt64
    /// Entry counts of the named databases met on the way (`MDB_db.md_entries`).
    private var namedEntries: [String: Int] = [:]
    private var pageSize = 0
    private var lastPage: UInt64 = 0
    private var visited = Set<UInt64>()

    /// Checks the file at `path`. A missing or empty file is fine (LMDB creates it).
    ///
    /// - Throws: ``Damage`` naming what is wrong; ``LMDBError`` when the file cannot be read.
    package static func check(path: String) throws {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            if errno == ENOENT { return }
            throw LMDBError(code: errno, call: "open", path: path)
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw LMDBError(code: errno, call: "fstat", path: path) }
        if st.st_size == 0 { return }
        var check = LMDBFileCheck(fd: fd, size: UInt64(st.st_size))
        try check.run()
    }

    /// How many entries the named database `database` holds, as far as the file can be read
    /// (nil when the walk does not reach its record).
    package static func entries(path: String, database: String) -> Int? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
        var check = LMDBFileCheck(fd: fd, size: UInt64(st.st_size))
        try? check.run()
        return check.namedEntries[database]
    }

    private init(fd: Int32, size: UInt64) {
        self.fd = fd
        self.size = size
    }

    private func read(_ count: Int, at offset: UInt64) throws -> [UInt8] {
        guard offset <= size, UInt64(count) <= size - offset else {
            throw Damage(description: "the file is truncated (\(size) bytes; page at byte \(offset) is missing)")
        }
        var out = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = out.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done))
            }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw Damage(description: "the file cannot be read at byte \(offset)") }
            done += n
        }
        return out
    }

    /// Walks the tree of the newest meta page. Other processes may commit meanwhile (the walk
    /// holds no reader slot, so pages it reads can be reused under it): damage found while the
    /// newest transaction changed is read again, and only damage that stays is reported.
    private mutating func run() throws {
        var attempts = 0
        while true {
            refreshSize()
            var walked: UInt64?
            do {
                walked = try metaTransaction()
                try walk()
                return
            } catch let damage as Damage {
                // A registry being created or committed to right now can look damaged for a
                // moment: look again for 20 ms, and for as long as its transactions move on.
                attempts += 1
                refreshSize()
                let moved = walked != nil && (try? metaTransaction()).map { $0 != walked } == true
                guard attempts < 20 || (moved && attempts < 200) else { throw damage }
                if !moved { usleep(1000) }
                visited = []
                namedEntries = [:]
            }
        }
    }

    private mutating func refreshSize() {
        var st = stat()
        if fstat(fd, &st) == 0 { size = UInt64(st.st_size) }
    }

    /// The transaction id of the newer meta page (both pages must be valid).
    private mutating func metaTransaction() throws -> UInt64 {
        let (first, second) = try metas()
        return max(first.txnID, second.txnID)
    }

    private mutating func metas() throws -> (Meta, Meta) {
        // Meta page 0 says the page size; meta page 1 follows at that offset.
        let first = try Meta(try read(Self.pageHeader + 136, at: 0), page: 0)
        let size = Int(first.pageSize)
        guard size >= 512, size <= 65536, size & (size - 1) == 0 else {
            throw Damage(description: "meta page 0 gives an invalid page size \(size)")
        }
        pageSize = size
        guard self.size >= UInt64(2 * size) else {
            throw Damage(description: "the file is truncated (\(self.size) bytes, shorter than its two meta pages)")
        }
        let second = try Meta(try read(Self.pageHeader + 136, at: UInt64(size)), page: 1)
        guard second.pageSize == first.pageSize else {
            throw Damage(description: "the meta pages disagree on the page size")
        }
        return (first, second)
    }

    private mutating func walk() throws {
        let (first, second) = try metas()
        let current = second.txnID > first.txnID ? second : first
        lastPage = current.lastPage
        guard lastPage >= 1, lastPage < UInt64.max / UInt64(pageSize) else {
            throw Damage(description: "meta page \(current.page) gives an invalid last page \(lastPage)")
        }
        // The data pages of a commit are written before its meta page: read the size after it.
        refreshSize()
        guard self.size >= (lastPage + 1) * UInt64(pageSize) else {
            throw Damage(
                description:
                    "the file is truncated (\(self.size) bytes; its meta page needs "
                    + "\((lastPage + 1) * UInt64(pageSize)))"
            )
        }
        try tree(root: current.freeRoot, depth: current.freeDepth, isMain: false)
        try tree(root: current.mainRoot, depth: current.mainDepth, isMain: true)
    }

    private struct Meta {
        let page: Int
        let pageSize: UInt32
        let freeRoot: UInt64, freeDepth: UInt16
        let mainRoot: UInt64, mainDepth: UInt16
        let lastPage: UInt64
        let txnID: UInt64

        init(_ b: [UInt8], page: Int) throws {
            self.page = page
            let flags = u16(b, 10)
            guard flags & LMDBFileCheck.meta != 0 else {
                throw Damage(description: "meta page \(page) is not a meta page (flags \(flags))")
            }
            let m = LMDBFileCheck.pageHeader
            guard u32(b, m) == LMDBFileCheck.magic else {
                throw Damage(description: "meta page \(page) has no LMDB magic number")
            }
            guard u32(b, m + 4) == LMDBFileCheck.dataVersion else {
                throw Damage(description: "meta page \(page) has LMDB data version \(u32(b, m + 4)), not 1")
            }
            // MDB_db: pad (page size in the free db) u32, flags u16, depth u16, 4 × u64, root u64.
            pageSize = u32(b, m + 24)
            freeDepth = u16(b, m + 24 + 6)
            freeRoot = u64(b, m + 24 + 40)
            mainDepth = u16(b, m + 72 + 6)
            mainRoot = u64(b, m + 72 + 40)
            lastPage = u64(b, m + 120)
            txnID = u64(b, m + 128)
        }
    }

    /// Walks a tree from `root`: every page inside the file, of the right kind, with nodes inside
    /// the page, leaves exactly at `depth`.
    private mutating func tree(root: UInt64, depth: UInt16, isMain: Bool) throws {
        if root == Self.invalidPage { return }
        guard depth >= 1, depth <= 32 else { throw Damage(description: "a tree has an invalid depth \(depth)") }
        try page(root, level: 1, depth: Int(depth), isMain: isMain)
    }

    private mutating func page(_ number: UInt64, level: Int, depth: Int, isMain: Bool) throws {
        guard number >= 2, number <= lastPage else {
            throw Damage(description: "a tree points to page \(number), outside pages 2…\(lastPage)")
        }
        guard visited.insert(number).inserted else { throw Damage(description: "page \(number) is reached twice") }
        let p = try read(pageSize, at: number * UInt64(pageSize))
        guard u64(p, 0) == number else { throw Damage(description: "page \(number) says it is page \(u64(p, 0))") }
        let flags = u16(p, 10)
        let isLeaf = flags & Self.leaf != 0
        let isBranch = flags & Self.branch != 0
        guard isLeaf != isBranch, flags & (Self.overflow | Self.meta | Self.leaf2) == 0 else {
            throw Damage(description: "page \(number) has invalid flags \(flags)")
        }
        guard isLeaf == (level == depth) else {
            throw Damage(
                description:
                    "page \(number) is a \(isLeaf ? "leaf" : "branch") at level \(level) of a tree of depth \(depth)")
        }
        let lower = Int(u16(p, 12))
        let upper = Int(u16(p, 14))
        guard lower >= Self.pageHeader, (lower - Self.pageHeader) % 2 == 0, lower <= upper, upper <= pageSize else {
            throw Damage(description: "page \(number) has invalid bounds \(lower)…\(upper)")
        }
        let count = (lower - Self.pageHeader) / 2
        guard count > 0 || level == 1 else { throw Damage(description: "page \(number) is empty") }
        for i in 0..<count {
            let at = Int(u16(p, Self.pageHeader + 2 * i))
            guard at >= upper, at + Self.nodeHeader <= pageSize else {
                throw Damage(description: "page \(number) has node \(i) outside the page")
            }
            let lo = UInt64(u16(p, at))
            let hi = UInt64(u16(p, at + 2))
            let nodeFlags = u16(p, at + 4)
            let keySize = Int(u16(p, at + 6))
            let data = at + Self.nodeHeader + keySize
            guard data <= pageSize else { throw Damage(description: "page \(number) has a key outside the page") }
            if isBranch {
                let child = lo | hi << 16 | UInt64(nodeFlags) << 32
                try page(child, level: level + 1, depth: depth, isMain: isMain)
                continue
            }
            try leafNode(
                p, number, at: at, dataSize: Int(lo | hi << 16), flags: nodeFlags, keySize: keySize, isMain: isMain)
        }
    }

    /// One node of leaf page `number` at offset `at`: its value inside the page, on overflow
    /// pages, or (in the main tree) the record of a named database, whose tree is walked too.
    private mutating func leafNode(
        _ p: [UInt8], _ number: UInt64, at: Int, dataSize: Int, flags: UInt16, keySize: Int,
        isMain: Bool
    ) throws {
        let data = at + Self.nodeHeader + keySize
        if flags & Self.bigData != 0 {
            guard data + 8 <= pageSize else { throw Damage(description: "page \(number) has a node outside the page") }
            try overflowPages(u64(p, data), bytes: dataSize)
            return
        }
        guard dataSize <= pageSize - data else {
            throw Damage(description: "page \(number) has a value outside the page")
        }
        guard flags & Self.dupData == 0 else {
            throw Damage(description: "page \(number) holds duplicate values, which the registry never writes")
        }
        guard flags & Self.subData != 0 else { return }
        // A named database: its MDB_db record.
        guard isMain, dataSize == 48 else { throw Damage(description: "page \(number) has an invalid database record") }
        let name = String(decoding: p[(at + Self.nodeHeader)..<data], as: UTF8.self)
        namedEntries[name] = Int(clamping: u64(p, data + 32))
        try tree(root: u64(p, data + 40), depth: u16(p, data + 6), isMain: false)
    }

    private mutating func overflowPages(_ first: UInt64, bytes: Int) throws {
        guard first >= 2, first <= lastPage else {
            throw Damage(description: "a value points to page \(first), outside pages 2…\(lastPage)")
        }
        let p = try read(Self.pageHeader, at: first * UInt64(pageSize))
        let pages = UInt64(u32(p, 12))
        guard u64(p, 0) == first, u16(p, 10) & Self.overflow != 0, pages >= 1, pages <= lastPage - first + 1,
            UInt64(bytes) <= pages * UInt64(pageSize) - UInt64(Self.pageHeader)
        else {
            throw Damage(description: "overflow page \(first) is invalid")
        }
        for n in first..<(first + pages) {
            guard visited.insert(n).inserted else { throw Damage(description: "page \(n) is reached twice") }
        }
    }
}

private func u16(_ b: [UInt8], _ at: Int) -> UInt16 { UInt16(b[at]) | UInt16(b[at + 1]) << 8 }
private func u32(_ b: [UInt8], _ at: Int) -> UInt32 {
    (0..<4).reduce(0) { $0 | UInt32(b[at + $1]) << (8 * UInt32($1)) }
}
private func u64(_ b: [UInt8], _ at: Int) -> UInt64 {
    (0..<8).reduce(0) { $0 | UInt64(b[at + $1]) << (8 * UInt64($1)) }
}
