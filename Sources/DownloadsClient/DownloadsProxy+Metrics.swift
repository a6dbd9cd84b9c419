import DBus
import DownloadsAPI

extension DownloadsProxy {
    /// A task's `GetMetrics`: its own times and counts, and its last requests, as the service
    /// sent them (times in Unix microseconds; a phase the service did not see is missing).
    public func metrics(_ task: ObjectPath) async throws -> TaskTimings {
        let reply = try await call(task, DownloadsInterfaces.task.name, "GetMetrics", [])
        guard reply.count == 2, let summary = reply[0].vardictValue, case .array(_, let list) = reply[1] else {
            throw DownloadsClientError(name: BusError.invalidArgsName, message: "the service sent no metrics")
        }
        return TaskTimings(task: summary, transactions: list.compactMap(\.vardictValue))
    }
}
