import Foundation
import SharedStore

/// One moment of a stress run, sampled by the orchestrator twice a second.
struct StressSample {
    /// Seconds since the writers started.
    let t: Double
    /// Saves acknowledged so far, kills and cleaner runs so far.
    let saves: Int, kills: Int, cleans: Int
    /// Transactions history retains.
    let retained: Int
    /// Each consumer's lag in transactions (by consumer name).
    let lags: [String: Int]
}

/// The page `storectl stress --report DIR` writes: one self-contained HTML file (inline SVG, no
/// script, no outside font or style) with the run's summary, its charts and its violations.
enum StressReport {
    struct Series {
        let name: String
        let points: [(x: Double, y: Double)]
    }

    /// Writes `DIR/index.html`; returns its path.
    static func write(
        to dir: String, summary: JSONValue, samples: [StressSample], latencies: [(t: Double, seconds: Double)],
        killTimes: [Double], cleanTimes: [Double], violations: [String]
    ) throws -> String {
        try FileManager.default.createDirectory(
            atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var body: [String] = []
        body.append("<h1>storectl stress</h1>")
        body.append(summaryTable(summary))
        body.append(
            chart("saves", "Saves per second", [Series(name: "saves/s", points: rates(samples))], unit: "saves/s"))
        body.append(
            chart("latency", "Commit → merge latency (p50, p99 per second)", percentiles(latencies), unit: "ms"))
        let names = Set(samples.flatMap { $0.lags.keys }).sorted()
        body.append(
            chart(
                "lag", "Each consumer's lag",
                names.map { n in Series(name: n, points: samples.map { ($0.t, Double($0.lags[n] ?? 0)) }) },
                unit: "transactions"))
        body.append(
            chart(
                "history", "History retained, and the cleaner's runs (ticks)",
                [Series(name: "transactions", points: samples.map { ($0.t, Double($0.retained)) })],
                unit: "transactions",
                ticks: cleanTimes))
        body.append(
            chart(
                "kills", "Processes killed (kill -9), cumulative; each kill a tick",
                [Series(name: "kills", points: samples.map { ($0.t, Double($0.kills)) })], unit: "kills",
                ticks: killTimes))
        body.append("<h2 id=\"violations\">Violations: \(violations.count)</h2>")
        body.append(
            violations.isEmpty
                ? "<p>None: every invariant held.</p>"
                : "<ol>" + violations.map { "<li>\(escape($0))</li>" }.joined() + "</ol>")
        let page = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>storectl stress report</title>
            <style>body{font:14px sans-serif;margin:2em;max-width:60em}td,th{padding:2px 8px;text-align:left}
            svg{display:block;margin:0.5em 0 1.5em}</style></head>
            <body>
            \(body.joined(separator: "\n"))
            </body></html>
            """
        let path = (dir as NSString).appendingPathComponent("index.html")
        try page.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    static func summaryTable(_ summary: JSONValue) -> String {
        guard case .object(let pairs) = summary else { return "" }
        let rows = pairs.filter { $0.0 != "violations" }.map { k, v in
            "<tr><th>\(escape(k))</th><td>\(escape(v.serialized))</td></tr>"
        }
        return "<table id=\"summary\">" + rows.joined() + "</table>"
    }

    /// Saves per second between samples.
    static func rates(_ samples: [StressSample]) -> [(x: Double, y: Double)] {
        zip(samples, samples.dropFirst()).map { a, b in
            (b.t, Double(b.saves - a.saves) / max(b.t - a.t, 0.001))
        }
    }

    /// The median and the 99th percentile of the latencies of each second, in milliseconds.
    static func percentiles(_ latencies: [(t: Double, seconds: Double)]) -> [Series] {
        var bySecond: [Int: [Double]] = [:]
        for l in latencies where l.t.isFinite && l.seconds.isFinite {
            bySecond[Int(max(0, l.t)), default: []].append(l.seconds * 1000)
        }
        let seconds = bySecond.keys.sorted()
        func at(_ p: Double) -> [(x: Double, y: Double)] {
            seconds.map { s in
                let v = bySecond[s, default: []].sorted()
                return (Double(s), v[min(v.count - 1, Int(Double(v.count - 1) * p))])
            }
        }
        return [Series(name: "p50", points: at(0.5)), Series(name: "p99", points: at(0.99))]
    }

    /// A line chart as inline SVG: axes with their ranges, one line per series (a legend names
    /// them), and ticks under the axis at `ticks`.
    static func chart(_ id: String, _ title: String, _ series: [Series], unit: String, ticks: [Double] = []) -> String {
        let (w, h, left, bottom) = (720.0, 220.0, 60.0, 30.0)
        let all = series.flatMap(\.points)
        let maxX = max(all.map(\.x).max() ?? 1, ticks.max() ?? 0, 1)
        let maxY = max(all.map(\.y).max() ?? 1, 1)
        func x(_ v: Double) -> Double { left + v / maxX * (w - left - 10) }
        func y(_ v: Double) -> Double { h - bottom - v / maxY * (h - bottom - 10) }
        let colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
        var svg = [
            "<h2>\(escape(title))</h2>",
            "<svg id=\"chart-\(id)\" role=\"img\" aria-label=\"\(escape(title))\" "
                + "width=\"\(Int(w))\" height=\"\(Int(h))\" viewBox=\"0 0 \(Int(w)) \(Int(h))\" "
                + "xmlns=\"http://www.w3.org/2000/svg\">",
            "<line x1=\"\(left)\" y1=\"\(h - bottom)\" x2=\"\(w - 10)\" y2=\"\(h - bottom)\" stroke=\"#333\"/>",
            "<line x1=\"\(left)\" y1=\"10\" x2=\"\(left)\" y2=\"\(h - bottom)\" stroke=\"#333\"/>",
            "<text x=\"\(left - 5)\" y=\"15\" text-anchor=\"end\" font-size=\"11\">\(format(maxY))</text>",
            "<text x=\"\(left - 5)\" y=\"\(h - bottom)\" text-anchor=\"end\" font-size=\"11\">0</text>",
            "<text x=\"\(w - 10)\" y=\"\(h - 8)\" text-anchor=\"end\" font-size=\"11\">\(format(maxX)) s</text>",
            "<text x=\"\(left)\" y=\"\(h - 8)\" font-size=\"11\">0 s · \(escape(unit))</text>",
        ]
        for t in ticks {
            svg.append(
                "<line x1=\"\(x(t))\" y1=\"\(h - bottom)\" x2=\"\(x(t))\" y2=\"\(h - bottom + 6)\" stroke=\"#999\"/>")
        }
        for (i, s) in series.enumerated() where !s.points.isEmpty {
            let colour = colours[i % colours.count]
            let points = s.points.map { "\(format2(x($0.x))),\(format2(y($0.y)))" }.joined(separator: " ")
            svg.append("<polyline fill=\"none\" stroke=\"\(colour)\" stroke-width=\"1.5\" points=\"\(points)\"/>")
            svg.append(
                "<text x=\"\(left + 10 + Double(i) * 110)\" y=\"22\" fill=\"\(colour)\" font-size=\"12\">"
                    + "\(escape(s.name))</text>")
        }
        if all.isEmpty { svg.append("<text x=\"\(w / 2)\" y=\"\(h / 2)\" text-anchor=\"middle\">no data</text>") }
        svg.append("</svg>")
        return svg.joined(separator: "\n")
    }

    static func format(_ v: Double) -> String { v >= 100 ? String(Int(v.rounded())) : String(format: "%.1f", v) }
    static func format2(_ v: Double) -> String { String(format: "%.1f", v) }

    /// `text` safe inside HTML.
    static func escape(_ text: String) -> String {
        TextSafety.visible(text).replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(
            of: "<", with: "&lt;"
        )
        .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
