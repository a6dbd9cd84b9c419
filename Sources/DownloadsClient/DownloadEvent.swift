import FoundationEssentials

/// The delegate's calls as values, for `for await event in session.events`.
public enum DownloadEvent: Sendable {
    case wroteData(BackgroundDownloadTask, bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64)
    case stateChanged(BackgroundDownloadTask, state: String)
    case finished(BackgroundDownloadTask, location: String)
    case completed(BackgroundDownloadTask, error: DownloadsClientError?)
    case finishedEvents(session: String)
    /// An upload's bytes went out (`didSendBodyData`).
    case sentData(BackgroundDownloadTask, bytesSent: Int64, totalBytesSent: Int64, totalBytesExpected: Int64)
    /// An upload's final response, and its body, before it completes.
    case receivedResponse(BackgroundDownloadTask, UploadResponse)
    case receivedData(BackgroundDownloadTask, Data)
    /// A group's progress: its bytes, and how many of its files are in place.
    case groupProgress(
        BackgroundDownloadGroup, bytesWritten: Int64, bytesExpected: Int64, filesFinished: UInt32, files: UInt32)
    /// A group ended: nil when every file is in place, else why it failed.
    case groupCompleted(BackgroundDownloadGroup, error: DownloadsClientError?)

    /// The task the event is about (nil for `finishedEvents`).
    public var task: BackgroundDownloadTask? {
        switch self {
        case .wroteData(let task, _, _, _), .stateChanged(let task, _), .finished(let task, _), .completed(let task, _),
            .sentData(let task, _, _, _), .receivedResponse(let task, _), .receivedData(let task, _):
            return task
        case .finishedEvents, .groupProgress, .groupCompleted:
            return nil
        }
    }
}
