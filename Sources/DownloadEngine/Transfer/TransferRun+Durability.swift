import CrashPoints
import DownloadModel
import NIOCore

/// Durability, in one place: what a task's bytes go through before the service promises them,
/// in this order, and what a restart makes of each step (`CrashPointTests` kills the daemon at each
/// named point and checks the result).
///
/// 1. **Write**: `PartialFileWriter` `pwrite`s each body part at its offset on the task's I/O queue.
/// 2. **Sync**: a checkpoint (every `checkpointInterval`, or `checkpointBytes`, and on stop, retry,
///    sleep and shutdown) `fdatasync`s a duplicate of the descriptor while later writes go on.
///    *Crash after it (`checkpoint-synced`, `segments-synced`)*: the bytes are on disk but not
///    recorded; the restart truncates to the last recorded offset and fetches them again (one
///    checkpoint's worth at most).
/// 3. **Record**: only after the sync, the offset (`recordDurable`) or the ranges still to fetch
///    (`recordSegments`) go to the observers; `StoreObserver` commits them in one SQLite
///    transaction (`segments-saving` is inside it: a crash there rolls it back to step 2's case).
///    The record also names the partial file (device and inode) from its opening on.
/// 4. **Finish the file**: the whole file `fdatasync`ed and checked against `sha256` while the
///    events so far are delivered, so the record naming the partial file is committed (with, for a
///    body of unknown length, the length it holds). *Crash here
///    (`file-synced`)*: the restart finds the file whole at its recorded offset and finishes it.
/// 5. **Rename**: the atomic publish (`TransferFinalizer.publish`, never replacing a file unless
///    `overwrite`), the directory synced. *Crash here (`published`)*: the partial file is gone;
///    `publishedBeforeCrash` finds the recorded file (same device and inode) at the destination, or
///    at a name tried after it, and the task finishes without fetching or publishing again.
/// 6. **Finished**: the `finished` row, then the `Finished` signal; the session's end count in
///    the same transaction (the completion call follows from it, see `DownloadsService`).
///
/// A reset of what is durable (a new version, a restart from zero, a checksum mismatch) goes
/// through `resetDurable`, nowhere else.
extension TransferRun {
    // MARK: 2–3. Checkpoints

    /// Counts a checkpoint asked for (one-stream or segmented), for the log line at the end.
    func countCheckpoint() {
        checkpoints.add(1, ordering: .relaxed)
    }

    /// Queues an fdatasync after the writes before `position` and records `position` as durable
    /// once it is done (never more than was synced; never after a later truncation, which voids it).
    func queueCheckpoint(_ position: Int64) {
        countCheckpoint()
        let task = self.task
        let owner = self.owner
        writer.checkpoint(
            durable: { [self] in
                recordDurable(position)
            },
            failed: { error in
                owner.logger.error("task \(task.id): \(error)")
            })
    }

    /// A checkpoint of everything received so far, waited for; the transfer goes on meanwhile
    /// (what arrives during the sync is covered by the next one). Also asked from outside the
    /// run, before the machine sleeps.
    func checkpoint() async {
        if let table = segmentState.withLockedValue({ $0.table }) { return await checkpoint(table) }
        countCheckpoint()
        let position = task.position
        do {
            try await writer.perform { writer in
                writer.awaitCheckpoints()
                try writer.sync()
            }
            recordDurable(position)
        } catch {
            owner.logger.error("task \(task.id): \(error)")
        }
    }

    /// Queues a checkpoint of every range (one fdatasync), at most one per half checkpoint
    /// interval however many connections ask.
    func queueSegmentCheckpoint(_ table: SegmentTable) {
        let now = NIODeadline.now()
        let due = segmentState.withLockedValue { state -> Bool in
            let spacing = TimeAmount.milliseconds(Int64(configuration.checkpointInterval * 500))
            guard now - state.lastCheckpoint >= spacing else { return false }
            state.lastCheckpoint = now
            return true
        }
        guard due else { return }
        countCheckpoint()
        let writer = self.writer
        let task = self.task
        let owner = self.owner
        table.withRemaining { remaining in
            writer.checkpoint(
                durable: { [self] in
                    recordSegments(remaining, length: table.length)
                },
                failed: { error in
                    owner.logger.error("task \(task.id): \(error)")
                })
        }
    }

