/// Which queued tasks may start: a global limit on running transfers, a limit per session (a
/// session is one user's: `SessionID`), higher priorities first, FIFO within a priority. Pure
/// bookkeeping, tested without I/O.
struct Scheduler: Sendable {
    var maxRunning: Int
    var maxRunningPerSession: Int

    private struct Entry: Sendable {
        let id: UInt64
        let session: SessionID
        let priority: DownloadOptions.Priority
        let sequence: UInt64
    }

    private var queued: [Entry] = []
    private var running: [UInt64: SessionID] = [:]
    private var sequence: UInt64 = 0

    init(maxRunning: Int, maxRunningPerSession: Int) {
        self.maxRunning = max(1, maxRunning)
        self.maxRunningPerSession = max(1, maxRunningPerSession)
    }

    var runningCount: Int { running.count }
    var queuedIDs: [UInt64] { queued.map(\.id) }

    mutating func enqueue(_ id: UInt64, session: SessionID, priority: DownloadOptions.Priority) {
        guard running[id] == nil, !queued.contains(where: { $0.id == id }) else { return }
        sequence += 1
        queued.append(Entry(id: id, session: session, priority: priority, sequence: sequence))
    }

    /// Moves a queued task within the order after its priority changed.
    mutating func reprioritize(_ id: UInt64, _ priority: DownloadOptions.Priority) {
        guard let index = queued.firstIndex(where: { $0.id == id }) else { return }
        let entry = queued[index]
        queued[index] = Entry(id: entry.id, session: entry.session, priority: priority, sequence: entry.sequence)
    }

    /// Forgets a task, queued or running.
    mutating func remove(_ id: UInt64) {
        queued.removeAll { $0.id == id }
        running.removeValue(forKey: id)
    }

    /// The tasks to start now, marked running.
    mutating func next() -> [UInt64] {
        var started: [UInt64] = []
        let order = queued.sorted {
            $0.priority != $1.priority ? $0.priority > $1.priority : $0.sequence < $1.sequence
        }
        for entry in order where running.count < maxRunning {
            let inSession = running.values.filter { $0 == entry.session }.count
            guard inSession < maxRunningPerSession else { continue }
            running[entry.id] = entry.session
            queued.removeAll { $0.id == entry.id }
            started.append(entry.id)
        }
        return started
    }
}
