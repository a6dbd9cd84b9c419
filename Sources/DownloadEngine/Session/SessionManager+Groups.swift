import CrashPoints
import DownloadModel
import Metalink
import TerminalOutput
import UserFiles
import ShownText

/// Groups: many files as one job (`DownloadGroupRecord`). A group's files are ordinary tasks
/// with its id in their records; the manager keeps the group's list of tasks and, for an atomic
/// group, the runs whose files are complete and waiting for the others. When the last one is
/// ready the decision to publish is recorded (the store commits it) and every waiting run
/// publishes its file; a run stopped meanwhile publishes when it runs again (the decision
/// stands: after a crash the runs find it and finish the renames). A file of an atomic group
/// that fails for good stops the others, keeping their partial files, until the group is
/// resumed.
extension SessionManager {
    /// A new group of `requests` (each checked first: one bad file refuses the whole call), its
    /// tasks created and queued in the order given. With `anchor`, every file is made below it.
    public func createGroup(
        _ requests: [DownloadRequest], owner: UInt32, app: String, session: String, title: String, atomic: Bool,
        taskSignals: Bool, parallel: Int = 0, maxBytesPerSecond: UInt64 = 0, anchor: DescriptorAnchor? = nil
    ) throws -> (DownloadGroupRecord, [TaskSnapshot]) {
        guard !requests.isEmpty else { throw DownloadError.invalidArgument("a group needs at least one file") }
        for request in requests { try request.options.validate() }
        let group = addGroup { id in
            var record = DownloadGroupRecord(
                id: id, owner: owner, app: app, session: session, title: title, atomic: atomic, taskSignals: taskSignals
            )
            record.parallel = max(0, parallel)
            record.maxBytesPerSecond = maxBytesPerSecond
            return record
        }
        return (group, insertFiles(requests, of: group.id, anchor: anchor))
    }

    /// Records a new group (`make` gives it for its id) and tells the observers; `alsoLocked`
    /// runs under the same lock, before anyone else sees the group.
    private func addGroup(
        _ make: (UInt64) -> DownloadGroupRecord,
        alsoLocked: (inout TaskTable, DownloadGroupRecord) -> Void = { _, _ in }
    ) -> DownloadGroupRecord {
        let group = state.withLockedValue { state -> DownloadGroupRecord in
            let group = make(state.nextGroupID)
            state.add(group)
            alsoLocked(&state, group)
            return group
        }
        delegate.groupCreated(group)
        return group
    }

    /// New tasks of `group`, queued in the order given and scheduled once for all of them, not
    /// once a file (a look at the queue each).
    private func insertFiles(
        _ requests: [DownloadRequest], of group: UInt64, anchor: DescriptorAnchor?
    ) -> [TaskSnapshot] {
        let snapshots = requests.map { request in
            insert(anchor: anchor, scheduling: false) { id in
                var record = DownloadTaskRecord(id: id, request: request)
                record.group = group
                return record
            }
        }
        schedule()
        return snapshots
    }

    /// Takes back the groups of an earlier run (from the store), before their tasks.
    public func restore(groups: [DownloadGroupRecord]) {
        state.withLockedValue { state in
            for group in groups { state.add(group) }
        }
    }

    public func group(_ id: UInt64) -> DownloadGroupRecord? {
        state.withLockedValue { $0.groups[id]?.record }
    }

    /// The group's tasks, in the order they were given.
    public func groupTasks(_ id: UInt64) -> [TaskSnapshot] {
        let tasks = state.withLockedValue { state in (state.groups[id]?.tasks ?? []).compactMap { state.tasks[$0] } }
        return tasks.map(\.snapshot)
    }

    /// How many of the group's files are queued, running or retrying (none: it may have ended).
    public func activeFiles(ofGroup id: UInt64) -> Int {
        state.withLockedValue { $0.activePerGroup[id, default: 0] }
    }

    public func groups(owner: UInt32) -> [DownloadGroupRecord] {
        state.withLockedValue { $0.groups.values.map(\.record) }.filter { $0.owner == owner }.sorted { $0.id < $1.id }
    }

    /// Whether `task`'s file waits for its group's other files before it is published.
    func publishesWithGroup(_ task: DownloadTask) -> Bool {
        let group = task.record.group
        guard group != 0 else { return false }
        return state.withLockedValue { $0.groups[group]?.record.atomic ?? false }
    }

