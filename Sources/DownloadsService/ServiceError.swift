import DBus
import DownloadEngine
import DownloadModel
import DownloadStore
import DownloadsAPI

/// Turns whatever a handler throws into the reply: our `BusError`s pass, an engine error becomes
/// `org.example.Downloads.Error.<its name>` (the names are `DownloadsErrorName`'s), anything
/// else is `Failed` with its description.
enum ServiceError {
    static func reply(for error: Error) -> BusError {
        switch error {
        case let error as BusError:
            return error
        case let error as DownloadError:
            return (DownloadsErrorName(rawValue: error.name) ?? .failed).error(error.message)
        case let error as StoreError where error.isStorageFull:
            return DownloadsErrorName.storageFull.error("\(error.description); nothing was changed")
        default:
            return DownloadsErrorName.failed.error("\(error)")
        }
    }
}
