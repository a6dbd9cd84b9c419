import Dispatch
import DownloadsService

/// `--exit-idle-time`: waits until the service has had nothing to do, and no call, for `seconds`
/// on end. Looks a few times per idle time (at most once a second); a busy look or a call starts
/// the count again.
struct IdleWatch {
    let seconds: Double

    /// Returns once the service has been idle for `seconds`; throws `CancellationError` when cancelled.
    func wait(for service: DownloadsService) async throws {
        let idle = UInt64(seconds * 1_000_000_000)
        let tick = Duration.milliseconds(Int64(max(0.05, min(1, seconds / 4)) * 1000))
        var quietSince = DispatchTime.now().uptimeNanoseconds
        while true {
            try await Task.sleep(for: tick)
            let now = DispatchTime.now().uptimeNanoseconds
            if service.isBusy {
                quietSince = now
                continue
            }
            let since = max(quietSince, service.lastCallArrival)
            if now >= since, now - since >= idle { return }
        }
    }
}
