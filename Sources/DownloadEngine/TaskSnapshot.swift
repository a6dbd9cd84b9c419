/// A task as observers and clients see it at one moment.
public struct TaskSnapshot: Sendable, Hashable {
    public let record: DownloadTaskRecord
    /// Bytes written so far (may be ahead of the durable offset).
    public let bytesWritten: Int64

    public init(record: DownloadTaskRecord, bytesWritten: Int64) {
        self.record = record
        self.bytesWritten = bytesWritten
    }

    public var id: UInt64 { record.id }
    public var owner: UInt32 { record.owner }
    public var session: String { record.session }
    public var sessionID: SessionID { record.sessionID }
    public var state: DownloadState { record.state }
    public var durableOffset: Int64 { record.durableOffset }
    public var expectedLength: Int64 { record.expectedLength }
}
