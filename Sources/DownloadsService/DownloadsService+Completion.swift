import CrashPoints
import DBus
import DownloadEngine
import DownloadModel
import DownloadStore
import DownloadsAPI

/// The Linux handleEventsForBackgroundURLSession: durable completion calls to registered clients.
extension DownloadsService {
    func registerCompletionHandler(_ call: MethodCall, caller: Caller) async throws {
        let owner = caller.uid
        guard let name = call.arguments[0].stringValue else {
            throw DownloadsErrorName.invalidArgument.error("session must be a string")
        }
        let session = SessionID(
            owner: owner, name: SessionKey.stored(try TaskOptions.checkedSession(name), app: caller.app))
        guard let object = call.arguments[1].objectPathValue else {
            throw DownloadsErrorName.invalidArgument.error("client_object must be an object path")
        }
        let options = call.arguments[2].vardictValue ?? [:]
        var busName: String?
        var challenges: Set<String> = []
        var challengeTimeout = CompletionHandler.defaultChallengeTimeout
        for (key, value) in options {
            switch key {
            case "bus_name": break
            case "challenges":
                challenges = try Self.checkedChallengeKinds(value)
                continue
            case "challenge_timeout":
                guard case .uint32(let seconds) = value, (1...3600).contains(seconds) else {
                    throw DownloadsErrorName.invalidArgument.error("challenge_timeout must be 1–3600 seconds (u)")
                }
                challengeTimeout = seconds
                continue
            default:
                throw DownloadsErrorName.invalidArgument.error(
                    "unknown option '\(LogText.escaped(key))' (known: bus_name, challenges, challenge_timeout)")
            }
            guard case .string(let name) = value, !name.isEmpty, !name.hasPrefix(":") else {
                throw DownloadsErrorName.invalidArgument.error("bus_name must be a well-known name (s)")
            }
            // What Flatpak lets an app own: its id and the names below it. Any other name would
            // have the service wake (or call) some other app for this one.
            if caller.isSandboxed, name != caller.app, !name.hasPrefix(caller.app + ".") {
                throw DownloadsErrorName.accessDenied.error(
                    "a sandboxed app's bus_name must be its app id \(caller.app) or a name below it, not '\(name)'"
                )
            }
            guard try await connection.nameOwner(name) == call.sender else {
                throw DownloadsErrorName.accessDenied.error("bus_name '\(name)' is not owned by the calling connection")
            }
            busName = name
        }
        if try store.handler(session) == nil {
            if try store.handlerCount(owner: owner) >= configuration.maxHandlersPerUser {
                throw DownloadsErrorName.quotaExceeded.error(
                    "you have \(configuration.maxHandlersPerUser) completion handlers")
            }
            if caller.isSandboxed,
                try store.handlerCount(owner: owner, sessionPrefix: SessionKey.stored("", app: caller.app))
                    >= configuration.maxHandlersPerApp
            {
                throw DownloadsErrorName.quotaExceeded.error(
                    "this app has \(configuration.maxHandlersPerApp) completion handlers")
            }
        }
        try requireRoom()
        let handler = CompletionHandler(
            owner: owner, session: session.name, connection: call.sender, objectPath: object.rawValue, busName: busName,
            busID: try await connection.busID(), challenges: challenges, challengeTimeout: challengeTimeout
        )
        // A write waits for the database (another write, a slow sync): off the pool every call runs on.
        try await BlockingWork.run { [store] in try store.registerHandler(handler) }
        logger.info(
            "completion handler for \(LogText.escaped(session.shownDescription)): \(busName ?? call.sender) \(object)")
        if try store.isPending(session) {
            Task { await self.deliverCompletion(session) }
        }
    }

    /// The engine says the session has nothing queued, running or retrying (on a task's event
    /// queue, after the store saved that task's end).
    func sessionBecameIdle(_ session: SessionID) {
        guard !engine.hasActiveTasks(in: session) else { return }
        CrashPoint.endedUnreported.reached()
        do {
            let (transition, pending) = try store.sessionBecameIdle(session)
            if transition {
                // An app's session to that app alone: its name says nothing of which app's it is,
                // and a host client of the user may have a session of the same name.
                let app = SessionKey.app(session.name)
                emit(
                    .eventsFinished(session: SessionKey.shown(session.name)), owner: session.owner, app: app,
                    appOnly: !app.isEmpty)
            }
            if pending { Task { await self.deliverCompletion(session) } }
        } catch {
            logger.error("store: \(error)")
        }
    }

    /// The unique name to call for `handler`, checked to belong to the handler's owner: the
    /// owner of its well-known name (started by activation when nobody has it), or the
    /// connection that registered, only on the bus instance it registered on. nil: nobody
    /// (fit) to call now; the call stays pending.
    func receiver(of handler: CompletionHandler) async throws -> String? {
        var unique: String?
        if let name = handler.busName {
            unique = try await connection.nameOwner(name)
            if unique == nil {
                try? await connection.startService(name)
                unique = try await connection.nameOwner(name)
            }
        } else if let recorded = handler.busID, recorded == (try await connection.busID()) {
            unique = handler.connection
        }
        guard let unique else { return nil }
        guard let credentials = try? await connection.credentials(of: unique), credentials.uid == handler.owner else {
            logger.warning("completion handler of uid \(handler.owner): \(unique) belongs to another user; not called")
            return nil
        }
        // And to the session's app: an app's session calls that app, the host's a host client
        // (a row an earlier version stored under the plain name for an app is never called).
        let app = SessionKey.app(handler.session)
        guard let receiver = try? await caller(unique, credentials: credentials), receiver.app == app else {
            logger.warning(
                "completion handler of \(LogText.escaped(SessionID(owner: handler.owner, name: handler.session).shownDescription)): \(unique) is not \(app.isEmpty ? "a host client" : "app " + LogText.escaped(app)); not called"
            )
            return nil
        }
        return unique
    }

    /// Calls the handler; the reply is the completion handler being called, and only then is the
    /// pending call removed. No reply, an error, or nobody there: it stays pending.
    func deliverCompletion(_ session: SessionID) async {
        let claimed = state.withLockedValue { $0.delivering.insert(session).inserted }
        guard claimed else { return }
        defer { _ = state.withLockedValue { $0.delivering.remove(session) } }
        do {
            guard try store.isPending(session), let handler = try store.handler(session),
                !engine.hasActiveTasks(in: session)
            else { return }
            guard let receiver = try await receiver(of: handler) else { return }
            _ = try await callClient(
                handler, receiver: receiver, method: "HandleEventsForBackgroundSession",
                arguments: [.string(SessionKey.shown(session.name))], timeout: configuration.completionTimeout)
            CrashPoint.completionAnswered.reached()
            try await BlockingWork.run { [store] in try store.completionDelivered(session) }
            logger.info("completion handler of \(LogText.escaped(session.shownDescription)) called")
        } catch {
            logger.info("completion call for \(LogText.escaped(session.shownDescription)) stays pending: \(error)")
        }
    }
}

extension SessionID {
    /// For the log: the name as its caller gave it, the app and the uid.
    var shownDescription: String {
        let app = SessionKey.app(name)
        return "session '\(SessionKey.shown(name))' of uid \(owner)" + (app.isEmpty ? "" : " (app \(app))")
    }
}
