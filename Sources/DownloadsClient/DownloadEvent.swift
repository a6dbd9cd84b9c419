/// The delegate's calls as values, for `for await event in session.events`.
public enum DownloadEvent: Sendable {
    case wroteData(BackgroundDownloadTask, bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64)
    case stateChanged(BackgroundDownloadTask, state: String)
    case finished(BackgroundDownloadTask, location: String)
    case completed(BackgroundDownloadTask, error: DownloadsClientError?)
    case finishedEvents(session: String)

    /// The task the event is about (nil for `finishedEvents`).
    public var task: BackgroundDownloadTask? {
        switch self {
        case .wroteData(let task, _, _, _), .stateChanged(let task, _), .finished(let task, _), .completed(let task, _):
            return task
        case .finishedEvents:
            return nil
        }
    }
}
