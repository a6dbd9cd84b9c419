/// An error as D-Bus carries it: a name such as `org.freedesktop.DBus.Error.UnknownMethod` and a
/// readable message. Handlers throw it to reply with that name; calls throw it when the peer
/// answered with an error.
public struct BusError: Error, Hashable, Sendable, CustomStringConvertible {
    public let name: String
    public let message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { "\(name): \(message)" }

    // MARK: The standard org.freedesktop.DBus.Error names this layer replies with.

    public static let failedName = "org.freedesktop.DBus.Error.Failed"
    public static let invalidArgsName = "org.freedesktop.DBus.Error.InvalidArgs"
    public static let invalidSignatureName = "org.freedesktop.DBus.Error.InvalidSignature"
    public static let unknownObjectName = "org.freedesktop.DBus.Error.UnknownObject"
    public static let unknownInterfaceName = "org.freedesktop.DBus.Error.UnknownInterface"
    public static let unknownMethodName = "org.freedesktop.DBus.Error.UnknownMethod"
    public static let unknownPropertyName = "org.freedesktop.DBus.Error.UnknownProperty"
    public static let propertyReadOnlyName = "org.freedesktop.DBus.Error.PropertyReadOnly"
    public static let disconnectedName = "org.freedesktop.DBus.Error.Disconnected"
    public static let noReplyName = "org.freedesktop.DBus.Error.NoReply"
    public static let noMemoryName = "org.freedesktop.DBus.Error.NoMemory"
    public static let nameTakenName = "org.example.DBus.Error.NameTaken"
    public static let accessDeniedName = "org.freedesktop.DBus.Error.AccessDenied"
    /// Nobody owns the name called and the bus could not start anyone for it.
    public static let serviceUnknownName = "org.freedesktop.DBus.Error.ServiceUnknown"
    public static let nameHasNoOwnerName = "org.freedesktop.DBus.Error.NameHasNoOwner"
    /// The bus refused the message for a limit of its own (a connection's pending replies).
    public static let limitsExceededName = "org.freedesktop.DBus.Error.LimitsExceeded"

    public static func failed(_ message: String) -> BusError { BusError(name: failedName, message: message) }
    public static func invalidArgs(_ message: String) -> BusError { BusError(name: invalidArgsName, message: message) }
    public static func invalidSignature(_ message: String) -> BusError {
        BusError(name: invalidSignatureName, message: message)
    }
    public static func unknownObject(_ path: String) -> BusError {
        BusError(name: unknownObjectName, message: "No such object path '\(path)'")
    }
    public static func unknownInterface(_ interface: String, _ path: String) -> BusError {
        BusError(name: unknownInterfaceName, message: "Object '\(path)' has no interface '\(interface)'")
    }
    public static func unknownMethod(_ member: String, _ interface: String?, _ signature: String) -> BusError {
        BusError(
            name: unknownMethodName,
            message: "No such method '\(member)' with signature '\(signature)' in interface '\(interface ?? "(none)")'"
        )
    }
    public static func unknownProperty(_ name: String, _ interface: String) -> BusError {
        BusError(name: unknownPropertyName, message: "No such property '\(name)' in interface '\(interface)'")
    }
    public static func propertyReadOnly(_ name: String) -> BusError {
        BusError(name: propertyReadOnlyName, message: "Property '\(name)' is read-only")
    }
    public static func disconnected(_ message: String = "The connection is closed") -> BusError {
        BusError(name: disconnectedName, message: message)
    }
    public static func noMemory() -> BusError { BusError(name: noMemoryName, message: "Out of memory") }
    public static func nameTaken(_ name: String) -> BusError {
        BusError(name: nameTakenName, message: "The bus name '\(name)' is already owned by another connection")
    }

    /// Whether `name` is a syntactically valid D-Bus error (or interface) name.
    public static func isValidName(_ name: String) -> Bool {
        DBusNames.isValidDottedName(name)
    }
}
