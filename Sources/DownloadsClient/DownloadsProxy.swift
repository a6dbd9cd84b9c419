import DBus
import DownloadsAPI
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// The service's methods as Swift calls on one bus connection; every error is a
/// `DownloadsClientError`. `DownloadSession` is built on it; tools use it directly.
public final class DownloadsProxy: Sendable {
    /// Where the service is.
    public enum Bus: Sendable, Hashable {
        /// The user's session bus (a per-user daemon).
        case session
        /// The system bus (the system service, every user).
        case system
        /// A bus at a D-Bus address (tests, private buses).
        case address(String)

        var connectionBus: Connection.Bus {
            switch self {
            case .session: return .session
            case .system: return .system
            case .address(let address): return .address(address)
            }
        }
    }

    public let connection: Connection
    /// Resolves the caller's proxy for each `start` that names none (nil: never; the daemon's
    /// own setting applies).
    public let proxies: ProxyResolver?

    public init(connection: Connection, proxies: ProxyResolver? = ProxyResolver()) {
        self.connection = connection
        self.proxies = proxies
    }

    /// Connects to `bus`. `resolvingProxies`: each `start` without a `proxy` option sends the
    /// proxy of the caller's session for its URL (`ProxyResolver`).
    public static func connect(_ bus: Bus, resolvingProxies: Bool = true) async throws -> DownloadsProxy {
        do {
            return DownloadsProxy(
                connection: try await Connection.open(bus.connectionBus),
                proxies: resolvingProxies ? ProxyResolver() : nil)
        } catch {
            throw DownloadsClientError.wrap(error)
        }
    }

    public func close() {
        connection.close()
        if let proxies { Task { await proxies.close() } }
    }

    func manager(_ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await call(DownloadsAPI.managerPath, DownloadsInterfaces.manager.name, method, arguments)
    }

    func call(
        _ path: ObjectPath, _ interface: String, _ method: String, _ arguments: [DBusValue]
    ) async throws -> [DBusValue] {
        do {
            return try await connection.call(
                destination: DownloadsAPI.busName, path: path, interface: interface, method: method,
                arguments: arguments
            )
        } catch {
            throw DownloadsClientError.wrap(error)
        }
    }

    func path(_ reply: [DBusValue]) throws -> ObjectPath {
        guard let path = reply.first?.objectPathValue else {
            throw DownloadsClientError(name: BusError.invalidArgsName, message: "the service sent no task path")
        }
        return path
    }

    /// The URL a Start with a Metalink document (its bytes, or its path, read here) and no URL
    /// would download from: the one the session's proxy is asked for.
    static func metalinkURL(_ options: TaskOptions) -> String? {
        if let bytes = options.metalink { return MetalinkPrimaryURL.find(in: bytes) }
        guard let path = options.metalinkPath, let data = FileManager.default.contents(atPath: path) else { return nil }
        return MetalinkPrimaryURL.find(in: Array(data))
    }

    /// Starts a download; without a `proxy` option, the caller's session's proxy for `url` (or,
    /// without one, for the first URL of its Metalink document) is sent. Inside a sandbox (a
    /// Flatpak or a Snap) the destination goes as a descriptor (`StartAt`), as the service asks
    /// of sandboxed apps: an app using this client needs no change.
    public func start(url: String, destination: String, options: TaskOptions = TaskOptions()) async throws -> ObjectPath
    {
        var options = options
        if options.proxy == nil, let proxies, let target = url.isEmpty ? Self.metalinkURL(options) : url {
            options.proxy = await proxies.proxy(for: target)
        }
        if Self.isSandboxed {
            if let document = options.metalinkPath {
                // Read here, with the app's own view of its files; the service reads no path for it.
                guard let bytes = FileManager.default.contents(atPath: document) else {
                    throw DownloadsClientError(
                        name: DownloadsErrorName.invalidArgument.fullName, message: "cannot read \(document)")
                }
                options.metalink = Array(bytes)
                options.metalinkPath = nil
            }
            let (directory, name) = try Self.open(destination)
            return try await start(url: url, at: directory, name: name, options: options)
        }
        return try path(try await manager("Start", [.string(url), .string(destination), .vardict(options.dictionary)]))
    }

    /// `StartAt`: the destination is `directory` (an open directory: `name` is created in it, ""
    /// for the server's name; or a regular file open for writing, `name` "").
    public func start(
        url: String, at directory: UnixFD, name: String, options: TaskOptions = TaskOptions()
    ) async throws -> ObjectPath {
        try path(
            try await manager(
                "StartAt", [.string(url), .unixFD(directory), .string(name), .vardict(options.dictionary)]))
    }

    /// Whether this process runs in a sandbox whose apps the service tells apart (the same
    /// signs xdg-desktop-portal reads: Flatpak's `/.flatpak-info`, a snap's `$SNAP`).
    public static var isSandboxed: Bool {
        access("/.flatpak-info", F_OK) == 0 || getenv("SNAP") != nil
    }

