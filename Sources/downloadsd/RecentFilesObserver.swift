import Dispatch
import DownloadModel
import Logging
import RecentFiles
import ShownText
#if canImport(Glibc)
import Glibc
#endif

/// The per-user daemon adds each finished download whose task asked (`add_to_recent`) to its
/// user's recently used files, as the user's own process (the system daemon never does: it
/// runs as root, and the user's `downloads-agent` adds them there). Only the daemon's own
/// user's tasks: a file of anyone else is never written into this user's list.
final class RecentFilesObserver: DownloadObserver {
    private let recent: RecentFiles
    private let logger: Logger
    /// One add at a time, off the delivery queue (each reads and writes the whole file).
    private let queue = DispatchQueue(label: "org.example.Downloads.recent")

    init(recent: RecentFiles = RecentFiles(), logger: Logger) {
        self.recent = recent
        self.logger = logger
    }

    func task(_ task: TaskSnapshot, didFinishDownloadingTo location: String) {
        let record = task.record
        guard record.options.addToRecent, record.owner == geteuid() else { return }
        queue.async { [recent, logger] in
            do {
                try recent.add(
                    location, desktopEntry: record.options.desktopEntry, fallbackName: "org.example.Downloads")
            } catch {
                logger.warning(
                    "task \(record.id): \(DisplayText.quoted(location, limit: 200)) not added to the recently used files: \(error)"
                )
            }
        }
    }
}
