import DBus
import DownloadEngine
import DownloadModel
import DownloadsAPI
import Foundation
import Metalink
import UserFiles
#if canImport(Glibc)
import Glibc
#endif

/// The methods of `org.example.Downloads` on the manager object.
extension DownloadsService {
    func managerInterface() throws -> ExportedInterface {
        func handler(
            _ body: @escaping @Sendable (MethodCall, Caller) async throws -> [DBusValue]
        ) -> ExportedInterface.MethodHandler {
            { [self] call in
                do {
                    return try await body(call, try await caller(call))
                } catch {
                    throw ServiceError.reply(for: error)
                }
            }
        }
        return try ExportedInterface(
            DownloadsInterfaces.manager,
            methods: [
                "Start": handler { [self] call, caller in
                    let options = try TaskOptions(vardict(call.arguments[2]), allowed: TaskOptions.startKeys)
                    guard !caller.isSandboxed else {
                        throw DownloadsErrorName.accessDenied.error(
                            "a sandboxed app names its destination by a file descriptor, not a path: open the directory "
                                + "(or the file) and call StartAt(url, h destination, s name, a{sv} options)"
                        )
                    }
                    let pid = try? await call.credentials().pid
                    let path = try await start(
                        url: call.arguments[0].stringValue ?? "",
                        destination: .path(call.arguments[1].stringValue ?? ""),
                        options: options, caller: caller, fileMode: CallerUmask.fileMode(pid: pid)
                    )
                    return [.objectPath(path)]
                },
                "StartAt": handler { [self] call, caller in
                    let options = try TaskOptions(vardict(call.arguments[3]), allowed: TaskOptions.startKeys)
                    guard let fd = call.arguments[1].unixFDValue else {
                        throw DownloadsErrorName.invalidArgument.error("destination must be a file descriptor (h)")
                    }
                    let anchor = try await anchor(fd, for: caller)
                    let pid = try? await call.credentials().pid
                    let path = try await start(
                        url: call.arguments[0].stringValue ?? "",
                        destination: .below(anchor, name: call.arguments[2].stringValue ?? ""),
                        options: options, caller: caller, fileMode: CallerUmask.fileMode(pid: pid)
                    )
                    return [.objectPath(path)]
                },
                "Pause": handler { [self] call, caller in
                    [.bytes(try await pause(try task(call.arguments[0].objectPathValue ?? .root, for: caller)))]
                },
                "Resume": handler { [self] call, caller in
                    try await resume(try task(call.arguments[0].objectPathValue ?? .root, for: caller))
                    return []
                },
                "Cancel": handler { [self] call, caller in
                    try await cancel(
                        try await task(
                            call.arguments[0].objectPathValue ?? .root, for: call, caller: caller, asAdmin: true))
                    return []
                },
                "ListAllTasks": handler { [self] call, caller in
                    [.objectPaths(try await listAllTasks(call, caller: caller))]
                },
                "ResumeWithData": handler { [self] call, caller in
                    let options = try TaskOptions(vardict(call.arguments[1]), allowed: TaskOptions.resumeKeys)
                    let fileMode = CallerUmask.fileMode(pid: try? await call.credentials().pid)
                    return [
                        .objectPath(
                            try await resumeWithData(
                                call.arguments[0].bytesValue ?? [], options: options, caller: caller, fileMode: fileMode
                            ))
                    ]
                },
                "ListTasks": handler { [self] call, caller in
                    let session = call.arguments[0].stringValue ?? ""
                    let (ids, _) = engine.taskIDs(after: 0, limit: .max) { caller.lists($0, session: session) }
                    return [.objectPaths(ids.map(DownloadsAPI.taskPath))]
                },
                "ListTasksPage": handler { [self] call, caller in
                    try listTasksPage(call.arguments, caller: caller)
                },
                "FindTasks": handler { [self] call, caller in
                    let match = MetadataValue.dictionary(
                        try TaskOptions.checkedMetadata(call.arguments[0], option: "match"))
                    let (ids, _) = engine.taskIDs(after: 0, limit: .max) { record in
                        caller.lists(record, session: "")
                            && match.allSatisfy { record.options.metadata[$0.key] == $0.value }
                    }
                    return [.objectPaths(ids.map(DownloadsAPI.taskPath))]
                },
                "StartGroup": handler { [self] call, caller in
                    try await startGroup(
                        files: call.arguments[0], options: call.arguments[1], below: nil, call: call, caller: caller)
                },
                "StartGroupAt": handler { [self] call, caller in
                    guard let fd = call.arguments[0].unixFDValue else {
                        throw DownloadsErrorName.invalidArgument.error("directory must be a file descriptor (h)")
                    }
                    let anchor = try await anchor(fd, for: caller)
                    guard anchor.kind == .directory else {
                        throw DownloadsErrorName.invalidArgument.error(
                            "directory must be an open directory, not a file")
                    }
                    return try await startGroup(
                        files: call.arguments[1], options: call.arguments[2], below: anchor, call: call, caller: caller)
                },
                "ResumeGroupWithData": handler { [self] call, caller in
                    try await resumeGroupWithData(call, caller: caller)
                },
                "ListShared": handler { [self] _, caller in [listShared(caller: caller)] },
                "Unshare": handler { [self] call, caller in
                    try unshare(call.arguments[0].stringValue ?? "", caller: caller)
                    return []
                },
                "ListGroups": handler { [self] call, caller in
                    [.objectPaths(listGroups(call.arguments[0].stringValue ?? "", caller: caller))]
                },
                "Upload": handler { [self] call, caller in
                    guard !caller.isSandboxed else {
                        throw DownloadsErrorName.accessDenied.error(
                            "a sandboxed app hands its file over by descriptor, not a path: open it for reading and call UploadAt(url, h source, a{sv} options)"
                        )
                    }
                    let options = try uploadOptions(call.arguments[2])
                    let path = try StartRequest.checkDestination(call.arguments[1].stringValue ?? "", what: "source")
                    return try await upload(call, options: options, source: .path(path), caller: caller)
                },
                "UploadAt": handler { [self] call, caller in
                    let options = try uploadOptions(call.arguments[2])
                    guard let fd = call.arguments[1].unixFDValue else {
                        throw DownloadsErrorName.invalidArgument.error("source must be a file descriptor (h)")
                    }
                    return try await upload(call, options: options, source: .descriptor(fd), caller: caller)
                },
                "RegisterCompletionHandler": handler { [self] call, caller in
                    try await registerCompletionHandler(call, caller: caller)
                    return []
                },
            ])
    }

