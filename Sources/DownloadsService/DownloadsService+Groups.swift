import DBus
import Metalink
import TerminalOutput
import DownloadEngine
import DownloadModel
import DownloadsAPI
import NIOCore
import UserFiles
import ShownText

/// Groups on the bus (v1.3): `StartGroup`, `ListGroups`, the group objects at
/// /org/example/Downloads/groups/<id> and their signals. A group's files are tasks like any
/// other (their objects, quotas and ownership are the tasks'); the group is computed from them.
extension DownloadsService {
    /// At most this many files in one call (a task quota is the real limit; this bounds one message's work).
    static let maxGroupFiles = 10_000

    /// `StartGroup` (destinations as `Start`'s paths) and `StartGroupAt` (`below`: relative
    /// paths below the directory the caller handed over, their subdirectories made as the
    /// caller, never through a link). Once the group is taken, and its working copies freed,
    /// `Configuration.afterGroupTaken` runs (the daemon gives free memory back there).
    func startGroup(
        files: DBusValue, options: DBusValue, below anchor: DescriptorAnchor?, call: MethodCall, caller: Caller
    ) async throws -> [DBusValue] {
        let reply = try await takeGroup(files: files, options: options, below: anchor, call: call, caller: caller)
        configuration.afterGroupTaken?()
        return reply
    }

    private func takeGroup(
        files: DBusValue, options: DBusValue, below anchor: DescriptorAnchor?, call: MethodCall, caller: Caller
    ) async throws -> [DBusValue] {
        guard case .array(_, let entries) = files else {
            throw DownloadsErrorName.invalidArgument.error("files must be a(ssa{sv})")
        }
        var groupOptions = try vardict(options)
        let atomic = try Self.flag(groupOptions.removeValue(forKey: "atomic"), "atomic")
        let taskSignals = try Self.flag(groupOptions.removeValue(forKey: "task_signals"), "task_signals")
        let parallel = try Self.parallel(groupOptions.removeValue(forKey: "parallel"))
        // The group's bandwidth is shared by its files, not given to each.
        let groupRate =
            try groupOptions.removeValue(forKey: "max_bytes_per_second").map {
                try TaskOptions(["max_bytes_per_second": $0]).maxBytesPerSecond ?? 0
            } ?? 0
        let shared = try TaskOptions(groupOptions, allowed: TaskOptions.groupKeys)
        guard !entries.isEmpty, entries.count <= Self.maxGroupFiles else {
            throw DownloadsErrorName.invalidArgument.error(
                "a group has 1 to \(Self.maxGroupFiles) files, got \(entries.count)")
        }
        guard anchor != nil || !caller.isSandboxed else {
            throw DownloadsErrorName.accessDenied.error(
                "a sandboxed app names its destinations below a directory it opened: StartGroupAt(h directory, a(ssa{sv}) files, a{sv} options)"
            )
        }
        let fileMode = CallerUmask.fileMode(pid: try? await call.credentials().pid)
        // A refused call takes back the directories it made (each only while empty).
        var made: [String] = []
        do {
            let files = try await groupFiles(
                entries, groupOptions: groupOptions, anchor: anchor, caller: caller, fileMode: fileMode, made: &made
            )
            try checkMayAddTasks(files.count, caller: caller)
            var requests: [DownloadRequest] = []
            var directories: [String] = []
            let checked = anchor == nil ? await checkDestinations(files, owner: caller.uid) : []
            for (index, file) in files.enumerated() {
                do {
                    let place: Destination =
                        anchor.map { .below($0, name: file.destination, nested: true) }
                        ?? .path(
                            file.destination,
                            checked: (overwrite: file.options.overwrite ?? false, isDirectory: checked[index]))
                    let (request, _) = try await prepareStart(
                        url: file.url, destination: place, options: file.options, caller: caller, fileMode: fileMode,
                        metalinkFile: file.metalinkFile
                    )
                    requests.append(request)
                    if anchor != nil, let slash = file.destination.lastIndex(of: "/") {
                        directories.append(String(file.destination[..<slash]))
                    }
                } catch let error as BusError {
                    throw BusError(name: error.name, message: "\(file.label): \(error.message)")
                }
            }
            // Paths as they were resolved (a destination that is a file, not a directory the server names into).
            try Self.checkDistinct(
                zip(files, requests).compactMap { file, request in
                    request.destinationIsDirectory ? nil : (file.label, Self.pathKey(request.destination))
                })
            if let anchor {
                for directory in Set(directories) {
                    made += try await makeDirectories(
                        directory, in: anchor.path, anchor: anchor, owner: caller.uid, fileMode: fileMode)
                }
            }
            try requireRoom()
            DownloadRequest.shareOptions(&requests)
            let session = SessionKey.stored(shared.session ?? "default", app: caller.app)
            let (group, tasks) = try engine.createGroup(
                requests, owner: caller.uid, app: caller.app, session: session, title: shared.title ?? "",
                atomic: atomic,
                taskSignals: taskSignals, parallel: parallel, maxBytesPerSecond: groupRate, anchor: anchor
            )
            await engine.eventsDelivered(ofGroup: group.id)
            let app = caller.isSandboxed ? " (app \(LogText.escaped(caller.app)))" : ""
            let place = anchor.map { " below \(LogText.escaped($0.path))" } ?? ""
            logger.info(
                "group \(group.id) of uid \(caller.uid)\(app): \(tasks.count) file(s)\(place)\(atomic ? ", atomic" : "")"
            )
            return [
                .objectPath(DownloadsAPI.groupPath(group.id)), .objectPaths(tasks.map { DownloadsAPI.taskPath($0.id) }),
            ]
        } catch {
            if !made.isEmpty {
                let owner = caller.uid
                await BlockingWork.run { [engine, made] in engine.removeDirectories(made, anchor: anchor, owner: owner)
                }
            }
            throw error
        }
    }

