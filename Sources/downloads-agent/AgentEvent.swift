import DBus
import DownloadsAPI

/// Everything the agent reacts to, from both buses, handled one at a time in arrival order.
enum AgentEvent: Sendable {
    /// A signal of the service.
    case service(ManagerSignal)
    /// `PropertiesChanged` of a task object.
    case properties(ObjectPath, [String: DBusValue])
    /// The service took its name (first start or a restart): learn the tasks again.
    case serviceAppeared
    /// A job-view server took `org.kde.JobViewServer` (its unique name) or left (nil).
    case jobViewServer(String?)
    /// `cancelRequested`, `suspendRequested` or `resumeRequested` on a job view.
    case jobViewRequest(view: ObjectPath, sender: String, request: String)
    /// A task's view delay passed (kjobwidgets waits half a second, so short jobs do not flicker).
    case viewDue(ObjectPath)
    /// The user chose an action of a notification.
    case notificationAction(id: UInt32, key: String)
}