    func vardict(_ value: DBusValue) throws -> [String: DBusValue] {
        guard let dict = value.vardictValue else {
            throw DownloadsErrorName.invalidArgument.error("options must be a{sv}")
        }
        return dict
    }

    /// The most tasks one `ListTasksPage` answers.
    static let maxPageTasks: UInt32 = 10_000

    /// `ListTasksPage(s session, t after, u limit) → (ao tasks, t next)`: `ListTasks`' tasks with
    /// an id after `after`, in id order, at most `limit`; `next` is the `after` of the next page,
    /// 0 when none follows. A million paths are 40 MB, more than a system bus carries in one
    /// message (32 MiB by default); a page is any size up to `maxPageTasks`.
    private func listTasksPage(_ arguments: [DBusValue], caller: Caller) throws -> [DBusValue] {
        let session = arguments[0].stringValue ?? ""
        guard let after = arguments[1].uint64Value, let limit = arguments[2].uint32Value,
            (1...Self.maxPageTasks).contains(limit)
        else {
            throw DownloadsErrorName.invalidArgument.error("limit is 1 to \(Self.maxPageTasks) tasks")
        }
        let (ids, more) = engine.taskIDs(after: after, limit: Int(limit)) { caller.lists($0, session: session) }
        return [.objectPaths(ids.map(DownloadsAPI.taskPath)), .uint64(more ? ids.last ?? 0 : 0)]
    }

    /// A descriptor a caller handed over, checked (a directory, or a regular file open for
    /// writing; not on a read-only mount) and duplicated for the task; its `fstat` and
    /// `fstatfs` off the shared pool, with a deadline (`CallerFileReads`).
    func anchor(_ fd: UnixFD, for caller: Caller) async throws -> DescriptorAnchor {
        do {
            return try await callerReads.run(for: caller, what: "destination") {
                try DescriptorAnchor.make(duplicating: fd.fd)
            }
        } catch let error as FileOperationError {
            if error.code == EROFS {
                throw DownloadsErrorName.fileError.error("destination: \(error.message); nothing can be created there")
            }
            throw DownloadsErrorName.invalidArgument.error("destination: \(error.message)")
        }
    }

