import DBus
import Dispatch
import DownloadsAPI
import DownloadsClient
import TerminalOutput
import Logging
import RecentFiles
import ShownText

/// Follows the user's tasks on the service's bus and shows them on the desktop's session bus:
/// a KDE job view per running task when a job-view server is there (Plasma then shows progress
/// in its task manager and notifies the end itself), otherwise dock progress for the task's
/// `desktop_entry` and a notification when it finishes or fails. A group (many files as one
/// job) is one job view ("12 of 4,000 files"), its files not shown on their own.
///
/// Every event goes through one stream and is handled by `run()` one at a time; the state
/// below is touched only there.
final class Agent: @unchecked Sendable {
    static let viewDelay: Duration = .milliseconds(500)
    /// The desktop entry of job views of tasks started without one.
    static let ownDesktopEntry = "org.example.Downloads.Agent.desktop"
    static let keptEndedTasks = 500

    let proxy: DownloadsProxy
    private let desktop: Connection
    let logger: Logger
    private let events: AsyncStream<AgentEvent>
    let inbox: AsyncStream<AgentEvent>.Continuation
    let jobViews: JobViews
    private let dock: DockProgress
    let notifier: Notifier

    var tasks: [ObjectPath: AgentTask] = [:]
    var jobViewServer: String?
    private var views: [ObjectPath: ObjectPath] = [:]
    var notifications: [UInt32: ObjectPath] = [:]
    private var dockShown: Set<String> = []
    /// The groups shown as one job each, their files (not shown on their own), and the groups' views.
    var groups: [ObjectPath: AgentGroup] = [:]
    var groupMembers: Set<ObjectPath> = []
    var groupViews: [ObjectPath: ObjectPath] = [:]

    /// The user's recently used files, when the agent adds to them (for the system service).
    private let recent: RecentFiles?
    /// One add at a time, off the agent's loop (each reads and writes the whole file).
    private let recentQueue = DispatchQueue(label: "org.example.Downloads.Agent.recent")

    init(proxy: DownloadsProxy, desktop: Connection, logger: Logger, recent: RecentFiles? = nil) {
        self.proxy = proxy
        self.desktop = desktop
        self.logger = logger
        self.recent = recent
        (events, inbox) = AsyncStream.makeStream(of: AgentEvent.self)
        jobViews = JobViews(connection: desktop)
        dock = DockProgress(connection: desktop)
        notifier = Notifier(connection: desktop)
    }

    func start() async throws {
        let inbox = self.inbox
        let service = proxy.connection
        try await service.subscribe(
            MatchRule(sender: DownloadsAPI.busName, interface: DownloadsInterfaces.manager.name)
        ) { message in
            if let signal = ManagerSignal(name: message.member ?? "", arguments: (try? message.arguments()) ?? []) {
                inbox.yield(.service(signal))
            }
        }
        try await service.subscribe(
            MatchRule(
                sender: DownloadsAPI.busName, interface: InterfaceDescription.properties.name,
                member: "PropertiesChanged"
            )
        ) { message in
            guard let path = message.path, DownloadsAPI.taskID(path) != nil, let arguments = try? message.arguments(),
                arguments.count == 3, arguments[0].stringValue == DownloadsInterfaces.task.name,
                let changed = arguments[1].vardictValue
            else { return }
            inbox.yield(.properties(path, changed))
        }
        try await service.onNameOwnerChanged { name, _, new in
            if name == DownloadsAPI.busName, !new.isEmpty { inbox.yield(.serviceAppeared) }
        }
        try await desktop.onNameOwnerChanged { name, _, new in
            if name == JobViews.busName { inbox.yield(.jobViewServer(new.isEmpty ? nil : new)) }
        }
        try await desktop.subscribe(MatchRule(interface: JobViews.viewInterface)) { message in
            guard let path = message.path, let sender = message.sender, let member = message.member else { return }
            inbox.yield(.jobViewRequest(view: path, sender: sender, request: member))
        }
        try await desktop.subscribe(
            MatchRule(sender: Notifier.busName, interface: Notifier.busName, member: "ActionInvoked")
        ) { message in
            guard let arguments = try? message.arguments(), arguments.count == 2, let id = arguments[0].uint32Value,
                let key = arguments[1].stringValue
            else { return }
            inbox.yield(.notificationAction(id: id, key: key))
        }
        jobViewServer = try? await desktop.nameOwner(JobViews.busName)
        // Only when the service runs: the agent never starts it (a login would start the daemon).
        if try await service.nameOwner(DownloadsAPI.busName) != nil { inbox.yield(.serviceAppeared) }
    }

