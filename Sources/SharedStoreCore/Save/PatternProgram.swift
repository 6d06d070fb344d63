import Foundation

/// A validation pattern compiled for matching whole strings fast: an automaton over Unicode
/// scalars, run in one pass without backtracking (Thompson's construction).
///
/// It takes the part of ICU's syntax that validation patterns use — literals, `.`, classes with
/// ranges and negation, `\s` `\d` `\p{…}` and their negations, groups, alternation, and the
/// greedy quantifiers `*` `+` `?` `{n,m}` — with ICU's meaning of each. Anything else (anchors,
/// look-around, flags, back references, `\w`, lazy and possessive quantifiers, POSIX classes, set
/// operations) is not compiled, and the pattern goes to `NSRegularExpression` as before: `init`
/// returns nil. A letter, digit or symbol class meeting a non-ASCII scalar leaves that one match
/// to ICU too (``ScalarSet/decide(_:)``). A test compares the two on random patterns and strings.
struct PatternProgram: Sendable {
    enum Instruction: Sendable {
        /// One scalar in the set, then the next instruction.
        case scalar(ScalarSet)
        /// Both instructions, without consuming.
        case split(Int, Int)
        case jump(Int)
        case match
    }

    let program: [Instruction]
    /// For each instruction: the instructions reachable from it without consuming a scalar
    /// (the scalar tests and the match among them), as a bit set of `words` words.
    private let closures: [[UInt64]]
    private let words: Int
    /// For each instruction that tests a scalar: which ASCII scalars it takes, as two words
    /// (worked out once: the Unicode properties are asked only of other scalars).
    private let ascii: [(UInt64, UInt64)]
    /// The match instruction's bit.
    private let matchBit: (word: Int, mask: UInt64)
    /// For a program of one word: the sets of instructions ASCII text leads to from the start,
    /// as the states of a table (state 0: the start), at most ``tableLimit`` of them.
    private let tableStates: [UInt64]
    /// `table[state * 128 + v]`: the state after ASCII scalar `v`; ``dead`` when no instruction
    /// takes it, ``unbuilt`` past the limit (the automaton goes on as without the table).
    private let table: [Int32]
    private static let dead: Int32 = -1
    private static let unbuilt: Int32 = -2
    /// States of the table at most (128 entries each).
    static let tableLimit = 64

    /// Instructions at most: a pattern with counted repeats that would make more is left to ICU.
    static let limit = 1024

    init?(_ pattern: String) {
        var parser = PatternParser(Array(pattern.unicodeScalars))
        guard let tree = parser.parse() else { return nil }
        var program: [Instruction] = []
        guard Self.emit(tree, into: &program) else { return nil }
        program.append(.match)
        self.program = program
        words = (program.count + 63) / 64
        closures = program.indices.map { Self.closure($0, program, words: (program.count + 63) / 64) }
        ascii = program.map { instruction in
            guard case .scalar(let set) = instruction else { return (0, 0) }
            var bits: (UInt64, UInt64) = (0, 0)
            for v in UInt32(0)..<128 where Unicode.Scalar(v).flatMap(set.decide) == true {
                if v < 64 { bits.0 |= 1 << UInt64(v) } else { bits.1 |= 1 << UInt64(v - 64) }
            }
            return bits
        }
        matchBit = ((program.count - 1) / 64, 1 << UInt64((program.count - 1) % 64))
        (tableStates, table) = words == 1 ? Self.asciiTable(closures, ascii) : ([], [])
    }

    /// The table of a one-word program over ASCII scalars: every set of instructions reachable
    /// from the start by ASCII text, up to ``tableLimit`` sets, with its step for each scalar.
    private static func asciiTable(_ closures: [[UInt64]], _ ascii: [(UInt64, UInt64)]) -> ([UInt64], [Int32]) {
        var states: [UInt64] = [closures[0][0]]
        var index: [UInt64: Int32] = [closures[0][0]: 0]
        var table: [Int32] = []
        var i = 0
        while i < states.count {
            for v in UInt32(0)..<128 {
                var next: UInt64 = 0
                var pending = states[i]
                while pending != 0 {
                    let pc = pending.trailingZeroBitCount
                    pending &= pending - 1
                    guard pc + 1 < closures.count else { continue }
                    let bits = v < 64 ? ascii[pc].0 & (1 << UInt64(v)) : ascii[pc].1 & (1 << UInt64(v - 64))
                    if bits != 0 { next |= closures[pc + 1][0] }
                }
                if next == 0 {
                    table.append(dead)
                } else if let known = index[next] {
                    table.append(known)
                } else if states.count < tableLimit {
                    index[next] = Int32(states.count)
                    table.append(Int32(states.count))
                    states.append(next)
                } else {
                    table.append(unbuilt)
                }
            }
            i += 1
        }
        return (states, table)
    }

    /// Whether instruction `pc` (a scalar test) takes `s` (nil: only ICU can say).
    private func takes(_ pc: Int, _ s: Unicode.Scalar) -> Bool? {
        let v = s.value
        if v < 64 { return ascii[pc].0 & (1 << UInt64(v)) != 0 }
        if v < 128 { return ascii[pc].1 & (1 << UInt64(v - 64)) != 0 }
        guard case .scalar(let set) = program[pc] else { return false }
        return set.decide(s)
    }