    /// A checkpoint of every range, waited for.
    func checkpoint(_ table: SegmentTable) async {
        countCheckpoint()
        do {
            let remaining: [ByteRange] = try await withCheckedThrowingContinuation { continuation in
                table.withRemaining { remaining in
                    writer.enqueue { writer in
                        writer.awaitCheckpoints()
                        continuation.resume(
                            with: Result {
                                try writer.sync()
                                return remaining
                            })
                    }
                }
            }
            recordSegments(remaining, length: table.length)
        } catch {
            owner.logger.error("task \(task.id): \(error)")
        }
    }

    /// Everything before `position` is fsynced: record it (called after the sync, under the
    /// writer's generation lock, so a truncation since the sync started voids it).
    func recordDurable(_ position: Int64) {
        CrashPoint.checkpointSynced.reached()
        // Only forward: a sync that finishes late (after a stop's own checkpoint, or the finish)
        // never takes back what is already recorded; resets go through resetDurable.
        owner.apply(.durable(upTo: position), to: task)
    }

    /// The whole file is fsynced and checked (a file of an atomic group, before it waits for the
    /// others): recorded as held whole, so a restart asks the server for nothing more.
    func recordComplete(_ length: Int64) {
        owner.apply(.durableWhole(length: length), to: task)
    }

    /// A segmented download's checkpoint: everything of its `length` bytes outside `remaining`
    /// is fsynced (called after the sync, like `recordDurable`).
    func recordSegments(_ remaining: [ByteRange], length: Int64) {
        CrashPoint.segmentsSynced.reached()
        owner.apply(.durableRanges(remaining: remaining, length: length), to: task)
    }

    // MARK: 4–6. The end

    /// The end, in the order at the top of this file (3–5).
    func finalize() async throws {
        let record = task.record
        let length = task.position
        let finalizer = owner.finalizer(for: task)
        let destination: String
        do {
            // A body of unknown length has nothing recorded that says how long it is (no
            // checkpoint of a small one): its length is recorded between the sync and the
            // rename, as a checkpoint is, so a restart that finds it published reports it whole.
            let lengthRecorded = record.expectedLength >= 0
            // A file of an atomic group waits for the others, complete and recorded so.
            let withGroup = owner.publishesWithGroup(task)
            let published = try await syncedThenPublished(
                record, length: length, finalizer: finalizer, publishes: !withGroup && lengthRecorded)
            let task = self.task
            if let published {
                destination = published
            } else {
                if withGroup {
                    recordComplete(length)
                } else if !lengthRecorded {
                    recordDurable(length)
                }
                await owner.events.eventsDelivered(after: task)
                CrashPoint.fileSynced.reached()
                if withGroup {
                    // No descriptor is held while it waits (a group may have thousands of files).
                    try await writer.perform { $0.close() }
                    switch try await owner.awaitPublication(of: task) {
                    case .stopped: throw DownloadError.cancelled
                    case .placed(let path): destination = path
                    case .publish:
                        destination = try await writer.perform { _ in try finalizer.publishRecorded(task.record) }
                    }
                } else {
                    destination = try await writer.perform { writer in
                        try finalizer.publish(task.record, writer: writer)
                    }
                }
            }
            CrashPoint.published.reached()
        } catch let error as DownloadError where error.code == .checksumMismatch {
            resetDurable(.version)
            throw error
        }
        let again = piecesFetchedAgain
        let pieces = again.pieces > 0 ? ", \(again.pieces) corrupt piece(s) fetched again (\(again.bytes) bytes)" : ""
        owner.logger.info(
            "task \(task.id) finished: \(length) bytes, \(checkpoints.load(ordering: .relaxed)) checkpoint(s) in its last run\(pieces)"
        )
        finished(at: destination, length: length)
    }