    /// A run whose file is complete and durable waits here, holding no place, for its group's
    /// other files: the group places them all (`publish(_:)`) and answers where this one is;
    /// `publish` when the decision was recorded before (a restart), `stopped` when the run is
    /// stopped first.
    func awaitPublication(of task: DownloadTask) async throws -> GroupPublication {
        let id = task.id
        let group = task.record.group
        // Its places go to others while it waits.
        state.withLockedValue { $0.scheduler.remove(id) }
        schedule()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<GroupPublication, Error>) in
                let (now, decide) = state.withLockedValue { state -> (GroupPublication?, Bool) in
                    guard var entry = state.groups[group] else { return (.publish, false) }
                    if entry.record.publishing { return (.publish, false) }
                    if Task.isCancelled { return (.stopped, false) }
                    entry.waiting[id] = continuation
                    // Every file of the group is ready (one in place already is; a cancelled one has no say).
                    let ready = entry.tasks.allSatisfy { member in
                        guard entry.waiting[member] == nil else { return true }
                        let state = state.tasks[member]?.record.state
                        return state == .finished || state == .cancelled
                    }
                    let decide = ready && !entry.deciding
                    if decide { entry.deciding = true }
                    state.groups[group] = entry
                    return (nil, decide)
                }
                if let now { continuation.resume(returning: now) }
                if decide { Task { await self.publish(group) } }
            }
        } onCancel: {
            let waiting = state.withLockedValue { state -> CheckedContinuation<GroupPublication, Error>? in
                guard var entry = state.groups[group] else { return nil }
                defer { state.groups[group] = entry }
                // While the files are being placed, the placing answers (its file may be in place).
                if entry.deciding, entry.waiting[id] != nil {
                    entry.stoppedWhileDeciding.insert(id)
                    return nil
                }
                return entry.waiting.removeValue(forKey: id)
            }
            waiting?.resume(returning: .stopped)
        }
    }

    /// Publishes every file of `group`, all or none. Each name must be free (another user may
    /// have planted one in a shared directory meanwhile): a taken one fails its file (and so the
    /// group, whose other files stop) before anything is placed. Then the decision is recorded
    /// (the store commits it; a run arriving meanwhile waits with the others, `deciding`) and the
    /// files are placed one by one, each by a rename that refuses to replace; a name taken in
    /// between moves the ones placed back to their partial names and undoes the decision.
    private func publish(_ group: UInt64) async {
        guard var record = state.withLockedValue({ $0.groups[group]?.record }) else { return }
        let taken = await takenNames(group)
        if !taken.isEmpty {
            logger.info(
                "group \(group): \(taken.count) file name(s) taken before the publication; nothing is published")
            refuse(group, taken)
            return
        }
        record.publishing = true
        await delegate.groupWillPublish(record)
        CrashPoint.groupDecided.reached()
        logger.info("group \(group): every file is complete; publishing them")
        let members = state.withLockedValue { state -> [DownloadTask] in
            guard let entry = state.groups[group] else { return [] }
            return entry.waiting.keys.sorted().compactMap { state.tasks[$0] }
        }
        var placed: [(DownloadTask, String)] = []
        var refusal: (UInt64, DownloadError)?
        for task in members {
            let finalizer = finalizer(for: task)
            let record = task.record
            do {
                placed.append((task, try await task.onIOQueue { try finalizer.publishRecorded(record) }))
            } catch {
                refusal = (task.id, DownloadError.classify(error))
                break
            }
        }
        if let (id, error) = refusal {
            for (task, path) in placed.reversed() where !task.record.writesInPlace {
                let access = fileAccess(for: task), record = task.record
                do {
                    try await task.onIOQueue {
                        try access.publish(
                            path, identity: record.partialFile, to: record.partialPath, replace: false, mode: nil)
                    }
                } catch {
                    logger.error(
                        "group \(group): task \(task.id)'s file could not go back from \(path): \(DownloadError.classify(error).message)"
                    )
                }
            }
            record.publishing = false
            await delegate.groupDidNotPublish(record)
            logger.info(
                "group \(group): task \(id)'s file could not be placed (\(error.message)); the \(placed.count) placed are back, nothing is published"
            )
            refuse(group, [id: error])
            return
        }
        let waiting = state.withLockedValue {
            state -> [(CheckedContinuation<GroupPublication, Error>, GroupPublication)] in
            guard var entry = state.groups[group] else { return [] }
            defer {
                entry.record.publishing = true
                entry.waiting = [:]
                entry.deciding = false
                entry.stoppedWhileDeciding = []
                state.groups[group] = entry
            }
            let paths = Dictionary(placed.map { ($0.0.id, $0.1) }, uniquingKeysWith: { first, _ in first })
            return entry.waiting.map { id, continuation in (continuation, paths[id].map { .placed($0) } ?? .publish) }
        }
        for (continuation, answer) in waiting { continuation.resume(returning: answer) }
    }

    /// Nothing of `group` is published: each file in `refused` fails with its error (its run
    /// ends, and so the group's other files stop); a run stopped while the files were placed is
    /// answered now; the others wait on.
    private func refuse(_ group: UInt64, _ refused: [UInt64: DownloadError]) {
        let answers = state.withLockedValue {
            state -> [(CheckedContinuation<GroupPublication, Error>, Result<GroupPublication, Error>)] in
            guard var entry = state.groups[group] else { return [] }
            defer {
                entry.deciding = false
                entry.stoppedWhileDeciding = []
                entry.record.publishing = false
                state.groups[group] = entry
            }
            var answers: [(CheckedContinuation<GroupPublication, Error>, Result<GroupPublication, Error>)] = []
            for (id, error) in refused {
                if let continuation = entry.waiting.removeValue(forKey: id) {
                    answers.append((continuation, .failure(error)))
                }
            }
            for id in entry.stoppedWhileDeciding {
                if let continuation = entry.waiting.removeValue(forKey: id) {
                    answers.append((continuation, .success(.stopped)))
                }
            }
            return answers
        }
        for (continuation, answer) in answers { continuation.resume(with: answer) }
    }

    /// The files of `group` waiting to be published whose destination name is taken now (a file
    /// is there and `overwrite` is false), asked as each task's owner; a file named by the server
    /// (a directory destination) finds a free name itself.
    private func takenNames(_ group: UInt64) async -> [UInt64: DownloadError] {
        let waiting = state.withLockedValue { state -> [DownloadTask] in
            guard let entry = state.groups[group] else { return [] }
            return entry.waiting.keys.sorted().compactMap { state.tasks[$0] }
        }
        var taken: [UInt64: DownloadError] = [:]
        for task in waiting {
            let record = task.record
            guard !record.destinationIsDirectory, !record.options.overwrite, !record.writesInPlace else { continue }
            let access = fileAccess(for: task)
            let exists = (try? await task.onIOQueue { try access.exists(record.destination) }) ?? false
            if exists { taken[task.id] = .fileExists(record.destination) }
        }
        return taken
    }

    /// A file of `task`'s group failed for good: in an atomic group nothing may be published, so
    /// the other files stop (paused, their partial files kept) until the group is resumed.
    func groupFileFailed(_ task: DownloadTask) {
        let group = task.record.group
        guard group != 0 else { return }
        let others = state.withLockedValue { state -> [UInt64] in
            guard let entry = state.groups[group], entry.record.atomic, !entry.record.publishing else { return [] }
            return entry.tasks.filter { $0 != task.id }
        }
        guard !others.isEmpty else { return }
        logger.info("group \(group): task \(task.id) failed; its other files stop until the group is resumed")
        Task {
            for id in others where snapshot(id)?.state.isActive == true {
                _ = try? await pause(id)
            }
        }
    }

    /// Pauses every active file of the group.
    public func pauseGroup(_ id: UInt64) async throws {
        guard group(id) != nil else { throw DownloadError.notFound("no group \(id)") }
        for task in groupTasks(id) where task.state.isActive {
            _ = try? await pause(task.id)
        }
    }

    /// Resumes every paused or failed file of the group.
    public func resumeGroup(_ id: UInt64) throws {
        guard group(id) != nil else { throw DownloadError.notFound("no group \(id)") }
        for task in groupTasks(id) where task.state == .paused || task.state == .failed {
            try? resume(task.id)
        }
    }

    /// Cancels every file of the group that has not ended (their partial files are removed); its
    /// ended files stay in the list, each removed by its own `Cancel` as a task's is.
    public func cancelGroup(_ id: UInt64) async throws {
        guard group(id) != nil else { throw DownloadError.notFound("no group \(id)") }
        for task in groupTasks(id) where !task.state.isTerminal {
            try? await cancel(task.id)
        }
    }
}

