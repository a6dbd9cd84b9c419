import AptMethod
import DBus
import DownloadModel
import DownloadsAPI
import DownloadsClient
import Foundation
import NIOConcurrencyHelpers

/// What the method does with apt's messages: `601 Configuration` sets the options every item
/// gets; each `600 URI Acquire` becomes a task of the system service (`StartAt` with the file apt
/// names, written in place), answered `200 URI Start` when its size is known, `201 URI Done` or
/// `400 URI Failure` at its end. Items run side by side as apt pipelines them: the service's
/// limits decide how many transfer at once.
final class AptMethodRun: Sendable {
    /// The service is on the system bus (`DBUS_SYSTEM_BUS_ADDRESS` honoured).
    static let bus: DownloadsProxy.Bus = .system
    static let package = "org-example-downloads"
    /// How often an item's task is looked at besides its signals.
    static let lookEvery: Duration = .seconds(2)

    private let output: MethodOutput
    private let settings = NIOLockedValueBox(AptMethodSettings())
    private let signals = TaskSignals()
    private let service = NIOLockedValueBox<Task<DownloadsProxy, Error>?>(nil)
    /// The tasks of items not yet answered (paused when apt goes away).
    private let running = NIOLockedValueBox<Set<ObjectPath>>([])
    private let items = NIOLockedValueBox<[Task<Void, Never>]>([])
    /// Starts go four at a time (`StartGate`).
    private let gate = StartGate(width: 4)
    /// The tasks earlier runs of the method left (apt interrupted), read at the first item; each
    /// taken by the item it was for.
    private let earlier = NIOLockedValueBox<Task<[DownloadTaskStatus], Never>?>(nil)
    private let claimed = NIOLockedValueBox<Set<UInt64>>([])
    /// Ended tasks being taken off the service's list (`aptWentAway` waits for them).
    private let removals = NIOLockedValueBox<[ObjectPath: Task<Void, Never>]>([:])
    /// apt went away: unanswered items keep their tasks and files (`aptWentAway`).
    private let leaving = NIOLockedValueBox(false)
    /// How long a task apt left is kept for its next run.
    static let keptFor: Int64 = 86_400

    init(output: MethodOutput) {
        self.output = output
    }

    func take(_ message: AptMessage) {
        switch message.code {
        case 601:
            let given = AptMethodSettings(message)
            settings.withLockedValue { $0 = given }
            // Into apt's sandbox before anything is asked of the service, as apt's methods go.
            if let user = given.sandboxUser {
                do {
                    try Sandbox.enter(as: user)
                } catch {
                    // As apt's methods when `DropPrivileges` fails: the error on standard error,
                    // which apt shows with "Method … has died unexpectedly".
                    FileHandle.standardError.write(Data("E: \(error)\n".utf8))
                    exit(100)
                }
            }
        case 600:
            guard let item = AcquireItem(message) else {
                output.failure(
                    message["URI"] ?? "",
                    "not a downloads+http://, downloads+https://, downloads://, http:// or https:// URI with a file")
                return
            }
            let work = Task { await fetch(item) }
            items.withLockedValue { $0.append(work) }
        default:
            break
        }
    }

    /// apt closed the pipe (it finished, or was interrupted): the tasks of unanswered items are
    /// paused, their bytes kept in the files apt named, for apt's next run to go on from (found
    /// again by URL and file; `leftBefore`), answered items' tasks are off the service's list,
    /// and the method ends once all that is done.
    func aptWentAway() async {
        leaving.withLockedValue { $0 = true }
        let open = running.withLockedValue { $0 }
        if !open.isEmpty, let proxy = try? await service.withLockedValue({ $0 })?.value {
            for task in open { _ = try? await proxy.pause(task) }
        }
        for work in items.withLockedValue({ $0 }) { work.cancel() }
        // Answered items' tasks still being removed: done before the method ends.
        for removal in removals.withLockedValue({ Array($0.values) }) { await removal.value }
    }

