import DownloadModel
/// Tasks with an `earliest_begin`: one timer, armed for the earliest begin time of a queued
/// task. When it fires, the tasks whose time has come stop waiting for it (`WaitingFor` leaves
/// `begin-time`) and may start. The time is the wall clock's (a person chose it); the timer looks
/// again at least once a minute, so a clock set or a machine that slept past the time is
/// noticed within a minute (and at once on wake-up, through `reconnectNow`).
extension SessionManager {
    struct BeginTimer: Sendable {
        var at: UInt64?
        var task: Task<Void, Never>?
    }

    /// The longest the timer sleeps before it looks at the clock again, in seconds.
    static let beginTimerLongestSleep: UInt64 = 60

    /// Arms the timer for the earliest begin time still to come (or disarms it).
    func armBeginTimer() {
        let now = WallClock.now
        let next = state.withLockedValue { $0.shuttingDown ? nil : $0.scheduler.nextBeginTime(after: now) }
        let stale = beginTimer.withLockedValue { timer -> Task<Void, Never>? in
            guard timer.at != next else { return nil }
            let old = timer.task
            timer.at = next
            timer.task = next.map { at in
                let seconds = min(at - now, SessionManager.beginTimerLongestSleep)
                return Task { [weak self] in
                    try? await Task.sleep(for: .seconds(seconds))
                    guard !Task.isCancelled else { return }
                    self?.beginTimeCame(armedFor: at)
                }
            }
            return old
        }
        stale?.cancel()
    }

    /// The timer fired (or the machine woke up): tasks whose begin time has come wait for what
    /// the network and the limits say instead, and may start; the timer is armed again.
    func beginTimeCame(armedFor at: UInt64? = nil) {
        if let at {
            beginTimer.withLockedValue { timer in
                guard timer.at == at else { return }
                timer.at = nil
                timer.task = nil
            }
        }
        let now = WallClock.now
        let (conditions, tasks) = state.withLockedValue { state in
            (state.scheduler.conditions, state.scheduler.beginTimesCome(by: now).compactMap { state.tasks[$0] })
        }
        for task in tasks {
            task.inEventOrder {
                let (before, snapshot) = task.withState { state -> (WaitingFor, TaskSnapshot) in
                    let before = state.waitingFor
                    state.wait(on: conditions, now: now)
                    return (before, state.snapshot)
                }
                if snapshot.waitingFor != before { delegate.waitingChanged(task, snapshot) }
            }
        }
        if !tasks.isEmpty { logger.info("begin time come for \(tasks.count) task(s)") }
        schedule()
    }

    func stopBeginTimer() {
        beginTimer.withLockedValue { timer in
            defer { timer = BeginTimer() }
            return timer.task
        }?.cancel()
    }
}
