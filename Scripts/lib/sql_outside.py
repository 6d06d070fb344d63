"""Lists SQL text in Swift string literals outside the SQL owners: every literal is read whole
(one-line, multi-line `\"\"\"` and raw `#"…"#` strings alike) and a literal holding an SQL keyword
in capitals (SQLite's and PostgreSQL's statements, the way this code base writes them) is SQL.

    python3 Scripts/lib/sql_outside.py FILE...   -> exit 1 when any file outside the owners holds SQL
"""
import re
import sys

OWNERS = ('Sources/SharedStoreCore/SQL/', 'Sources/SharedStoreSQLite/', 'Sources/SharedStorePostgres/',
          'Sources/storebench/Baseline.swift', 'Sources/storebench/Baseline+ShareBatch.swift')
KEYWORDS = re.compile(r'\b(SELECT|INSERT|UPDATE|DELETE\s+FROM|WHERE|ORDER\s+BY|REINDEX|CREATE|PRAGMA|BEGIN|COMMIT|ROLLBACK|DROP|ALTER|SHOW|'
                      r'SAVEPOINT|RELEASE|REPLACE INTO|VACUUM|ANALYZE|ATTACH|DETACH|EXPLAIN|LISTEN|NOTIFY|TRUNCATE|'
                      r'GRANT|REVOKE|WITH RECURSIVE)\b')


def literals(text):
    """(line, content) of every string literal of a Swift source, comments skipped."""
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == '\n':
            line += 1
            i += 1
        elif text.startswith('//', i):
            end = text.find('\n', i)
            i = n if end < 0 else end
        elif text.startswith('/*', i):
            end = text.find('*/', i + 2)
            end = n if end < 0 else end + 2
            line += text.count('\n', i, end)
            i = end
        elif c == '#' or c == '"':
            hashes = len(text[i:]) - len(text[i:].lstrip('#'))
            j = i + hashes
            if j >= n or text[j] != '"':
                i = j if hashes else i + 1
                continue
            multi = text.startswith('"""', j)
            opener = '"""' if multi else '"'
            start = j + len(opener)
            closer = opener + '#' * hashes
            k = start
            while True:
                end = text.find(closer, k)
                if end < 0:
                    end = n
                    break
                # In a plain string an escaped quote does not end it.
                backslashes = len(text[:end]) - len(text[:end].rstrip('\\'))
                if hashes == 0 and backslashes % 2 == 1:
                    k = end + 1
                    continue
                break
            yield line, text[start:end]
            line += text.count('\n', i, end)
            i = end + len(closer)
        else:
            i += 1


def main():
    found = []
    for path in sys.argv[1:]:
        if path.startswith(OWNERS):
            continue
        text = open(path, encoding='utf-8').read()
        for line, content in literals(text):
            m = KEYWORDS.search(content)
            if m:
                found.append(f'{path}:{line}: {m.group(1)} in "{content.strip()[:80]}"')
    for f in found:
        print(f)
    sys.exit(1 if found else 0)


if __name__ == '__main__':
    main()
