/// Receives the events of every task, with the callbacks of `URLSessionDownloadDelegate`.
/// Every method has an empty default, so the service, the store and the log each implement
/// only what they need (the shape of Alamofire's `EventMonitor`). Events of one task arrive in
/// order; callbacks must return quickly.
public protocol DownloadObserver: AnyObject, Sendable {
    func task(_ task: TaskSnapshot, didChangeState state: DownloadState)
    func task(_ task: TaskSnapshot, didReceiveResponse status: Int, expectedLength: Int64)
    func task(_ task: TaskSnapshot, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64)
    /// The partial file is fsynced up to `task.durableOffset`: safe to record.
    func taskDidCheckpoint(_ task: TaskSnapshot)
    func task(_ task: TaskSnapshot, didFinishDownloadingTo location: String)
    /// `resumeData` is set when the download can be resumed from where it stopped.
    func task(_ task: TaskSnapshot, didCompleteWithError error: DownloadError, resumeData: [UInt8]?)
    /// Nothing is queued, running or retrying in `session` any more.
    func sessionDidFinishEvents(_ session: String)
}

extension DownloadObserver {
    public func task(_ task: TaskSnapshot, didChangeState state: DownloadState) {}
    public func task(_ task: TaskSnapshot, didReceiveResponse status: Int, expectedLength: Int64) {}
    public func task(_ task: TaskSnapshot, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64) {}
    public func taskDidCheckpoint(_ task: TaskSnapshot) {}
    public func task(_ task: TaskSnapshot, didFinishDownloadingTo location: String) {}
    public func task(_ task: TaskSnapshot, didCompleteWithError error: DownloadError, resumeData: [UInt8]?) {}
    public func sessionDidFinishEvents(_ session: String) {}
}