    func run() async {
        for await event in events { await handle(event) }
    }

    func stop() { inbox.finish() }

    // MARK: Events

    private func handle(_ event: AgentEvent) async {
        switch event {
        case .serviceAppeared:
            await synchronise()
        case .service(let signal):
            guard let path = signal.task else { return await handleGroup(signal) }
            // A task first seen with this signal is read whole (`known`) after the signal was
            // sent: its state and bytes are newer than the signal's, which would move them back.
            let readAfterSignal = tasks[path] == nil
            guard await known(path) else { return }
            switch signal {
            case .stateChanged(_, let state):
                if !readAfterSignal { tasks[path]?.status.state = state }
                present(path)
            case .progress(_, _, let total, let expected):
                if !readAfterSignal {
                    tasks[path]?.recordProgress(total, at: .now)
                    tasks[path]?.status.bytesExpected = expected
                }
                present(path)
            case .finished(_, let location):
                tasks[path]?.status.destination = location
                tasks[path]?.status.state = "finished"
                if let task = tasks[path], task.status.addToRecent, !task.status.isUpload { addToRecent(task.status) }
                await ended(path)
            case .failed(_, let name, let message, _):
                let cancelled = name == DownloadsErrorName.cancelled.fullName
                tasks[path]?.status.state = cancelled ? "cancelled" : "failed"
                tasks[path]?.status.error = name
                tasks[path]?.status.errorMessage = message
                await ended(path)
            case .eventsFinished, .groupProgress, .groupFinished, .groupFailed:
                break
            }
        case .properties(let path, let changed):
            guard tasks[path] != nil else { return }
            let before = tasks[path]?.status.state
            let waitedForApp = tasks[path]?.status.waitingFor == "app"
            tasks[path]?.status.apply(changed)
            if !waitedForApp, tasks[path]?.status.waitingFor == "app" { await askToSignIn(path) }
            // Ends are handled on Finished and Failed, which say more.
            if let state = tasks[path]?.status.state, state != before,
                ["finished", "failed", "cancelled"].contains(state)
            {
                return
            }
            present(path)
        case .jobViewServer(let owner):
            jobViewServer = owner
            // A new server knows none of our views: register the live tasks and groups again.
            views.removeAll()
            await groupViewServerChanged(owner)
            for path in tasks.keys {
                tasks[path]?.view = nil
                tasks[path]?.viewPending = false
                if owner != nil, tasks[path]?.shownByJobView == true, tasks[path]?.isActive == true {
                    await requestView(path)
                }
            }
            if owner != nil {
                // Plasma's task manager shows job views: clear our dock entries.
                for entry in dockShown { dock.update(desktopEntry: entry, count: 0, progress: nil) }
                dockShown.removeAll()
            }
        case .jobViewRequest(let view, let sender, let request):
            guard sender == jobViewServer else { return }
            if let group = groupViews[view] { return await performOnGroup(request, on: group) }
            guard let path = views[view] else { return }
            await perform(request, on: path)
        case .viewDue(let path) where groups[path] != nil:
            groups[path]?.viewPending = false
            if groups[path]?.isActive == true, groups[path]?.view == nil { await requestGroupView(path) }
        case .viewDue(let path):
            tasks[path]?.viewPending = false
            if tasks[path]?.isActive == true, tasks[path]?.view == nil { await requestView(path) }
        case .notificationAction(let id, let key):
            if let path = notifications[id], let task = tasks[path], task.status.waitingFor == "app",
                key == "default" || key == "open-app"
            {
                logger.info("opening the app \(task.status.desktopEntry) to sign in")
                return Opener.launch(desktopEntry: task.status.desktopEntry)
            }
            guard let path = notifications[id], let task = tasks[path], task.status.state == "finished" else { return }
            switch key {
            case "default", "open":
                logger.info("opening \(DisplayText.escaped(task.status.destination))")
                Opener.open(task.status.destination)
            case "show-in-folder":
                await showInFolder(task.status.destination)
            default:
                break
            }
        }
    }

