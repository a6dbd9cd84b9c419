/// A task as observers and clients see it at one moment.
public struct TaskSnapshot: Sendable, Hashable {
    public let record: DownloadTaskRecord
    /// Bytes written so far (may be ahead of the durable offset).
    public let bytesWritten: Int64
    /// Why a queued task does not run yet; `.yielding` for a running background task giving way
    /// to other traffic; `.nothing` otherwise.
    public let waitingFor: WaitingFor
    /// Bytes a second over the last few seconds while running (`Speed`); 0 otherwise.
    public let speed: UInt64
    /// The question its app is asked while it waits for it (`WaitingFor` `app`); nil otherwise.
    @SharedIfAny public private(set) var asking: Challenge?

    public init(
        record: DownloadTaskRecord, bytesWritten: Int64, waitingFor: WaitingFor = .nothing, speed: UInt64 = 0,
        asking: Challenge? = nil
    ) {
        self.record = record
        self.asking = record.state == .queued && waitingFor == .app ? asking : nil
        self.bytesWritten = bytesWritten
        self.speed = speed
        self.waitingFor =
            record.state == .queued || (record.state == .running && waitingFor == .yielding) ? waitingFor : .nothing
    }

    public var id: UInt64 { record.id }
    public var owner: UInt32 { record.owner }
    public var session: String { record.session }
    public var sessionID: SessionID { record.sessionID }
    public var state: DownloadState { record.state }
    public var durableOffset: Int64 { record.durableOffset }
    public var expectedLength: Int64 { record.expectedLength }
}
