"""Lists the bodies of Swift files that are longer than a limit: functions (func, init, deinit,
subscript), computed properties and accessors, closures that no function contains (a stored
property's `= { … }()`, a global's initializer, a closure in top-level code), and a file's top-level
code itself (the statements of a `main.swift`). A function's closures are bounded by the function.

Lines count from the line that opens a body to the line that closes it; top-level code counts its
statement lines (blank lines, comments and declarations aside, a statement's continuation lines
only inside a block).

    python3 Scripts/lib/function_lengths.py LIMIT FILE...   -> exit 1 when any is longer
"""
import re
import sys

MODIFIERS = (r'(?:(?:public|package|private|fileprivate|internal|static|class|final|override|mutating|nonmutating|'
             r'nonisolated|convenience|required|lazy|weak|unowned|dynamic|@\w+(?:\([^)]*\))?)(?:\(set\))?\s+)*')
FUNC = re.compile(r'^\s*' + MODIFIERS + r'(func\s+[^\s(<]+|init[?!]?|deinit|subscript)\b')
TYPE = re.compile(r'^\s*' + MODIFIERS + r'(?:indirect\s+)?(struct|class|enum|extension|protocol|actor)\s+[\w.]+')
# `var name: Type {` (a computed property, or one with observers), without an `=` before the brace.
COMPUTED = re.compile(r'^\s*' + MODIFIERS + r'var\s+(\w+)\s*:[^=]*$')
ACCESSOR = re.compile(r'^\s*(?:(?:nonmutating|mutating)\s+)?(get|set|willSet|didSet|_read|_modify)\b')
IMPORT = re.compile(r'^\s*(@\w+\s+)*import\s')
CONTROL = re.compile(r'^\s*(?:\}\s*)?(?:\w+\s*:\s*)?(if|else|for|while|switch|guard|do|catch|repeat|defer)\b')
DECLARATION = re.compile(r'^\s*' + MODIFIERS + r'(import|func|init|deinit|subscript|var|let|typealias|struct|class|enum|'
                         r'extension|protocol|actor|case|associatedtype|precedencegroup|operator)\b')


def strip_strings(line, in_multiline):
    """The line without string literal contents and comments (so that braces in them do not count)."""
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
        raw = re.match(r'(#+)(""")?"', line[i:])
        if raw and not quote:
            # A raw string (`#"…"#`): quotes inside it end nothing until `"#`.
            closer = ('"""' if raw.group(2) else '"') + raw.group(1)
            end = line.find(closer, i + raw.end())
            if end < 0:
                return ''.join(out), bool(raw.group(2))
            i = end + len(closer)
            continue
        c = line[i]
        if quote:
            if line.startswith('\\(', i):
                i = end_of_interpolation(line, i + 2)
                continue
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


def end_of_interpolation(line, i):
    """The index after the `)` that closes an interpolation whose text starts at `i`: its
    parentheses counted, the strings inside it skipped (`\\(x ?? "{")` holds no brace)."""
    depth, quote = 1, False
    while i < len(line) and depth > 0:
        c = line[i]
        if quote:
            if c == '\\':
                i += 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c == '(':
            depth += 1
        elif c == ')':
            depth -= 1
        i += 1
    return i


def clean_lines(path):
    lines = open(path, encoding='utf-8').read().split('\n')
    clean, multi, in_block_comment = [], False, False
    for line in lines:
        text, multi = strip_strings(line, multi)
        if in_block_comment or '/*' in text:
            start = 0 if in_block_comment else text.index('/*')
            end = text.find('*/', start)
            in_block_comment = end < 0
            text = text[:start] + ('' if end < 0 else text[end + 2:])
        clean.append(text)
    return clean


CONTINUATION = re.compile(r'^\s*(\)|->|(throws|rethrows|async|where)\b)')


def signature(clean, n, before):
    """The text that says what a `{` on line `n` opens: `before` (the text ahead of it on its
    line), or, for a signature wrapped over lines (`) throws -> T {`, `throws -> T` then `{`
    alone), the line where the signature starts."""
    candidate, depth = before, before.count(')') - before.count('(')
    for m in range(n - 1, max(-1, n - 40), -1):
        if depth <= 0 and candidate.strip() and not CONTINUATION.match(candidate):
            return candidate
        candidate = clean[m]
        depth += candidate.count(')') - candidate.count('(')
    return candidate


def kind_of(before, stack):
    """What a `{` opens, from the text before it on its line."""
    inside_type = bool(stack) and stack[-1][0] == 'type'
    if FUNC.match(before):
        return 'func', FUNC.match(before).group(1)
    if TYPE.match(before):
        return 'type', None
    if (inside_type or not stack) and COMPUTED.match(before):
        return 'func', 'var ' + COMPUTED.match(before).group(1)
    if stack and stack[-1][0] == 'func' and stack[-1][2].startswith('var ') and ACCESSOR.match(before):
        return 'func', stack[-1][2] + ' ' + ACCESSOR.match(before).group(1)
    if CONTROL.match(before):
        return 'control', CONTROL.match(before).group(1)
    return 'closure', 'closure'


def bodies(path):
    """(name, first line, length) of every body the limit applies to, and of the top-level code
    (in a `main.swift`, every line of its statements, `let`s and multi-line calls included)."""
    clean = clean_lines(path)
    main = path.endswith('main.swift')
    stack = []  # (kind, first line, name, inside a function)
    top_level, open_brackets = 0, 0
    for n, text in enumerate(clean):
        segment_start = 0
        # A statement of top-level code starts here (a declaration's continuation lines, such as
        # the elements of a global array, are not code).
        opens_body = bool(FUNC.match(text) or TYPE.match(text))
        line_is_top_level = (not stack and text.strip() and text.strip() != '}' and not IMPORT.match(text)
                             and not opens_body and (main or (open_brackets == 0 and not DECLARATION.match(text))))
        if not stack:
            open_brackets += text.count('(') + text.count('[') - text.count(')') - text.count(']')
        for i, c in enumerate(text):
            if c == '{':
                if text[:i].count('(') > text[:i].count(')'):
                    # Inside an argument list or a default value: a closure, not a body.
                    kind, name = 'closure', 'closure'
                else:
                    before = text[segment_start:i]
                    if FUNC.match(text[:i]) and not FUNC.match(before):
                        before = text[:i]  # `func f(x: () -> Int = { 1 }) {`: the signature's line
                    kind, name = kind_of(signature(clean, n, before), stack)
                in_func = any(k == 'func' for k, _, _, _ in stack) or any(f for _, _, _, f in stack)
                stack.append((kind, n, name or '', in_func))
                segment_start = i + 1
            elif c == '}':
                if not stack:
                    continue
                kind, first, name, in_func = stack.pop()
                if kind == 'func' and not in_func:
                    yield name, first + 1, n - first + 1
                elif kind in ('closure', 'control') and not in_func:
                    yield f'{name} (outside any function)', first + 1, n - first + 1
                segment_start = i + 1
            elif c == ';':
                segment_start = i + 1
        if line_is_top_level or (stack and not any(k in ('func', 'type') for k, _, _, _ in stack) and text.strip()):
            top_level += 1
    if top_level:
        yield 'top-level code', 1, top_level


def main():
    limit = int(sys.argv[1])
    long = []
    for path in sys.argv[2:]:
        for name, line, length in bodies(path):
            if length > limit:
                long.append((length, path, line, name))
    for length, path, line, name in sorted(long, reverse=True):
        print(f'{path}:{line}: {name} is {length} lines (limit {limit})')
    sys.exit(1 if long else 0)


if __name__ == '__main__':
    main()
