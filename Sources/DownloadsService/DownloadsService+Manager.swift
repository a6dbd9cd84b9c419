import DBus
import DownloadEngine
import DownloadsAPI
import Foundation
import Metalink

/// The methods of `org.example.Downloads` on the manager object.
extension DownloadsService {
    func managerInterface() throws -> ExportedInterface {
        func handler(_ body: @escaping @Sendable (MethodCall, UInt32) async throws -> [DBusValue]) -> ExportedInterface.MethodHandler {
            { [self] call in
                do {
                    return try await body(call, try await caller(call))
                } catch {
                    throw ServiceError.reply(for: error)
                }
            }
        }
        return try ExportedInterface(DownloadsInterfaces.manager, methods: [
            "Start": handler { [self] call, uid in
                let options = try TaskOptions(vardict(call.arguments[2]), allowed: TaskOptions.startKeys)
                let pid = try? await call.credentials().pid
                let path = try await start(
                    url: call.arguments[0].stringValue ?? "", destination: call.arguments[1].stringValue ?? "",
                    options: options, owner: uid, fileMode: CallerUmask.fileMode(pid: pid)
                )
                return [.objectPath(path)]
            },
            "Pause": handler { [self] call, uid in
                [.bytes(try await pause(try task(call.arguments[0].objectPathValue ?? .root, for: uid)))]
            },
            "Resume": handler { [self] call, uid in
                try await resume(try task(call.arguments[0].objectPathValue ?? .root, for: uid))
                return []
            },
            "Cancel": handler { [self] call, uid in
                try await cancel(try await task(call.arguments[0].objectPathValue ?? .root, for: call, uid: uid, asAdmin: true))
                return []
            },
            "ListAllTasks": handler { [self] call, uid in
                [.objectPaths(try await listAllTasks(call, uid: uid))]
            },
            "ResumeWithData": handler { [self] call, uid in
                let options = try TaskOptions(vardict(call.arguments[1]), allowed: TaskOptions.resumeKeys)
                let fileMode = CallerUmask.fileMode(pid: try? await call.credentials().pid)
                return [.objectPath(try await resumeWithData(
                    call.arguments[0].bytesValue ?? [], options: options, owner: uid, fileMode: fileMode
                ))]
            },
            "ListTasks": handler { [self] call, uid in
                let session = call.arguments[0].stringValue ?? ""
                let paths = engine.snapshots(owner: uid)
                    .filter { session.isEmpty || $0.session == session }
                    .map { DownloadsAPI.taskPath($0.id) }
                return [.objectPaths(paths)]
            },
            "FindTasks": handler { [self] call, uid in
                let match = MetadataValue.dictionary(try TaskOptions.checkedMetadata(call.arguments[0], option: "match"))
                let paths = engine.snapshots(owner: uid)
                    .filter { task in match.allSatisfy { task.record.options.metadata[$0.key] == $0.value } }
                    .map { DownloadsAPI.taskPath($0.id) }
                return [.objectPaths(paths)]
            },
            "RegisterCompletionHandler": handler { [self] call, uid in
                try await registerCompletionHandler(call, owner: uid)
                return []
            },
        ])
    }

    private func vardict(_ value: DBusValue) throws -> [String: DBusValue] {
        guard let dict = value.vardictValue else { throw DownloadsErrorName.invalidArgument.error("options must be a{sv}") }
        return dict
    }

    /// Whether `owner` may have one more task: the quota; and a daemon that cannot act as other
    /// users (not root, so no file helpers) takes tasks only from its own user and root, so no
    /// caller can make it write where the caller could not.
    private func checkMayAddTask(owner: UInt32) throws {
        guard configuration.filesAsEveryUser || owner == 0 || owner == getuid() else {
            throw DownloadsErrorName.accessDenied.error(
                "this downloadsd runs as uid \(getuid()) and cannot write files as you; use the system service (--system) or your own"
            )
        }
        guard engine.taskCount(owner: owner) < configuration.maxTasksPerUser else {
            throw DownloadsErrorName.quotaExceeded.error(
                "you have \(configuration.maxTasksPerUser) tasks; cancel finished ones (Cancel removes them) or wait for them to expire"
            )
        }
    }

    /// A call that changes state asks first whether the state directory has room (its reserve is
    /// in place), so a full disk refuses the call before anything changes.
    func requireRoom(forNewWork: Bool = true) throws {
        guard store.hasRoom(forNewWork: forNewWork) else {
            throw DownloadsErrorName.storageFull.error(
                "the state directory \(store.directory) is full: nothing was changed; free some space there and try again"
            )
        }
    }

    /// A write of task `id`'s events failed after all (the disk filled meanwhile): the call fails.
    func requireStored(_ id: UInt64) throws {
        if let failure = storeObserver.takeFailure(id) {
            throw DownloadsErrorName.storageFull.error("task \(id) could not be recorded: \(failure)")
        }
    }

    /// A `metalink` given as a path: read as the caller (through their file helper on the
    /// system bus), a regular file of at most `MetalinkDocument.maximumSize` bytes.
    func readMetalink(_ path: String, owner: UInt32) async throws -> [UInt8] {
        guard path.hasPrefix("/"), !path.utf8.contains(0), path.utf8.count <= StartRequest.maxPathBytes else {
            throw DownloadsErrorName.invalidArgument.error("metalink must be the document's bytes (ay) or an absolute path (s)")
        }
        do {
            return try await BlockingWork.run { [engine] in
                try engine.readFile(path, owner: owner, atMost: MetalinkDocument.maximumSize)
            }
        } catch let error as DownloadError {
            throw DownloadsErrorName.invalidArgument.error("cannot read the Metalink document \(path): \(error.message)")
        }
    }