    /// Whether `caller` may have one more task: the quota (its user's, and a sandboxed app's
    /// share of it); and a daemon that cannot act as other users (not root, so no file helpers)
    /// takes tasks only from its own user and root, so no caller can make it write where the
    /// caller could not.
    func checkMayAddTask(_ caller: Caller) throws {
        let owner = caller.uid
        if caller.isSandboxed {
            let count = engine.countTasks { $0.owner == owner && $0.app == caller.app }
            guard count < configuration.maxTasksPerApp else {
                throw DownloadsErrorName.quotaExceeded.error(
                    "this app has \(configuration.maxTasksPerApp) tasks; cancel finished ones (Cancel removes them) or wait for them to expire"
                )
            }
        }
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

    /// What a new task's URL and options (`Start`'s, `Upload`'s) come to: the URL checked, its
    /// `user:password@` taken out into an Authorization header (unless the caller gave one), the
    /// options the engine's, a sandboxed app's desktop entry its own.
    func checkedTask(
        url given: String, options: TaskOptions, caller: Caller
    ) async throws -> (String, DownloadOptions) {
        let (stripped, authorization) = URLCredentials.split(given)
        let url = try StartRequest.checkURL(stripped)
        var engineOptions = try StartRequest.downloadOptions(options)
        if engineOptions.share != nil, configuration.sharing == nil {
            throw DownloadsErrorName.accessDenied.error(
                "this service shares no file with the local network (downloadsd --lan-peers off or fetch, or no state directory for its key)"
            )
        }
        if caller.isSandboxed {
            engineOptions.desktopEntry = try Self.desktopEntry(engineOptions.desktopEntry, app: caller.app)
            // The desktop agent adds to the host user's Recent, where a path inside the app's
            // private directory means nothing and tells the host of what the app keeps.
            guard !engineOptions.addToRecent else {
                throw DownloadsErrorName.accessDenied.error(
                    "add_to_recent is for host callers: a sandboxed app's Recent is its own (GtkRecentManager in the app)"
                )
            }
        }
        if let fd = options.clientCertificate {
            let passphrase = options.clientCertificatePassphrase
            engineOptions.clientCertificate = try await callerReads.run(for: caller, what: "client_certificate") {
                try ClientCertificateFile.read(fd, passphrase: passphrase)
            }
        } else if options.clientCertificatePassphrase != nil {
            throw DownloadsErrorName.invalidArgument.error("client_certificate_passphrase needs client_certificate")
        }
        // The URL's credentials, unless the caller's own Authorization header says otherwise.
        if let authorization, !engineOptions.headers.keys.contains(where: { $0.lowercased() == "authorization" }) {
            engineOptions.headers["Authorization"] = authorization
        }
        return (url, engineOptions)
    }

    /// Whether `caller` may have one more task (`checkMayAddTask`), in the session `name` (or
    /// `default`: one session more than a user may have is `QuotaExceeded`), with room in the
    /// state directory; returns the session's stored name.
    func admitNewTask(session name: String?, caller: Caller) throws -> String {
        try checkMayAddTask(caller)
        let session = SessionKey.stored(name ?? "default", app: caller.app)
        let sessions = engine.sessionNames(owner: caller.uid)
        guard sessions.contains(session) || sessions.count < configuration.maxSessionsPerUser else {
            throw DownloadsErrorName.quotaExceeded.error(
                "your tasks are in \(configuration.maxSessionsPerUser) sessions already; use one of them or remove ended tasks"
            )
        }
        try requireRoom()
        return session
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
            throw (failure.isStorageFull ? DownloadsErrorName.storageFull : .failed).error(
                "task \(id) could not be recorded: \(failure)")
        }
    }

