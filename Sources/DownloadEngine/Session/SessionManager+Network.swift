import DownloadModel
/// The network, power and sleep: tasks wait for a network and power that allow them, retries go
/// at once on wake-up, transfers are checkpointed before sleep and stopped at shutdown.
extension SessionManager {
    /// What the network allows now (from NetworkManager). Transfers it no longer allows are
    /// checkpointed and go back to the queue (`WaitingFor` says why), instead of burning their
    /// retries; queued ones it allows start. Returns once those transfers have stopped.
    public func setNetwork(_ network: NetworkStatus) async {
        guard await setConditions({ $0.network = network }) else { return }
        logger.info("network: \(network)")
        if network.online { reconnectNow() }
    }

    /// What power allows now (from UPower and power-profiles-daemon): a `requires_ac_power`
    /// transfer is checkpointed and queued again when the machine unplugs (`WaitingFor`
    /// `ac-power`), a background one when the power-saver profile is chosen (`power-saver`);
    /// they start again when it changes back. Returns once those transfers have stopped.
    public func setPower(_ power: PowerStatus) async {
        guard await setConditions({ $0.power = power }) else { return }
        logger.info("power: \(power)")
    }

    /// What the machine allows now (`RunConditions`), changed by `change`; false when nothing changed.
    private func setConditions(_ change: (inout RunConditions) -> Void) async -> Bool {
        let (changed, conditions, tasks) = state.withLockedValue { state -> (Bool, RunConditions, [DownloadTask]) in
            var conditions = state.scheduler.conditions
            change(&conditions)
            let changed = state.scheduler.conditions != conditions
            state.scheduler.conditions = conditions
            return (changed, conditions, changed ? Array(state.tasks.values) : [])
        }
        guard changed else { return false }
        var stopping: [DownloadTask] = []
        for task in tasks {
            task.inEventOrder {
                let (before, snapshot) = task.withState { state -> (WaitingFor, TaskSnapshot) in
                    let before = state.waitingFor
                    state.wait(on: conditions)
                    return (before, state.snapshot)
                }
                if snapshot.state == .queued, snapshot.waitingFor != before { delegate.waitingChanged(task, snapshot) }
                if snapshot.state.holdsTransfer, !conditions.allows(snapshot.record.options) {
                    stopping.append(task)
                }
            }
        }
        await withTaskGroup(of: Void.self) { group in
            for task in stopping {
                group.addTask { try? await self.stop(task, reason: .wait) }
            }
        }
        schedule()
        return true
    }

    /// Connections may work again (the machine woke up): transfers waiting to retry do it now
    /// instead of sitting out their back-off.
    public func reconnectNow() {
        state.withLockedValue { $0.reconnectGeneration += 1 }
        beginTimeCame()
    }

    /// Makes every running transfer durable now (fdatasync, then the offset recorded and
    /// delivered to the observers) without stopping it: what happens before the machine sleeps.
    public func checkpointTransfers() async {
        let runs = state.withLockedValue { Array($0.tasks.values) }.compactMap { task in
            task.withState { $0.transfer }.map { (task, $0) }
        }
        await withTaskGroup(of: Void.self) { group in
            for (task, run) in runs {
                group.addTask {
                    await run.checkpoint()
                    await self.delegate.eventsDelivered(after: task)
                }
            }
        }
    }

    /// Stops every transfer (checkpointing it) and leaves active tasks queued for the next start.
    public func shutdown() async {
        let tasks = state.withLockedValue { state -> [DownloadTask] in
            state.shuttingDown = true
            return Array(state.tasks.values)
        }
        for task in tasks where task.snapshot.state.isActive {
            try? await stop(task, reason: .shutdown)
        }
        for task in tasks { await delegate.eventsDelivered(after: task) }
        stopBeginTimer()
        await clients.shutdown()
    }
}
