import DBus
import DownloadStore

/// The Linux handleEventsForBackgroundURLSession: durable completion calls to registered clients.
extension DownloadsService {
    func registerCompletionHandler(_ call: MethodCall, owner: UInt32) async throws {
        let session = try StartRequest.session(call.arguments[0])
        guard let object = call.arguments[1].objectPathValue else { throw ServiceError.invalidArgument("client_object must be an object path") }
        let options = call.arguments[2].vardictValue ?? [:]
        var busName: String?
        for (key, value) in options {
            guard key == "bus_name" else {
                throw ServiceError.invalidArgument("unknown option '\(key)' (known: bus_name)")
            }
            guard case .string(let name) = value, !name.isEmpty, !name.hasPrefix(":") else {
                throw ServiceError.invalidArgument("bus_name must be a well-known name (s)")
            }
            guard try await connection.nameOwner(name) == call.sender else {
                throw ServiceError.accessDenied("bus_name '\(name)' is not owned by the calling connection")
            }
            busName = name
        }
        try store.registerHandler(CompletionHandler(
            owner: owner, session: session, connection: call.sender, objectPath: object.rawValue, busName: busName
        ))
        logger.info("completion handler for session '\(session)' of uid \(owner): \(busName ?? call.sender) \(object)")
        let key = SessionKey(owner: owner, name: session)
        if try store.isPending(owner: owner, session: session) {
            Task { await self.deliverCompletion(key) }
        }
    }

    /// The engine says the session has nothing queued, running or retrying.
    func sessionBecameIdle(_ key: SessionKey) async {
        guard !engine.hasActiveTasks(in: key.engineKey) else { return }
        do {
            let (transition, pending) = try store.sessionBecameIdle(owner: key.owner, session: key.name)
            if transition { emit("EventsFinished", owner: key.owner, [.string(key.name)]) }
            if pending { await deliverCompletion(key) }
        } catch {
            logger.error("store: \(error)")
        }
    }

    /// Calls the handler; the reply is the completion handler being called, and only then is the
    /// pending call removed. No reply, an error, or nobody there: it stays pending.
    func deliverCompletion(_ key: SessionKey) async {
        let claimed = state.withLockedValue { $0.delivering.insert(key).inserted }
        guard claimed else { return }
        defer { _ = state.withLockedValue { $0.delivering.remove(key) } }
        do {
            guard try store.isPending(owner: key.owner, session: key.name),
                  let handler = try store.handler(owner: key.owner, session: key.name),
                  !engine.hasActiveTasks(in: key.engineKey)
            else { return }
            let path = try ObjectPath(handler.objectPath)
            _ = try await connection.call(
                destination: handler.busName ?? handler.connection, path: path,
                interface: DownloadsInterfaces.client.name, method: "HandleEventsForBackgroundSession",
                arguments: [.string(key.name)], timeout: configuration.completionTimeout, autoStart: handler.busName != nil
            )
            try store.completionDelivered(owner: key.owner, session: key.name)
            logger.info("completion handler of session '\(key.name)' (uid \(key.owner)) called")
        } catch {
            logger.info("completion call for session '\(key.name)' (uid \(key.owner)) stays pending: \(error)")
        }
    }
}
