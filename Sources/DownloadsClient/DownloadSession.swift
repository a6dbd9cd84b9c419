import DBus
import DownloadsAPI
import FoundationEssentials
import NIOConcurrencyHelpers

/// A background session of the download service, shaped like
/// `URLSession(configuration: .background(withIdentifier:), delegate:delegateQueue:)`.
///
/// Its tasks belong to the service: they go on when this process exits, and a new session with
/// the same identifier finds them again (`allTasks()`). Events reach the delegate one at a time,
/// in the service's order, and `events` as an `AsyncSequence`. When every task of the session
/// has ended the service calls the session (its completion handler), which calls
/// `downloadSessionDidFinishEvents(forBackgroundSession:)` and then answers the service.
/// Call `invalidate()` when done with it (as URLSession's `invalidateAndCancel`, but the tasks
/// keep running in the service).
public final class DownloadSession: Sendable {
    public struct Configuration: Sendable {
        /// The session's name in the service (the `session` option of its tasks).
        public var identifier: String
        /// Where the service is: the session bus (default), the system bus or an address.
        public var bus: DownloadsProxy.Bus = .session
        /// Whether this session registers itself as the completion handler of `identifier`.
        public var handlesEvents = true
        /// A well-known name this process owns, so that D-Bus activation can start the app to
        /// receive the completion call (install a D-Bus service file for it).
        public var completionBusName: String?
        /// `URLSessionConfiguration.isDiscretionary`: the session's downloads use only the
        /// bandwidth nobody else is using (the `background` option), unless a task's options say
        /// otherwise.
        public var isDiscretionary = false
        /// The kinds of question the delegate answers (`downloadSession(_:task:didReceive:)`):
        /// `http-auth`, `proxy-auth`. None by default: a task that meets one fails as it would.
        public var challengeKinds: Set<String> = []
        /// Seconds the delegate has to answer one (the service's default, 120, when nil).
        public var challengeTimeout: UInt32?

        public init(identifier: String) {
            self.identifier = identifier
        }

        /// `URLSessionConfiguration.background(withIdentifier:)`.
        public static func background(identifier: String) -> Configuration {
            Configuration(identifier: identifier)
        }
    }

    enum Inbound: Sendable {
        case signal(ManagerSignal)
        case completion(CheckedContinuation<Void, Never>)
        /// The service's name has a new owner: someone's call started it after it exited when idle.
        case serviceAppeared
    }

    struct Registry {
        var tasks: [ObjectPath: BackgroundDownloadTask] = [:]
        var foreign: Set<ObjectPath> = []
        var pendingStarts = 0
        var groups: [ObjectPath: BackgroundDownloadGroup] = [:]
    }

    public let configuration: Configuration
    public let proxy: DownloadsProxy
    public let delegate: (any DownloadSessionDelegate)?
    /// Every event, also given to the delegate. Buffers the newest 10,000 when nobody reads.
    public let events: AsyncStream<DownloadEvent>
    private let sink: AsyncStream<DownloadEvent>.Continuation
    private let inbox: AsyncStream<Inbound>.Continuation
    private let registry = NIOLockedValueBox(Registry())

