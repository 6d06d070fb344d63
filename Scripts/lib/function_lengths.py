"""Lists the functions (func, init, deinit, subscript, computed property) of Swift files whose
body is longer than a limit, counting lines from the declaration to its closing brace.

    python3 Scripts/lib/function_lengths.py LIMIT FILE...   -> exit 1 when any is longer
"""
import re
import sys

DECL = re.compile(r'^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|private|fileprivate|internal|static|class|final|'
                  r'override|mutating|nonisolated|convenience|required|@discardableResult|@inlinable)\s+)*'
                  r'(func\s+[^\s(<]+|init[?!]?|deinit|subscript)\b')


def strip_strings(line, in_multiline):
    """The line without string literal contents (so that braces in strings do not count)."""
    out, i, quote = [], 0, None
    while i < len(line):
        if in_multiline:
            end = line.find('"""', i)
            if end < 0:
                return ''.join(out), True
            i, in_multiline = end + 3, False
            continue
        if line.startswith('"""', i):
            in_multiline, i = True, i + 3
            continue
        c = line[i]
        if quote:
            if c == '\\':
                i += 2
                continue
            if c == '"':
                quote = None
            i += 1
            continue
        if c == '"':
            quote = '"'
        elif line.startswith('//', i):
            break
        else:
            out.append(c)
        i += 1
    return ''.join(out), in_multiline


def functions(path):
    lines = open(path, encoding='utf-8').read().split('\n')
    clean, multi = [], False
    for line in lines:
        text, multi = strip_strings(line, multi)
        clean.append(text)
    for start, line in enumerate(lines):
        m = DECL.match(line)
        if not m:
            continue
        depth, opened = 0, False
        for end in range(start, len(lines)):
            for c in clean[end]:
                if c == '{':
                    depth += 1
                    opened = True
                elif c == '}':
                    depth -= 1
            if opened and depth <= 0:
                yield m.group(1), start + 1, end - start + 1
                break
            if not opened and end > start and clean[end].strip() == '':
                break  # a declaration without a body (a protocol requirement)


def main():
    limit = int(sys.argv[1])
    long = []
    for path in sys.argv[2:]:
        for name, line, length in functions(path):
            if length > limit:
                long.append((length, path, line, name))
    for length, path, line, name in sorted(long, reverse=True):
        print(f'{path}:{line}: {name} is {length} lines (limit {limit})')
    sys.exit(1 if long else 0)


if __name__ == '__main__':
    main()