    /// One file of a group as the call gave it, or one `<file>` of a Metalink document an entry gave.
    struct GroupFile {
        var label: String
        var url: String
        var destination: String
        var options: TaskOptions
        var metalinkFile: MetalinkDocument.File?
        /// A Metalink file's subdirectories to make below a path destination before it is checked.
        var directories: (relative: String, base: String)?

        /// The file's own path when it names a file (a Metalink document's file, a name below
        /// `StartGroupAt`'s directory); nil when the destination may be a directory.
        func filePath(anchored: Bool) -> String? {
            guard metalinkFile != nil || (anchored && !destination.isEmpty) else { return nil }
            return DownloadsService.pathKey(destination)
        }
    }

    /// A path as one file is named once: empty and `.` parts left out (`a//b/./c` is `a/b/c`).
    static func pathKey(_ path: String) -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
        return (path.hasPrefix("/") ? "/" : "") + parts.joined(separator: "/")
    }

    /// A group (or a document) that names one file twice would publish one over the other, or
    /// half of an atomic group: refused at the call, before anything is made.
    static func checkDistinct(_ paths: [(label: String, path: String)]) throws {
        var seen: [String: String] = [:]
        for (label, path) in paths {
            if let first = seen[path] {
                throw DownloadsErrorName.invalidArgument.error(
                    "\(first) and \(label) name the same file \(DisplayText.quoted(path, limit: 200)); nothing was started"
                )
            }
            seen[path] = label
        }
    }

    /// Each file's destination checked as `Start` checks it (`SessionManager.checkDestination`,
    /// as its owner), all in one call off the pool: whether it is a directory, or why not.
    private func checkDestinations(_ files: [GroupFile], owner: UInt32) async -> [Result<Bool, any Error>] {
        let wanted = files.map { ($0.destination, $0.options.overwrite ?? false) }
        return await BlockingWork.run { [engine] in
            wanted.map { destination, overwrite in
                Result {
                    try engine.checkDestination(
                        StartRequest.checkDestination(destination), overwrite: overwrite, owner: owner)
                }
            }
        }
    }

    /// The call's entries as files: each with the group's options under its own; an entry whose
    /// `metalink` describes several files becomes one file per `<file>` (as aria2 takes a
    /// multi-file Metalink), its `name` a relative path below the entry's destination directory
    /// (plain names only; subdirectories are made as the caller, never through a link).
    private func groupFiles(
        _ entries: [DBusValue], groupOptions: [String: DBusValue], anchor: DescriptorAnchor?, caller: Caller,
        fileMode: UInt32?,
        made: inout [String]
    ) async throws -> [GroupFile] {
        var files: [GroupFile] = []
        for (index, entry) in entries.enumerated() {
            guard case .structure(let fields) = entry, fields.count == 3, let url = fields[0].stringValue,
                let destination = fields[1].stringValue, let own = fields[2].vardictValue
            else {
                throw DownloadsErrorName.invalidArgument.error(
                    "file \(index): each file is (s url, s destination, a{sv} options)")
            }
            do {
                guard own["session"] == nil else {
                    throw DownloadsErrorName.invalidArgument.error(
                        "a group's files are in the group's session: give session in the group's options")
                }
                // The group's options, then the file's own over them.
                var merged = groupOptions
                for (key, value) in own { merged[key] = value }
                var options = try TaskOptions(merged, allowed: TaskOptions.groupKeys)
                guard options.metalink != nil || options.metalinkPath != nil else {
                    files.append(
                        GroupFile(label: "file \(index)", url: url, destination: destination, options: options))
                    continue
                }
                if caller.isSandboxed, options.metalinkPath != nil {
                    throw DownloadsErrorName.accessDenied.error(
                        "a sandboxed app gives a Metalink document as its bytes (ay), not a path")
                }
                if let path = options.metalinkPath {
                    options.metalink = try await readMetalink(path, owner: caller.uid)
                    options.metalinkPath = nil
                }
                let bytes = options.metalink ?? []
                let document: MetalinkDocument
                do {
                    document = try await BlockingWork.run { try MetalinkDocument.parse(bytes) }
                } catch let error as MetalinkDocument.Invalid {
                    throw DownloadsErrorName.invalidArgument.error(error.message)
                }
                guard document.files.count > 1 else {
                    files.append(
                        GroupFile(label: "file \(index)", url: url, destination: destination, options: options))
                    continue
                }
                guard url.isEmpty else {
                    throw DownloadsErrorName.invalidArgument.error(
                        "a Metalink document of several files names their URLs: give url \"\"")
                }
                options.metalink = nil
                for file in document.files {
                    let name = file.name
                    guard DescriptorAnchor.isRelativePath(name) else {
                        throw DownloadsErrorName.invalidArgument.error(
                            "the Metalink file \(DisplayText.quoted(name, limit: 120)) is not a relative path of plain names (no '..', '/' first or empty parts)"
                        )
                    }
                    let path: String
                    var directories: (relative: String, base: String)?
                    if anchor != nil {
                        path = destination.isEmpty ? name : destination + "/" + name
                    } else {
                        let directory = try StartRequest.checkDestination(destination)
                        path = FilePaths.join(directory, name)
                        // Made before the file is checked (its directory must exist then), as the
                        // caller, once every file's name was checked.
                        if let slash = name.lastIndex(of: "/") { directories = (String(name[..<slash]), directory) }
                    }
                    files.append(
                        GroupFile(
                            label: "file \(index) (\(name))", url: "", destination: path, options: options,
                            metalinkFile: file,
                            directories: directories
                        ))
                }
            } catch let error as BusError {
                throw BusError(name: error.name, message: "file \(index): \(error.message)")
            }
        }
        guard files.count <= Self.maxGroupFiles else {
            throw DownloadsErrorName.invalidArgument.error(
                "a group has 1 to \(Self.maxGroupFiles) files, got \(files.count)")
        }
        try Self.checkDistinct(
            files.compactMap { file in file.filePath(anchored: anchor != nil).map { (file.label, $0) } })
        for file in files {
            guard let (relative, base) = file.directories else { continue }
            made += try await makeDirectories(relative, in: base, anchor: nil, owner: caller.uid, fileMode: fileMode)
        }
        return files
    }

    /// `relative`'s missing directories below the directory `base` the caller named, or below
    /// the descriptor they handed over (`anchor`, at `base`), made as them (their file helper on
    /// the system bus); a link on the way refuses the call.
    /// Returns the directories it made (see `SessionManager.makeDirectories`).
    private func makeDirectories(
        _ relative: String, in base: String, anchor: DescriptorAnchor?, owner: UInt32, fileMode: UInt32?
    ) async throws -> [String] {
        do {
            return try await BlockingWork.run { [engine] in
                try engine.makeDirectories(relative, in: base, anchor: anchor, owner: owner, mode: fileMode)
            }
        } catch let error as DownloadError {
            throw DownloadsErrorName.fileError.error("\(relative) in \(base): \(error.message); nothing was started")
        }
    }

    /// Whether `caller` may have `count` more tasks: its user's quota and, sandboxed, its app's share.
    func checkMayAddTasks(_ count: Int, caller: Caller) throws {
        try checkMayAddTask(caller)
        guard engine.taskCount(owner: caller.uid) + count <= configuration.maxTasksPerUser else {
            throw DownloadsErrorName.quotaExceeded.error(
                "a group of \(count) files would take you over \(configuration.maxTasksPerUser) tasks"
            )
        }
        if caller.isSandboxed {
            let own = engine.countTasks { $0.owner == caller.uid && $0.app == caller.app }
            guard own + count <= configuration.maxTasksPerApp else {
                throw DownloadsErrorName.quotaExceeded.error(
                    "a group of \(count) files would take this app over its \(configuration.maxTasksPerApp) tasks"
                )
            }
        }
    }

    /// `ResumeGroupWithData(ay data, a{sv} options) → (o group, ao tasks)`: the group the data
    /// came from resumed while it exists, else a new one taking over its files' partial files.
    /// Options as `ResumeWithData`'s but `url` (a group's files have a URL each); `destination_fd`
    /// is the directory the group was started below (`StartGroupAt`).
    func resumeGroupWithData(_ call: MethodCall, caller: Caller) async throws -> [DBusValue] {
        let options = try TaskOptions(vardict(call.arguments[1]), allowed: TaskOptions.resumeKeys.subtracting([.url]))
        let data = try engine.decodeGroupResumeData(
            call.arguments[0].bytesValue ?? [], owner: caller.uid, app: caller.app)
        guard !data.files.isEmpty else {
            throw DownloadsErrorName.wrongState.error("every file of the group is in place already; nothing to resume")
        }
        if engine.group(data.group.id) == nil {
            try checkMayAddTasks(data.files.count, caller: Caller(uid: caller.uid, app: data.group.app))
        }
        var anchor: DescriptorAnchor?
        if let fd = options.destinationFD {
            let given = try await self.anchor(fd, for: caller)
            guard given.kind == .directory,
                data.files.allSatisfy({
                    $0.destination == given.path
                        || $0.destination.hasPrefix(given.path == "/" ? "/" : given.path + "/")
                })
            else {
                throw DownloadsErrorName.invalidArgument.error(
                    "destination_fd must be the directory the group was started below")
            }
            anchor = given
        }
        try requireRoom()
        let fileMode = CallerUmask.fileMode(pid: try? await call.credentials().pid)
        let (group, tasks) = try await engine.adoptGroup(
            data, change: try StartRequest.change(options), fileMode: fileMode, anchor: anchor)
        forgetGroupEnd(group.id)
        await engine.eventsDelivered(ofGroup: group.id)
        for task in tasks { try requireStored(task.id) }
        logger.info("group \(group.id) of uid \(caller.uid): resumed from the resume data of group \(data.group.id)")
        return [
            .objectPath(DownloadsAPI.groupPath(group.id)), .objectPaths(tasks.map { DownloadsAPI.taskPath($0.id) }),
        ]
    }

    /// `parallel` u: files of the group at once (0 or absent: as the daemon's limits allow).
    private static func parallel(_ value: DBusValue?) throws -> Int {
        guard let value else { return 0 }
        guard case .uint32(let count) = value.variantValue ?? value else {
            throw DownloadsErrorName.invalidArgument.error("parallel must be an unsigned integer (u)")
        }
        return Int(count)
    }

    private static func flag(_ value: DBusValue?, _ name: String) throws -> Bool {
        guard let value else { return false }
        guard case .boolean(let flag) = value.variantValue ?? value else {
            throw DownloadsErrorName.invalidArgument.error("\(name) must be a boolean (b)")
        }
        return flag
    }

    /// The groups `caller` sees, of `session` ("" for every session).
    func listGroups(_ session: String, caller: Caller) -> [ObjectPath] {
        engine.groups(owner: caller.uid)
            .filter {
                caller.sees(owner: $0.owner, app: $0.app)
                    && (session.isEmpty || SessionKey.shown($0.session) == session)
            }
            .map { DownloadsAPI.groupPath($0.id) }
    }

    /// The group a path names, if the caller may use it (another's answers as a missing one).
    func group(_ path: ObjectPath, for caller: Caller) throws -> DownloadGroupRecord {
        guard let id = DownloadsAPI.groupID(path), let group = engine.group(id),
            caller.sees(owner: group.owner, app: group.app)
        else {
            throw DownloadsErrorName.notFound.error("no group at \(path)")
        }
        return group
    }

    func groupSubtree() throws -> ExportedSubtree {
        func handler(
            _ body: @escaping @Sendable (DownloadGroupRecord) async throws -> [DBusValue]
        ) -> ExportedInterface.MethodHandler {
            { [self] call in
                do {
                    return try await body(try group(call.path, for: try await caller(call)))
                } catch {
                    throw ServiceError.reply(for: error)
                }
            }
        }
        let methods: [String: ExportedInterface.MethodHandler] = [
            "Pause": handler { [self] group in
                try requireRoom(forNewWork: false)
                try await engine.pauseGroup(group.id)
                await engine.eventsDelivered(ofGroup: group.id)
                return [.bytes(try engine.groupResumeData(group.id))]
            },
            "Resume": handler { [self] group in
                try requireRoom()
                forgetGroupEnd(group.id)
                try engine.resumeGroup(group.id)
                await engine.eventsDelivered(ofGroup: group.id)
                return []
            },
            "Cancel": handler { [self] group in
                try requireRoom(forNewWork: false)
                try await engine.cancelGroup(group.id)
                await engine.eventsDelivered(ofGroup: group.id)
                return []
            },
        ]
        _ = try ExportedInterface(DownloadsInterfaces.group, methods: methods)
        return ExportedSubtree(
            path: DownloadsAPI.groupsPath,
            find: { [self] path in
                guard let id = DownloadsAPI.groupID(path) else { return nil }
                guard
                    let interface = try? ExportedInterface(
                        DownloadsInterfaces.group, methods: methods,
                        getProperty: { [self] name in
                            guard let property = GroupProperty(rawValue: name), let group = engine.group(id) else {
                                return nil
                            }
                            return GroupSummary(group, engine.groupTasks(id)).value(property)
                        },
                        readAll: { [self] in
                            engine.group(id).map { GroupSummary($0, engine.groupTasks(id)).properties }
                        })
                else { return nil }
                return try? ExportedObject(path: path, interfaces: [interface]) { [self] call in
                    do {
                        _ = try group(call.path, for: try await caller(call))
                    } catch {
                        throw ServiceError.reply(for: error)
                    }
                }
            },
            enumerate: { [self] call in
                let caller = try await caller(call)
                return engine.groups(owner: caller.uid).filter { caller.sees(owner: $0.owner, app: $0.app) }.map {
                    String($0.id)
                }
            }
        )
    }

    // MARK: Signals

    /// Whether a task's own signals go out: not for a file of a group that asked for none.
    func sendsTaskSignals(_ task: TaskSnapshot) -> Bool {
        let group = task.record.group
        guard group != 0 else { return true }
        return engine.group(group)?.taskSignals ?? true
    }

    /// After an event of a file of a group: the group's progress (throttled as a task's), and its
    /// end, once.
    func groupEvent(_ task: TaskSnapshot, ended: Bool) {
        let id = task.record.group
        guard id != 0, let group = engine.group(id) else { return }
        let now = NIODeadline.now().uptimeNanoseconds
        let interval = UInt64(max(0, configuration.groupProgressInterval) * 1e9)
        // A file's end may end the group only when none of its files is active any more (counted
        // by the engine): otherwise it is progress like any other, throttled. Each end reading
        // every file of a group of thousands made a thousand files cost a million reads.
        let mayEnd = ended && engine.activeFiles(ofGroup: id) == 0
        let progressDue = state.withLockedValue { state -> Bool in
            // The group's end went out (its summary reads the engine, ahead of the events): the
            // other files' ends tell nothing new.
            guard !state.groupEnds.contains(id) else { return false }
            guard mayEnd || now - state.groupProgressAt[id, default: 0] >= interval else { return false }
            state.groupProgressAt[id] = now
            return true
        }
        // The summary reads every file of the group: only when something goes out (a file's
        // end always does), not at every progress event of every file.
        guard progressDue else { return }
        let summary = GroupSummary(group, engine.groupTasks(id))
        let path = DownloadsAPI.groupPath(id)
        emit(
            .groupProgress(
                group: path, bytesWritten: summary.bytesWritten, bytesExpected: summary.bytesExpected,
                filesFinished: UInt32(clamping: summary.finished), files: UInt32(clamping: summary.tasks.count)
            ), owner: group.owner, app: group.app)
        guard mayEnd else { return }
        let end: ManagerSignal?
        switch summary.state {
        case .finished: end = .groupFinished(group: path)
        case .failed:
            let failed = summary.tasks.first { $0.state == .failed }
            let name = (failed?.record.errorName).flatMap(DownloadsErrorName.init(rawValue:)) ?? .failed
            end = .groupFailed(
                group: path, errorName: name.fullName,
                message: failed.map {
                    "file \($0.id) failed: \($0.record.errorMessage ?? "")"
                } ?? "a file failed")
        default: end = nil
        }
        guard let end, state.withLockedValue({ $0.groupEnds.insert(id).inserted }) else { return }
        emit(end, owner: group.owner, app: group.app)
    }

    /// A resumed group may end again.
    func forgetGroupEnd(_ id: UInt64) {
        _ = state.withLockedValue { $0.groupEnds.remove(id) }
    }
}
