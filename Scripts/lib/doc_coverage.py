"""Counts the public declarations of the modules `import SharedStore` re-exports and how many of
them carry a doc comment (`///` or `/** */` directly above, attributes such as @discardableResult
in between).

    python3 Scripts/lib/doc_coverage.py [--list] [THRESHOLD]

Prints the figure per module and in all; --list also prints every undocumented declaration as
`path:line: text`. With THRESHOLD (a percentage), exits 1 when the figure in all is below it.

A public declaration is one declared `public` or `open` (func, init, var, let, subscript, struct,
class, actor, enum, protocol, typealias, associatedtype), a case of a public enum, a requirement of
a public protocol, or a member of a `public extension` that names no other access level. Function
bodies are skipped, so a `case` of a switch or a local `let` never counts; a `case` line counts
once per case it declares. A declaration that shares its line with the brace of its extension (a
one-line conformance such as `extension Int: P { public var v: Value { … } }`) cannot carry a
comment of its own and is not counted: DocC shows the protocol's comment for it. The modules are
read from the `@_exported import` lines of Sources/SharedStore/Exports.swift.
"""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
EXPORTS = os.path.join(ROOT, 'Sources', 'SharedStore', 'Exports.swift')

ATTRIBUTE = r'@\w+(?:\([^)]*\))?\s+'
MODIFIER = (r'(?:public|open|package|internal|private|fileprivate|static|class|final|override|mutating|nonmutating|'
            r'nonisolated|convenience|required|lazy|weak|unowned|dynamic|indirect|prefix|postfix|infix|'
            r'(?:public|private|fileprivate|internal|package)\((?:set)\))\s+')
KEYWORD = r'(func|init[?!]?|var|let|subscript|struct|class|actor|enum|protocol|typealias|associatedtype|case|extension)'
DECL = re.compile(r'^\s*(?P<attrs>(?:' + ATTRIBUTE + r')*)(?P<mods>(?:' + MODIFIER + r')*)' + KEYWORD + r'\b')
ACCESS = re.compile(r'\b(public|open|package|internal|private|fileprivate)\b(?!\()')
TYPE_KEYWORDS = {'struct', 'class', 'actor', 'enum', 'protocol', 'extension'}


def strip_code(lines):
    """Each line without string contents and comments, so that braces in them do not count."""
    out, in_string, in_comment = [], False, False
    for line in lines:
        text, i, quote = [], 0, False
        while i < len(line):
            if in_comment:
                end = line.find('*/', i)
                if end < 0:
                    i = len(line)
                    continue
                i, in_comment = end + 2, False
                continue
            if in_string:
                end = line.find('"""', i)
                if end < 0:
                    i = len(line)
                    continue
                i, in_string = end + 3, False
                continue
            if quote:
                if line[i] == '\\':
                    i += 2
                    continue
                if line[i] == '"':
                    quote = False
                i += 1
                continue
            if line.startswith('"""', i):
                in_string, i = True, i + 3
            elif line[i] == '"':
                quote, i = True, i + 1
                text.append('""')
            elif line.startswith('//', i):
                break
            elif line.startswith('/*', i):
                in_comment, i = True, i + 2
            else:
                text.append(line[i])
                i += 1
        out.append(''.join(text))
    return out


def documented(lines, n):
    """Whether the declaration on line n has a doc comment directly above (attributes between)."""
    i = n - 1
    while i >= 0 and re.match(r'^\s*@\w+', lines[i]) and not re.match(r'^\s*@\w+.*\b(func|var|let|init)\b', lines[i]):
        i -= 1
    if i < 0:
        return False
    above = lines[i].strip()
    if above.startswith('///'):
        return True
    if above.endswith('*/'):
        while i >= 0 and '/*' not in lines[i]:
            i -= 1
        return i >= 0 and '/**' in lines[i]
    return False


def declarations(path):
    """(line number, text, documented) of every public declaration of a Swift file."""
    raw = open(path, encoding='utf-8').read().split('\n')
    code = strip_code(raw)
    stack = []  # what each open brace belongs to: 'enum', 'protocol', 'extension' (public ones), or 'other'
    pending = None  # the scope the next `{` opens, when a type's declaration is on this line or above
    for n, text in enumerate(code):
        m = DECL.match(text)
        if m and not (stack and stack[-1] == 'body'):
            keyword = m.group(3)
            mods = m.group('mods')
            access = ACCESS.findall(mods)
            scope = stack[-1] if stack else 'file'
            explicit_public = any(a in ('public', 'open') for a in access)
            if keyword == 'case':
                public = scope == 'enum'
            elif keyword == 'extension':
                public = False
            elif scope == 'protocol':
                public = True
            elif scope == 'extension':
                public = explicit_public or not access
            else:
                public = explicit_public
            if public:
                count = 1
                if keyword == 'case':
                    rest = text[m.end():].split('=')[0]
                    count = len([c for c in split_top_level(rest) if c.strip()])
                for _ in range(max(count, 1)):
                    yield n + 1, raw[n].strip(), documented(raw, n)
            if keyword in TYPE_KEYWORDS:
                if keyword == 'extension':
                    pending = 'extension' if explicit_public else 'other'
                elif keyword in ('enum', 'protocol') and public:
                    pending = keyword
                else:
                    pending = 'other'
            elif keyword in ('func', 'init', 'init?', 'init!', 'subscript', 'var', 'let'):
                pending = 'body'
        for c in text:
            if c == '{':
                if stack and stack[-1] == 'body':
                    stack.append('body')
                else:
                    stack.append(pending or 'body')
                pending = None
            elif c == '}':
                if stack:
                    stack.pop()


def split_top_level(text):
    """The comma-separated parts of text that are outside parentheses (the cases of one `case` line)."""
    parts, depth, current = [], 0, ''
    for c in text:
        if c in '([<':
            depth += 1
        elif c in ')]>':
            depth -= 1
        if c == ',' and depth == 0:
            parts.append(current)
            current = ''
        else:
            current += c
    parts.append(current)
    return parts


def modules():
    text = open(EXPORTS, encoding='utf-8').read()
    return re.findall(r'^@_exported import (\w+)', text, re.M)


def main():
    args = sys.argv[1:]
    listing = '--list' in args
    args = [a for a in args if a != '--list']
    threshold = float(args[0]) if args else None
    total = done = 0
    missing = []
    for module in modules():
        count = ok = 0
        for path in sorted(glob.glob(os.path.join(ROOT, 'Sources', module, '**', '*.swift'), recursive=True)):
            for line, text, has_doc in declarations(path):
                count += 1
                ok += has_doc
                where = f'{os.path.relpath(path, ROOT)}:{line}: {text}'
                if not has_doc and (not missing or missing[-1] != where):
                    missing.append(where)
        total += count
        done += ok
        print(f'{module}: {ok} of {count} public declarations documented ({percent(ok, count):.1f}%)')
    figure = percent(done, total)
    print(f'in all: {done} of {total} public declarations documented ({figure:.1f}%)')
    if listing:
        print('\n'.join(missing))
    if threshold is not None and figure < threshold:
        print(f'doc coverage {figure:.1f}% is below {threshold:g}%: run with --list to see what lacks a comment',
              file=sys.stderr)
        sys.exit(1)


def percent(part, whole):
    return 100.0 * part / whole if whole else 100.0


if __name__ == '__main__':
    main()
