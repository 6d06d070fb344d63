/// A reproducible random number generator (SplitMix64): one seed, one sequence, on every
/// machine. Randomized tests and the stress run print their seed so that a failure replays.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    /// The generator's whole state.
    public var state: UInt64

    /// Starts from `state` as it is.
    public init(state: UInt64) { self.state = state }

    /// Starts from `seed` moved one step away from 0 (a seed of 0 still gives a useful sequence).
    public init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }

    /// The next number of the sequence (SplitMix64's step).
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<n` (0 when `n` is not positive).
    public mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
}
