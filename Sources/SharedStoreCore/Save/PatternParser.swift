import Foundation

// What a validation pattern is before ``PatternProgram`` compiles it: the scalar sets it tests,
// its tree, and the parser of the part of ICU's syntax the program runs.

/// A set of scalars: ranges and named classes, or everything else.
struct ScalarSet: Sendable {
    enum Named: Sendable {
        /// ICU's `\s`: the White_Space property.
        case whiteSpace
        /// `\p{…}`: scalars of these general categories.
        case categories([Unicode.GeneralCategory])
    }

    var ranges: [ClosedRange<UInt32>] = []
    var named: [(Named, negated: Bool)] = []
    var negated = false

    /// ICU's `.`: everything but the line terminators.
    static let dot = ScalarSet(
        ranges: [0x0A...0x0D, 0x85...0x85, 0x2028...0x2029], named: [], negated: true)

    /// Whether the set holds `s`; nil when only ICU can say. Swift's Unicode tables are newer
    /// than the ICU the toolchain carries, and they differ on thousands of letters, digits and
    /// symbols: a general category other than the controls, formats and separators (where the
    /// two agree on every scalar) is decided here for ASCII only.
    func decide(_ s: Unicode.Scalar) -> Bool? {
        var found = ranges.contains { $0.contains(s.value) }
        if !found {
            for (named, negated) in named {
                let inside: Bool
                switch named {
                case .whiteSpace: inside = s.properties.isWhitespace
                case .categories(let cs):
                    if s.value >= 0x80 && !cs.allSatisfy(Self.stable.contains) { return nil }
                    inside = cs.contains(s.properties.generalCategory)
                }
                if inside != negated {
                    found = true
                    break
                }
            }
        }
        return found != negated
    }

    /// The general categories Swift and ICU agree on for every scalar.
    static let stable: Set<Unicode.GeneralCategory> = [
        .control, .format, .spaceSeparator, .lineSeparator, .paragraphSeparator,
    ]
}

indirect enum PatternNode {
    case set(ScalarSet)
    case sequence([PatternNode])
    case alternation([PatternNode])
    case repeated(PatternNode, min: Int, max: Int?)
}

/// Reads the subset of ICU's pattern syntax ``PatternProgram`` runs; nil for anything else.
struct PatternParser {
    let s: [Unicode.Scalar]
    var i = 0

    init(_ s: [Unicode.Scalar]) { self.s = s }

    var peek: Unicode.Scalar? { i < s.count ? s[i] : nil }

    mutating func parse() -> PatternNode? {
        guard let node = alternation(), i == s.count else { return nil }
        return node
    }

    mutating func alternation() -> PatternNode? {
        var branches: [PatternNode] = []
        while true {
            guard let seq = sequence() else { return nil }
            branches.append(seq)
            guard peek == "|" else { break }
            i += 1
        }
        return branches.count == 1 ? branches[0] : .alternation(branches)
    }

    mutating func sequence() -> PatternNode? {
        var items: [PatternNode] = []
        while let c = peek, c != "|", c != ")" {
            guard let atom = atom(), let item = quantified(atom) else { return nil }
            items.append(item)
        }
        return .sequence(items)
    }

    mutating func quantified(_ atom: PatternNode) -> PatternNode? {
        guard let c = peek else { return atom }
        var (min, max): (Int, Int?)
        switch c {
        case "*": (min, max) = (0, nil)
        case "+": (min, max) = (1, nil)
        case "?": (min, max) = (0, 1)
        case "{":
            guard let counted = counted() else { return nil }
            (min, max) = counted
        default: return atom
        }
        if c != "{" { i += 1 }
        // A lazy loop ends, in ICU, at an iteration that matched nothing: not compiled.
        if peek == "?" { return nil }
        // Possessive quantifiers and stacked ones change what matches: ICU's.
        if let n = peek, n == "+" || n == "*" || n == "?" || n == "{" { return nil }
        return .repeated(atom, min: min, max: max)
    }

    /// `{n}`, `{n,}` or `{n,m}` (at most 1000).
    mutating func counted() -> (Int, Int?)? {
        i += 1
        guard let min = number() else { return nil }
        var max: Int? = min
        if peek == "," {
            i += 1
            max = peek == "}" ? nil : number()
            if max == nil && peek != "}" { return nil }
        }
        guard peek == "}", max.map({ $0 >= min }) ?? true else { return nil }
        i += 1
        return (min, max)
    }

    mutating func number() -> Int? {
        var n = 0
        var digits = 0
        while let c = peek, (0x30...0x39).contains(c.value) {
            n = n * 10 + Int(c.value - 0x30)
            digits += 1
            i += 1
            guard n <= 1000 else { return nil }
        }
        return digits > 0 ? n : nil
    }

    mutating func atom() -> PatternNode? {
        guard let c = peek else { return nil }
        i += 1
        switch c {
        case "(":
            if peek == "?" {
                guard i + 1 < s.count, s[i + 1] == ":" else { return nil }
                i += 2
            }
            guard let inner = alternation(), peek == ")" else { return nil }
            i += 1
            return inner
        case "[": return classSet().map(PatternNode.set)
        case ".": return .set(.dot)
        case "\\": return escape(inClass: false).map(PatternNode.set)
        case "^", "$", "*", "+", "?", "{", "}", ")", "]": return nil
        default:
            // ICU takes white space and `#` literally without the x flag; other ASCII
            // punctuation is literal too.
            return .set(ScalarSet(ranges: [c.value...c.value]))
        }
    }