    /// Learns the user's tasks (again): at start and whenever the service comes back.
    private func synchronise() async {
        await synchroniseGroups()
        guard let paths = try? await proxy.listTasks(session: "") else { return }
        for path in paths where !groupMembers.contains(path) {
            guard let status = try? await proxy.status(path) else { continue }
            if tasks[path] == nil {
                // Ended before the agent saw it: nothing to show.
                tasks[path] = AgentTask(status: status)
            } else {
                tasks[path]?.status = status
            }
            // As for a task first seen by a signal (`known`): `Progress` queued while this was
            // read is older than it, and would move the dock's progress back.
            tasks[path]?.readFloor = status.bytesWritten
            if status.isEnded { await ended(path, announce: false) } else { present(path) }
        }
    }

    /// Whether the task is known, learning it from the service when it is new.
    private func known(_ path: ObjectPath) async -> Bool {
        if tasks[path] != nil { return true }
        // A file of a group (one sending its own signals) is shown as part of its group.
        if groupMembers.contains(path) { return false }
        await synchroniseGroups()
        if groupMembers.contains(path) { return false }
        guard let status = try? await proxy.status(path) else { return false }
        var task = AgentTask(status: status)
        // Signals queued while this was read are older than it (a dock's progress only grows).
        task.readFloor = status.bytesWritten
        tasks[path] = task
        return true
    }

    // MARK: Presenting

    private func present(_ path: ObjectPath) {
        guard let task = tasks[path], task.isActive else { return }
        if jobViewServer != nil {
            if let view = task.view {
                jobViews.update(view, JobViews.state(of: task))
            } else if !task.viewPending, task.status.state != "queued" {
                tasks[path]?.viewPending = true
                let inbox = self.inbox
                Task {
                    try? await Task.sleep(for: Agent.viewDelay)
                    inbox.yield(.viewDue(path))
                }
            }
        }
        refreshDock(task.status.desktopEntry)
    }

    private func requestView(_ path: ObjectPath) async {
        guard let task = tasks[path] else { return }
        let entry = task.status.desktopEntry.isEmpty ? Agent.ownDesktopEntry : task.status.desktopEntry
        do {
            let view = try await jobViews.requestView(
                desktopEntry: String(entry.dropLast(".desktop".count)), state: JobViews.state(of: task))
            views[view] = path
            tasks[path]?.view = view
            tasks[path]?.shownByJobView = true
            if let task = tasks[path] {
                jobViews.update(view, JobViews.state(of: task))
                if !task.isActive { terminate(path) }
            }
        } catch {
            logger.warning("no job view for \(path.rawValue): \(error)")
        }
    }

    private func terminate(_ path: ObjectPath) {
        guard let task = tasks[path], let view = task.view else { return }
        let code: UInt32 =
            switch task.status.state {
            case "finished": 0
            case "cancelled": JobViews.killedError
            default: JobViews.userDefinedError
            }
        jobViews.update(view, JobViews.state(of: task))
        jobViews.terminate(
            view, errorCode: code,
            message: code == JobViews.userDefinedError ? DisplayText.escaped(task.status.errorMessage) : ""
        )
        views[view] = nil
        tasks[path]?.view = nil
    }

    /// A task finished, failed or was cancelled.
    private func ended(_ path: ObjectPath, announce: Bool = true) async {
        guard let task = tasks[path] else { return }
        terminate(path)
        refreshDock(task.status.desktopEntry)
        forgetOldEndedTasks()
        // A job view's end is notified by the desktop; a cancel was the user's own doing.
        guard announce, !task.shownByJobView, task.status.state != "cancelled" else { return }
        let finished = task.status.state == "finished"
        let kind = task.status.isUpload ? "Upload" : "Download"
        let id = await notifier.notify(
            replacing: task.notification,
            summary: finished ? "\(kind) finished" : "\(kind) failed",
            // The body is markup to the notification server: names and messages are escaped.
            body: AgentText.notificationBody(task.status),
            icon: finished ? (task.status.isUpload ? "document-send" : "folder-download") : "dialog-error",
            category: finished ? "transfer.complete" : "transfer.error",
            desktopEntry: task.status.desktopEntry.isEmpty ? nil : task.status.desktopEntry,
            // An upload's file was there before: nothing new to open.
            actions: finished && !task.status.isUpload
                ? ["default", "Open", "open", "Open", "show-in-folder", "Show in folder"] : []
        )
        guard id != 0 else { return }
        if let old = task.notification { notifications[old] = nil }
        tasks[path]?.notification = id
        notifications[id] = path
    }