    /// A destination path as `StartAt` takes it: an existing directory itself, else its
    /// directory and the last component.
    static func open(_ destination: String) throws -> (UnixFD, String) {
        func failure(_ what: String) -> DownloadsClientError {
            DownloadsClientError(
                name: DownloadsErrorName.fileError.fullName,
                message: "cannot open \(what): \(String(cString: strerror(errno)))")
        }
        let path = destination.count > 1 && destination.hasSuffix("/") ? String(destination.dropLast()) : destination
        let itself = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if itself >= 0 { return (UnixFD(owning: itself), "") }
        let slash = path.lastIndex(of: "/")
        let parent = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let fd = Glibc.open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw failure(parent) }
        return (UnixFD(owning: fd), name)
    }

    public func pause(_ task: ObjectPath) async throws -> Data {
        Data(try await manager("Pause", [.objectPath(task)]).first?.bytesValue ?? [])
    }

    public func resume(_ task: ObjectPath) async throws {
        _ = try await manager("Resume", [.objectPath(task)])
    }

    /// `SetURL`: the task carries on at `url`, keeping its bytes when the entity is the same.
    public func setURL(_ task: ObjectPath, url: String) async throws {
        _ = try await call(task, DownloadsInterfaces.task.name, "SetURL", [.string(url)])
    }

    /// The task's `Update`: what may change while it exists (`TaskOptions.updateKeys`).
    public func update(_ task: ObjectPath, options: TaskOptions) async throws {
        _ = try await call(task, DownloadsInterfaces.task.name, "Update", [.vardict(options.dictionary)])
    }

    public func cancel(_ task: ObjectPath) async throws {
        _ = try await manager("Cancel", [.objectPath(task)])
    }

    /// `ResumeWithData`; `options.destinationFD` gives the task a new descriptor to make its files below.
    public func resume(resumeData: Data, options: TaskOptions = TaskOptions()) async throws -> ObjectPath {
        try path(try await manager("ResumeWithData", [.bytes(Array(resumeData)), .vardict(options.dictionary)]))
    }

    /// The caller's tasks whose `metadata` has every key of `match` with that value (same type).
    public func findTasks(matching match: [String: DBusValue]) async throws -> [ObjectPath] {
        try await manager("FindTasks", [.vardict(match)]).first?.objectPathArrayValue ?? []
    }

    /// The caller's tasks (of one session, or all with "").
    public func listTasks(session: String = "") async throws -> [ObjectPath] {
        try await manager("ListTasks", [.string(session)]).first?.objectPathArrayValue ?? []
    }

    /// One page of `listTasks` (`ListTasksPage`): at most `limit` tasks with an id after `after`,
    /// in id order, and the `after` of the next page (0: none follows).
    public func listTasksPage(
        session: String = "", after: UInt64 = 0, limit: UInt32 = 1_000
    ) async throws -> (tasks: [ObjectPath], next: UInt64) {
        let reply = try await manager("ListTasksPage", [.string(session), .uint64(after), .uint32(limit)])
        return (reply.first?.objectPathArrayValue ?? [], reply.dropFirst().first?.uint64Value ?? 0)
    }

    public func registerCompletionHandler(
        session: String, object: ObjectPath, busName: String?, challenges: Set<String> = [],
        challengeTimeout: UInt32? = nil
    ) async throws {
        var options: [String: DBusValue] = [:]
        if let busName { options["bus_name"] = .string(busName) }
        if !challenges.isEmpty {
            options["challenges"] = .array(element: .string, challenges.sorted().map { .string($0) })
        }
        if let challengeTimeout { options["challenge_timeout"] = .uint32(challengeTimeout) }
        _ = try await manager("RegisterCompletionHandler", [.string(session), .objectPath(object), .vardict(options)])
    }

    public func status(_ task: ObjectPath) async throws -> DownloadTaskStatus {
        let reply = try await call(
            task, InterfaceDescription.properties.name, "GetAll", [.string(DownloadsInterfaces.task.name)])
        guard let properties = reply.first?.vardictValue else {
            throw DownloadsClientError(name: BusError.invalidArgsName, message: "the service sent no properties")
        }
        return try DownloadTaskStatus(properties: properties)
    }

    /// Every task of the caller (of one session, or all with ""), sorted by id: one
    /// `GetManagedObjects` call, not a `GetAll` a task (a thousand tasks listed in one round
    /// trip). The system service offers no ObjectManager (it would announce every user's tasks):
    /// there it is `ListTasks` and a `GetAll` a task, a task removed meanwhile skipped.
    public func statuses(session: String = "") async throws -> [DownloadTaskStatus] {
        let reply: [DBusValue]
        do {
            reply = try await call(
                DownloadsAPI.managerPath, InterfaceDescription.objectManager.name, "GetManagedObjects", [])
        } catch let error as DownloadsClientError
            where error.name == BusError.unknownInterfaceName || error.name == BusError.unknownMethodName
        {
            var statuses: [DownloadTaskStatus] = []
            for path in try await listTasks(session: session) {
                if let status = try? await status(path) { statuses.append(status) }
            }
            return statuses.sorted { $0.id < $1.id }
        }
        guard case .dictionary(_, _, let objects)? = reply.first else {
            throw DownloadsClientError(name: BusError.invalidArgsName, message: "the service sent no objects")
        }
        var statuses: [DownloadTaskStatus] = []
        statuses.reserveCapacity(objects.count)
        for object in objects {
            guard let path = object.key.objectPathValue, DownloadsAPI.taskID(path) != nil,
                case .dictionary(_, _, let interfaces) = object.value,
                let properties = interfaces.first(where: { $0.key.stringValue == DownloadsInterfaces.task.name })?.value
                    .vardictValue,
                let status = try? DownloadTaskStatus(properties: properties),
                session.isEmpty || status.session == session
            else { continue }
            statuses.append(status)
        }
        return statuses.sorted { $0.id < $1.id }
    }

    /// A task's object path from an id (`12`) or a path (`/org/example/Downloads/tasks/12`).
    public static func taskPath(_ text: String) -> ObjectPath? {
        if let id = UInt64(text) { return DownloadsAPI.taskPath(id) }
        guard let path = try? ObjectPath(text), DownloadsAPI.taskID(path) != nil else { return nil }
        return path
    }
}