    /// Whether the whole of `s` matches: the set of instructions the automaton is in, one scalar
    /// at a time (one machine word for a program of up to 64 instructions, with no allocation).
    /// Nil when a scalar's class only ICU can decide (``ScalarSet/decide(_:)``).
    func matches(_ s: String) -> Bool? {
        if words == 1, let decided = asciiMatch(s) { return decided }
        if words == 1 {
            // ASCII goes through the table, a load a scalar; another scalar (or a set past the
            // table) steps the set of instructions, and the table takes over again from a set it has.
            var state = 0
            var current: UInt64 = 0
            for scalar in s.unicodeScalars {
                let v = scalar.value
                if state >= 0 {
                    if v < 128 {
                        let next = table[state &* 128 &+ Int(v)]
                        if next >= 0 {
                            state = Int(next)
                            continue
                        }
                        if next == Self.dead { return false }
                    }
                    current = tableStates[state]
                    state = -1
                }
                var next: UInt64 = 0
                var pending = current
                while pending != 0 {
                    let pc = pending.trailingZeroBitCount
                    pending &= pending - 1
                    guard pc + 1 < program.count else { continue }
                    guard let taken = takes(pc, scalar) else { return nil }
                    if taken { next |= closures[pc + 1][0] }
                }
                if next == 0 { return false }
                current = next
                state = tableStates.firstIndex(of: next) ?? -1
            }
            return (state >= 0 ? tableStates[state] : current) & matchBit.mask != 0
        }
        var current = closures[0]
        var next = [UInt64](repeating: 0, count: words)
        for scalar in s.unicodeScalars {
            for w in 0..<words { next[w] = 0 }
            var any = false
            for w in 0..<words {
                var pending = current[w]
                while pending != 0 {
                    let pc = w * 64 + pending.trailingZeroBitCount
                    pending &= pending - 1
                    guard pc + 1 < program.count else { continue }
                    guard let taken = takes(pc, scalar) else { return nil }
                    guard taken else { continue }
                    for (k, bits) in closures[pc + 1].enumerated() { next[k] |= bits }
                    any = true
                }
            }
            if !any { return false }
            swap(&current, &next)
        }
        return current[matchBit.word] & matchBit.mask != 0
    }

    /// ``matches(_:)`` for text that is ASCII and stays in the table, over its bytes in place;
    /// nil for any other (a non-ASCII byte, a state past the table, a string not stored as UTF-8).
    private func asciiMatch(_ s: String) -> Bool? {
        let decided: Bool?? = s.utf8.withContiguousStorageIfAvailable { bytes -> Bool? in
            var state = 0
            for byte in bytes {
                guard byte < 128 else { return nil }
                let next = table[state &* 128 &+ Int(byte)]
                guard next >= 0 else { return next == Self.dead ? false : nil }
                state = Int(next)
            }
            return tableStates[state] & matchBit.mask != 0
        }
        return decided ?? nil
    }

    /// The scalar tests and the match reachable from `pc` without consuming a scalar.
    private static func closure(_ pc: Int, _ program: [Instruction], words: Int) -> [UInt64] {
        var bits = [UInt64](repeating: 0, count: words)
        var seen = Set<Int>()
        var stack = [pc]
        while let pc = stack.popLast() {
            guard seen.insert(pc).inserted else { continue }
            switch program[pc] {
            case .split(let a, let b): stack += [b, a]
            case .jump(let a): stack.append(a)
            case .scalar, .match: bits[pc / 64] |= 1 << UInt64(pc % 64)
            }
        }
        return bits
    }

    /// Appends the instructions of `node`; false when there would be more than ``limit``.
    private static func emit(_ node: PatternNode, into p: inout [Instruction]) -> Bool {
        guard p.count < limit else { return false }
        switch node {
        case .set(let set):
            p.append(.scalar(set))
        case .sequence(let nodes):
            for n in nodes where !emit(n, into: &p) { return false }
        case .alternation(let branches):
            // split(b1, next) b1 jump(end) split(b2, next) … bn
            var jumps: [Int] = []
            for (i, branch) in branches.enumerated() {
                let isLast = i == branches.count - 1
                let split = p.count
                if !isLast { p.append(.split(0, 0)) }
                guard emit(branch, into: &p) else { return false }
                if !isLast {
                    jumps.append(p.count)
                    p.append(.jump(0))
                    p[split] = .split(split + 1, p.count)
                }
            }
            for j in jumps { p[j] = .jump(p.count) }
        case .repeated(let inner, let min, let max):
            for _ in 0..<min where !emit(inner, into: &p) { return false }
            if let max {
                // Each optional copy may end the repeat.
                var splits: [Int] = []
                for _ in min..<max {
                    splits.append(p.count)
                    p.append(.split(0, 0))
                    guard emit(inner, into: &p) else { return false }
                }
                for s in splits { p[s] = .split(s + 1, p.count) }
            } else {
                let loop = p.count
                p.append(.split(0, 0))
                guard emit(inner, into: &p) else { return false }
                p.append(.jump(loop))
                p[loop] = .split(loop + 1, p.count)
            }
        }
        return p.count <= limit
    }
}
