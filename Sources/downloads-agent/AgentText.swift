import DownloadsClient
import TerminalOutput
import ShownText

/// The words the agent shows.
enum AgentText {
    /// Why a queued task waits, for people; nil when it does not (or only for a place).
    static func waiting(_ status: DownloadTaskStatus) -> String? {
        switch status.waitingFor {
        case "network": return "Waiting for a network connection"
        case "unmetered-network": return "Waiting for a network that is not metered"
        case "yielding": return "Giving way to other traffic (background download)"
        case "begin-time": return "Scheduled for later"
        case "ac-power": return "Waiting for the computer to be plugged in"
        case "power-saver": return "Waiting while power saver is on (background download)"
        case "app": return "Waiting for its app to sign in"
        default: return status.state == "retrying" ? "Connection lost; trying again" : nil
        }
    }

    /// A group as people are shown it: its title, else how many files it has.
    static func groupName(_ status: DownloadGroupStatus) -> String {
        status.title.isEmpty ? "\(count(status.files)) files" : status.title
    }

    /// "12 of 4,000 files".
    static func groupFiles(_ status: DownloadGroupStatus) -> String {
        "\(count(status.filesFinished)) of \(count(status.files)) files"
    }

    /// A count with thousands separated ("4,000").
    static func count(_ value: UInt32) -> String {
        let digits = Array(String(value))
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { text.append(",") }
            text.append(digit)
        }
        return text
    }

    /// The body of an ended task's notification, as markup (everything escaped): its title (or
    /// file name), the error of a failed one, and the app's description on a line of its own.
    /// The body of the notification that asks the user to sign in through the task's app
    /// ("Sign in to REALM to continue downloading NAME"; markup: the realm and name escaped).
    static func signInBody(_ status: DownloadTaskStatus) -> String {
        // The realm is the server's words: cut, and escaped as the name is.
        let realm = String((status.question["realm"] ?? "").prefix(80))
        return "Sign in " + (realm.isEmpty ? "" : "to " + DisplayText.markup(realm) + " ") + "to continue "
            + (status.isUpload ? "uploading " : "downloading ") + DisplayText.markup(status.displayName)
    }

    static func notificationBody(_ status: DownloadTaskStatus) -> String {
        var body = DisplayText.markup(status.displayName)
        if status.state == "failed" { body += ": " + DisplayText.markup(status.errorMessage) }
        if !status.taskDescription.isEmpty { body += "\n" + DisplayText.markup(status.taskDescription) }
        return body
    }
}
