import AsyncHTTPClient
import DownloadModel
import NIOCore

/// A download's request through `RequestSender`: its body into the run's `TransferDelegate`,
/// its end as the run's `Sent` (the network's part knows no run type).
extension RequestSender {
    /// Sends `request` to `url` (as the task gave it: a forwarded request's line carries it)
    /// (its body streamed into `delegate`) on a client of `kind`, and waits for
    /// the response as far as the delegate took it. A stop of the task, or `seat` being
    /// retired, cancels it. `afterwards` runs once the request is over, before its error is
    /// classified (the run checks its writer there).
    func send(
        _ request: HTTPClient.Request, to url: String, delegate: TransferDelegate, kind: HTTPClients.Kind,
        sourceKind: Source.Kind? = nil, seat: SegmentWorkers.Seat? = nil,
        afterwards: () async -> DownloadError? = { nil }
    ) async -> TransferRun.Sent {
        let result = await exchange(
            request, to: url, delegate: delegate, kind: kind, sourceKind: sourceKind, seat: seat, afterwards: afterwards
        ) { forwarding in
            ForwardedRequest(
                target: forwarding.target, host: request.host, port: request.port, headers: forwarding.headers,
                proxyHost: forwarding.proxyHost, proxyPort: forwarding.proxyPort,
                proxyAuthorization: forwarding.proxyAuthorization, delegate: delegate,
                connectTimeout: forwarding.connectTimeout, deadline: forwarding.deadline
            )
        }
        switch result {
        case .success(var response):
            // A question the response asked is asked of this URL.
            if case .fail(let error) = response.decision { response.decision = .fail(error.met(at: url)) }
            return .response(response)
        case .failure(let error): return .failed(error)
        }
    }
}
