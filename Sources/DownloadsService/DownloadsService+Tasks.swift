import DBus
import DownloadEngine

/// One object per task at /org/example/Downloads/tasks/<id> with `org.example.Downloads.Task`.
extension DownloadsService {
    func exportTask(_ id: UInt64) throws {
        func handler(_ body: @escaping @Sendable (UInt64) async throws -> [DBusValue]) -> ExportedInterface.MethodHandler {
            { [self] call in
                do {
                    let uid = try await caller(call)
                    return try await body(try task(call.path, for: uid))
                } catch {
                    throw ServiceError.reply(for: error)
                }
            }
        }
        let interface = try ExportedInterface(
            DownloadsInterfaces.task,
            methods: [
                "Pause": handler { [self] id in [.bytes(try await engine.pause(id))] },
                "Resume": handler { [self] id in
                    try engine.resume(id)
                    return []
                },
                "Cancel": handler { [self] id in
                    try await cancel(id)
                    return []
                },
            ],
            getProperty: { [self] name in
                guard let snapshot = engine.snapshot(id) else { return nil }
                return DownloadsService.property(name, of: snapshot)
            }
        )
        // Properties too: another user must not read a task's URL or destination.
        try connection.export(ExportedObject(path: DownloadsService.path(of: id), interfaces: [interface]) { [self] call in
            do {
                _ = try task(call.path, for: try await caller(call))
            } catch {
                throw ServiceError.reply(for: error)
            }
        })
    }

    static func property(_ name: String, of snapshot: TaskSnapshot) -> DBusValue? {
        let record = snapshot.record
        switch name {
        case "Id": return .uint64(record.id)
        case "Session": return .string(SessionKey(engineKey: record.session)?.name ?? record.session)
        case "URL": return .string(record.url)
        case "Destination": return .string(record.resolvedPath ?? record.destination)
        case "State": return .string(record.state.rawValue)
        case "BytesWritten": return .int64(snapshot.bytesWritten)
        case "BytesExpected": return .int64(record.expectedLength)
        case "Error": return .string(record.errorName.map(ServiceError.name) ?? "")
        case "ErrorMessage": return .string(record.errorMessage ?? "")
        default: return nil
        }
    }
}
