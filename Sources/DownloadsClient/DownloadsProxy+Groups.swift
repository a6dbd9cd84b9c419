import DBus
import DownloadsAPI
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Groups: many files as one job (`StartGroup`, the group objects, `ResumeGroupWithData`).
extension DownloadsProxy {
    /// How a group behaves beyond its files' options.
    public struct GroupOptions: Sendable {
        /// Publish no file until every one is complete, then all together.
        public var atomic = false
        /// The group's files send their own signals too (`Progress`, `Finished`, …).
        public var taskSignals = false
        /// At most this many files at once (nil: as the service's limits allow).
        public var parallel: UInt32?
        public init(atomic: Bool = false, taskSignals: Bool = false, parallel: UInt32? = nil) {
            self.atomic = atomic
            self.taskSignals = taskSignals
            self.parallel = parallel
        }
    }

    /// `StartGroup`: the files, each with its own options over `options` (the group's: session,
    /// title, priority…). Inside a sandbox the destinations go below one directory descriptor
    /// (`StartGroupAt`), as the service asks of sandboxed apps. Without a `proxy` option, each
    /// file gets the caller's session's proxy for its URL, as `start` does. Returns the group and its tasks.
    public func startGroup(
        _ files: [DownloadGroupFile], options: TaskOptions = TaskOptions(), group: GroupOptions = GroupOptions()
    ) async throws -> (group: ObjectPath, tasks: [ObjectPath]) {
        // Each file without a proxy of its own (or the group's) gets its user's session's proxy, as `start` does.
        var files = files
        if options.proxy == nil, let proxies {
            for index in files.indices where files[index].options.proxy == nil {
                let file = files[index]
                if let target = file.url.isEmpty ? Self.metalinkURL(file.options) : file.url {
                    files[index].options.proxy = await proxies.proxy(for: target)
                }
            }
        }
        var dictionary = options.dictionary
        dictionary["atomic"] = .boolean(group.atomic)
        dictionary["task_signals"] = .boolean(group.taskSignals)
        if let parallel = group.parallel { dictionary["parallel"] = .uint32(parallel) }
        if Self.isSandboxed {
            let (directory, names) = try Self.openCommonDirectory(files.map(\.destination))
            let entries = zip(files, names).map { file, name in (file.url, name, file.options) }
            return try Self.groupReply(
                try await manager("StartGroupAt", [.unixFD(directory), Self.entries(entries), .vardict(dictionary)]))
        }
        let entries = files.map { ($0.url, $0.destination, $0.options) }
        return try Self.groupReply(try await manager("StartGroup", [Self.entries(entries), .vardict(dictionary)]))
    }

    public func listGroups(session: String = "") async throws -> [ObjectPath] {
        try await manager("ListGroups", [.string(session)]).first?.objectPathArrayValue ?? []
    }

    public func groupStatus(_ group: ObjectPath) async throws -> DownloadGroupStatus {
        let reply = try await call(
            group, InterfaceDescription.properties.name, "GetAll", [.string(DownloadsInterfaces.group.name)])
        guard let properties = reply.first?.vardictValue else {
            throw DownloadsClientError(name: BusError.invalidArgsName, message: "the service sent no properties")
        }
        return try DownloadGroupStatus(properties: properties)
    }

    /// Pauses every file of the group; returns the group's resume data.
    public func pauseGroup(_ group: ObjectPath) async throws -> Data {
        Data(try await call(group, DownloadsInterfaces.group.name, "Pause", []).first?.bytesValue ?? [])
    }

    public func resumeGroup(_ group: ObjectPath) async throws {
        _ = try await call(group, DownloadsInterfaces.group.name, "Resume", [])
    }

    public func cancelGroup(_ group: ObjectPath) async throws {
        _ = try await call(group, DownloadsInterfaces.group.name, "Cancel", [])
    }

    /// `ResumeGroupWithData`: the group the data came from carries on (or a new one takes its files over).
    public func resumeGroup(
        resumeData: Data, options: TaskOptions = TaskOptions()
    ) async throws -> (group: ObjectPath, tasks: [ObjectPath]) {
        try Self.groupReply(
            try await manager("ResumeGroupWithData", [.bytes(Array(resumeData)), .vardict(options.dictionary)]))
    }

    private static func entries(_ files: [(String, String, TaskOptions)]) -> DBusValue {
        .array(
            element: .structure([.string, .string, .dictionary(key: .string, value: .variant)]),
            files.map { .structure([.string($0.0), .string($0.1), .vardict($0.2.dictionary)]) }
        )
    }

    private static func groupReply(_ reply: [DBusValue]) throws -> (group: ObjectPath, tasks: [ObjectPath]) {
        guard reply.count == 2, let group = reply[0].objectPathValue, let tasks = reply[1].objectPathArrayValue else {
            throw DownloadsClientError(name: BusError.invalidArgsName, message: "the service sent no group")
        }
        return (group, tasks)
    }

    /// The deepest directory every destination lies in (a destination that is a directory
    /// counts as itself), opened, and each destination's name relative to it ("" for the
    /// directory itself: the server's name).
    static func openCommonDirectory(_ destinations: [String]) throws -> (UnixFD, [String]) {
        func trimmed(_ path: String) -> String {
            path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        }
        func isDirectory(_ path: String) -> Bool {
            var info = stat()
            return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
        }
        let paths = destinations.map(trimmed)
        let directories = paths.map { path -> [Substring] in
            let parts = path.split(separator: "/")
            return isDirectory(path) ? parts : Array(parts.dropLast())
        }
        var common = directories.first ?? []
        for parts in directories.dropFirst() {
            common = Array(zip(common, parts).prefix { $0 == $1 }.map(\.0))
        }
        let base = "/" + common.joined(separator: "/")
        let fd = Glibc.open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            throw DownloadsClientError(
                name: DownloadsErrorName.fileError.fullName,
                message: "cannot open \(base): \(String(cString: strerror(errno)))")
        }
        let names = paths.map { path -> String in
            let parts = path.split(separator: "/")
            return parts.dropFirst(common.count).joined(separator: "/")
        }
        return (UnixFD(owning: fd), names)
    }
}

extension DownloadsProxy {
    /// A group's object path from its id or its path.
    public static func groupPath(_ text: String) -> ObjectPath? {
        if let id = UInt64(text) { return DownloadsAPI.groupPath(id) }
        guard let path = try? ObjectPath(text), DownloadsAPI.groupID(path) != nil else { return nil }
        return path
    }
}
