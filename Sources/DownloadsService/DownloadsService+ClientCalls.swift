import DBus
import DownloadModel
import DownloadStore
import DownloadsAPI

/// The service's calls to a client's registered object (`HandleChallenge`, the completion
/// call), through `ClientCallSlots`: at most so many of one user's and one app's are in flight,
/// and one the bus refused for its own limit (`LimitsExceeded`) is tried again, never dropped.
extension DownloadsService {
    /// The first pause after a refusal, doubled up to `maxPause`.
    static let firstLimitPause: Duration = .milliseconds(100)
    static let maxLimitPause: Duration = .seconds(5)

    /// Calls `method` on `handler`'s object at `receiver`, within `timeout` of the call being
    /// sent (waiting for a slot does not count: the app has not been asked yet).
    func callClient(
        _ handler: CompletionHandler, receiver: String, method: String, arguments: [DBusValue], timeout: Duration
    ) async throws -> [DBusValue] {
        let party = ClientCallSlots.Party(uid: handler.owner, app: SessionKey.app(handler.session))
        let path = try ObjectPath(handler.objectPath)
        var pause = Self.firstLimitPause
        var refusedFor: Duration = .zero
        while true {
            do {
                return try await clientCalls.withSlot(party) {
                    try await connection.call(
                        destination: receiver, path: path, interface: DownloadsInterfaces.client.name,
                        method: method, arguments: arguments, timeout: timeout, autoStart: false)
                }
            } catch let error as BusError where error.name == BusError.limitsExceededName && refusedFor < timeout {
                logger.warning(
                    "the bus refused \(method) to \(receiver) for its limits (\(clientCalls.inFlight()) calls in flight); trying again in \(pause)"
                )
                try await Task.sleep(for: pause)
                refusedFor += pause
                pause = min(pause * 2, Self.maxLimitPause)
            }
        }
    }
}