    /// Step 4 and, when `publishes`, step 5, waited for once. Step 4 wants the record naming the
    /// partial file committed before the rename; the file is open and named already (its first
    /// write opened it). So the sync and the check run on the I/O queue while the events so far
    /// are delivered (the store commits them), and the rename follows on the I/O queue once both
    /// are done, without a trip back to the run in between. Nil when the file is left for the
    /// caller's slower way: a file of a group, a length not recorded, or a file the record did not
    /// name when the wait began (the sync had to open it: nothing was written in this run), whose
    /// record the caller waits for between the two, as the order says.
    private func syncedThenPublished(
        _ record: DownloadTaskRecord, length: Int64, finalizer: TransferFinalizer, publishes: Bool
    ) async throws -> String? {
        let task = self.task
        let writer = self.writer
        let events = owner.events
        // Read before the wait: a change visible now has queued its events ahead of the wait's.
        let named = task.record.partialFile
        return try await withCheckedThrowingContinuation { continuation in
            let waits = TwoWaits { failure in
                if let failure { return continuation.resume(throwing: failure) }
                // Nothing to rename here: no trip to the I/O queue only to say so.
                guard publishes, let named else { return continuation.resume(returning: nil) }
                // On the queue that was second: the rename goes after the sync, on the I/O queue.
                writer.enqueue { writer in
                    continuation.resume(
                        with: Result {
                            guard writer.identity == named else { return nil }
                            CrashPoint.fileSynced.reached()
                            return try finalizer.publish(task.record, writer: writer)
                        })
                }
            }
            writer.enqueue { writer in
                do {
                    try finalizer.complete(record, length: length, writer: writer)
                    waits.done()
                } catch {
                    waits.failed(error)
                }
            }
            events.whenDelivered(after: task) { waits.done() }
        }
    }

    /// Where the file is now: the task is finished.
    func finished(at destination: String, length: Int64) {
        owner.apply(.finished(at: destination, length: length), to: task)
    }

    // MARK: After a crash; resets

    /// See `TransferFinalizer.publishedBeforeCrash`; asked only of a task that opened a file
    /// before. At the run's start: its record is the one it started with.
    func publishedBeforeCrash() async throws -> String? {
        let record = start.record
        guard record.partialFile != nil else { return nil }
        let finalizer = owner.finalizer(for: task)
        return try await writer.perform { _ in try finalizer.publishedBeforeCrash(record) }
    }

    /// Opens the partial file when it should hold bytes and drops what a crash left past the
    /// last checkpoint; a file shorter than its checkpoint lost data and starts from zero.
    /// Returns the offset to continue from. At the run's start, from the record it started with
    /// (nothing but the file's opening has changed it since).
    func recover() async throws -> Int64 {
        let record = start.record
        let durable = record.durableOffset
        if let segments = record.segments {
            return try await recoverSegments(segments, length: record.expectedLength)
        }
        guard durable > 0 else {
            owner.apply(.position(0), to: task)
            return 0
        }
        let offset: Int64 = try await writer.perform { writer in
            try writer.openIfNeeded()
            let offset = writer.size < durable ? 0 : durable
            try writer.truncate(to: offset)
            return offset
        }
        if offset < durable {
            owner.logger.warning("task \(task.id): partial file is shorter than its checkpoint; restarting")
            resetDurable(.version)
        }
        owner.apply(.position(offset), to: task)
        return offset
    }

    /// A segmented download's file keeps every byte outside `segments` (a crash's unsynced
    /// writes inside them are fetched again and overwritten); a file shorter than the last
    /// byte it should hold lost data and starts from zero.
    private func recoverSegments(_ segments: [ByteRange], length: Int64) async throws -> Int64 {
        let heldEnd = segments.last.map { $0.end == length ? $0.start : length } ?? length
        let size = try await writer.perform { writer in
            try writer.openIfNeeded()
            return writer.size
        }
        guard size < heldEnd else {
            let held = ByteRange.held(length: length, remaining: segments)
            owner.apply(.position(held), to: task)
            return held
        }
        owner.logger.warning("task \(task.id): partial file is shorter than its checkpoint; restarting")
        try await restartFromZero()
        return 0
    }

    /// Empties the partial file and forgets its version (after every older checkpoint, on the I/O queue).
    func restartFromZero() async throws {
        segmentState.withLockedValue { $0.letGoOfRanges() }
        try await writer.perform { [self] writer in
            try writer.truncate(to: 0)
            resetDurable(.version)
        }
    }

    /// What `resetDurable` forgets.
    /// The one place a task's durable progress is taken back (a new version, a restart from
    /// zero, a file shorter than its checkpoint, a checksum mismatch). Called after the
    /// truncation it describes, on the I/O queue where there is one, so no older checkpoint can
    /// be recorded after it (`recordDurable` only moves forward, and never past the bytes written).
    /// Recorded only when it takes back something recorded: a new download's first response
    /// empties a file that holds nothing durable yet (every small file did: a save each).
    func resetDurable(_ reset: TaskChange.Reset) {
        if reset == .version { segmentState.withLockedValue { $0.letGoOfRanges() } }
        owner.apply(.reset(reset), to: task)
    }
}
