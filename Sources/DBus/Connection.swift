import CDBus
import Dispatch
import Logging
import NIOConcurrencyHelpers

/// A private connection to a message bus, driven by a `MainLoop` on its own serial queue.
/// Safe to use from any thread or task. Call `close()` when done.
public final class Connection: @unchecked Sendable {
    public enum Bus: Sendable, Hashable {
        /// `DBUS_SESSION_BUS_ADDRESS`.
        case session
        /// `DBUS_SYSTEM_BUS_ADDRESS`, or the well-known system bus socket.
        case system
        /// Any bus address, e.g. `unix:path=/tmp/bus`.
        case address(String)
    }

    /// The `DBusConnection *` (one reference owned).
    let raw: OpaquePointer
    let loop: MainLoop
    let logger: Logger
    /// Our unique name on the bus (`:1.42`).
    public let uniqueName: String

    struct Subscription: Sendable {
        let rule: MatchRule
        let handler: @Sendable (Message) -> Void
    }

    struct State {
        var objects = ObjectTable()
        var subscriptions: [UInt64: Subscription] = [:]
        var nextSubscriptionID: UInt64 = 1
        var credentials: [String: Credentials] = [:]
        var nameWatchInstalled = false
        /// Well-known senders of subscriptions, and their owners (`Connection+Bus`: `follow`).
        var followedNames: [String: FollowedName] = [:]
        var disconnectHandlers: [@Sendable () -> Void] = []
        var closed = false
        var disconnected = false
        /// Calls waiting for a reply; failed with `Disconnected` when the connection goes.
        var pendingReplies: [ObjectIdentifier: PendingReply] = [:]
        var incoming = IncomingCalls()
    }

    let state = NIOLockedValueBox(State())
    private let filterBox: FilterBox

    private static let threadsInitialised: Bool = dbus_threads_init_default() != 0