    /// Waits for every item taken so far.
    func finish() async {
        for work in items.withLockedValue({ $0 }) { await work.value }
    }

    private func connected() async throws -> DownloadsProxy {
        let task = service.withLockedValue { service -> Task<DownloadsProxy, Error> in
            if let service { return service }
            let made = Task { [signals] in
                let proxy = try await DownloadsProxy.connect(Self.bus, resolvingProxies: false)
                // Only the signals an item waits for (not StateChanged, nor groups'): each one
                // the bus sends is read and decoded here, several a package.
                for member in ["Progress", "Finished", "Failed"] {
                    _ = try await proxy.connection.subscribe(
                        MatchRule(
                            sender: DownloadsAPI.busName, interface: DownloadsInterfaces.manager.name, member: member)
                    ) { message in
                        if let signal = ManagerSignal(name: member, arguments: (try? message.arguments()) ?? []) {
                            signals.deliver(signal)
                        }
                    }
                }
                // A finished task's status and Last-Modified, from the PropertiesChanged the
                // service sends anyway (to the task's owner on the system bus): no call per item.
                _ = try await proxy.connection.subscribe(
                    MatchRule(
                        sender: DownloadsAPI.busName, interface: InterfaceDescription.properties.name,
                        member: "PropertiesChanged", arg0: DownloadsInterfaces.task.name)
                ) { message in
                    guard let task = message.path,
                        let changed = (try? message.arguments())?.dropFirst().first?.vardictValue
                    else { return }
                    signals.deliverProperties(task, changed)
                }
                _ = try await proxy.connection.onNameOwnerChanged { name, old, new in
                    if name == DownloadsAPI.busName, !old.isEmpty, new.isEmpty { signals.serviceGone() }
                }
                return proxy
            }
            service = made
            return made
        }
        return try await task.value
    }

