import AsyncHTTPClient
import DownloadModel
import ProxyRules

/// A background transfer (option `background`) paced by `BackgroundPacer`: four times a second
/// the delay to the first hop (`DelayProbe`: the proxy when there is one, else the server) and
/// what the transfer received give a rate, which the task's `RateLimit` applies to
/// every connection of the task together. `WaitingFor` says `yielding` while it gives way.
/// An upload is paced the same way (what it sent is its `bytesWritten`).
extension TransferRun {
    static let pacingStep = 0.25

    static func startPacing(_ task: DownloadTask, owner: any TransferRunOwner, start: RunStart) -> Task<Void, Never> {
        // Paced from the first byte, at the pacer's starting rate.
        let limit = start.limit
        limit.paced.store(UInt64(BackgroundPacer().rate), ordering: .relaxed)
        return Task.detached {
            // The probes obey --deny-network as the transfer does: no handshake with a denied address.
            let denied = start.record.owner == 0 ? [] : owner.configuration.deniedNetworks
            guard
                let (host, port) = TransferRun.firstHop(
                    of: start.record, environment: owner.configuration.proxyEnvironment),
                let address = NetworkRange.parse(host) != nil
                    ? host : try? await AddressResolver.resolve(host, port: port).first,
                !denied.contains(where: { $0.contains(address) })
            else {
                owner.logger.info(
                    "task \(task.id): background pacing has no hop it may probe; it runs at its starting rate")
                return
            }
            var pacer = BackgroundPacer()
            let clock = ContinuousClock()
            let start = clock.now
            var lastBytes = task.position
            var lastTime = clock.now
            while !Task.isCancelled {
                let stepStart = clock.now
                let delay = await DelayProbe.connectTime(address: address, port: port, timeout: 1) ?? 1
                let now = clock.now
                let bytes = task.position
                let elapsed = TransferRun.seconds(now - lastTime)
                let throughput = elapsed > 0 ? Double(max(0, bytes - lastBytes)) / elapsed : 0
                lastBytes = bytes
                lastTime = now
                let wasYielding = pacer.yielding
                let rate = pacer.observe(delay: delay, throughput: throughput, now: TransferRun.seconds(now - start))
                limit.paced.store(rate, ordering: .relaxed)
                if pacer.yielding != wasYielding { owner.apply(.yielding(pacer.yielding), to: task) }
                try? await Task.sleep(
                    until: stepStart + .milliseconds(Int(TransferRun.pacingStep * 1000)), clock: clock)
            }
        }
    }

    static func stopPacing(
        _ pacing: Task<Void, Never>?, _ task: DownloadTask, owner: any TransferRunOwner, limit: RateLimit
    ) {
        guard let pacing else { return }
        pacing.cancel()
        limit.paced.store(0, ordering: .relaxed)
        owner.apply(.yielding(false), to: task)
    }

    /// The host and port a background transfer's packets go to first: the proxy, or the server.
    static func firstHop(of record: DownloadTaskRecord, environment: ProxyEnvironment) -> (String, Int)? {
        guard let request = try? HTTPClient.Request(url: record.finalURL ?? record.url) else { return nil }
        let proxy = environment.proxy(
            own: record.options.proxy, scheme: request.scheme, host: request.host, port: request.port)
        if let proxy, let host = proxy.host, let port = proxy.port { return (host, port) }
        return (request.host, request.port)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
