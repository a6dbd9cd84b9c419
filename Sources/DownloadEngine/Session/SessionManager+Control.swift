import DownloadModel
import UserFiles
#if canImport(Glibc)
import Glibc
#endif

/// What callers do to tasks: create, pause, resume, change options, cancel, remove; the stop
/// protocol; destination checks; partial files removed.
extension SessionManager {
    /// A new task: gets the next id, is reported (`taskWasCreated`) and queued.
    /// With `anchor` (a descriptor the caller handed over) every file of the task is made below it.
    @discardableResult
    public func create(_ request: DownloadRequest, anchor: DescriptorAnchor? = nil) throws -> TaskSnapshot {
        try request.options.validate()
        return insert(anchor: anchor) { id in DownloadTaskRecord(id: id, request: request) }
    }

    /// `scheduling` false: the caller schedules once after inserting many.
    /// `source`: an upload's file, handed over by descriptor (`UploadAt`).
    func insert(
        anchor: DescriptorAnchor? = nil, source: SourceFile? = nil, scheduling: Bool = true,
        _ makeRecord: (UInt64) -> DownloadTaskRecord
    ) -> TaskSnapshot {
        // Whole milliseconds, rounded down, as the store keeps it: never after the task starts.
        let queuedAt = TaskMetrics.now / 1000 * 1000
        let task = state.withLockedValue { state -> DownloadTask in
            var record = makeRecord(state.takeID())
            record.queuedAt = queuedAt
            let task = DownloadTask(record: record)
            if anchor != nil || source != nil {
                task.update { state in
                    state.anchor = anchor
                    state.source = source
                }
            }
            state.add(task, record)
            return task
        }
        let snapshot = task.inEventOrder {
            let conditions = state.withLockedValue { $0.scheduler.conditions }
            let snapshot = task.update { $0.wait(on: conditions) }
            delegate.created(task, snapshot)
            state.withLockedValue { state in
                if snapshot.state == .queued {
                    state.scheduler.enqueue(snapshot.record)
                }
            }
            return snapshot
        }
        if scheduling { schedule() }
        return snapshot
    }

    /// Start's checks on a destination, made with the owner's credentials (a path the owner
    /// cannot reach answers like a missing one): returns whether it is a directory; a file needs
    /// an existing directory, and `overwrite` when it exists. Blocks on the owner's file helper.
    public func checkDestination(_ path: String, overwrite: Bool, owner: UInt32) throws -> Bool {
        // Two calls for a new file's path (each a round trip to a file helper on the system
        // bus): nothing at the path (then it is no directory either), a directory to write in.
        let access = files.files(for: owner)
        let somethingThere = try access.exists(path)
        let isDirectory = try somethingThere && access.isDirectory(path)
        let directory = isDirectory ? path : FilePaths.directory(of: path)
        guard try access.isWritableDirectory(directory) else {
            guard try isDirectory || access.isDirectory(directory) else {
                throw DownloadError.invalidArgument("the directory of \(path) does not exist")
            }
            throw DownloadError.file("you cannot create files in \(directory)")
        }
        if !isDirectory, somethingThere, !overwrite { throw DownloadError.fileExists(path) }
        return isDirectory
    }

    /// The file access of one task: below the descriptor its caller handed over while this
    /// daemon holds it, else the owner's, with the limits its record sets (`TaskFileAccess`).
    func fileAccess(for task: DownloadTask) -> any FileAccess {
        let (record, anchor) = task.withState { ($0.record, $0.anchor) }
        return fileAccess(for: record, anchor: anchor)
    }

    func fileAccess(for record: DownloadTaskRecord, anchor: DescriptorAnchor?) -> any FileAccess {
        let base = anchor.map { files.files(for: record.owner, below: $0) } ?? files.files(for: record.owner)
        let recordedOnly = anchor == nil && !record.app.isEmpty
        guard recordedOnly || record.writesInPlace else { return base }
        return TaskFileAccess(
            base: base, recordedOnly: recordedOnly, kept: record.writesInPlace ? record.destination : nil)
    }

    /// Whether `owner` sees something at `path` below a descriptor they handed over (asked with
    /// their credentials). Blocks on the owner's file helper.
    public func exists(_ path: String, below anchor: DescriptorAnchor, owner: UInt32) throws -> Bool {
        try files.files(for: owner, below: anchor).exists(path)
    }

    /// Makes the missing directories of `relative` below the directory `base` `owner` named, or
    /// below the descriptor they handed over (`anchor`, whose path `base` then is), as them, never
    /// through a link below it (`StartGroupAt`'s nested names, a Metalink file's). Blocks on the
    /// owner's file helper.
    /// Returns the directories it made, deepest last (`removeDirectories` takes them back).
    @discardableResult
    public func makeDirectories(
        _ relative: String, in base: String, anchor: DescriptorAnchor?, owner: UInt32, mode: UInt32?
    ) throws -> [String] {
        let access = anchor.map { files.files(for: owner, below: $0) } ?? files.files(for: owner)
        var missing: [String] = []
        var path = base
        for component in relative.split(separator: "/") {
            path = FilePaths.join(path, String(component))
            if try !missing.isEmpty || !access.isDirectory(path) { missing.append(path) }
        }
        try access.makeDirectories(relative, below: base, mode: mode)
        return missing
    }