    /// A `metalink` given as a path: read as the caller (through their file helper on the
    /// system bus), a regular file of at most `MetalinkDocument.maximumSize` bytes.
    func readMetalink(_ path: String, owner: UInt32) async throws -> [UInt8] {
        guard path.hasPrefix("/"), !path.utf8.contains(0), path.utf8.count <= StartRequest.maxPathBytes else {
            throw DownloadsErrorName.invalidArgument.error(
                "metalink must be the document's bytes (ay) or an absolute path (s)")
        }
        do {
            // Only a host caller names a document by path (a sandboxed app's is refused before).
            return try await callerReads.run(for: Caller(uid: owner, app: ""), what: "the Metalink document") {
                [engine] in
                try engine.readFile(path, owner: owner, atMost: MetalinkDocument.maximumSize)
            }
        } catch let error as DownloadError {
            throw DownloadsErrorName.invalidArgument.error(
                "cannot read the Metalink document \(path): \(error.message)")
        }
    }

    /// Where a new task's file goes: a path the caller named (`Start`), or below a descriptor it
    /// handed over (`StartAt`: `name` in a directory, "" for the server's name or a file written
    /// in place; `StartGroupAt`: `nested`, a relative path of plain names).
    enum Destination {
        /// `checked`: its check (`SessionManager.checkDestination` with `overwrite`) made already,
        /// with its answer: a group's files are checked in one go off the pool, not with a hop
        /// to another thread and back for each.
        case path(String, checked: (overwrite: Bool, isDirectory: Result<Bool, any Error>)? = nil)
        case below(DescriptorAnchor, name: String, nested: Bool = false)
    }

    func start(
        url: String, destination: Destination, options: TaskOptions, caller: Caller, fileMode: UInt32? = nil
    ) async throws -> ObjectPath {
        let (request, anchor) = try await prepareStart(
            url: url, destination: destination, options: options, caller: caller, fileMode: fileMode)
        return try await record(request, caller: caller) { try engine.create(request, anchor: anchor) }
    }

    /// Makes a task (`create`) and answers with its path only once the store holds it; one the
    /// store could not take is taken back, so nothing runs that a restart would not know.
    func record(
        _ request: DownloadRequest, caller: Caller, _ create: () throws -> TaskSnapshot
    ) async throws -> ObjectPath {
        let snapshot = try create()
        await engine.eventsDelivered(snapshot.id)
        if let failure = storeObserver.takeFailure(snapshot.id) {
            // Cancelled first: a queued or running task cannot be removed as it is.
            try? await engine.cancel(snapshot.id)
            try? await engine.remove(snapshot.id)
            _ = storeObserver.takeFailure(snapshot.id)
            // A full disk is StorageFull; anything else SQLite refused is ours (Failed), said as it is.
            throw (failure.isStorageFull ? DownloadsErrorName.storageFull : .failed).error(
                "the task could not be recorded: \(failure); nothing was changed"
            )
        }
        logStarted(snapshot.id, request, caller: caller)
        return DownloadsAPI.taskPath(snapshot.id)
    }

    /// The journal's line for a new task: the proxy without its credentials (`description`).
    func logStarted(_ id: UInt64, _ request: DownloadRequest, caller: Caller) {
        let through = request.options.proxy.map { " through \(LogText.escaped($0.description))" } ?? ""
        let app = caller.isSandboxed ? " (app \(LogText.escaped(caller.app)))" : ""
        logger.info(
            "task \(id) of uid \(caller.uid)\(app): \(LogText.url(request.url)) → \(LogText.escaped(request.destination))\(through)"
        )
    }

