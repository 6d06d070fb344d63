import Foundation
import SharedStore

/// Monotonic time in seconds (CLOCK_MONOTONIC is system-wide: comparable across processes).
func now() -> Double { Monotonic.seconds() }

func median(_ xs: [Double]) -> Double {
    guard !xs.isEmpty else { return 0 }
    let s = xs.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func percentile(_ xs: [Double], _ p: Double) -> Double {
    guard !xs.isEmpty else { return 0 }
    let s = xs.sorted()
    return s[min(s.count - 1, Int((Double(s.count - 1) * p).rounded()))]
}

/// Throughput of `count` operations done by `body`, in wall time; their CPU time (the
/// process's, every thread's) joins ``cpuTally``.
func throughput(_ count: Int, _ body: () throws -> Void) rethrows -> Double {
    let c0 = Monotonic.processCPUSeconds()
    let t0 = now()
    try body()
    let wall = now() - t0
    cpuTally.withLock { $0.add(count, Monotonic.processCPUSeconds() - c0) }
    return Double(count) / wall
}

/// The operations ``throughput(_:_:)`` timed and the CPU seconds they took, since the last
/// reset: ``compare(_:unit:rounds:ours:baseline:)`` resets it before each side of a round, so
/// that a round also gives each side's operations per CPU second. Time a side spends waiting
/// (for the disk, a lock, another process) is in its wall time and not in its CPU time.
struct CPUTally {
    private(set) var operations = 0
    private(set) var seconds = 0.0
    mutating func add(_ count: Int, _ cpu: Double) {
        operations += count
        seconds += cpu
    }
    /// Operations per CPU second; nil when nothing was timed.
    var rate: Double? { operations > 0 && seconds > 0 ? Double(operations) / seconds : nil }
}

let cpuTally = Protected(CPUTally())

/// Peak resident memory of this process in MiB (VmHWM).
func peakRSSMiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        let kb = Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        return kb / 1024
    }
    return 0
}

/// The machine's processor time so far, in clock ticks of `/proc/stat`: all of it, and the part
/// the host of this virtual machine took for others ("steal"). Zeros where it cannot be read.
func machineTicks() -> (total: Double, steal: Double) {
    guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
        let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ")
    else { return (0, 0) }
    let ticks = line.split(separator: " ").dropFirst().map { Double($0) ?? 0 }
    return (ticks.reduce(0, +), ticks.count > 7 ? ticks[7] : 0)
}

/// A fresh private directory for one case, removed after.
func scratch() -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("storebench-\(UUID().uuidString)").path
    mkdir(dir, 0o700)
    return dir
}

/// A container as a target opens one: with the change signal attached, so that every save
/// costs what it costs in the targets.
func openStore(group: String, model: Model, options: Container.Options = Container.Options()) throws -> Container {
    let container = try Container(group: group, model: model, options: options)
    try ChangeSignal.attach(to: container)
    return container
}

/// The directory of this executable: the targets a case runs as processes are built beside it.
func executableDirectory() -> String {
    URL(
        fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
    ).deletingLastPathComponent().path
}
