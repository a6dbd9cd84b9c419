import DBus
import DownloadsAPI
import FoundationEssentials

/// An error from the service (or the bus), with the D-Bus error name and the service's message.
/// When a task failed in a way it can resume from, `resumeData` holds what
/// `DownloadSession.downloadTask(withResumeData:)` takes (as `NSURLSessionDownloadTaskResumeData`
/// does in Foundation).
public struct DownloadsClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The full D-Bus error name, e.g. `org.example.Downloads.Error.NotFound`.
    public let name: String
    /// The service's readable message.
    public let message: String
    /// Resume data of a failed task, when it can be resumed.
    public let resumeData: Data?

    public init(name: String, message: String, resumeData: Data? = nil) {
        self.name = name
        self.message = message
        self.resumeData = resumeData
    }

    /// The service's error, when it is one of the contract's (nil for bus errors).
    public var code: DownloadsErrorName? { DownloadsErrorName(fullName: name) }

    /// The bus has no download service to give the call to (not running, not activatable).
    public var serviceIsNotRunning: Bool { name == BusError.serviceUnknownName }

    /// `org.example.Downloads.Error.NotFound: no task at …`.
    public var description: String { "\(name): \(message)" }

    /// The error name without the service's prefix (`NotFound`), or the whole name.
    public var shortName: String { code?.rawValue ?? name }

    static func wrap(_ error: Error) -> DownloadsClientError {
        switch error {
        case let error as DownloadsClientError: return error
        case let error as BusError: return DownloadsClientError(name: error.name, message: error.message)
        default: return DownloadsClientError(name: BusError.failedName, message: "\(error)")
        }
    }
}
