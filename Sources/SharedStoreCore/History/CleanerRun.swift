import Foundation

/// One run of the history cleaner, as the store logs it (``Container/cleanerRuns()``): when it
/// ended, the token history was deleted through, and the newest token then. Two runs tell how
/// fast history was made (`newest`) and cleaned (`through`) between them.
public struct CleanerRun: Sendable, Equatable {
    /// When the run ended, in seconds since 1970.
    public var time: Double
    /// The token history was deleted through after the run.
    public var through: Int64
    /// The store's newest token at the run.
    public var newest: Int64

    /// Creates a run.
    public init(time: Double, through: Int64, newest: Int64) {
        self.time = time
        self.through = through
        self.newest = newest
    }

    /// How many runs the store keeps: the newest.
    public static let kept = 32

    /// The transactions retained after the run.
    public var retained: Int64 { newest > through ? newest &- through : 0 }

    /// The run as stored: `TIME THROUGH NEWEST`.
    var text: String { "\(time) \(through) \(newest)" }

    /// The runs of a stored value, oldest first. An entry that does not parse or is out of
    /// range is left out (another program may have written the value); a run earlier than the
    /// one before it, or with tokens below it (a clock set back, a store put back to a copy), starts
    /// the log again from it, so that one wrong time never hides the runs after it.
    static func parse(_ value: String?) -> [CleanerRun] {
        guard let value, value.utf8.count <= 64 * kept else { return [] }
        var runs: [CleanerRun] = []
        for entry in value.split(separator: ";") {
            let f = entry.split(separator: " ")
            guard f.count == 3, let time = Double(f[0]), time.isFinite, time >= 0, time < latest,
                let through = Int64(f[1]), let newest = Int64(f[2]), through >= 0, newest >= through
            else { continue }
            let run = CleanerRun(time: time, through: through, newest: newest)
            if let last = runs.last, run.time < last.time || run.through < last.through || run.newest < last.newest {
                runs = []
            }
            runs.append(run)
        }
        return Array(runs.suffix(kept))
    }

    /// Times from here on (the year 5138) are no clock's: such a run is left out.
    static let latest: Double = 1e11

    /// The log with `run` added: a run earlier than the last one logged (the clock went back)
    /// starts it again.
    static func appending(_ run: CleanerRun, to runs: [CleanerRun]) -> [CleanerRun] {
        guard let last = runs.last, run.time >= last.time, run.through >= last.through, run.newest >= last.newest
        else { return [run] }
        return Array(runs.suffix(kept - 1)) + [run]
    }
}
