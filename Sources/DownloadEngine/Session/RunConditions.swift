import DownloadModel

/// What the machine allows a queued task now: the network (`NetworkStatus`) and the power
/// (`PowerStatus`), each told to the engine by its watcher; the scheduler starts only tasks both
/// allow, and a running transfer one of them stops allowing is checkpointed and queued again.
public struct RunConditions: Sendable, Hashable, CustomStringConvertible {
    public var network = NetworkStatus()
    public var power = PowerStatus()

    public init(network: NetworkStatus = NetworkStatus(), power: PowerStatus = PowerStatus()) {
        self.network = network
        self.power = power
    }

    /// Whether a task with these options may transfer now.
    public func allows(_ options: DownloadOptions) -> Bool {
        allows(
            allowMetered: options.allowMetered, requiresACPower: options.requiresACPower, background: options.background
        )
    }

    func allows(allowMetered: Bool, requiresACPower: Bool, background: Bool) -> Bool {
        network.allows(allowMetered: allowMetered)
            && power.allows(requiresACPower: requiresACPower, background: background)
    }

    /// Why a queued task with these options waits: the network first (nothing moves offline),
    /// then power, else a place.
    public func waitingFor(_ options: DownloadOptions) -> WaitingFor {
        let network = network.waitingFor(allowMetered: options.allowMetered)
        guard network == .slot else { return network }
        return power.waitingFor(options) ?? .slot
    }

    public var description: String { "\(network), \(power)" }
}
