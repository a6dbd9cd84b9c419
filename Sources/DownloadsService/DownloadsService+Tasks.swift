import DBus
import DownloadEngine
import DownloadModel
import DownloadsAPI

/// The task objects at /org/example/Downloads/tasks/<id>, served by one subtree handler: an
/// object is built when it is called, so ten thousand tasks cost no more than their rows.
extension DownloadsService {
    func taskSubtree() throws -> ExportedSubtree {
        // Built once; each call finds its task by its path.
        func handler(
            asAdmin: Bool = false, _ body: @escaping @Sendable (TaskSnapshot) async throws -> [DBusValue]
        ) -> ExportedInterface.MethodHandler {
            { [self] call in
                do {
                    return try await body(
                        try await task(call.path, for: call, caller: try await caller(call), asAdmin: asAdmin))
                } catch {
                    throw ServiceError.reply(for: error)
                }
            }
        }
        let methods: [String: ExportedInterface.MethodHandler] = [
            "Pause": handler { [self] task in [.bytes(try await pause(task))] },
            "Resume": handler { [self] task in
                try await resume(task)
                return []
            },
            "Cancel": handler(asAdmin: true) { [self] task in
                try await cancel(task)
                return []
            },
            "GetReply": handler { [self] task in try await reply(of: task) },
            "GetMetrics": handler { [self] task in try await metrics(of: task) },
            "Update": { [self] call in
                do {
                    let task = try await task(call.path, for: call, caller: try await caller(call), asAdmin: false)
                    try await update(task, call.arguments.first ?? .vardict([:]))
                    return []
                } catch {
                    throw ServiceError.reply(for: error)
                }
            },
            "SetURL": { [self] call in
                do {
                    let task = try await task(call.path, for: call, caller: try await caller(call), asAdmin: false)
                    try await setURL(task, to: call.arguments.first?.stringValue ?? "")
                    return []
                } catch {
                    throw ServiceError.reply(for: error)
                }
            },
        ]
        // Validate the declaration against the handlers once, up front.
        _ = try ExportedInterface(DownloadsInterfaces.task, methods: methods)
        return ExportedSubtree(
            path: DownloadsAPI.tasksPath,
            find: { [self] path in
                guard let id = DownloadsAPI.taskID(path) else { return nil }
                guard
                    let interface = try? ExportedInterface(
                        DownloadsInterfaces.task, methods: methods,
                        getProperty: { [self] name in
                            guard let property = TaskProperty(rawValue: name), let snapshot = engine.snapshot(id) else {
                                return nil
                            }
                            return DownloadsService.value(property, of: snapshot)
                        },
                        readAll: { [self] in engine.snapshot(id).map(DownloadsService.properties(of:)) })
                else { return nil }
                // Every path of the form answers; one that is not the caller's task answers NotFound
                // (Introspect: UnknownObject), whether it is missing or another user's. An
                // administrator reads every task (the methods check for themselves).
                return try? ExportedObject(path: path, interfaces: [interface]) { [self] call in
                    do {
                        _ = try await task(call.path, for: call, caller: try await caller(call), asAdmin: true)
                    } catch {
                        throw ServiceError.reply(for: error)
                    }
                }
            },
            enumerate: { [self] call in
                let caller = try await caller(call)
                let all = await mayManageAll(call, caller: caller)
                return engine.snapshots().filter { all || caller.sees($0) }.map { String($0.id) }
            }
        )
    }

    /// Every property of a task at one moment (InterfacesAdded), from the one table below.
    static func properties(of snapshot: TaskSnapshot) -> [String: DBusValue] {
        Dictionary(uniqueKeysWithValues: TaskProperty.allCases.map { ($0.name, value($0, of: snapshot)) })
    }

    /// The one table of property values: Get, GetAll and PropertiesChanged all read it.
    static func value(_ property: TaskProperty, of snapshot: TaskSnapshot) -> DBusValue {
        let record = snapshot.record
        switch property {
        case .id: return .uint64(record.id)
        case .session: return .string(SessionKey.shown(record.session))
        case .url: return .string(record.url)
        case .destination:
            return .string(record.upload.map { $0.replyDestination ?? "" } ?? record.resolvedPath ?? record.destination)
        case .state: return .string(record.state.rawValue)
        case .bytesWritten: return .int64(snapshot.bytesWritten)
        case .bytesExpected: return .int64(record.expectedLength)
        case .error: return .string(record.errorName.map { DownloadsErrorName.prefix + $0 } ?? "")
        case .errorMessage: return .string(record.errorMessage ?? "")
        case .waitingFor: return .string(snapshot.waitingFor.rawValue)
        case .question:
            guard let asking = snapshot.asking else { return .vardict([:]) }
            return .vardict([
                "kind": .string(asking.kind.rawValue), "realm": .string(asking.realm), "host": .string(asking.host),
            ])
        case .desktopEntry: return .string(record.options.desktopEntry ?? "")
        case .background: return .boolean(record.options.background)
        case .addToRecent: return .boolean(record.options.addToRecent)
        case .title: return .string(record.options.title ?? "")
        case .description: return .string(record.options.taskDescription ?? "")
        case .metadata: return .vardict(record.options.metadata.mapValues(\.dbusValue))
        case .app: return .string(record.app)
        case .kind: return .string(record.kind)
        case .source: return .string(record.upload?.source ?? "")
        case .responseStatus:
            return .uint32(UInt32(clamping: record.upload?.responseStatus ?? record.responseStatus ?? 0))
        case .lastModified: return .int64(record.upload == nil ? record.lastModified ?? 0 : 0)
        case .bytesConfirmed: return .int64(record.upload == nil ? 0 : record.durableOffset)
        case .priority: return .string(record.options.priority.rawValue)
        case .maxBytesPerSecond: return .uint64(record.options.maxBytesPerSecond)
        case .speed: return .uint64(snapshot.speed)
        }
    }
}
