/// A reproducible random number generator (SplitMix64): one seed, one sequence, on every
/// machine. Randomized tests and the stress run print their seed so that a failure replays.
package struct SeededRandom: RandomNumberGenerator, Sendable {
    /// The generator's whole state.
    package var state: UInt64

    /// Starts from `state` as it is.
    package init(state: UInt64) { self.state = state }

    /// Starts from `seed` moved one step away from 0 (a seed of 0 still gives a useful sequence).
    package init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }

    /// The next number of the sequence (SplitMix64's step).
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<n` (0 when `n` is not positive).
    package mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
}