/// A group's resume data out (`groupResumeData`) and back in (`adoptGroup`).
extension SessionManager {
    /// The resume data of every file of the group not yet in place (cancelled ones left out).
    public func groupResumeData(_ id: UInt64) throws -> [UInt8] {
        guard let group = group(id) else { throw DownloadError.notFound("no group \(id)") }
        let tasks = groupTasks(id)
        let finished = tasks.filter { $0.state == .finished }.count
        let files = tasks.filter { $0.state != .finished && $0.state != .cancelled }.map {
            ResumeData(record: $0.record)
        }
        guard !files.isEmpty else {
            throw DownloadError.wrongState("group \(id) has no file left to fetch; there is nothing to resume")
        }
        return try GroupResumeData(group: group, files: files, finished: finished).encoded(key: key)
    }

    /// Verifies a group's blob made by this engine for `owner` (and a sandboxed `app`).
    public func decodeGroupResumeData(_ blob: [UInt8], owner: UInt32, app: String = "") throws -> GroupResumeData {
        try GroupResumeData.decode(blob, key: key, owner: owner, app: app)
    }

    /// `ResumeGroupWithData`: the group the data came from, while it exists, gets `change` and is
    /// resumed (each file as `adopt` resumes a task); otherwise a new group of the same kind
    /// takes over its files' partial files (a file whose partial is gone starts from zero).
    public func adoptGroup(
        _ data: GroupResumeData, change: DownloadOptions.Change, fileMode: UInt32? = nil,
        anchor: DescriptorAnchor? = nil
    ) async throws -> (DownloadGroupRecord, [TaskSnapshot]) {
        if let existing = group(data.group.id), existing.owner == data.group.owner, existing.app == data.group.app {
            for file in data.files {
                _ = try await adopt(file, change: change, fileMode: fileMode, anchor: anchor)
            }
            return (existing, groupTasks(existing.id))
        }
        let group = addGroup { id in
            var record = data.group
            record.id = id
            record.publishing = false
            return record
        }
        for file in data.files {
            _ = try await adopt(file, change: change, fileMode: fileMode, anchor: anchor, group: group.id)
        }
        logger.info("group \(group.id): takes over \(data.files.count) file(s) of group \(data.group.id)")
        return (group, groupTasks(group.id))
    }
}