    /// Takes back directories `makeDirectories` made for a call that was then refused, deepest
    /// first, each only while it is empty, as `owner`. Blocks on the owner's file helper.
    public func removeDirectories(_ paths: [String], anchor: DescriptorAnchor?, owner: UInt32) {
        let access = anchor.map { files.files(for: owner, below: $0) } ?? files.files(for: owner)
        for path in paths.reversed() { try? access.remove(path) }
    }

    /// The bytes of a regular file `owner` can read (a document they named), read with their
    /// credentials, at most `limit` bytes (more is `InvalidArgument`). Blocks on the owner's file helper.
    public func readFile(_ path: String, owner: UInt32, atMost limit: Int) throws -> [UInt8] {
        let descriptor = try files.files(for: owner).openForReading(path)
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw DownloadError.file("cannot read \(path): \(errnoText())")
            }
            if count == 0 { return bytes }
            bytes += buffer[0..<count]
            guard bytes.count <= limit else {
                throw DownloadError.invalidArgument("\(path) is larger than \(limit) bytes")
            }
        }
    }

    /// Stops a task, keeps its partial file, and returns resume data for it. Pausing a paused
    /// task just returns its resume data again.
    public func pause(_ id: UInt64) async throws -> [UInt8] {
        let task = try task(id)
        if task.snapshot.state != .paused {
            try await stop(task, reason: .pause)
        }
        return try resumeData(for: id)
    }

    /// Puts a paused or failed task back in the queue; it continues from its durable offset.
    public func resume(_ id: UInt64) throws {
        let task = try task(id)
        let moved = move(
            task, to: .queued, from: [.paused, .failed],
            { state in
                state.record.errorName = nil
                state.record.errorMessage = nil
                state.stopReason = nil
                // Sending a request again whose answer was lost is the app's decision: this is it.
                state.record.upload?.sentWhole = nil
            },
            then: { [self] _, _, snapshot in
                state.withLockedValue {
                    $0.scheduler.enqueue(snapshot.record)
                }
            })
        guard moved != nil else {
            throw DownloadError.wrongState(
                "task \(id) is \(task.snapshot.state); only paused or failed tasks can be resumed")
        }
        schedule()
    }

    /// Changes the options a live task may change (priority, bandwidth limit, metered, power).
    /// A running transfer picks up a new limit within a second; one that may no longer use the
    /// network it is on (or run on battery) goes back to the queue, and a queued one that now may starts.
    @discardableResult
    public func changeOptions(_ id: UInt64, _ change: DownloadOptions.Change) throws -> TaskSnapshot {
        let task = try task(id)
        guard !change.isEmpty else { return task.snapshot }
        let wasBackground = task.record.options.background
        let snapshot = task.inEventOrder {
            let conditions = state.withLockedValue { $0.scheduler.conditions }
            let before = task.snapshot.waitingFor
            let snapshot = task.update { state in
                state.record.options.apply(change)
                // A running transfer reads its limit per chunk (`RateLimit`): the new one applies now.
                state.limitIfMade?.own.store(state.record.options.maxBytesPerSecond, ordering: .relaxed)
                state.wait(on: conditions)
            }
            delegate.optionsChanged(task, snapshot)
            if snapshot.waitingFor != before { delegate.waitingChanged(task, snapshot) }
            state.withLockedValue { $0.scheduler.update(snapshot.id, snapshot.record.options) }
            return snapshot
        }
        if snapshot.state.holdsTransfer,
            !state.withLockedValue({ $0.scheduler.conditions }).allows(snapshot.record.options)
        {
            Task { try? await stop(task, reason: .wait) }
        } else if snapshot.state == .running, snapshot.record.options.background != wasBackground {
            // Pacing starts with a run: the run is queued again and goes on from its checkpoint.
            Task { try? await stop(task, reason: .wait) }
        }
        schedule()
        return snapshot
    }

    /// Replaces the URL of a task that is not transferring (queued, paused, retrying or failed),
    /// keeping every byte already fetched: the next request goes to `url` from the durable offset
    /// (each remaining range of a segmented download) with `If-Range` carrying the validator
    /// recorded from the old URL, so the response decides as on any resume (`ResponseDecision`):
    /// a 206 of the same entity (validator and total length) continues; a 200 or another entity
    /// restarts from zero, never a splice of two files. A retrying task's run is stopped and
    /// queued again, so its next attempt goes to the new URL. The redirects the old URL led
    /// through are forgotten. `url` must already be checked (http or https, with a host).
    @discardableResult
    public func setURL(_ id: UInt64, to url: String) async throws -> TaskSnapshot {
        let task = try task(id)
        let (snapshot, wasRetrying) = try task.inEventOrder { () throws -> (TaskSnapshot, Bool) in
            let current = task.snapshot.state
            guard [.queued, .paused, .retrying, .failed].contains(current) else {
                throw DownloadError.wrongState(
                    "task \(id) is \(current); its URL can change while it is queued, paused, retrying or failed"
                )
            }
            let snapshot = task.update { state in
                state.record.url = url
                state.record.finalURL = nil
                // The caller chose this URL: its credentials are for it now.
                state.record.options.credentialsOrigin = url
            }
            delegate.urlChanged(task, snapshot)
            return (snapshot, current == .retrying)
        }
        if wasRetrying { try? await stop(task, reason: .wait) }
        schedule()
        return snapshot
    }

    /// Stops a task and removes its partial file.
    public func cancel(_ id: UInt64) async throws {
        let task = try task(id)
        try await stop(task, reason: .cancel)
        // A resumable upload's resource is deleted on the server (`terminate_on_cancel`).
        if task.record.upload?.resumable?.resource != nil {
            Task { await UploadRun(task: task, owner: self, start: task.runStart(answers: .none)).terminate() }
        }
    }

    /// Forgets a task that is paused or has ended, removing its partial file unless
    /// `keepingPartialFile` (a failed task's partial file is what Resume needs).
    public func remove(_ id: UInt64, keepingPartialFile: Bool = false) async throws {
        let task = try task(id)
        let removed: TaskSnapshot? = try task.inEventOrder {
            let snapshot = task.snapshot
            guard snapshot.state.isTerminal || snapshot.state == .paused else {
                throw DownloadError.wrongState("task \(id) is \(snapshot.state); cancel it first")
            }
            let (wasThere, emptied) = state.withLockedValue { state -> (Bool, DownloadGroupRecord?) in
                let wasThere = state.remove(snapshot.record)
                defer { state.emptiedGroup = nil }
                return (wasThere, state.emptiedGroup)
            }
            guard wasThere else { return nil }
            delegate.removed(task, snapshot)
            if let emptied { delegate.groupRemoved(emptied) }
            return snapshot
        }
        guard removed != nil else { throw DownloadError.notFound("no task \(id)") }
        if !keepingPartialFile { await removePartialFile(of: task) }
        await delegate.eventsDelivered(after: task)
    }

    func stop(_ task: DownloadTask, reason: DownloadTask.StopReason) async throws {
        enum Plan {
            case direct(from: DownloadState, to: DownloadState)
            case wait(Task<Void, Never>?, cancelling: RequestsOut?)
        }
        while true {
            let plan: Plan = try task.withState { state in
                let current = state.record.state
                switch (current, reason) {
                case (.queued, .pause), (.queued, .cancel), (.paused, .cancel), (.failed, .cancel):
                    return .direct(from: current, to: reason == .pause ? .paused : .cancelled)
                case (.queued, .shutdown):
                    return .wait(nil, cancelling: nil)
                case (.running, _), (.retrying, _):
                    // Only the reason is set under the lock; the run's requests are stopped after
                    // it: one kept from then on is refused and cancels itself (RequestSender.send).
                    state.stopReason = reason
                    return .wait(state.runner, cancelling: state.requests)
                default:
                    let why =
                        reason == .pause ? "only a queued, running or retrying task can be paused" : "it has ended"
                    throw DownloadError.wrongState("task \(task.id) is \(current); \(why)")
                }
            }
            switch plan {
            case .direct(let current, let next):
                // Only from the state planned for: the scheduler may have started the queued task
                // since, and a run is stopped by its runner, never by relabelling it.
                // Leaving the queue in the same step: a start the scheduler picked it for and
                // has not made yet is refused by its ticket.
                let moved = move(
                    task, to: next, from: [current],
                    then: { [self] delegate, task, snapshot in
                        state.withLockedValue { $0.scheduler.remove(task.id) }
                        if next == .cancelled { delegate.completed(task, snapshot, error: .cancelled, resumeData: nil) }
                    })
                guard let snapshot = moved else { continue }
                if next == .cancelled { await removePartialFile(of: task) }
                sessionMayBeIdle(snapshot.sessionID)
            case .wait(let runner, let requests):
                for cancel in requests?.stop() ?? [] { cancel() }
                runner?.cancel()
                await runner?.value
            }
            return
        }
    }

    /// Removes a task's partial file on its I/O queue (after any write still queued there).
    func removePartialFile(of task: DownloadTask) async {
        if let spec = task.record.upload { return await removeUploadFiles(of: task, spec) }
        let path = task.record.partialPath
        let access = fileAccess(for: task)
        do {
            try await task.onIOQueue { try access.remove(path) }
        } catch {
            logger.warning("task \(task.id): \(error)")
        }
        // A cancelled task makes no more files: its caller's descriptor is given back.
        if task.record.state == .cancelled { task.update { $0.anchor = nil } }
    }
}