    /// Everything `Start` checks and asks before a task exists: the URL, the options, the
    /// quotas, the destination (as the caller); the request to make, and the descriptor its
    /// files are made below.
    /// `metalinkFile`: one `<file>` of a document a group was given (`StartGroup`), already parsed.
    func prepareStart(
        url: String, destination: Destination, options: TaskOptions, caller: Caller, fileMode: UInt32? = nil,
        metalinkFile: MetalinkDocument.File? = nil
    ) async throws -> (DownloadRequest, DescriptorAnchor?) {
        let owner = caller.uid
        var asked = options
        if caller.isSandboxed, asked.metalinkPath != nil {
            throw DownloadsErrorName.accessDenied.error(
                "a sandboxed app gives a Metalink document as its bytes (ay), not a path")
        }
        if let path = asked.metalinkPath {
            asked.metalink = try await readMetalink(path, owner: owner)
            asked.metalinkPath = nil
        }
        // A document (up to a few MiB of XML) is parsed off the pool calls run on: six at once
        // held back every other call of the daemon for most of a second on two cores.
        let checked = asked
        let (given, options, pieces, fileName) = try await {
            if let metalinkFile { return try StartRequest.applying(metalinkFile, url, checked) }
            return checked.metalink == nil
                ? try StartRequest.applyingMetalink(url, checked)
                : try await BlockingWork.run { try StartRequest.applyingMetalink(url, checked) }
        }()
        var (url, engineOptions) = try await checkedTask(url: given, options: options, caller: caller)
        engineOptions.pieces = pieces
        let session = try admitNewTask(session: options.session, caller: caller)
        let overwrite = engineOptions.overwrite
        let place: (destination: String, isDirectory: Bool, inPlace: Bool, anchor: DescriptorAnchor?)
        switch destination {
        case .path(let given, let checked):
            let destination = try StartRequest.checkDestination(given)
            // Asked of the owner's file helper, off the cooperative pool (a hung mount blocks it),
            // unless a group's check asked it already with the same `overwrite`.
            let isDirectory: Bool
            if let checked, checked.overwrite == overwrite {
                isDirectory = try checked.isDirectory.get()
            } else {
                isDirectory = try await BlockingWork.run { [engine] in
                    try engine.checkDestination(destination, overwrite: overwrite, owner: owner)
                }
            }
            place = (destination, isDirectory, false, nil)
        case .below(let anchor, let name, let nested):
            let (destination, isDirectory) = try Self.destination(below: anchor, name: name, nested: nested)
            // Asked with the owner's credentials below the descriptor (their file helper on the
            // system bus), so the answer says nothing the owner could not see.
            if !overwrite, anchor.kind == .directory, !isDirectory {
                let exists = try await BlockingWork.run { [engine] in
                    try engine.exists(destination, below: anchor, owner: owner)
                }
                if exists {
                    throw DownloadsErrorName.fileExists.error(
                        "\(name) exists in the destination directory; give overwrite=true to replace it")
                }
            }
            place = (destination, isDirectory, anchor.kind == .file, anchor)
        }
        let destination = place.destination
        var request = DownloadRequest(
            owner: owner, session: session, url: url, destination: destination,
            destinationIsDirectory: place.isDirectory, options: engineOptions, fileMode: fileMode, fileName: fileName
        )
        request.app = caller.app
        request.writesInPlace = place.inPlace
        return (request, place.anchor)
    }

    /// `StartAt`'s destination below a descriptor: `name` (one path component; with `nested`, plain
    /// components joined by "/") in a directory, the directory itself for "" (the response names
    /// the file), or the caller's own file.
    static func destination(below anchor: DescriptorAnchor, name: String, nested: Bool = false) throws -> (String, Bool)
    {
        guard anchor.path.hasPrefix("/") else {
            throw DownloadsErrorName.invalidArgument.error(
                "destination does not lead to a file system path (\(anchor.path))")
        }
        let base = try StartRequest.checkDestination(anchor.path)
        switch anchor.kind {
        case .file:
            guard name.isEmpty else {
                throw DownloadsErrorName.invalidArgument.error(
                    "name must be \"\" when destination is a file (it is written in place)")
            }
            return (base, false)
        case .directory:
            if name.isEmpty { return (base, true) }
            if nested {
                guard !name.hasPrefix("/") else {
                    throw DownloadsErrorName.invalidArgument.error(
                        "'\(name)' is an absolute path; names are relative to the directory")
                }
                guard DescriptorAnchor.isRelativePath(name) else {
                    throw DownloadsErrorName.invalidArgument.error(
                        "'\(name)' must be plain names joined by '/' (no '..', '.', empty or trailing components)"
                    )
                }
                return (try StartRequest.checkDestination(FilePaths.join(base, name)), false)
            }
            guard DescriptorAnchor.isPlainName(name) else {
                throw DownloadsErrorName.invalidArgument.error(
                    "name must be one path component (no '/', not '.' or '..'), got '\(name)'")
            }
            return (try StartRequest.checkDestination(FilePaths.join(base, name)), false)
        }
    }

