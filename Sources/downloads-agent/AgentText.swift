import DownloadsClient

/// The words the agent shows.
enum AgentText {
    /// Why a queued task waits, for people; nil when it does not (or only for a place).
    static func waiting(_ status: DownloadTaskStatus) -> String? {
        switch status.waitingFor {
        case "network": return "Waiting for a network connection"
        case "unmetered-network": return "Waiting for a network that is not metered"
        case "yielding": return "Giving way to other traffic (background download)"
        default: return status.state == "retrying" ? "Connection lost; trying again" : nil
        }
    }
}