/// A Metalink document of several files followed by a running task becomes a group.
extension SessionManager {
    func makeGroup(of task: DownloadTask, from document: MetalinkDocument, at url: String) throws -> UInt64 {
        let (record, anchor) = task.withState { ($0.record, $0.anchor) }
        let directory = record.destination
        // Every file checked before anything is made: its name, its URLs, its piece hashes.
        var requests: [DownloadRequest] = []
        var directories: [String] = []
        for (index, file) in document.files.enumerated() {
            guard DescriptorAnchor.isRelativePath(file.name) else {
                throw DownloadError.invalidResponse(
                    "the Metalink document at \(DisplayText.quoted(url, limit: 200)) names a file \(DisplayText.quoted(file.name, limit: 120)), not a relative path of plain names"
                )
            }
            if let slash = file.name.lastIndex(of: "/") { directories.append(String(file.name[..<slash])) }
            guard index > 0 else { continue }  // the first is the task's own
            let urls = file.downloadURLs(from: url).filter(RedirectRules.acceptableAsTaskURL)
            guard let primary = urls.first else {
                throw DownloadError.invalidResponse(
                    "the Metalink document names no http(s) URL this download may go to for \(DisplayText.quoted(file.name, limit: 120))"
                )
            }
            let pieces: PieceHashes?
            do throws(Checksum.Invalid) {
                pieces = try file.pieceHashes()
            } catch {
                throw DownloadError.invalidResponse("\(error.message) (\(DisplayText.quoted(file.name, limit: 120)))")
            }
            var base = record.options
            base.mirrors = []
            base.checksum = nil
            var request = DownloadRequest(
                owner: record.owner, session: record.session, url: primary,
                destination: FilePaths.join(directory, file.name),
                destinationIsDirectory: false,
                options: TransferRun.options(
                    base, following: file, urls: urls, primary: primary, pieces: pieces, document: url,
                    given: record.url),
                fileMode: record.fileMode
            )
            request.app = record.app
            requests.append(request)
        }
        let access = fileAccess(for: record, anchor: anchor)
        for relative in Set(directories) {
            try access.makeDirectories(relative, below: directory, mode: record.fileMode)
        }
        let group = addGroup(
            { id in
                DownloadGroupRecord(
                    id: id, owner: record.owner, app: record.app, session: record.session,
                    title: record.options.title ?? "",
                    atomic: false, taskSignals: true
                )
            },
            alsoLocked: { state, group in
                // The task is the group's first file (its record says so from the run's next report).
                state.groups[group.id]?.tasks.append(task.id)
                state.activeChanged(group: group.id, by: 1)
            })
        _ = insertFiles(requests, of: group.id, anchor: anchor)
        logger.info(
            "task \(task.id): the Metalink document at \(DisplayText.quoted(url, limit: 200)) describes \(document.files.count) files: group \(group.id)"
        )
        return group.id
    }
}
