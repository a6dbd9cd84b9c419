import NIOConcurrencyHelpers

/// Which Passim peers were asked for which hash in the last hour. Passim answers one request per
/// hash an hour to each client and counts a Range request as one
/// (`passim_server_check_client_cooldown`): a peer without TXT `ranges=1` is asked for a hash at
/// most once an hour. In memory: a restart of the daemon within the hour could ask again (Passim
/// then answers 403, which the run takes as done with that peer).
public final class PassimLedger: Sendable {
    public static let cooldown: Duration = .seconds(3600)

    private let asked = NIOLockedValueBox<[String: ContinuousClock.Instant]>([:])

    public init() {}

    /// Whether `address` may be asked for `sha256` at `now`; if so, it counts as asked.
    public func mayAsk(_ address: String, _ sha256: String, now: ContinuousClock.Instant = .now) -> Bool {
        asked.withLockedValue { asked in
            asked = asked.filter { now - $0.value < Self.cooldown }
            guard asked["\(address) \(sha256)"] == nil else { return false }
            asked["\(address) \(sha256)"] = now
            return true
        }
    }
}
