import DBus
import DownloadEngine
import DownloadStore
import Foundation

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
                let options = try vardict(call.arguments[2], "options")
                let request = try StartRequest(url: call.arguments[0].stringValue ?? "", destination: call.arguments[1].stringValue ?? "", options: options)
                return [.objectPath(try start(request, owner: uid))]
            },
            "Pause": handler { [self] call, uid in
                let id = try task(call.arguments[0].objectPathValue ?? .root, for: uid)
                return [.bytes(try await engine.pause(id))]
            },
            "Resume": handler { [self] call, uid in
                try engine.resume(try task(call.arguments[0].objectPathValue ?? .root, for: uid))
                return []
            },
            "Cancel": handler { [self] call, uid in
                try await cancel(try task(call.arguments[0].objectPathValue ?? .root, for: uid))
                return []
            },
            "ResumeWithData": handler { [self] call, uid in
                let options = try vardict(call.arguments[1], "options")
                return [.objectPath(try resumeWithData(call.arguments[0].bytesValue ?? [], options: options, owner: uid))]
            },
            "ListTasks": handler { [self] call, uid in
                let session = call.arguments[0].stringValue ?? ""
                let paths = engine.snapshots().filter { snapshot in
                    guard owner(of: snapshot.id) == uid, let key = SessionKey(engineKey: snapshot.session) else { return false }
                    return session.isEmpty || key.name == session
                }.map { DownloadsService.path(of: $0.id) }
                return [.objectPaths(paths)]
            },
            "RegisterCompletionHandler": handler { [self] call, uid in
                try await registerCompletionHandler(call, owner: uid)
                return []
            },
        ])
    }

    private func vardict(_ value: DBusValue, _ name: String) throws -> [String: DBusValue] {
        guard let dict = value.vardictValue else { throw ServiceError.invalidArgument("\(name) must be a{sv}") }
        return dict
    }

    /// Whether `owner` may have one more task: the quota, and on the system bus, until files are
    /// written with each user's own credentials, only root and the daemon's own user.
    private func checkMayAddTask(owner: UInt32) throws {
        if configuration.systemBus && owner != 0 && owner != getuid() {
            throw ServiceError.accessDenied("downloads for other users on the system bus are not supported yet")
        }
        guard try store.taskCount(owner: owner) < configuration.maxTasksPerUser else {
            throw ServiceError.quotaExceeded(
                "you have \(configuration.maxTasksPerUser) tasks; cancel finished ones (Cancel removes them) or wait for them to expire"
            )
        }
    }

    func start(_ request: StartRequest, owner: UInt32) throws -> ObjectPath {
        try checkMayAddTask(owner: owner)
        let isDirectory = fileAccess.isDirectory(request.destination)
        if !isDirectory {
            let parent = request.destination.split(separator: "/").dropLast().joined(separator: "/")
            guard fileAccess.isDirectory("/" + parent) else {
                throw ServiceError.invalidArgument("the directory of \(request.destination) does not exist")
            }
            if fileAccess.exists(request.destination) && !request.options.overwrite {
                throw ServiceError.bus(.fileExists(request.destination))
            }
        }
        var record = DownloadTaskRecord(
            id: 0, session: request.session, url: request.url, destination: request.destination,
            destinationIsDirectory: isDirectory, options: request.options
        )
        record.id = try store.createTask(record, owner: owner)
        return try adoptNew(record, owner: owner)
    }

    /// Exports a stored task and hands it to the engine (a new task, or one restored at start).
    func adopt(_ record: DownloadTaskRecord, owner: UInt32) throws {
        state.withLockedValue { $0.owners[record.id] = owner }
        try exportTask(record.id)
        var engineRecord = record
        engineRecord.session = SessionKey(owner: owner, name: record.session).engineKey
        try engine.add(engineRecord)
    }

    /// Adopts a task just written to the store, or takes it out again.
    private func adoptNew(_ record: DownloadTaskRecord, owner: UInt32) throws -> ObjectPath {
        do {
            try adopt(record, owner: owner)
        } catch {
            try? removeTaskFromStoreOnly(record.id)
            throw error
        }
        logger.info("task \(record.id): \(record.url) → \(record.destination)")
        return DownloadsService.path(of: record.id)
    }

    private func removeTaskFromStoreOnly(_ id: UInt64) throws {
        connection.unexport(DownloadsService.path(of: id))
        _ = state.withLockedValue { $0.owners.removeValue(forKey: id) }
        try store.deleteTask(id)
    }

    /// Cancel stops a live task; on an ended task it removes it from the list.
    func cancel(_ id: UInt64) async throws {
        guard let snapshot = engine.snapshot(id) else { throw ServiceError.notFound("no task \(id)") }
        if snapshot.state.isTerminal {
            try removeTask(id)
        } else {
            try await engine.cancel(id)
        }
    }

    func resumeWithData(_ blob: [UInt8], options: [String: DBusValue], owner: UInt32) throws -> ObjectPath {
        let data = try engine.decodeResumeData(blob)
        var request = try StartRequest(url: data.url, destination: data.destination, options: [:])
        request.session = data.session
        request.options = data.options
        try request.apply(options, allowed: StartRequest.resumeKeys)
        // The task the data came from still exists: resume it rather than race it for its file.
        if let existing = engine.snapshot(data.taskID), self.owner(of: data.taskID) == owner {
            switch existing.state {
            case .paused, .failed:
                try engine.resume(data.taskID)
                return DownloadsService.path(of: data.taskID)
            case .queued, .running, .retrying:
                return DownloadsService.path(of: data.taskID)
            case .finished, .cancelled:
                break
            }
        }
        try checkMayAddTask(owner: owner)
        var record = DownloadTaskRecord(
            id: 0, session: request.session, url: data.url, destination: data.destination,
            destinationIsDirectory: data.destinationIsDirectory, options: request.options
        )
        record.id = try store.createTask(record, owner: owner)
        // Take over the partial file of the old task when it is still there.
        let old = DownloadTaskRecord(
            id: data.taskID, session: data.session, url: data.url, destination: data.destination,
            destinationIsDirectory: data.destinationIsDirectory, options: data.options
        )
        if data.offset > 0, fileAccess.exists(old.partialPath),
           (try? fileAccess.rename(old.partialPath, to: record.partialPath, replace: true)) != nil
        {
            record.durableOffset = data.offset
            record.validator = data.validator
            record.expectedLength = data.expectedLength
            record.finalURL = data.finalURL
        }
        try store.save(record)
        return try adoptNew(record, owner: owner)
    }
}
