import DBus
import DownloadsClient
import TerminalOutput
import ShownText

/// The KDE job-view protocol (kjobwidgets' `KUiServerV2JobTracker`): `org.kde.JobViewServerV2`
/// at `org.kde.JobViewServer` `/JobViewServer` gives a `org.kde.JobViewV3` object per job.
struct JobViews {
    static let busName = "org.kde.JobViewServer"
    static let path: ObjectPath = "/JobViewServer"
    static let viewInterface = "org.kde.JobViewV3"
    /// Killable | Suspendable.
    static let capabilities: Int32 = 0x1 | 0x2
    /// kjobwidgets' error codes: killed by the user, and a job's own error.
    static let killedError: UInt32 = 1
    static let userDefinedError: UInt32 = 100

    let connection: Connection

    /// The job's state as a view shows it (the same keys kjobwidgets sends).
    static func state(of task: AgentTask) -> [String: DBusValue] {
        let status = task.status
        var state: [String: DBusValue] = [
            // Plain text in the job view, but a bidi override or a control character still
            // rearranges or hides what a person reads: escaped.
            "title": .string("\(status.isUpload ? "Uploading" : "Downloading") \(DisplayText.escaped(task.name))"),
            "processedBytes": .uint64(UInt64(max(0, status.bytesWritten))),
            // The service's own measure (`Speed`), else the agent's from the progress it heard.
            "speed": .uint64(status.speed > 0 || status.state != "running" ? status.speed : task.speed),
            "suspended": .boolean(status.state == "paused"),
            // Why it waits, else the app's description of the download.
            "infoMessage": .string(AgentText.waiting(status) ?? DisplayText.escaped(status.taskDescription)),
        ]
        if status.isUpload {
            // An upload goes from the file to the URL.
            state["descriptionLabel1"] = .string("File")
            state["descriptionValue1"] = .string(DisplayText.escaped(status.source))
            state["descriptionLabel2"] = .string("To")
            state["descriptionValue2"] = .string(DisplayText.escaped(status.url))
        } else {
            state["descriptionLabel1"] = .string("Source")
            state["descriptionValue1"] = .string(DisplayText.escaped(status.url))
            state["descriptionLabel2"] = .string("Destination")
            state["descriptionValue2"] = .string(DisplayText.escaped(status.destination))
            // Plasma's finished job offers "Open Folder" from it.
            state["destUrl"] = .string(FileURI.of(status.destination))
        }
        if status.bytesExpected > 0 {
            state["totalBytes"] = .uint64(UInt64(status.bytesExpected))
            state["percent"] = .uint32(UInt32(min(100, status.bytesWritten * 100 / status.bytesExpected)))
        }
        return state
    }

    /// A group's job: its title (or its number of files), "12 of 4,000 files", its bytes.
    static func state(ofGroup group: AgentGroup) -> [String: DBusValue] {
        let status = group.status
        var state: [String: DBusValue] = [
            "title": .string("Downloading \(DisplayText.escaped(AgentText.groupName(status)))"),
            "descriptionLabel1": .string("Files"), "descriptionValue1": .string(AgentText.groupFiles(status)),
            "processedBytes": .uint64(UInt64(max(0, status.bytesWritten))),
            "suspended": .boolean(status.state == "paused"),
        ]
        if status.bytesExpected > 0 {
            state["totalBytes"] = .uint64(UInt64(status.bytesExpected))
            state["percent"] = .uint32(UInt32(min(100, status.bytesWritten * 100 / status.bytesExpected)))
        }
        return state
    }

    func requestView(desktopEntry: String, state: [String: DBusValue]) async throws -> ObjectPath {
        var hints = state
        // The delay is ours (as kjobwidgets does): the server shows the view at once.
        hints["immediate"] = .boolean(true)
        let reply = try await connection.call(
            destination: Self.busName, path: Self.path, interface: "org.kde.JobViewServerV2", method: "requestView",
            arguments: [.string(desktopEntry), .int32(Self.capabilities), .vardict(hints)], timeout: .seconds(10),
            autoStart: false
        )
        guard let view = reply.first?.objectPathValue else { throw BusError.failed("requestView returned no path") }
        return view
    }

    func update(_ view: ObjectPath, _ state: [String: DBusValue]) {
        send(view, "update", [.vardict(state)])
    }

    func terminate(_ view: ObjectPath, errorCode: UInt32, message: String) {
        send(view, "terminate", [.uint32(errorCode), .string(message), .vardict([:])])
    }

    /// `update` and `terminate` are declared NoReply.
    private func send(_ view: ObjectPath, _ method: String, _ arguments: [DBusValue]) {
        do {
            let message = try Message.methodCall(
                destination: Self.busName, path: view, interface: Self.viewInterface, member: method)
            message.setNoReply(true)
            message.autoStart = false
            try message.append(arguments)
            try connection.send(message)
        } catch {
            // The server went away: its NameOwnerChanged will follow.
        }
    }
}