    /// After `\`: a class escape, a control escape, or escaped punctuation.
    mutating func escape(inClass: Bool) -> ScalarSet? {
        guard let c = peek else { return nil }
        i += 1
        switch c {
        case "s": return ScalarSet(named: [(.whiteSpace, false)])
        case "S": return ScalarSet(named: [(.whiteSpace, true)])
        case "d": return ScalarSet(named: [(.categories([.decimalNumber]), false)])
        case "D": return ScalarSet(named: [(.categories([.decimalNumber]), true)])
        case "p", "P":
            guard let categories = property() else { return nil }
            return ScalarSet(named: [(.categories(categories), c == "P")])
        case "t": return ScalarSet(ranges: [0x09...0x09])
        case "n": return ScalarSet(ranges: [0x0A...0x0A])
        case "r": return ScalarSet(ranges: [0x0D...0x0D])
        case "f": return ScalarSet(ranges: [0x0C...0x0C])
        default:
            // Escaped ASCII punctuation is itself; letters and digits are escapes ICU gives
            // other meanings (\w, \b, \x…, \1…): not compiled.
            guard c.isASCII, !c.properties.isAlphabetic, !(0x30...0x39).contains(c.value), c.value > 0x20 else {
                return nil
            }
            return ScalarSet(ranges: [c.value...c.value])
        }
    }

    /// `{Name}` of a `\p`: a general category by its short name.
    mutating func property() -> [Unicode.GeneralCategory]? {
        guard peek == "{" else { return nil }
        i += 1
        var name = ""
        while let c = peek, c != "}" {
            name.unicodeScalars.append(c)
            i += 1
        }
        guard peek == "}" else { return nil }
        i += 1
        let letters: [Unicode.GeneralCategory] = [
            .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
        ]
        let table: [String: [Unicode.GeneralCategory]] = [
            "L": letters, "Lu": [.uppercaseLetter], "Ll": [.lowercaseLetter], "Lt": [.titlecaseLetter],
            "Lm": [.modifierLetter], "Lo": [.otherLetter],
            "N": [.decimalNumber, .letterNumber, .otherNumber], "Nd": [.decimalNumber], "Nl": [.letterNumber],
            "No": [.otherNumber], "Z": [.spaceSeparator, .lineSeparator, .paragraphSeparator],
            "Zs": [.spaceSeparator], "Zl": [.lineSeparator], "Zp": [.paragraphSeparator], "Cc": [.control],
            "Cf": [.format],
            "P": [
                .connectorPunctuation, .dashPunctuation, .openPunctuation, .closePunctuation,
                .initialPunctuation, .finalPunctuation, .otherPunctuation,
            ],
            "S": [.mathSymbol, .currencySymbol, .modifierSymbol, .otherSymbol],
        ]
        return table[name]
    }

    /// After `[`: a class of literals, ranges and escapes, maybe negated, up to `]`.
    mutating func classSet() -> ScalarSet? {
        var set = ScalarSet()
        if peek == "^" {
            set.negated = true
            i += 1
        }
        // `]` first, nested classes and set operations read differently in ICU: not compiled.
        // and `[:alpha:]` is a POSIX class in ICU.
        guard let first = peek, first != "]", first != ":" else { return nil }
        while let c = peek, c != "]" {
            if c == "[" || c == "&" { return nil }
            if c == "\\" {
                i += 1
                guard let e = escape(inClass: true) else { return nil }
                if e.named.isEmpty && e.ranges.count == 1, let lo = e.ranges.first?.lowerBound, rangeFollows() {
                    guard let hi = rangeEnd(), hi >= lo else { return nil }
                    set.ranges.append(lo...hi)
                } else {
                    set.ranges += e.ranges
                    set.named += e.named
                }
                continue
            }
            i += 1
            if c == "-" && (set.ranges.isEmpty && set.named.isEmpty) == false && peek != "]" { return nil }
            if rangeFollows() {
                guard let hi = rangeEnd(), hi >= c.value else { return nil }
                set.ranges.append(c.value...hi)
            } else {
                set.ranges.append(c.value...c.value)
            }
        }
        guard peek == "]" else { return nil }
        i += 1
        return set
    }

    /// Whether `-` and a range's end come next (a `-` before `]` is a literal).
    func rangeFollows() -> Bool { peek == "-" && i + 1 < s.count && s[i + 1] != "]" }

    /// After a range's start: `-` and its end (a literal or an escaped literal).
    mutating func rangeEnd() -> UInt32? {
        i += 1
        guard let c = peek else { return nil }
        i += 1
        if c == "\\" {
            guard let e = escape(inClass: true), e.named.isEmpty, e.ranges.count == 1 else { return nil }
            return e.ranges[0].lowerBound
        }
        if c == "[" || c == "&" || c == "-" { return nil }
        return c.value
    }
}
