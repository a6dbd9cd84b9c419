import DownloadModel

/// What the engine knows of the machine's power: whether it runs on battery (UPower's
/// `OnBattery`) and whether the user chose to save power (power-profiles-daemon's `power-saver`
/// profile). Without anyone telling it (no UPower, no power-profiles-daemon), on mains with no
/// profile: nothing waits.
public struct PowerStatus: Sendable, Hashable, CustomStringConvertible {
    public var onBattery: Bool
    public var powerSaver: Bool

    public init(onBattery: Bool = false, powerSaver: Bool = false) {
        self.onBattery = onBattery
        self.powerSaver = powerSaver
    }

    /// Whether a task may transfer now: one with `requires_ac_power` not on battery, a
    /// background one not while saving power.
    public func allows(requiresACPower: Bool, background: Bool) -> Bool {
        !(onBattery && requiresACPower) && !(powerSaver && background)
    }

    /// Why a task these options hold back waits (nil: they hold nothing back).
    public func waitingFor(_ options: DownloadOptions) -> WaitingFor? {
        onBattery && options.requiresACPower ? .acPower : powerSaver && options.background ? .powerSaver : nil
    }

    public var description: String {
        (onBattery ? "on battery" : "on mains power") + (powerSaver ? ", power-saver profile" : "")
    }
}
