import DBus
import DownloadEngine
import DownloadModel
import DownloadsAPI
import Foundation

/// A task's `GetMetrics`: where its time went, as the engine measured it (`TaskMetrics`), in
/// the shape of `URLSessionTaskMetrics`. Times are Unix microseconds (`t`); a time the service
/// did not see is left out, never guessed.
extension DownloadsService {
    func metrics(of task: TaskSnapshot) async throws -> [DBusValue] {
        // A task made by this daemon knows; one read from the store, the store does.
        let queuedAt: Int64? =
            task.record.queuedAt > 0
            ? task.record.queuedAt
            : (try? await BlockingWork.run { [store] in try store.createdAt(of: task.id) })?
                .map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) * 1000 }
        let metrics = task.record.metrics
        var summary: [String: DBusValue] = [
            "attempts": .uint32(UInt32(clamping: metrics?.attempts ?? 0)),
            "redirects": .uint32(UInt32(clamping: metrics?.redirects ?? 0)),
            "restarts": .uint32(UInt32(clamping: metrics?.restarts ?? 0)),
            "bytes_by_source": .dictionary(
                key: .string, value: .uint64,
                (metrics?.bytesBySource ?? [:]).sorted { $0.key < $1.key }.map {
                    DBusValue.DictEntry(.string($0.key), .uint64(UInt64(max(0, $0.value))))
                }),
        ]
        if let queuedAt { summary["queued_at"] = Self.time(queuedAt) }
        if let metrics {
            summary["started_at"] = Self.time(metrics.startedAt)
            if let first = metrics.firstByteAt { summary["first_byte_at"] = Self.time(first) }
            if let ended = metrics.endedAt { summary["ended_at"] = Self.time(ended) }
        }
        let transactions = (metrics?.transactions ?? []).map { Self.dictionary($0) }
        return [.vardict(summary), .array(element: .dictionary(key: .string, value: .variant), transactions)]
    }

    private static func time(_ microseconds: Int64) -> DBusValue { .uint64(UInt64(max(0, microseconds))) }

    private static func dictionary(_ transaction: TransactionMetrics) -> DBusValue {
        var entry: [String: DBusValue] = [
            "url": .string(transaction.url), "source": .string(transaction.source),
            "range": .string(transaction.range), "protocol": .string(transaction.protocol),
            "status": .uint32(UInt32(clamping: transaction.status)),
            "fetch_start": time(transaction.fetchStart), "response_end": time(transaction.responseEnd),
            "bytes_sent": .uint64(UInt64(max(0, transaction.bytesSent))),
            "bytes_received": .uint64(UInt64(max(0, transaction.bytesReceived))),
        ]
        let phases: [(String, Int64?)] = [
            ("lookup_start", transaction.lookupStart), ("lookup_end", transaction.lookupEnd),
            ("connect_start", transaction.connectStart), ("connect_end", transaction.connectEnd),
            ("tls_end", transaction.tlsEnd), ("request_start", transaction.requestStart),
            ("response_start", transaction.responseStart),
        ]
        for (name, value) in phases { if let value { entry[name] = time(value) } }
        if let address = transaction.remoteAddress { entry["remote_address"] = .string(address) }
        if let reused = transaction.reusedConnection { entry["reused_connection"] = .boolean(reused) }
        if let version = transaction.tlsVersion { entry["tls_version"] = .string(version) }
        if !transaction.error.isEmpty { entry["error"] = .string(DownloadsErrorName.prefix + transaction.error) }
        return .vardict(entry)
    }
}
