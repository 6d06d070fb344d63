"""Where a share-batch line's instructions go, from two listings of callgrind_annotate (exclusive and
inclusive, --auto=no --threshold=100): by activity (the inclusive cost of the functions that do each
step of a line) and by kind (every function's own cost, grouped by library or by the Swift type it
belongs to). Read by Scripts/profile-share-batch.sh.
    python3 callgrind_groups.py EXCLUSIVE INCLUSIVE LINES"""
import collections
import re
import sys

ROW = re.compile(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*)$")

# The steps of a line, each by the mangled names of the functions doing it. For each name the largest
# function matching it counts (the outermost: what it calls is in its cost), its chunks summed (callgrind
# lists code inlined from several source files as one chunk each). No step calls another's functions.
ACTIVITIES = [
    ("SQLite: the insert into Article and its indexes (sqlite3_step)", [r"^sqlite3_step$"]),
    ("binding the values (sqlite3_bind_*, clear_bindings)",
     [f"^sqlite3_{c}$" for c in ("bind_text", "bind_blob", "bind_int64", "bind_double", "bind_null", "clear_bindings")]),
    ("parsing the line into fields", [r"9ReadLaterAAO9parseLine", r"9ReadLaterAAO6fields_"]),
    ("the category found or made", [r"9ReadLater13CategoryNamesV"]),
    ("validation (the URL pattern, the length and single-line rules)", [r"9ValidatorC8validate"]),
    ("derived values (the canonical searchTitle, the category's articleCount)", [r"12ChangeWriterV15deriveForInsert"]),
    ("the awakeFromInsert hook (createdAt)", [r"12ChangeWriterV6awaken"]),
    ("kept counts", [r"11KeptCounterV"]),
    ("history (the transaction's inserts)", [r"14ChangeRecorderV5write", r"10InsertRunsV6append"]),
]


def rows(path):
    for line in open(path, encoding="utf-8", errors="replace"):
        m = ROW.match(line)
        if m and "PROGRAM TOTALS" not in line:
            yield int(m.group(1).replace(",", "")), m.group(2)


def symbol(entry):
    """The function of a 'file:function [object]' entry, without its file."""
    entry = re.sub(r"\s*\[[^\]]*\]\s*$", "", entry)
    return entry.split(":", 1)[1] if ":" in entry else entry


def swift_type(sym):
    """Module.Type of a mangled Swift symbol ($s<len><module><len><type>...), or None."""
    m = re.search(r"\$s(\d+)", sym)
    if not m:
        return None
    at = m.end()
    n = int(m.group(1))
    module = sym[at:at + n]
    m2 = re.match(r"(\d+)", sym[at + n:])
    if not m2:
        return module
    k = int(m2.group(1))
    start = at + n + len(m2.group(1))
    return module + "." + sym[start:start + k]


def kind(entry):
    obj = re.search(r"\[([^\]]+)\]\s*$", entry)
    obj = obj.group(1) if obj else ""
    sym = symbol(entry)
    if "libsqlite3" in obj:
        return "SQLite"
    if "libicu" in obj or "FoundationICU" in obj or "RegularExpression" in sym:
        return "regular expressions (Foundation, ICU)"
    if re.search(r"swift_(retain|release|allocObject|deallocObject|bridgeObject|beginAccess|endAccess|slowAlloc|"
                 r"slowDealloc|isUniquely|arrayInit|arrayDestroy|getGenericMetadata|dynamicCast)|_swift_release_"
                 r"dealloc|RefCounts|PrespecializedGenericMetadata", sym):
        return "Swift run time: reference counts, allocation, metadata"
    if "libc.so" in obj and re.search(r"malloc|free|memcpy|memmove|memset|memcmp", sym):
        return "libc: malloc, free, memcpy"
    if re.search(r"Hasher|SipHash|RawDictionaryStorage|NativeDictionary|NativeSet|_HashTable|hashValue", sym):
        return "hashing and dictionaries"
    if "Foundation" in obj:
        return "Foundation (other)"
    if "libswiftCore" in obj:
        return "Swift standard library: strings, arrays"
    t = swift_type(sym)
    return "code: " + t if t else "other"


def main():
    exclusive, inclusive, lines = sys.argv[1], sys.argv[2], int(sys.argv[3])
    total = sum(ir for ir, _ in rows(exclusive))
    print(f"{total / lines:,.0f} instructions a line in all (the process's start and open included)")
    print("\nby activity (inclusive):")
    functions = collections.Counter()
    for ir, entry in rows(inclusive):
        functions[symbol(entry)] += ir
    found = collections.Counter()
    for name, patterns in ACTIVITIES:
        for p in patterns:
            found[name] += max((ir for sym, ir in functions.items() if re.search(p, sym)), default=0)
    for name, _ in ACTIVITIES:
        figure = f"{found[name] / lines:9,.0f}" if found[name] else "        -"
        print(f"  {figure}  {name}")
    rest = total - sum(found.values())
    print(f"  {rest / lines:9,.0f}  the rest (the batch writer, the row, ids, the line loop)")
    print("\nby kind (each function's own instructions):")
    groups = collections.Counter()
    for ir, entry in rows(exclusive):
        groups[kind(entry)] += ir
    for name, ir in groups.most_common(16):
        print(f"  {ir / lines:9,.0f}  {name}")


if __name__ == "__main__":
    main()