    /// "Show in folder": the desktop's file manager opens the file's folder with it selected
    /// (`FileManager1.ShowItems`); without one, the folder is opened as any file is.
    private func showInFolder(_ file: String) async {
        do {
            try await FileManagerWindow.show(file, on: desktop)
            logger.info("showing \(DisplayText.escaped(file)) in its folder")
        } catch {
            let folder = String(file[..<(file.lastIndex(of: "/") ?? file.endIndex)])
            logger.info("no file manager answers ShowItems (\(error)); opening \(DisplayText.escaped(folder))")
            Opener.open(folder.isEmpty ? "/" : folder)
        }
    }

    /// The system service (root) never writes a user's files: the user's own agent adds the
    /// finished file to their recently used files, for the app that started it.
    private func addToRecent(_ status: DownloadTaskStatus) {
        guard let recent else { return }
        let logger = self.logger
        recentQueue.async {
            do {
                try recent.add(
                    status.destination, desktopEntry: status.desktopEntry.isEmpty ? nil : status.desktopEntry,
                    fallbackName: "org.example.Downloads")
                logger.info("added \(DisplayText.escaped(status.destination)) to the recently used files")
            } catch {
                logger.warning(
                    "\(DisplayText.escaped(status.destination)) not added to the recently used files: \(error)")
            }
        }
    }

    /// The task waits for its app to answer a login (`WaitingFor` `app`): a notification whose
    /// action opens the app (its `desktop_entry`), where the user signs in.
    private func askToSignIn(_ path: ObjectPath) async {
        guard let task = tasks[path] else { return }
        let entry = task.status.desktopEntry
        let id = await notifier.notify(
            replacing: task.notification, summary: "Sign in to continue",
            body: AgentText.signInBody(task.status), icon: "dialog-password", category: "transfer",
            desktopEntry: entry.isEmpty ? nil : entry,
            actions: entry.isEmpty ? [] : ["default", "Sign in", "open-app", "Sign in"]
        )
        guard id != 0 else { return }
        if let old = task.notification { notifications[old] = nil }
        tasks[path]?.notification = id
        notifications[id] = path
    }

    /// Ended tasks are kept for their notification's action; beyond `keptEndedTasks` the oldest
    /// ids go (the service itself forgets them after its retention).
    private func forgetOldEndedTasks() {
        let ended = tasks.filter { !$0.value.isActive }.sorted { $0.value.status.id < $1.value.status.id }
        guard ended.count > Agent.keptEndedTasks else { return }
        for (path, task) in ended.prefix(ended.count - Agent.keptEndedTasks) {
            tasks[path] = nil
            if let id = task.notification { notifications[id] = nil }
        }
    }

    /// The dock entry of an app: how many of its downloads are active and how far they are.
    private func refreshDock(_ entry: String) {
        guard !entry.isEmpty, jobViewServer == nil else { return }
        let active = tasks.values.filter { $0.status.desktopEntry == entry && $0.isActive }
        if active.isEmpty {
            if dockShown.remove(entry) != nil { dock.update(desktopEntry: entry, count: 0, progress: nil) }
            return
        }
        let sized = active.filter { $0.status.bytesExpected > 0 }
        let expected = sized.reduce(Int64(0)) { $0 + $1.status.bytesExpected }
        let written = sized.reduce(Int64(0)) { $0 + min($1.status.bytesWritten, $1.status.bytesExpected) }
        dock.update(
            desktopEntry: entry, count: active.count, progress: expected > 0 ? Double(written) / Double(expected) : nil)
        dockShown.insert(entry)
    }

    // MARK: Requests from the desktop

    private func perform(_ request: String, on path: ObjectPath) async {
        do {
            switch request {
            case "cancelRequested": try await proxy.cancel(path)
            case "suspendRequested": _ = try await proxy.pause(path)
            case "resumeRequested": try await proxy.resume(path)
            default: return
            }
            logger.info("\(request) for \(path.rawValue)")
        } catch {
            logger.warning("\(request) for \(path.rawValue): \(error)")
        }
    }
}