    private func fetch(_ item: AcquireItem) async {
        let proxy: DownloadsProxy
        do {
            proxy = try await connected()
        } catch {
            return output.failure(
                item.uri,
                "the download service (org.example.Downloads) cannot be reached on the system bus: \(error); is the package \(Self.package) installed?"
            )
        }
        // A file this method made is removed again when the item fails: apt finds none.
        let made = access(item.filename, F_OK) != 0
        // Read and write: a resumed item's bytes already there are read back for its SHA-256.
        let fd = open(item.filename, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            return output.failure(item.uri, "cannot open \(item.filename): \(String(cString: strerror(errno)))")
        }
        let settings = settings.withLockedValue { $0 }
        var options = TaskOptions()
        options.session = "apt"
        options.title = "apt: " + (item.filename.split(separator: "/").last.map(String.init) ?? item.url)
        if let sha256 = item.expectedSHA256 {
            options.checksum = "sha256:\(sha256)"
            if settings.share { options.share = true }
            if settings.lanPeers { options.lanPeers = true }
        }
        if settings.background { options.background = true }
        // A package's length (its index says it): another length fails at the response's head,
        // and a small package does not wait for a transfer place (many fetched at once, as apt's
        // http method pipelines them).
        options.expectedSize = item.expectedSize
        // The time of the copy apt has (an index's): a 304 leaves it as it is (`IMS-Hit`).
        options.ifModifiedSince = item.lastModified.flatMap(HTTPDate.seconds)
        options.proxy = settings.proxy(for: item.url)
        // What finds the task again when apt is interrupted (`leftBefore`).
        options.metadata = [
            "apt_url": .string(item.url), "apt_file": .string(item.filename),
            "apt_sha256": .string(item.expectedSHA256 ?? ""), "apt_started": .int64(Int64(time(nil))),
        ]
        let task: ObjectPath
        do {
            if let resumed = await resumeEarlier(item, fd: fd, made: made, proxy) {
                close(fd)
                task = resumed
            } else {
                task = try await start(item, UnixFD(owning: fd), options, proxy)
            }
        } catch let error as DownloadsClientError
            where error.name == "org.freedesktop.DBus.Error.ServiceUnknown"
            || error.name == "org.freedesktop.DBus.Error.NameHasNoOwner"
        {
            if made { unlink(item.filename) }
            return output.failure(
                item.uri,
                "the download service (org.example.Downloads) is not running and could not be started on the system bus (\(error.message)); is the package \(Self.package) installed?"
            )
        } catch {
            if made { unlink(item.filename) }
            return output.failure(item.uri, "the download service refused it: \(error)")
        }
        let follower = Task { await follow(task, item, proxy, made: made) }
        running.withLockedValue { _ = $0.insert(task) }
        // Signals are the fast way; a look at the task every few seconds is the sure one (a
        // signal lost, a service that stopped answering): no item waits for ever.
        let watchdog = Task { [signals] in
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.lookEvery)
                guard !Task.isCancelled else { return }
                do {
                    let status = try await proxy.status(task)
                    switch status.state {
                    case "finished": signals.deliver(.finished(task: task, location: status.destination))
                    case "failed", "cancelled":
                        signals.deliver(
                            .failed(task: task, errorName: status.error, message: status.errorMessage, resumeData: []))
                    default: continue
                    }
                } catch {
                    signals.deliver(
                        .failed(
                            task: task, errorName: "",
                            message: "the download service no longer answers for it: \(error)",
                            resumeData: []))
                }
                return
            }
        }
        let answer = await withTaskCancellationHandler {
            await follower.value
        } onCancel: {
            follower.cancel()
        }
        watchdog.cancel()
        running.withLockedValue { _ = $0.remove(task) }
        signals.forget(task)
        // apt went away before the item was answered: its task is paused with its bytes in the
        // file, both kept for apt's next run.
        if answer == nil, leaving.withLockedValue({ $0 }) { return }
        let done = answer?.code == 201
        if !done, made { unlink(item.filename) }
        // An ended task is taken off the service's list (its file stays where apt reads it). apt,
        // given its last file, ends the method at once (SIGINT): the removal is registered before
        // the answer goes, and `aptWentAway` waits for it.
        let removal = Task { _ = try? await proxy.cancel(task) }
        removals.withLockedValue { $0[task] = removal }
        if let answer { output.send(answer) }
        await removal.value
        removals.withLockedValue { _ = $0.removeValue(forKey: task) }
    }

    /// The tasks of session `apt` an earlier run left, read once; those older than `keptFor`
    /// that are not running are removed (a package apt never asked for again).
    private func leftBefore(_ proxy: DownloadsProxy) async -> [DownloadTaskStatus] {
        let task = earlier.withLockedValue { earlier -> Task<[DownloadTaskStatus], Never> in
            if let earlier { return earlier }
            let made = Task {
                let now = Int64(time(nil))
                var kept: [DownloadTaskStatus] = []
                for status in (try? await proxy.statuses(session: "apt")) ?? [] {
                    guard case .int64(let started)? = status.metadata["apt_started"] else { continue }
                    if now - started > Self.keptFor, !["queued", "running", "retrying"].contains(status.state) {
                        try? await proxy.cancel(DownloadsAPI.taskPath(status.id))
                    } else {
                        kept.append(status)
                    }
                }
                return kept
            }
            earlier = made
            return made
        }
        return await task.value
    }

    /// The task an earlier run left for this item (same URL, file and SHA-256), going on from
    /// its bytes: a paused one resumed with the file opened again (`ResumeWithData` with
    /// `destination_fd`), one still running (the method was killed) followed as it is. One
    /// whose file is gone, or that failed, is removed and the item starts afresh (nil).
    private func resumeEarlier(
        _ item: AcquireItem, fd: Int32, made: Bool, _ proxy: DownloadsProxy
    ) async -> ObjectPath? {
        let found = await leftBefore(proxy).first { status in
            status.metadata["apt_url"]?.stringValue == item.url
                && status.metadata["apt_file"]?.stringValue == item.filename
                && status.metadata["apt_sha256"]?.stringValue == (item.expectedSHA256 ?? "")
        }
        guard let found, claimed.withLockedValue({ $0.insert(found.id).inserted }) else { return nil }
        let path = DownloadsAPI.taskPath(found.id)
        guard !made else {
            try? await proxy.cancel(path)
            return nil
        }
        switch found.state {
        case "paused":
            do {
                let data = try await proxy.pause(path)
                var options = TaskOptions()
                options.destinationFD = UnixFD(owning: dup(fd))
                return try await proxy.resume(resumeData: data, options: options)
            } catch {
                try? await proxy.cancel(path)
                return nil
            }
        case "queued", "running", "retrying":
            return path
        default:
            try? await proxy.cancel(path)
            return nil
        }
    }

    /// `StartAt`, through the gate; a refusal because the user's file calls are all pending is
    /// tried again (a few times, a moment apart): it says "later", not "no".
    private func start(
        _ item: AcquireItem, _ file: UnixFD, _ options: TaskOptions, _ proxy: DownloadsProxy
    ) async throws -> ObjectPath {
        var attempt = 0
        while true {
            await gate.enter()
            do {
                let task = try await proxy.start(url: item.url, at: file, name: "", options: options)
                await gate.leave()
                return task
            } catch let error as DownloadsClientError
                where error.name == DownloadsErrorName.fileError.fullName && error.message.contains("not returned yet")
                && attempt < 20
            {
                await gate.leave()
                attempt += 1
                try await Task.sleep(for: .milliseconds(100 * attempt))
            } catch {
                await gate.leave()
                throw error
            }
        }
    }

    /// The `201 URI Done` of a finished item, as apt's http method gives it: a 304 is an
    /// `IMS-Hit` (the file this method made for it removed: apt keeps its own copy); otherwise
    /// the file's size, its SHA-256 (the service checked the file against it), and the server's
    /// `Last-Modified`, which the file's time is set to (apt sends it back as the next
    /// `Last-Modified` of the item: the method runs as the file's owner, so it may set it).
    private func done(_ task: ObjectPath, _ item: AcquireItem, _ proxy: DownloadsProxy, made: Bool) async -> AptMessage
    {
        let ending: TaskSignals.Ending
        if let known = signals.ending(task) {
            ending = known
        } else if let status = try? await proxy.status(task) {
            ending = TaskSignals.Ending(responseStatus: status.responseStatus, lastModified: status.lastModified)
        } else {
            // Finished, but the service no longer says how: asked again by apt's next run.
            return AptMessage(
                400, "URI Failure",
                [
                    .init("URI", item.uri), .init("Message", "the download service no longer answers for it"),
                    .init("Transient-Failure", "true"),
                ])
        }
        if ending.responseStatus == 304 {
            if made { unlink(item.filename) }
            var fields: [AptMessage.Field] = [.init("URI", item.uri), .init("Filename", item.filename)]
            if let since = item.lastModified { fields.append(.init("Last-Modified", since)) }
            fields.append(.init("IMS-Hit", "true"))
            return AptMessage(201, "URI Done", fields)
        }
        var info = stat()
        let size = stat(item.filename, &info) == 0 ? Int64(info.st_size) : 0
        var fields: [AptMessage.Field] = [
            .init("URI", item.uri), .init("Filename", item.filename), .init("Size", String(size)),
        ]
        if ending.lastModified > 0 {
            let modified = ending.lastModified
            // Not a shared file's: the service offers the file as it was when it finished (its
            // time too), and apt asks with the time only of indexes, which are not shared
            // (InRelease, Release: no SHA-256 is known of them).
            if !(item.expectedSHA256 != nil && settings.withLockedValue({ $0.share })) {
                var times = [timeval(tv_sec: Int(modified), tv_usec: 0), timeval(tv_sec: Int(modified), tv_usec: 0)]
                utimes(item.filename, &times)
            }
            fields.append(.init("Last-Modified", HTTPDate.text(modified)))
        }
        if let sha256 = item.expectedSHA256 { fields.append(.init("SHA256-Hash", sha256)) }
        return AptMessage(201, "URI Done", fields)
    }

    /// Follows the item's task, telling apt when it starts; its answer (`201 URI Done` or `400
    /// URI Failure`) for the caller to send once the task is tidied away, or nil when the
    /// following was cancelled (apt went away).
    private func follow(
        _ task: ObjectPath, _ item: AcquireItem, _ proxy: DownloadsProxy, made: Bool
    ) async -> AptMessage? {
        var started = false
        for await signal in signals.follow(task) {
            switch signal {
            case .progress(_, _, let total, let expected):
                if let maximum = item.maximumSize, max(total, expected) > maximum {
                    try? await proxy.cancel(task)
                    return MethodOutput.failure(
                        item.uri, "File is larger than expected (\(max(total, expected)) > \(maximum)).",
                        reason: "MaximumSizeExceeded")
                }
                if !started {
                    started = true
                    var fields: [AptMessage.Field] = [.init("URI", item.uri)]
                    if expected >= 0 { fields.append(.init("Size", String(expected))) }
                    output.send(AptMessage(200, "URI Start", fields))
                }
            case .finished:
                // A file that came whole before any progress said its size is measured here.
                var info = stat()
                if let maximum = item.maximumSize, stat(item.filename, &info) == 0, Int64(info.st_size) > maximum {
                    return MethodOutput.failure(
                        item.uri, "File is larger than expected (\(info.st_size) > \(maximum)).",
                        reason: "MaximumSizeExceeded")
                }
                return await done(task, item, proxy, made: made)
            case .failed(_, let name, let message, _):
                return MethodOutput.failure(
                    item.uri, message, reason: Self.reason(name, message), transient: Self.transient(name, message))
            default:
                break
            }
        }
        if !Task.isCancelled {
            return MethodOutput.failure(
                item.uri, "the download service stopped before the file was done", transient: true)
        }
        return nil
    }

    /// apt's `FailReason` for the service's error: `HttpError404` as apt's http method says it.
    static func reason(_ errorName: String, _ message: String) -> String? {
        let name =
            errorName.hasPrefix(DownloadsErrorName.prefix)
            ? String(errorName.dropFirst(DownloadsErrorName.prefix.count)) : errorName
        switch name {
        case DownloadsErrorName.httpError.rawValue:
            let prefix = "the server answered "
            guard message.hasPrefix(prefix), let status = Int(message.dropFirst(prefix.count).prefix(3)) else {
                return nil
            }
            return "HttpError\(status)"
        case DownloadsErrorName.checksumMismatch.rawValue: return "HashSumMismatch"
        // A file of another length than the index says (`expected_size`): apt says "File has
        // unexpected size" of it, a hash sum mismatch.
        case DownloadsErrorName.invalidResponse.rawValue where message.contains("expected_size promises"):
            return "HashSumMismatch"
        case DownloadsErrorName.timeout.rawValue: return "Timeout"
        case DownloadsErrorName.networkError.rawValue:
            return message.contains("resolv") ? "TmpResolveFailure" : "ConnectionFailed"
        default: return nil
        }
    }

    /// Whether apt may try the item again later (`Transient-Failure`), as the service judges it.
    static func transient(_ errorName: String, _ message: String) -> Bool {
        let name =
            errorName.hasPrefix(DownloadsErrorName.prefix)
            ? String(errorName.dropFirst(DownloadsErrorName.prefix.count)) : errorName
        return DownloadsErrorName(rawValue: name)?.isWorthResuming(message: message) ?? false
    }
}
