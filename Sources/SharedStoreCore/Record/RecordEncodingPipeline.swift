import Foundation

/// Encodes the records of a large ``ObjectContext/batchInsert(_:)-(Array<R>)`` on a thread of its
/// own, ahead of the writer, in chunks: the writer takes each record's values in order while the
/// next ones are encoded beside its SQLite work, so that Codable's calls per property do not
/// lengthen the write transaction. At most ``ahead`` chunks wait, so memory stays bounded
/// whatever the batch's size.
final class RecordEncodingPipeline<R: Record>: @unchecked Sendable {
    /// One record's values and to-one relationships, or why it cannot be written.
    typealias Encoded = Result<RecordEncoder.EncodedRow, any Error>
    /// Records per chunk handed over (one lock and one wake-up per chunk, not per record).
    static var chunk: Int { 64 }
    /// Chunks encoded ahead of the writer at most (a few hundred records: what a record's
    /// `encode(to:)` may run for past a bad record the writer has yet to meet).
    static var ahead: Int { 4 }
    /// Batches smaller than this are encoded by the writer itself (a thread costs more).
    static var threshold: Int { 512 }

    private let condition = NSCondition()
    // Guarded by `condition`.
    private var ready: [[Encoded]] = []
    private var finished = false
    private var stopped = false

    /// Starts encoding `records` as objects of `entity`.
    init(_ records: [R], entity: Entity) {
        let thread = Thread { [self] in
            let memo = RecordEncoder.Memo(entity: entity)
            var start = records.startIndex
            while start < records.endIndex {
                let end = min(start + Self.chunk, records.endIndex)
                var chunk: [Encoded] = []
                chunk.reserveCapacity(end - start)
                for i in start..<end {
                    chunk.append(
                        Result { try RecordEncoder.encodeRow(records[i], memo: memo) })
                }
                start = end
                guard hand(chunk) else { break }
            }
            condition.withLock {
                finished = true
                condition.broadcast()
            }
        }
        thread.name = "SharedStore.RecordEncoding"
        thread.start()
    }

    /// Waits for room, then hands `chunk` to the writer; false when the writer stopped.
    private func hand(_ chunk: [Encoded]) -> Bool {
        condition.withLock {
            while ready.count >= Self.ahead && !stopped { condition.wait() }
            guard !stopped else { return false }
            ready.append(chunk)
            condition.broadcast()
            return true
        }
    }

    /// The next chunk of encoded records, in order; nil after the last.
    func next() -> [Encoded]? {
        condition.withLock {
            while ready.isEmpty && !finished { condition.wait() }
            guard !ready.isEmpty else { return nil }
            condition.broadcast()
            return ready.removeFirst()
        }
    }

    /// Stops encoding (the writer is done, or failed) and waits until the thread no longer
    /// touches the records.
    func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
            while !finished { condition.wait() }
        }
    }
}
