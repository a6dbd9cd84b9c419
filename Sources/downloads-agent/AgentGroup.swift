import DBus
import DownloadsClient

/// One of the user's groups as the agent presents it: one job for all of its files.
struct AgentGroup {
    var status: DownloadGroupStatus
    /// Its KDE job view, once the server gave one.
    var view: ObjectPath?
    /// A view is asked for (or its delay runs).
    var viewPending = false
    /// A job view showed it: the desktop notifies its end itself.
    var shownByJobView = false
    /// The notification it has.
    var notification: UInt32?

    var isActive: Bool { !["finished", "failed", "cancelled"].contains(status.state) }
}