    /// Connects without blocking the caller's thread: the handshake runs on a serial queue of its
    /// own (libdispatch's overcommitting pool), not on `DispatchQueue.global()`, which on Linux is
    /// the pool Swift's tasks run on.
    public static func open(_ bus: Bus, logger: Logger = Logger(label: "dbus")) async throws -> Connection {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue(label: "org.example.Downloads.dbus.open").async {
                do {
                    continuation.resume(returning: try Connection(bus: bus, logger: logger))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Connects, blocking the current thread during the handshake.
    public init(bus: Bus, logger: Logger = Logger(label: "dbus")) throws {
        guard Connection.threadsInitialised else { throw BusError.failed("libdbus could not initialise threads") }
        let error = cdbus_error_new()
        defer { cdbus_error_free(error) }
        var connection: OpaquePointer?
        switch bus {
        case .session:
            connection = dbus_bus_get_private(DBUS_BUS_SESSION, error)
        case .system:
            connection = dbus_bus_get_private(DBUS_BUS_SYSTEM, error)
        case .address(let address):
            connection = dbus_connection_open_private(address, error)
            if let opened = connection, dbus_bus_register(opened, error) == 0 {
                dbus_connection_close(opened)
                dbus_connection_unref(opened)
                connection = nil
            }
        }
        guard let connection else {
            if let error, dbus_error_is_set(error) != 0 {
                throw BusError(
                    name: String(cString: cdbus_error_name(error)),
                    message: String(cString: cdbus_error_message(error))
                )
            }
            throw BusError.failed("could not connect to the bus")
        }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        self.raw = connection
        self.logger = logger
        self.uniqueName = dbus_bus_get_unique_name(connection).map { String(cString: $0) } ?? ""
        self.loop = MainLoop(connection: connection, label: "dbus.connection\(uniqueName)")
        self.filterBox = FilterBox()
        filterBox.connection = self
        let box = Unmanaged.passRetained(filterBox).toOpaque()
        guard
            dbus_connection_add_filter(
                connection,
                { _, message, data in
                    guard let message, let data,
                        let connection = Unmanaged<FilterBox>.fromOpaque(data).takeUnretainedValue().connection
                    else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
                    return connection.route(Message(retaining: message))
                },
                box,
                { data in
                    guard let data else { return }
                    Unmanaged<FilterBox>.fromOpaque(data).release()
                }
            ) != 0
        else {
            Unmanaged<FilterBox>.fromOpaque(box).release()
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            throw BusError.noMemory()
        }
        loop.install()
    }

    deinit {
        close()
        dbus_connection_unref(raw)
    }

    /// Closes the connection. Calls still waiting for a reply fail with `Disconnected`.
    public func close() {
        let first = state.withLockedValue { state -> Bool in
            guard !state.closed else { return false }
            state.closed = true
            return true
        }
        guard first else { return }
        filterBox.connection = nil
        // Stop the I/O thread first, so nothing handles a watch while closing frees it.
        loop.uninstall()
        dbus_connection_close(raw)
        failPendingReplies()
    }

    private func failPendingReplies() {
        let pending = state.withLockedValue { state in
            let pending = state.pendingReplies.values
            state.pendingReplies = [:]
            return pending
        }
        for reply in pending { reply.fail(BusError.disconnected()) }
    }

    /// Blocks until every queued message (replies, signals) is written to the bus.
    public func flush() {
        guard !state.withLockedValue({ $0.closed }) else { return }
        dbus_connection_flush(raw)
    }

    public var isConnected: Bool { dbus_connection_get_is_connected(raw) != 0 }

    /// Whether the peer accepts unix file descriptors in messages.
    public var canPassUnixFDs: Bool { dbus_connection_can_send_type(raw, CDBUS_TYPE_UNIX_FD) != 0 }

    /// Runs `handler` once when the connection to the bus is lost.
    public func onDisconnect(_ handler: @escaping @Sendable () -> Void) {
        let runNow = state.withLockedValue { state -> Bool in
            if state.disconnected { return true }
            state.disconnectHandlers.append(handler)
            return false
        }
        if runNow { handler() }
    }

    // MARK: Sending

    /// Queues a message for sending; it is written at once or as soon as the socket accepts it.
    public func send(_ message: Message) throws {
        guard !state.withLockedValue({ $0.closed }) else { throw BusError.disconnected() }
        guard dbus_connection_send(raw, message.raw, nil) != 0 else { throw BusError.noMemory() }
    }

    /// Emits a signal; with `destination`, as a unicast signal to that connection only.
    public func emitSignal(
        path: ObjectPath, interface: String, name: String, arguments: [DBusValue] = [], destination: String? = nil,
        signature: String? = nil
    ) throws {
        try send(
            Message.signal(
                path: path, interface: interface, name: name, destination: destination, arguments: arguments,
                signature: signature
            ))
    }

    /// Sends a method call and waits for its reply (a method return or an error, thrown as `BusError`).
    public func call(_ message: Message, timeout: Duration = .seconds(25)) async throws -> Message {
        guard !state.withLockedValue({ $0.closed }) else { throw BusError.disconnected() }
        let milliseconds = Int32(
            clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        var pendingCall: OpaquePointer?
        guard dbus_connection_send_with_reply(raw, message.raw, &pendingCall, milliseconds) != 0 else {
            throw BusError.noMemory()
        }
        guard let pendingCall else { throw BusError.disconnected() }
        // Our own reference while this function uses the pointer: a disconnect on another thread
        // may fail the reply (cancel + unref) between its registration and set_notify below,
        // which freed the pending call under us (a segfault when the bus dropped a client right
        // after an oversized send).
        dbus_pending_call_ref(pendingCall)
        defer { dbus_pending_call_unref(pendingCall) }
        let reply: Message = try await withCheckedThrowingContinuation { continuation in
            let pending = PendingReply(pendingCall, continuation) { [weak self] reply in
                _ = self?.state.withLockedValue { $0.pendingReplies.removeValue(forKey: ObjectIdentifier(reply)) }
            }
            let registered = state.withLockedValue { state -> Bool in
                guard !state.disconnected, !state.closed else { return false }
                state.pendingReplies[ObjectIdentifier(pending)] = pending
                return true
            }
            guard registered else {
                pending.fail(BusError.disconnected())
                return
            }
            let context = Unmanaged.passRetained(pending).toOpaque()
            let set = dbus_pending_call_set_notify(
                pendingCall,
                { call, data in
                    guard let data else { return }
                    Unmanaged<PendingReply>.fromOpaque(data).takeUnretainedValue().complete()
                },
                context,
                { data in
                    guard let data else { return }
                    Unmanaged<PendingReply>.fromOpaque(data).release()
                }
            )
            if set == 0 {
                Unmanaged<PendingReply>.fromOpaque(context).release()
                pending.fail(BusError.noMemory())
            } else if dbus_pending_call_get_completed(pendingCall) != 0 {
                // The reply was dispatched before the notify function was in place.
                pending.complete()
            }
        }
        if reply.kind == .error {
            let text = (try? reply.arguments().first?.stringValue) ?? nil
            if reply.errorName == BusError.noReplyName {
                logger.warning(
                    "no reply to \(message.interface ?? "").\(message.member ?? "") within the timeout; \(loop.diagnostics())"
                )
            }
            throw BusError(name: reply.errorName ?? BusError.failedName, message: text ?? "")
        }
        return reply
    }

    /// Calls a method and returns the reply's values.
    public func call(
        destination: String, path: ObjectPath, interface: String, method: String,
        arguments: [DBusValue] = [], timeout: Duration = .seconds(25), autoStart: Bool = true
    ) async throws -> [DBusValue] {
        let message = try Message.methodCall(destination: destination, path: path, interface: interface, member: method)
        message.autoStart = autoStart
        try message.append(arguments)
        return try await call(message, timeout: timeout).arguments()
    }

    // MARK: Routing incoming messages (on the loop's queue)

    func route(_ message: Message) -> DBusHandlerResult {
        switch message.kind {
        case .methodCall:
            handleMethodCall(message)
            return DBUS_HANDLER_RESULT_HANDLED
        case .signal:
            if message.interface == "org.freedesktop.DBus.Local", message.member == "Disconnected" {
                handleDisconnected()
                return DBUS_HANDLER_RESULT_HANDLED
            }
            deliverSignal(message)
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        default:
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
    }

    private func handleDisconnected() {
        let handlers = state.withLockedValue { state -> [@Sendable () -> Void] in
            state.disconnected = true
            let handlers = state.disconnectHandlers
            state.disconnectHandlers = []
            return handlers
        }
        logger.info("disconnected from the bus", metadata: ["unique-name": "\(uniqueName)"])
        failPendingReplies()
        for handler in handlers { handler() }
    }

    private func deliverSignal(_ message: Message) {
        let handlers = state.withLockedValue { state in
            state.subscriptions.values.filter { subscription in
                subscription.rule.matches(message) { state.followedNames[$0]?.owner }
            }.map(\.handler)
        }
        for handler in handlers { handler(message) }
    }
}

/// Holds the connection weakly for libdbus's filter callback, so a callback racing with the
/// connection's release finds nil instead of a dangling pointer.
private final class FilterBox: @unchecked Sendable {
    private let lock = NIOLock()
    private weak var _connection: Connection?

    var connection: Connection? {
        get { lock.withLock { _connection } }
        set { lock.withLock { _connection = newValue } }
    }
}

/// One outstanding method call: resumes its continuation exactly once.
final class PendingReply: @unchecked Sendable {
    private let lock = NIOLock()
    private var continuation: CheckedContinuation<Message, Error>?
    private let call: OpaquePointer
    private let onDone: @Sendable (PendingReply) -> Void

    init(
        _ call: OpaquePointer, _ continuation: CheckedContinuation<Message, Error>,
        onDone: @escaping @Sendable (PendingReply) -> Void
    ) {
        self.call = call
        self.continuation = continuation
        self.onDone = onDone
    }

    private func take() -> CheckedContinuation<Message, Error>? {
        let taken = lock.withLock {
            let taken = continuation
            continuation = nil
            return taken
        }
        if taken != nil { onDone(self) }
        return taken
    }

    func complete() {
        guard let continuation = take() else { return }
        let reply = dbus_pending_call_steal_reply(call)
        dbus_pending_call_unref(call)
        if let reply {
            continuation.resume(returning: Message(owning: reply))
        } else {
            continuation.resume(throwing: BusError(name: BusError.noReplyName, message: "no reply"))
        }
    }

    func fail(_ error: Error) {
        guard let continuation = take() else { return }
        dbus_pending_call_cancel(call)
        dbus_pending_call_unref(call)
        continuation.resume(throwing: error)
    }
}