    func start(url: String, destination: String, options: TaskOptions, owner: UInt32, fileMode: UInt32? = nil) async throws -> ObjectPath {
        var asked = options
        if let path = asked.metalinkPath {
            asked.metalink = try await readMetalink(path, owner: owner)
            asked.metalinkPath = nil
        }
        let (given, options, pieces, fileName) = try StartRequest.applyingMetalink(url, asked)
        let (stripped, authorization) = URLCredentials.split(given)
        let url = try StartRequest.checkURL(stripped)
        let destination = try StartRequest.checkDestination(destination)
        var engineOptions = try StartRequest.downloadOptions(options)
        engineOptions.pieces = pieces
        // The URL's credentials, unless the caller's own Authorization header says otherwise.
        if let authorization, !engineOptions.headers.keys.contains(where: { $0.lowercased() == "authorization" }) {
            engineOptions.headers["Authorization"] = authorization
        }
        try checkMayAddTask(owner: owner)
        let session = options.session ?? "default"
        let sessions = engine.sessionNames(owner: owner)
        guard sessions.contains(session) || sessions.count < configuration.maxSessionsPerUser else {
            throw DownloadsErrorName.quotaExceeded.error(
                "your tasks are in \(configuration.maxSessionsPerUser) sessions already; use one of them or remove ended tasks"
            )
        }
        try requireRoom()
        // Asked of the owner's file helper, off the cooperative pool (a hung mount blocks it).
        let overwrite = engineOptions.overwrite
        let isDirectory = try await BlockingWork.run { [engine] in
            try engine.checkDestination(destination, overwrite: overwrite, owner: owner)
        }
        let snapshot = try engine.create(DownloadRequest(
            owner: owner, session: session, url: url, destination: destination,
            destinationIsDirectory: isDirectory, options: engineOptions, fileMode: fileMode, fileName: fileName
        ))
        // The reply names the task only once the store holds it; one the store could not take
        // is taken back, so nothing runs that a restart would not know.
        await engine.eventsDelivered(snapshot.id)
        if let failure = storeObserver.takeFailure(snapshot.id) {
            // Cancelled first: a queued or running task cannot be removed as it is.
            try? await engine.cancel(snapshot.id)
            try? await engine.remove(snapshot.id)
            _ = storeObserver.takeFailure(snapshot.id)
            throw DownloadsErrorName.storageFull.error("the task could not be recorded: \(failure); nothing was changed")
        }
        // The proxy without its credentials (`description`).
        let through = engineOptions.proxy.map { " through \(LogText.escaped($0.description))" } ?? ""
        logger.info("task \(snapshot.id) of uid \(owner): \(LogText.url(url)) → \(LogText.escaped(destination))\(through)")
        return DownloadsAPI.taskPath(snapshot.id)
    }

    // A control call's reply means its effect is in the store: each waits for the task's events.

    func pause(_ task: TaskSnapshot) async throws -> [UInt8] {
        try requireRoom(forNewWork: false)
        let data = try await engine.pause(task.id)
        await engine.eventsDelivered(task.id)
        try requireStored(task.id)
        if task.state != .paused { logger.info("task \(task.id) of uid \(task.owner): paused") }
        return data
    }

    func resume(_ task: TaskSnapshot) async throws {
        try requireRoom()
        try engine.resume(task.id)
        await engine.eventsDelivered(task.id)
        try requireStored(task.id)
        logger.info("task \(task.id) of uid \(task.owner): resumed")
    }

    /// The task carries on at `url`, keeping its bytes when the entity is the same (`SessionManager.setURL`).
    func setURL(_ task: TaskSnapshot, to url: String) async throws {
        let checked = try StartRequest.checkURL(url)
        try requireRoom()
        try await engine.setURL(task.id, to: checked)
        await engine.eventsDelivered(task.id)
        try requireStored(task.id)
        logger.info("task \(task.id) of uid \(task.owner): URL now \(LogText.url(checked))")
    }

    /// Cancel stops a live task; on an ended task it removes it from the list (with its partial file).
    func cancel(_ task: TaskSnapshot) async throws {
        try requireRoom(forNewWork: false)
        if task.state.isTerminal {
            try await engine.remove(task.id)
        } else {
            try await engine.cancel(task.id)
        }
        await engine.eventsDelivered(task.id)
        try requireStored(task.id)
        logger.info("task \(task.id) of uid \(task.owner): \(task.state.isTerminal ? "removed" : "cancelled")")
    }

    /// The task the data came from, if it still exists, gets the options and carries on;
    /// otherwise a new task takes over its partial file.
    func resumeWithData(_ blob: [UInt8], options: TaskOptions, owner: UInt32, fileMode: UInt32? = nil) async throws -> ObjectPath {
        let data = try engine.decodeResumeData(blob, owner: owner)
        let source = engine.snapshot(data.taskID)
        if source == nil || source?.state == .finished || source?.state == .cancelled {
            try checkMayAddTask(owner: owner)
        }
        try requireRoom()
        let url = try options.url.map(StartRequest.checkURL)
        let snapshot = try await engine.adopt(data, change: try StartRequest.change(options), url: url, fileMode: fileMode)
        await engine.eventsDelivered(snapshot.id)
        try requireStored(snapshot.id)
        logger.info("task \(snapshot.id) of uid \(owner): resumed from the resume data of task \(data.taskID)")
        return DownloadsAPI.taskPath(snapshot.id)
    }
}
