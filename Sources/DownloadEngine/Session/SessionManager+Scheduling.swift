import DownloadModel
/// Starting what the scheduler lets start, growing segmented runs, running a task, restoring
/// the tasks of an earlier run.
extension SessionManager {
    /// Takes back the tasks of an earlier run (from the store): active ones are queued, others
    /// kept as they are. No `taskWasCreated` is reported for them. New ids start after `nextID - 1`.
    public func restore(_ records: [DownloadTaskRecord], nextID: UInt64) {
        state.withLockedValue { $0.nextID = max($0.nextID, nextID) }
        for var record in records {
            if record.state == .running || record.state == .retrying { record.enter(.queued) }
            let task = DownloadTask(record: record)
            state.withLockedValue { state in
                state.add(task, record)
                if record.state == .queued {
                    state.scheduler.enqueue(record)
                    let conditions = state.scheduler.conditions
                    task.update { $0.wait(on: conditions) }
                }
            }
        }
        schedule()
    }

    /// Starts what the scheduler lets start; with `growing`, then hands places no queued task
    /// can take to segmented runs short of their connections.
    func schedule(growing: Bool = true) {
        typealias Start = (task: DownloadTask, connections: Int, ticket: UInt64)
        let (reclaimed, starting, grown) = state.withLockedValue {
            state -> ([(DownloadTask, Int)], [Start], [(DownloadTask, Int)]) in
            guard !state.shuttingDown else { return ([], [], []) }
            // Places a user holds beyond an equal share go to users who wait (`Scheduler.reclaim`).
            let reclaimed = state.scheduler.reclaim().compactMap { id, count in state.tasks[id].map { ($0, count) } }
            let starting = state.scheduler.next().compactMap { id in
                state.tasks[id].map {
                    Start($0, state.scheduler.connections(of: id), state.scheduler.ticket(of: id) ?? 0)
                }
            }
            let grown =
                growing ? state.scheduler.grow().compactMap { id, count in state.tasks[id].map { ($0, count) } } : []
            return (reclaimed, starting, grown)
        }
        for (task, count) in reclaimed {
            let ending = task.withState { $0.transfer }?.shedConnections(count) ?? 0
            if ending < count { state.withLockedValue { $0.scheduler.regrant(task.id, count - ending) } }
            if ending > 0 { logger.info("task \(task.id): \(ending) connection(s) given back to users who wait") }
        }
        var freed = false
        for (task, connections, ticket) in starting {
            // The runner is stored under the task's lock, so a stop never misses it; its own
            // events wait for this one (move holds the task's event order). Only while the
            // scheduler still counts this start: a stop since (and a resume that queued the task
            // again) took it back in the same event order.
            let moved = move(
                task, to: .running, from: [.queued], provided: { $0.ticket(of: task.id) == ticket },
                { state in
                    state.stopReason = nil
                    state.runID += 1
                    state.requests = RequestsOut()
                    let runID = state.runID
                    state.runner = Task { await self.run(task, runID: runID, connections: connections) }
                })
            if moved == nil {
                // Stopped between the scheduler's pick and here: its places are free again, and
                // whoever stopped it may have looked for work while they still looked taken.
                state.withLockedValue { $0.scheduler.remove(task.id, ticket: ticket) }
                freed = true
            }
        }
        var gaveBack = false
        for (task, count) in grown {
            let taken = task.withState { $0.transfer }?.addConnections(count) ?? 0
            if taken < count {
                state.withLockedValue { $0.scheduler.giveBack(task.id, count - taken) }
                gaveBack = true
            }
            if taken > 0 { logger.info("task \(task.id): \(taken) more connection(s)") }
        }
        // A task queued meanwhile may have found those places taken: it may start now (without
        // offering places given back to the runs that just refused them).
        if freed || gaveBack { schedule(growing: !gaveBack) }
        shareGroupBandwidth()
        armBeginTimer()
    }

    /// Each file of a group with a bandwidth of its own gets the group's limit over the files
    /// running now (set again only when that number changed).
    private func shareGroupBandwidth() {
        let changes = state.withLockedValue { state -> [(DownloadTask, UInt64)] in
            var changes: [(DownloadTask, UInt64)] = []
            for (id, entry) in state.groups where entry.record.maxBytesPerSecond > 0 {
                let count = max(1, state.scheduler.running(inGroup: id))
                guard count != entry.sharedAmong else { continue }
                state.groups[id]?.sharedAmong = count
                let share = max(1, entry.record.maxBytesPerSecond / UInt64(count))
                changes += entry.tasks.compactMap { state.tasks[$0].map { ($0, share) } }
            }
            return changes
        }
        for (task, share) in changes { task.withState { $0.limit }.share.store(share, ordering: .relaxed) }
    }

    /// A run's response has little left to fetch: it stops counting as a transfer, and what
    /// may start in its place starts.
    func transferIsShort(_ task: DownloadTask) {
        if state.withLockedValue({ $0.scheduler.markShort(task.id) }) { schedule() }
    }

    /// A run that fetches on one stream from now on gives back all but one of its places.
    /// `task`'s run may use `connections` from now on (granted as places free, `Scheduler.want`).
    func wantConnections(_ task: DownloadTask, _ connections: Int) {
        state.withLockedValue { $0.scheduler.want(task.id, connections: connections) }
    }

    /// A connection of `task`'s run has no source to fetch from: its place goes back for good.
    func placeNotNeeded(_ task: DownloadTask) {
        state.withLockedValue { $0.scheduler.giveBack(task.id, 1, forGood: true) }
        schedule(growing: false)
    }

    func settleOnOneStream(_ task: DownloadTask) {
        let freed = state.withLockedValue { state -> Bool in
            let held = state.scheduler.connections(of: task.id)
            state.scheduler.settle(task.id)
            return held > 1
        }
        if freed { schedule() }
    }

    func run(_ task: DownloadTask, runID: UInt64, connections: Int) async {
        let record = task.record
        let start = task.runStart(answers: answers(for: task.id, in: record.sessionID))
        if record.upload != nil {
            await UploadRun(task: task, owner: self, start: start).run()
        } else {
            await TransferRun(task: task, owner: self, connections: connections, start: start).run()
        }
        // The scheduler let go of the task when it left running (in `move`); a new run may
        // have started since: its handles are not ours to clear.
        task.update { state in
            guard state.runID == runID else { return }
            state.runner = nil
        }
        schedule()
        let snapshot = task.snapshot
        if !snapshot.state.isActive { sessionMayBeIdle(snapshot.sessionID) }
    }
}
