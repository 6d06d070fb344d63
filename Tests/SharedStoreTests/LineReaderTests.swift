import Foundation
import SharedStore
import Testing

@testable import ReadLater

/// share-batch's line reader: lines across its 64 KiB blocks come out whole, each searched once
/// (a line searched again from its start after every block made a long one quadratic), and a line
/// longer than any a batch holds is refused, naming it, before it grows with the file.
@Suite struct LineReaderTests {
    /// The lines `LineReader` reads from a file holding `text`.
    func lines(_ text: [UInt8]) throws -> [[UInt8]] {
        let path = NSTemporaryDirectory() + "/sharedstore-lines-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(text).write(to: URL(fileURLWithPath: path))
        let input = try #require(FileHandle(forReadingAtPath: path))
        defer { try? input.close() }
        var out: [[UInt8]] = []
        try LineReader(input, name: "the file").forEachLine { line, number in
            #expect(number == out.count + 1)
            out.append(Array(line))
        }
        return out
    }

    /// Random lines, short and long (up to three blocks), some with CRLF, some empty, the last
    /// with or without its newline: read back as they were written.
    @Test func linesAcrossBlocksComeOutWhole() throws {
        let seed = UInt64.random(in: 1...UInt64(UInt32.max))
        print("LineReaderTests: seed \(seed)")
        var random = TestRandom(state: seed)
        for _ in 0..<4 {
            var text: [UInt8] = []
            var expected: [[UInt8]] = []
            for _ in 0..<(1 + random.next(40)) {
                let length = random.chance(10) ? random.next(200_000) : random.next(80)
                let line = (0..<length).map { _ in UInt8(97 + random.next(26)) }
                expected.append(line)
                text += line + (random.chance(20) ? [13, 10] : [10])
            }
            if random.chance(50), let last = expected.last, !last.isEmpty { text.removeLast() }
            if text.last == 13 { text.removeLast() }
            #expect(try lines(text) == expected, "seed \(seed)")
        }
    }

    /// A file of two mebibytes with no newline (a binary given by mistake): refused as line 1,
    /// longer than a line can be, after at most a mebibyte and a block.
    @Test func aLineLongerThanABatchHoldsIsRefused() throws {
        let text = [UInt8]("ok\n".utf8) + [UInt8](repeating: 120, count: 2 << 20)
        #expect {
            _ = try lines(text)
        } throws: { error in
            let message = "\(error)"
            return (error as? StoreError)?.code == .validation && message.contains("line 2 of the file is longer than")
        }
        // At the limit, a line is still taken.
        let longest = [UInt8](repeating: 120, count: LineReader.maxLineBytes)
        #expect(try lines(longest + [10]) == [longest])
    }
}