    /// The object the service calls when the session's tasks are done.
    public var completionObject: ObjectPath {
        // Object path elements allow [A-Za-z0-9_]: anything else is written as _XX.
        let element = configuration.identifier.utf8.map { byte -> String in
            let scalar = Unicode.Scalar(byte)
            return
                (scalar.properties.isASCIIHexDigit || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a))
                ? String(scalar) : "_" + (byte < 16 ? "0" : "") + String(byte, radix: 16)
        }.joined()
        return (try? ObjectPath("/org/example/Downloads/Client/s" + element)) ?? "/org/example/Downloads/Client"
    }

    /// Connects to the service, subscribes to its signals, makes itself known (on the system
    /// bus signals are sent only to known connections), learns the session's existing tasks and,
    /// unless told not to, registers as the session's completion handler.
    public init(configuration: Configuration, delegate: (any DownloadSessionDelegate)? = nil) async throws {
        _ = try TaskOptions.checkedSession(configuration.identifier)
        self.configuration = configuration
        self.delegate = delegate
        proxy = try await DownloadsProxy.connect(configuration.bus)
        (events, sink) = AsyncStream.makeStream(of: DownloadEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        let (incoming, inbox) = AsyncStream.makeStream(of: Inbound.self)
        self.inbox = inbox
        do {
            try await proxy.connection.subscribe(
                MatchRule(sender: DownloadsAPI.busName, interface: DownloadsInterfaces.manager.name)
            ) { message in
                guard
                    let signal = ManagerSignal(name: message.member ?? "", arguments: (try? message.arguments()) ?? [])
                else { return }
                inbox.yield(.signal(signal))
            }
            // The service exits when idle (signals reach only the connections that called the
            // instance sending them): when a call starts it again, the session calls it once.
            _ = try await proxy.connection.onNameOwnerChanged { name, _, new in
                if name == DownloadsAPI.busName, !new.isEmpty { inbox.yield(.serviceAppeared) }
            }
            for path in try await proxy.listTasks(session: configuration.identifier) { _ = register(path) }
            if configuration.handlesEvents { try await registerCompletionHandler() }
        } catch {
            proxy.close()
            throw DownloadsClientError.wrap(error)
        }
        Task { [self] in
            for await item in incoming { await handle(item) }
        }
    }

    /// Stops events, answers nothing more and closes the connection. The tasks go on.
    public func invalidate() {
        inbox.finish()
        sink.finish()
        proxy.close()
    }

    // MARK: Tasks

    /// A new, suspended task downloading `url` to `destination` (a file, or an existing
    /// directory: the name then comes from the response). `resume()` starts it.
    public func downloadTask(
        with url: URL, to destination: String, options: TaskOptions = TaskOptions()
    ) -> BackgroundDownloadTask {
        var options = options
        options.session = configuration.identifier
        if configuration.isDiscretionary && options.background == nil { options.background = true }
        return makeTask(.url(url.absoluteString, destination: destination, options: options))
    }

    /// A new, suspended task downloading the file a Metalink v4 document describes (the bytes of
    /// a `.meta4`) from all its URLs, each piece checked against its hash when the document has
    /// them, the whole file against its strongest hash. `resume()` starts it.
    public func downloadTask(
        withMetalink document: Data, to destination: String, options: TaskOptions = TaskOptions()
    ) -> BackgroundDownloadTask {
        var options = options
        options.session = configuration.identifier
        options.metalink = Array(document)
        if configuration.isDiscretionary && options.background == nil { options.background = true }
        return makeTask(.url("", destination: destination, options: options))
    }

    /// A new, suspended task sending the file at `path` with `request`'s method and headers
    /// (`uploadTask(with:fromFile:)`). `resume()` starts it; the service sends it whether or not
    /// this process lives, from byte 0 again after a cut connection or a restart. `options`
    /// take the upload's own (`form`, `content_type`, `reply_destination`, `snapshot`).
    public func uploadTask(
        with request: UploadRequest, fromFile path: String, options: TaskOptions = TaskOptions()
    ) -> BackgroundDownloadTask {
        var options = options
        options.session = configuration.identifier
        options.method = request.httpMethod.uppercased()
        if !request.allHTTPHeaderFields.isEmpty {
            options.headers = (options.headers ?? [:]).merging(request.allHTTPHeaderFields) { $1 }
        }
        if configuration.isDiscretionary && options.background == nil { options.background = true }
        return makeTask(.upload(request.url.absoluteString, source: path, options: options))
    }

    /// A suspended task that continues from resume data (`downloadTask(withResumeData:)`).
    public func downloadTask(withResumeData data: Data, options: TaskOptions = TaskOptions()) -> BackgroundDownloadTask
    {
        makeTask(.resumeData(data, options: options))
    }

    /// Starts many files as one job (`StartGroup`) in this session: each file's options over
    /// `options`; `group` says whether it is atomic, how many files run at once and whether its
    /// files send their own events. The group's progress and end reach the delegate.
    public func downloadGroup(
        _ files: [DownloadGroupFile], options: TaskOptions = TaskOptions(),
        group: DownloadsProxy.GroupOptions = DownloadsProxy.GroupOptions()
    ) async throws -> BackgroundDownloadGroup {
        var options = options
        options.session = configuration.identifier
        if configuration.isDiscretionary && options.background == nil { options.background = true }
        let files = files.map { file -> DownloadGroupFile in
            var file = file
            file.options.session = nil
            return file
        }
        registry.withLockedValue { $0.pendingStarts += 1 }
        defer { registry.withLockedValue { $0.pendingStarts = max(0, $0.pendingStarts - 1) } }
        let (path, paths) = try await proxy.startGroup(files, options: options, group: group)
        return registerGroup(path, tasks: paths)
    }

    /// A group from its resume data (`BackgroundDownloadGroup.pause()`): the same group while
    /// the service has it, else a new one taking over its files.
    public func downloadGroup(
        withResumeData data: Data, options: TaskOptions = TaskOptions()
    ) async throws -> BackgroundDownloadGroup {
        registry.withLockedValue { $0.pendingStarts += 1 }
        defer { registry.withLockedValue { $0.pendingStarts = max(0, $0.pendingStarts - 1) } }
        let (path, paths) = try await proxy.resumeGroup(resumeData: data, options: options)
        return registerGroup(path, tasks: paths)
    }

    /// The session's groups the service holds.
    public func allGroups() async throws -> [BackgroundDownloadGroup] {
        var groups: [BackgroundDownloadGroup] = []
        for path in try await proxy.listGroups(session: configuration.identifier) {
            guard let status = try? await proxy.groupStatus(path) else { continue }
            groups.append(registerGroup(path, tasks: status.tasks.compactMap { try? ObjectPath($0) }))
        }
        return groups
    }

    private func registerGroup(_ path: ObjectPath, tasks paths: [ObjectPath]) -> BackgroundDownloadGroup {
        let tasks = paths.map(register)
        return registry.withLockedValue { registry in
            if let known = registry.groups[path] { return known }
            let group = BackgroundDownloadGroup(proxy: proxy, path: path, tasks: tasks)
            registry.groups[path] = group
            return group
        }
    }

    /// Whether a group signal's group is this session's (as `task(for:)` for tasks).
    private func group(for path: ObjectPath) async -> BackgroundDownloadGroup? {
        await ours(path, known: { $0.groups[path] }) { [self] in
            guard let status = try? await proxy.groupStatus(path), status.session == configuration.identifier else {
                return nil
            }
            return registerGroup(path, tasks: status.tasks.compactMap { try? ObjectPath($0) })
        }
    }

    /// The object `known` finds for a signal's `path`, once no start of ours that may name it is
    /// still on its way (its reply lands first); else `ask` the service whether it is of this
    /// session, and remember a path that is not.
    private func ours<T: Sendable>(
        _ path: ObjectPath, known: @escaping @Sendable (Registry) -> T?, ask: () async -> T?
    ) async -> T? {
        for _ in 0..<2500 {
            let (found, foreign, pending) = registry.withLockedValue {
                (known($0), $0.foreign.contains(path), $0.pendingStarts)
            }
            if let found { return found }
            if foreign { return nil }
            guard pending > 0 else { break }
            try? await Task.sleep(for: .milliseconds(10))
        }
        if let found = await ask() { return found }
        _ = registry.withLockedValue { $0.foreign.insert(path) }
        return nil
    }

    private func handleGroup(_ signal: ManagerSignal) async {
        switch signal {
        case .groupProgress(let path, let written, let expected, let finished, let files):
            guard let group = await group(for: path) else { return }
            delegate?.downloadSession(
                self, group: group, didWriteData: written, bytesExpected: expected, filesFinished: finished,
                files: files)
            sink.yield(
                .groupProgress(
                    group, bytesWritten: written, bytesExpected: expected, filesFinished: finished, files: files))
        case .groupFinished(let path):
            guard let group = await group(for: path) else { return }
            delegate?.downloadSession(self, group: group, didCompleteWithError: nil)
            sink.yield(.groupCompleted(group, error: nil))
        case .groupFailed(let path, let name, let message):
            guard let group = await group(for: path) else { return }
            let error = DownloadsClientError(name: name, message: message)
            delegate?.downloadSession(self, group: group, didCompleteWithError: error)
            sink.yield(.groupCompleted(group, error: error))
        default:
            break
        }
    }

    /// The session's tasks the service holds (`getAllTasks`), live and ended.
    /// Each comes with its title, description and metadata read from the service, so an app that
    /// restarts maps the service's tasks to its own items by them.
    public func allTasks() async throws -> [BackgroundDownloadTask] {
        try await described(try await proxy.listTasks(session: configuration.identifier))
    }

    /// The session's tasks whose `metadata` has every key of `match` with that value (same
    /// D-Bus type), as Ubuntu's download manager's `getAllDownloadsWithMetadata`.
    public func tasks(matching match: [String: DBusValue]) async throws -> [BackgroundDownloadTask] {
        let mine = Set(try await proxy.listTasks(session: configuration.identifier))
        return try await described(try await proxy.findTasks(matching: match).filter { mine.contains($0) })
    }

    private func described(_ paths: [ObjectPath]) async throws -> [BackgroundDownloadTask] {
        var tasks: [BackgroundDownloadTask] = []
        for path in paths {
            let task = register(path)
            // A task removed meanwhile is left out.
            guard let status = try? await proxy.status(path) else { continue }
            task.learn(status)
            tasks.append(task)
        }
        return tasks
    }

    private func makeTask(_ origin: BackgroundDownloadTask.Origin) -> BackgroundDownloadTask {
        BackgroundDownloadTask(proxy: proxy, origin: origin) { [weak self] task, phase in
            self?.registry.withLockedValue { registry in
                switch phase {
                case .starting:
                    registry.pendingStarts += 1
                case .started(let path):
                    registry.tasks[path] = task
                    registry.foreign.remove(path)
                    registry.pendingStarts = max(0, registry.pendingStarts - 1)
                case .failed:
                    registry.pendingStarts = max(0, registry.pendingStarts - 1)
                }
            }
        }
    }

    /// The task object for `path`, made if the session has none yet.
    private func register(_ path: ObjectPath) -> BackgroundDownloadTask {
        registry.withLockedValue { registry in
            if let task = registry.tasks[path] { return task }
            let task = BackgroundDownloadTask(proxy: proxy, origin: .existing, path: path) { _, _ in }
            registry.tasks[path] = task
            return task
        }
    }

    /// Whether a signal's task is this session's: known tasks are; an unknown one (started by
    /// an earlier run, or by a Start whose reply is still on its way) is asked for its session.
    private func task(for path: ObjectPath) async -> BackgroundDownloadTask? {
        await ours(path, known: { $0.tasks[path] }) { [self] in
            guard let status = try? await proxy.status(path), status.session == configuration.identifier else {
                return nil
            }
            return register(path)
        }
    }

    // MARK: Events

    private func handle(_ item: Inbound) async {
        switch item {
        case .completion(let answered):
            finishEvents()
            answered.resume()
        case .serviceAppeared:
            // Known to the new instance again, and any task of the session started meanwhile learnt.
            for path in (try? await proxy.listTasks(session: configuration.identifier)) ?? [] { _ = register(path) }
        case .signal(let signal):
            guard let path = signal.task else {
                await handleGroup(signal)
                if case .eventsFinished(let session) = signal, session == configuration.identifier,
                    !configuration.handlesEvents
                {
                    finishEvents()
                }
                return
            }
            guard let task = await task(for: path) else { return }
            switch signal {
            case .progress(_, let written, let total, let expected) where task.isUpload:
                delegate?.downloadSession(
                    self, task: task, didSendBodyData: written, totalBytesSent: total,
                    totalBytesExpectedToSend: expected)
                sink.yield(.sentData(task, bytesSent: written, totalBytesSent: total, totalBytesExpected: expected))
            case .progress(_, let written, let total, let expected):
                delegate?.downloadSession(
                    self, downloadTask: task, didWriteData: written, totalBytesWritten: total,
                    totalBytesExpectedToWrite: expected)
                sink.yield(
                    .wroteData(task, bytesWritten: written, totalBytesWritten: total, totalBytesExpected: expected))
            case .stateChanged(_, let state):
                sink.yield(.stateChanged(task, state: state))
            case .finished(_, let location):
                if task.isUpload {
                    await deliverReply(of: task)
                } else {
                    delegate?.downloadSession(self, downloadTask: task, didFinishDownloadingTo: location)
                }
                sink.yield(.finished(task, location: location))
                delegate?.downloadSession(self, task: task, didCompleteWithError: nil)
                sink.yield(.completed(task, error: nil))
            case .failed(_, let name, let message, let resumeData):
                let error = DownloadsClientError(
                    name: name, message: message, resumeData: resumeData.isEmpty ? nil : Data(resumeData))
                // A server's refusal of an upload is a response too: the app reads it first.
                if task.isUpload, error.code == .httpError { await deliverReply(of: task) }
                delegate?.downloadSession(self, task: task, didCompleteWithError: error)
                sink.yield(.completed(task, error: error))
            case .eventsFinished, .groupProgress, .groupFinished, .groupFailed:
                break  // not about a task (above)
            }
        }
    }

    /// An upload's reply, as URLSession hands a data task's: the response, then its body.
    private func deliverReply(of task: BackgroundDownloadTask) async {
        guard let (response, data) = try? await task.reply() else { return }
        delegate?.downloadSession(self, task: task, didReceive: response)
        sink.yield(.receivedResponse(task, response))
        guard !data.isEmpty else { return }
        delegate?.downloadSession(self, task: task, didReceive: data)
        sink.yield(.receivedData(task, data))
    }

    private func finishEvents() {
        delegate?.downloadSessionDidFinishEvents(forBackgroundSession: self)
        sink.yield(.finishedEvents(session: configuration.identifier))
    }

    /// Exports the completion object and registers it (with the well-known name, if any). The
    /// service's call is answered after the delegate has handled every event before it.
    private func registerCompletionHandler() async throws {
        let inbox = self.inbox
        let identifier = configuration.identifier
        try proxy.connection.export(
            ExportedObject(
                path: completionObject,
                interfaces: [
                    ExportedInterface(
                        DownloadsInterfaces.client,
                        methods: [
                            "HandleEventsForBackgroundSession": { call in
                                guard call.arguments.first?.stringValue == identifier else { return [] }
                                await withCheckedContinuation { continuation in
                                    if case .terminated = inbox.yield(.completion(continuation)) {
                                        continuation.resume()
                                    }
                                }
                                return []
                            },
                            "HandleChallenge": { [weak self, connection = proxy.connection] call in
                                // Only the service is answered: another peer calling this object
                                // learns nothing of the delegate's credentials.
                                guard (try? await connection.nameOwner(DownloadsAPI.busName)) == call.sender else {
                                    throw BusError(
                                        name: BusError.accessDeniedName, message: "only the downloads service asks")
                                }
                                return await self?.answer(call).reply
                                    ?? ChallengeDisposition.performDefaultHandling.reply
                            },
                        ])
                ]))
        if let name = configuration.completionBusName { try await proxy.connection.requestName(name) }
        try await proxy.registerCompletionHandler(
            session: identifier, object: completionObject, busName: configuration.completionBusName,
            challenges: configuration.challengeKinds, challengeTimeout: configuration.challengeTimeout
        )
    }

    /// The delegate's answer to the service's `HandleChallenge` for one of this session's tasks.
    private func answer(_ call: MethodCall) async -> ChallengeDisposition {
        guard call.arguments.count == 3, let path = call.arguments[0].objectPathValue,
            let kind = call.arguments[1].stringValue, let details = call.arguments[2].vardictValue,
            let delegate, let task = await task(for: path)
        else { return .performDefaultHandling }
        var challenge = DownloadChallenge(
            kind: kind, scheme: details["scheme"]?.stringValue ?? "", realm: details["realm"]?.stringValue ?? "",
            host: details["host"]?.stringValue ?? "", port: details["port"]?.uint16Value ?? 0,
            url: details["url"]?.stringValue ?? "", previousFailureCount: details["failures"]?.uint32Value ?? 0)
        challenge.serverCertificates = details["certificates"]?.arrayValue?.compactMap(\.bytesValue) ?? []
        challenge.serverTrustError = details["error"]?.stringValue ?? ""
        challenge.acceptedIssuers = details["issuers"]?.arrayValue?.compactMap(\.bytesValue) ?? []
        challenge.status = details["status"]?.uint32Value ?? 0
        return await delegate.downloadSession(self, task: task, didReceive: challenge)
    }
}
