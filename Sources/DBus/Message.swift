import CDBus

/// A D-Bus message (owned reference to a `DBusMessage`).
public final class Message: @unchecked Sendable {
    /// The `DBusMessage *`. Owned: released in `deinit`.
    let raw: OpaquePointer

    public enum Kind: Sendable, Equatable {
        case methodCall, methodReturn, error, signal, invalid
    }

    /// Takes over one reference.
    init(owning raw: OpaquePointer) {
        self.raw = raw
    }

    /// Adds a reference.
    init(retaining raw: OpaquePointer) {
        dbus_message_ref(raw)
        self.raw = raw
    }

    deinit { dbus_message_unref(raw) }

    // MARK: Creating messages

    public static func methodCall(
        destination: String?, path: ObjectPath, interface: String?, member: String
    ) throws -> Message {
        if let interface { try Message.checkInterfaceName(interface) }
        try Message.checkMemberName(member)
        if let destination { try checkDestination(destination) }
        guard let raw = dbus_message_new_method_call(destination, path.rawValue, interface, member) else {
            throw BusError.noMemory()
        }
        return Message(owning: raw)
    }

    public static func signal(path: ObjectPath, interface: String, name: String) throws -> Message {
        try Message.checkInterfaceName(interface)
        try Message.checkMemberName(name)
        guard let raw = dbus_message_new_signal(path.rawValue, interface, name) else {
            throw BusError.noMemory()
        }
        return Message(owning: raw)
    }

    /// An empty method return for this call.
    public func methodReturn() throws -> Message {
        guard let raw = dbus_message_new_method_return(self.raw) else { throw BusError.noMemory() }
        return Message(owning: raw)
    }

    /// An error reply for this call. An invalid error name becomes `org.freedesktop.DBus.Error.Failed`.
    public func errorReply(_ error: BusError) throws -> Message {
        let name = BusError.isValidName(error.name) ? error.name : BusError.failedName
        let text = String(error.message.map { $0 == "\0" ? " " : $0 })
        guard let raw = dbus_message_new_error(self.raw, name, text) else { throw BusError.noMemory() }
        return Message(owning: raw)
    }

    // MARK: Header fields

    public var kind: Kind {
        switch dbus_message_get_type(raw) {
        case CDBUS_MESSAGE_TYPE_METHOD_CALL: return .methodCall
        case CDBUS_MESSAGE_TYPE_METHOD_RETURN: return .methodReturn
        case CDBUS_MESSAGE_TYPE_ERROR: return .error
        case CDBUS_MESSAGE_TYPE_SIGNAL: return .signal
        default: return .invalid
        }
    }

    public var sender: String? { dbus_message_get_sender(raw).map { String(cString: $0) } }
    public var destination: String? { dbus_message_get_destination(raw).map { String(cString: $0) } }
    public var path: ObjectPath? { dbus_message_get_path(raw).map { ObjectPath(unchecked: String(cString: $0)) } }
    public var interface: String? { dbus_message_get_interface(raw).map { String(cString: $0) } }
    public var member: String? { dbus_message_get_member(raw).map { String(cString: $0) } }
    public var errorName: String? { dbus_message_get_error_name(raw).map { String(cString: $0) } }
    public var signature: String { dbus_message_get_signature(raw).map { String(cString: $0) } ?? "" }
    public var serial: UInt32 { dbus_message_get_serial(raw) }
    public var replySerial: UInt32 { dbus_message_get_reply_serial(raw) }
    public var noReplyExpected: Bool { dbus_message_get_no_reply(raw) != 0 }

    /// Whether the bus may start the destination's service to deliver this call.
    public var autoStart: Bool {
        get { dbus_message_get_auto_start(raw) != 0 }
        set { dbus_message_set_auto_start(raw, newValue ? 1 : 0) }
    }

    public func setNoReply(_ noReply: Bool) { dbus_message_set_no_reply(raw, noReply ? 1 : 0) }

    public func setDestination(_ destination: String?) throws {
        guard dbus_message_set_destination(raw, destination) != 0 else { throw BusError.noMemory() }
    }

    // MARK: Validation of names (libdbus would only warn and refuse)

    static func checkInterfaceName(_ name: String) throws {
        guard BusError.isValidName(name) else {
            throw BusError.invalidArgs("'\(name)' is not a valid D-Bus interface name")
        }
    }

    static func checkDestination(_ destination: String) throws {
        guard !destination.isEmpty, !destination.utf8.contains(0) else {
            throw BusError.invalidArgs("invalid destination '\(destination)'")
        }
    }

    static func checkMemberName(_ name: String) throws {
        guard name.utf8.count <= 255, DBusNames.isValidElement(name.utf8) else {
            throw BusError.invalidArgs("'\(name)' is not a valid D-Bus member name")
        }
    }
}
