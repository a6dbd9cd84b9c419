import FoundationEssentials

/// What a `DownloadSession` tells its delegate, in the shapes of `URLSessionDownloadDelegate`
/// (and, for uploads, `URLSessionTaskDelegate`'s and `URLSessionDataDelegate`'s).
/// Calls come one at a time, in the order the service sent the events (like a serial
/// `delegateQueue`). Every method has an empty default.
public protocol DownloadSessionDelegate: AnyObject, Sendable {
    /// Bytes reached the file (`urlSession(_:downloadTask:didWriteData:…)`); coalesced by the service.
    func downloadSession(
        _ session: DownloadSession, downloadTask: BackgroundDownloadTask, didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    )
    /// The file is complete at `location` (`urlSession(_:downloadTask:didFinishDownloadingTo:)`).
    /// Unlike URLSession's temporary file, the file is already where you asked and stays there.
    func downloadSession(
        _ session: DownloadSession, downloadTask: BackgroundDownloadTask, didFinishDownloadingTo location: String)
    /// The task ended (`urlSession(_:task:didCompleteWithError:)`): nil after a finish, else the
    /// error, whose `resumeData` is set when the task can be resumed.
    func downloadSession(
        _ session: DownloadSession, task: BackgroundDownloadTask, didCompleteWithError error: DownloadsClientError?)
    /// Every task of the session has ended (`urlSessionDidFinishEvents(forBackgroundURLSession:)`).
    /// When the session is the completion handler, the service's call is answered after this
    /// returns (as calling `backgroundCompletionHandler` does).
    func downloadSessionDidFinishEvents(forBackgroundSession session: DownloadSession)
    /// An upload's bytes went out (`urlSession(_:task:didSendBodyData:…)`); coalesced by the service.
    func downloadSession(
        _ session: DownloadSession, task: BackgroundDownloadTask, didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    )
    /// An upload's final response (`urlSession(_:dataTask:didReceive:completionHandler:)`), before
    /// it completes: after a 2xx, and after a refusal (`HTTPError`).
    func downloadSession(_ session: DownloadSession, task: BackgroundDownloadTask, didReceive response: UploadResponse)
    /// The response's body (`urlSession(_:dataTask:didReceive:)`), at most 1 MiB, in one piece.
    func downloadSession(_ session: DownloadSession, task: BackgroundDownloadTask, didReceive data: Data)
    /// A group's progress (at most ten a second, and at each file's end).
    func downloadSession(
        _ session: DownloadSession, group: BackgroundDownloadGroup, didWriteData bytesWritten: Int64,
        bytesExpected: Int64,
        filesFinished: UInt32, files: UInt32
    )
    /// A group ended: nil once every file is in place, else the error that failed it.
    func downloadSession(
        _ session: DownloadSession, group: BackgroundDownloadGroup, didCompleteWithError error: DownloadsClientError?)
    /// A task met a login, an expired token or a proxy that wants credentials
    /// (`urlSession(_:task:didReceive:completionHandler:)`); asked only for the kinds the
    /// session's configuration names (`challengeKinds`). The task waits, holding no place, until
    /// this returns (within `challengeTimeout`).
    func downloadSession(
        _ session: DownloadSession, task: BackgroundDownloadTask, didReceive challenge: DownloadChallenge
    ) async -> ChallengeDisposition
}

extension DownloadSessionDelegate {
    public func downloadSession(
        _ session: DownloadSession, downloadTask: BackgroundDownloadTask, didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) {}
    public func downloadSession(
        _ session: DownloadSession, downloadTask: BackgroundDownloadTask, didFinishDownloadingTo location: String
    ) {}
    public func downloadSession(
        _ session: DownloadSession, task: BackgroundDownloadTask, didCompleteWithError error: DownloadsClientError?
    ) {}
    public func downloadSessionDidFinishEvents(forBackgroundSession session: DownloadSession) {}
    public func downloadSession(
        _ session: DownloadSession, task: BackgroundDownloadTask, didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {}
    public func downloadSession(
        _ session: DownloadSession, task: BackgroundDownloadTask, didReceive response: UploadResponse
    ) {}
    public func downloadSession(_ session: DownloadSession, task: BackgroundDownloadTask, didReceive data: Data) {}
    public func downloadSession(
        _ session: DownloadSession, group: BackgroundDownloadGroup, didWriteData bytesWritten: Int64,
        bytesExpected: Int64,
        filesFinished: UInt32, files: UInt32
    ) {}
    public func downloadSession(
        _ session: DownloadSession, group: BackgroundDownloadGroup, didCompleteWithError error: DownloadsClientError?
    ) {}
    public func downloadSession(
        _ session: DownloadSession, task: BackgroundDownloadTask, didReceive challenge: DownloadChallenge
    ) async -> ChallengeDisposition { .performDefaultHandling }
}
