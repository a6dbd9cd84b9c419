import DBus
import DownloadsAPI
import DownloadsClient
import TerminalOutput
import ShownText

/// Groups on the desktop: one job view per group, its progress in files and bytes, its end.
extension Agent {
    /// Learns the user's groups the agent does not know yet, and their files.
    func synchroniseGroups() async {
        guard let paths = try? await proxy.listGroups(session: "") else { return }
        for path in paths where groups[path] == nil {
            guard let status = try? await proxy.groupStatus(path) else { continue }
            learn(path, status)
            if groups[path]?.isActive == true { presentGroup(path) }
        }
    }

    private func learn(_ path: ObjectPath, _ status: DownloadGroupStatus) {
        groups[path] = AgentGroup(status: status)
        for task in status.tasks {
            guard let task = try? ObjectPath(task) else { continue }
            groupMembers.insert(task)
            // Shown on its own before the group was known (its own signals came first): no longer.
            if let shown = tasks.removeValue(forKey: task), let view = shown.view {
                jobViews.terminate(view, errorCode: 0, message: "")
            }
        }
    }

    func handleGroup(_ signal: ManagerSignal) async {
        let path: ObjectPath
        switch signal {
        case .groupProgress(let group, _, _, _, _), .groupFinished(let group), .groupFailed(let group, _, _):
            path = group
        default: return
        }
        if groups[path] == nil {
            guard let status = try? await proxy.groupStatus(path) else { return }
            learn(path, status)
        }
        switch signal {
        case .groupProgress(_, let written, let expected, let finished, let files):
            groups[path]?.status.bytesWritten = written
            groups[path]?.status.bytesExpected = expected
            groups[path]?.status.filesFinished = finished
            groups[path]?.status.files = files
            if groups[path]?.isActive == false || groups[path]?.status.state == "paused" {
                groups[path]?.status.state = "running"
            }
            presentGroup(path)
        case .groupFinished:
            groups[path]?.status.state = "finished"
            if let files = groups[path]?.status.files { groups[path]?.status.filesFinished = files }
            await groupEnded(path, message: "")
        case .groupFailed(_, _, let message):
            groups[path]?.status.state = "failed"
            await groupEnded(path, message: message)
        default:
            break
        }
    }

    func presentGroup(_ path: ObjectPath) {
        guard let group = groups[path], group.isActive, jobViewServer != nil else { return }
        if let view = group.view {
            jobViews.update(view, JobViews.state(ofGroup: group))
        } else if !group.viewPending {
            groups[path]?.viewPending = true
            let inbox = self.inbox
            Task {
                try? await Task.sleep(for: Agent.viewDelay)
                inbox.yield(.viewDue(path))
            }
        }
    }

    func requestGroupView(_ path: ObjectPath) async {
        guard let group = groups[path] else { return }
        do {
            let view = try await jobViews.requestView(
                desktopEntry: String(Agent.ownDesktopEntry.dropLast(".desktop".count)),
                state: JobViews.state(ofGroup: group)
            )
            groupViews[view] = path
            groups[path]?.view = view
            groups[path]?.shownByJobView = true
            jobViews.update(view, JobViews.state(ofGroup: group))
        } catch {
            logger.warning("no job view for \(path.rawValue): \(error)")
        }
    }

    /// A new job-view server (or none): the live groups get views from it.
    func groupViewServerChanged(_ owner: String?) async {
        groupViews.removeAll()
        for path in groups.keys {
            groups[path]?.view = nil
            groups[path]?.viewPending = false
            if owner != nil, groups[path]?.shownByJobView == true, groups[path]?.isActive == true {
                await requestGroupView(path)
            }
        }
    }

    private func groupEnded(_ path: ObjectPath, message: String) async {
        guard let group = groups[path] else { return }
        if let view = group.view {
            let finished = group.status.state == "finished"
            jobViews.update(view, JobViews.state(ofGroup: group))
            jobViews.terminate(
                view, errorCode: finished ? 0 : JobViews.userDefinedError,
                message: finished ? "" : DisplayText.escaped(message))
            groupViews[view] = nil
            groups[path]?.view = nil
        }
        guard !group.shownByJobView else { return }
        let finished = group.status.state == "finished"
        let body =
            DisplayText.markup(AgentText.groupName(group.status)) + (finished ? "" : ": " + DisplayText.markup(message))
        let id = await notifier.notify(
            replacing: group.notification, summary: finished ? "Downloads finished" : "Downloads failed", body: body,
            icon: finished ? "folder-download" : "dialog-error",
            category: finished ? "transfer.complete" : "transfer.error",
            desktopEntry: nil, actions: []
        )
        if id != 0 { groups[path]?.notification = id }
    }

    func performOnGroup(_ request: String, on path: ObjectPath) async {
        do {
            switch request {
            case "cancelRequested": try await proxy.cancelGroup(path)
            case "suspendRequested":
                _ = try await proxy.pauseGroup(path)
                groups[path]?.status.state = "paused"
                presentGroup(path)
            case "resumeRequested":
                try await proxy.resumeGroup(path)
                groups[path]?.status.state = "running"
                presentGroup(path)
            default: return
            }
            logger.info("\(request) for \(path.rawValue)")
        } catch {
            logger.warning("\(request) for \(path.rawValue): \(error)")
        }
    }
}
