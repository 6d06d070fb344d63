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

/// Throughput of `count` operations done by `body`.
func throughput(_ count: Int, _ body: () throws -> Void) rethrows -> Double {
    let t0 = now()
    try body()
    return Double(count) / (now() - t0)
}

/// Peak resident memory of this process in MiB (VmHWM).
func peakRSSMiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        let kb = Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        return kb / 1024
    }
    return 0
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
