import DownloadModel
/// What the engine knows of the network: whether transfers can reach anything and whether the
/// connection costs money. Without anyone telling it (no NetworkManager), a full, unmetered
/// network.
public struct NetworkStatus: Sendable, Hashable, CustomStringConvertible {
    public var online: Bool
    public var metered: Bool

    public init(online: Bool = true, metered: Bool = false) {
        self.online = online
        self.metered = metered
    }

    /// Whether a task with this `allow_metered` may transfer now.
    public func allows(allowMetered: Bool) -> Bool {
        online && (allowMetered || !metered)
    }

    /// Why a queued task waits: the network when it may not transfer, else a place.
    public func waitingFor(allowMetered: Bool) -> WaitingFor {
        !online ? .network : allows(allowMetered: allowMetered) ? .slot : .unmeteredNetwork
    }

    public var description: String {
        !online ? "offline" : metered ? "online (metered)" : "online"
    }
}
