import DBus
import Dispatch
import DownloadsAPI
import Foundation

/// Exit when idle (`downloadsd --exit-idle-time`): what keeps the service, and how it leaves the
/// bus so that a call arriving meanwhile waits for the next instance instead of being lost.
extension DownloadsService {
    /// Whether the service has something to do: a task queued (for its begin time, a network or
    /// power too), running or retrying, a completion call being made, a call being handled, a
    /// file offered to the local network (`share`: the server answers only while the daemon runs).
    /// Clients that only listen to signals keep nothing.
    public var isBusy: Bool { engine.anyTaskActive || callsUnderWay || !(configuration.sharing?.isEmpty ?? true) }

    /// A call being handled, or a completion call being made.
    private var callsUnderWay: Bool {
        connection.incomingCalls.inFlight > 0 || !state.withLockedValue { $0.delivering.isEmpty }
    }

    /// When the last method call arrived (`DispatchTime` uptime nanoseconds; 0: none yet).
    public var lastCallArrival: UInt64 { connection.incomingCalls.lastArrival }

    /// Gives up the bus name, then waits (at most `timeout`) until every call the bus routed here
    /// before the release is answered and no completion call is under way; false, keeping the
    /// name, when work came before the release (a call that gave the service work: it stays).
    /// From the release on, a call to the name queues at the bus, which starts the next instance
    /// (D-Bus activation); that instance waits for this one's state-directory lock before it
    /// reads the store.
    public func leaveBus(timeout: Duration = .seconds(30)) async -> Bool {
        await DownloadsService.testLeavingDelay()
        guard !isBusy else { return false }
        do {
            try await connection.releaseName(DownloadsAPI.busName)
        } catch {
            logger.warning("could not release \(DownloadsAPI.busName): \(error)")
        }
        await DownloadsService.testLeavingDelay()
        // The bus wrote ReleaseName's reply after every call it had routed to this connection,
        // and the connection counts each call in flight as it reads it: they are all counted.
        let deadline = ContinuousClock.now + timeout
        while callsUnderWay {
            guard ContinuousClock.now < deadline else {
                logger.warning("leaving with calls still unanswered after \(timeout)")
                return true
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// After `leaveBus` and `shutdown`: when a call answered while leaving gave the service work
    /// (a Start, a Resume), asks the bus to start the next instance, which carries it on; true
    /// when it did. Its replies and the request are written before this returns.
    public func handOver() -> Bool {
        let handing = engine.anyTaskActive
        if handing {
            do {
                try connection.requestStart(DownloadsAPI.busName)
            } catch {
                logger.error("cannot ask the bus to start the next instance for the work left: \(error)")
            }
        }
        connection.flush()
        return handing
    }

    /// Debug builds only (the tests): `DOWNLOADSD_TEST_LEAVING_DELAY_MS` widens the moment before
    /// the name is released and the one after it, so a test can send a call into each.
    static func testLeavingDelay() async {
        #if DEBUG
        if let value = ProcessInfo.processInfo.environment["DOWNLOADSD_TEST_LEAVING_DELAY_MS"],
            let milliseconds = Int(value)
        {
            try? await Task.sleep(for: .milliseconds(milliseconds))
        }
        #endif
    }
}
