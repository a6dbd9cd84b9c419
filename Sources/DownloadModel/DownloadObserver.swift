/// Receives the events of every task, with the callbacks of `URLSessionDownloadDelegate`.
/// Every method has an empty default, so the service, the store and the log each implement
/// only what they need (the shape of Alamofire's `EventMonitor`).
///
/// Delivery: the events of one task arrive in the order they happened, never under an engine
/// lock and never on an event loop, so an observer may write SQLite or send on D-Bus. They come
/// in batches, on one serial queue for every task (`EventDelivery`): each observer, in the
/// order they were added, is given every event of the batch and then `eventsWereDelivered()`,
/// before the next observer is given the batch. The store comes first and commits the batch
/// there, so others see what is durable. Progress is coalesced: one `didWriteData` per task at
/// most every `SessionManager.Configuration.progressInterval` (20 ms by default), carrying the
/// bytes of every chunk since the last, and always before the task's next other event.
public protocol DownloadObserver: AnyObject, Sendable {
    /// A new task exists (created by a client or from resume data; not a restored one).
    func taskWasCreated(_ task: TaskSnapshot)
    func task(_ task: TaskSnapshot, didChangeState state: DownloadState)
    /// Options changed while the task exists (ResumeWithData with options).
    func taskDidChangeOptions(_ task: TaskSnapshot)
    /// The task's URL was replaced (`SetURL`, ResumeWithData with `url`): `task.record.url`.
    func taskDidChangeURL(_ task: TaskSnapshot)
    /// A queued task waits for something else now (the network changed; `.slot` when it may go).
    func task(_ task: TaskSnapshot, isWaitingFor reason: WaitingFor)
    func task(_ task: TaskSnapshot, didReceiveResponse status: Int, expectedLength: Int64)
    func task(
        _ task: TaskSnapshot, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64)
    /// The same, told whether a state change carrying the same totals comes next (the progress
    /// flushed before it): an observer that publishes both may publish the totals once. The
    /// default calls the method above.
    func task(
        _ task: TaskSnapshot, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64,
        stateChangeFollows: Bool
    )
    /// The partial file is fsynced up to `task.durableOffset`: safe to record.
    func taskDidCheckpoint(_ task: TaskSnapshot)
    func task(_ task: TaskSnapshot, didFinishDownloadingTo location: String)
    /// `resumeData` is set when the download can be resumed from where it stopped.
    func task(_ task: TaskSnapshot, didCompleteWithError error: DownloadError, resumeData: [UInt8]?)
    /// The task is gone from the engine (its partial file too, unless it was kept).
    func taskWasRemoved(_ task: TaskSnapshot)
    /// A group was made (before its tasks' `taskWasCreated`).
    func groupWasCreated(_ group: DownloadGroupRecord)
    /// An atomic group's files are all complete and durable: the decision to publish them is
    /// recorded here (the store commits it) before the first rename.
    func groupWillPublish(_ group: DownloadGroupRecord)
    /// That decision is undone: a file's name was taken between the check and its rename, the
    /// files placed are back at their partial names, nothing is published.
    func groupDidNotPublish(_ group: DownloadGroupRecord)
    /// The group's last task was removed.
    func groupWasRemoved(_ group: DownloadGroupRecord)
    /// Nothing is queued, running or retrying in `session` any more.
    func sessionDidFinishEvents(_ session: SessionID)
    /// This observer was given every event of a batch; the next observer is given them after
    /// this returns (the store commits the batch's writes here).
    func eventsWereDelivered()
}

extension DownloadObserver {
    public func groupWasCreated(_ group: DownloadGroupRecord) {}
    public func groupWillPublish(_ group: DownloadGroupRecord) {}
    public func groupDidNotPublish(_ group: DownloadGroupRecord) {}
    public func groupWasRemoved(_ group: DownloadGroupRecord) {}
    public func taskWasCreated(_ task: TaskSnapshot) {}
    public func task(_ task: TaskSnapshot, didChangeState state: DownloadState) {}
    public func taskDidChangeOptions(_ task: TaskSnapshot) {}
    public func taskDidChangeURL(_ task: TaskSnapshot) {}
    public func task(_ task: TaskSnapshot, isWaitingFor reason: WaitingFor) {}
    public func task(_ task: TaskSnapshot, didReceiveResponse status: Int, expectedLength: Int64) {}
    public func task(
        _ task: TaskSnapshot, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64
    ) {}
    public func task(
        _ task: TaskSnapshot, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64,
        stateChangeFollows: Bool
    ) {
        self.task(
            task, didWriteData: bytesWritten, totalBytesWritten: totalBytesWritten,
            totalBytesExpected: totalBytesExpected)
    }
    public func taskDidCheckpoint(_ task: TaskSnapshot) {}
    public func task(_ task: TaskSnapshot, didFinishDownloadingTo location: String) {}
    public func task(_ task: TaskSnapshot, didCompleteWithError error: DownloadError, resumeData: [UInt8]?) {}
    public func taskWasRemoved(_ task: TaskSnapshot) {}
    public func sessionDidFinishEvents(_ session: SessionID) {}
    public func eventsWereDelivered() {}
}