    /// A sandboxed app's `desktop_entry`: its own (`APPID.desktop`; a snap's `NAME_…desktop`),
    /// given or not: its dock progress and notifications never show under another app.
    static func desktopEntry(_ given: String?, app: String) throws -> String? {
        if app.hasPrefix("snap.") {
            let name = String(app.dropFirst(5))
            guard let given else { return nil }
            guard given.hasPrefix(name + "_") else {
                throw DownloadsErrorName.invalidArgument.error(
                    "desktop_entry of snap \(name) must be one of its own (\(name)_*.desktop)")
            }
            return given
        }
        let own = app + ".desktop"
        guard given == nil || given == own else {
            throw DownloadsErrorName.invalidArgument.error(
                "a sandboxed app's desktop_entry is its own, \(own), not '\(given ?? "")'")
        }
        return own
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

    /// `Update`: what may change while the task exists, checked by the rules of `Start`, applied
    /// at once (a running transfer's limit within a second, its priority at the next scheduling
    /// decision, its headers from its next request; a change of `background` requeues a running
    /// transfer, which goes on from its checkpoint), kept through restarts and in resume data.
    func update(_ task: TaskSnapshot, _ value: DBusValue) async throws {
        let options = try TaskOptions(try vardict(value), allowed: TaskOptions.updateKeys)
        var change = try StartRequest.change(options)
        change.background = options.background
        change.requiresACPower = options.requiresACPower
        if let headers = options.headers { change.headers = headers }
        change.title = options.title
        change.taskDescription = options.taskDescription
        if let metadata = options.metadata { change.metadata = MetadataValue.dictionary(metadata) }
        guard !change.isEmpty else { return }
        var candidate = task.record.options
        candidate.apply(change)
        do {
            try candidate.validate()
        } catch let error as DownloadError {
            throw DownloadsErrorName.invalidArgument.error(error.message)
        }
        try requireRoom(forNewWork: false)
        try engine.changeOptions(task.id, change)
        await engine.eventsDelivered(task.id)
        try requireStored(task.id)
        let changed = options.dictionary.keys.sorted().joined(separator: ", ")
        logger.info("task \(task.id) of uid \(task.owner): updated \(changed)")
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
    func resumeWithData(
        _ blob: [UInt8], options: TaskOptions, caller: Caller, fileMode: UInt32? = nil
    ) async throws -> ObjectPath {
        let owner = caller.uid
        let data = try engine.decodeResumeData(blob, owner: owner, app: caller.app)
        let source = engine.snapshot(data.taskID)
        if source == nil || source?.state == .finished || source?.state == .cancelled {
            try checkMayAddTask(Caller(uid: owner, app: data.app))
        }
        // A new descriptor for the task's files: the directory (or the file) it was started in.
        var anchor: DescriptorAnchor?
        if let fd = options.destinationFD {
            let given = try await self.anchor(fd, for: caller)
            let expected =
                data.writesInPlace || data.destinationIsDirectory
                ? data.destination : FilePaths.directory(of: data.destination)
            guard given.path == expected, (given.kind == .file) == data.writesInPlace else {
                throw DownloadsErrorName.invalidArgument.error(
                    "destination_fd must be \(data.writesInPlace ? "the file" : "the directory") the download was started in (\(expected))"
                )
            }
            anchor = given
        }
        try requireRoom()
        if let spec = data.upload, spec.snapshot == nil, spec.reopensByPath {
            // An upload goes on only with the file it began with.
            let now = try await BlockingWork.run { [engine] in try engine.inspectSource(spec.source, owner: owner) }
            if let why = now.change(from: spec.identity) {
                throw DownloadsErrorName.sourceChanged.error(DownloadError.sourceChanged(spec.source, why).message)
            }
        }
        let url = try options.url.map(StartRequest.checkURL)
        let snapshot = try await engine.adopt(
            data, change: try StartRequest.change(options), url: url, fileMode: fileMode, anchor: anchor)
        await engine.eventsDelivered(snapshot.id)
        try requireStored(snapshot.id)
        logger.info("task \(snapshot.id) of uid \(owner): resumed from the resume data of task \(data.taskID)")
        return DownloadsAPI.taskPath(snapshot.id)
    }
}
