/// A signal match rule (the subset this layer needs), sent to the bus with AddMatch and applied
/// locally to route each signal to its subscribers.
public struct MatchRule: Sendable, Hashable {
    public var sender: String?
    public var interface: String?
    public var member: String?
    public var path: ObjectPath?
    /// Only unicast signals sent to us (the bus's `destination` key).
    public var destination: String?
    /// The first argument, a string (the bus's `arg0` key): `NameOwnerChanged` of one name.
    public var arg0: String?

    public init(
        sender: String? = nil, interface: String? = nil, member: String? = nil,
        path: ObjectPath? = nil, destination: String? = nil, arg0: String? = nil
    ) {
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.destination = destination
        self.arg0 = arg0
    }

    /// Whether `name` is a well-known name (`org.example.Downloads`), whose owner changes, rather
    /// than a unique name (`:1.42`) or the bus itself, which a message's sender field carries.
    static func isWellKnown(_ name: String) -> Bool {
        !name.hasPrefix(":") && name != "org.freedesktop.DBus"
    }

    public var text: String {
        var parts = ["type='signal'"]
        if let sender { parts.append("sender='\(sender)'") }
        if let interface { parts.append("interface='\(interface)'") }
        if let member { parts.append("member='\(member)'") }
        if let path { parts.append("path='\(path.rawValue)'") }
        if let destination { parts.append("destination='\(destination)'") }
        if let arg0 { parts.append("arg0='\(arg0)'") }
        return parts.joined(separator: ",")
    }

    /// Local match. A message carries its sender's unique name, so a well-known `sender` is
    /// compared with the unique name that owns it now (`owner`, which the connection follows
    /// through `NameOwnerChanged` as GDBus does): anyone may send a unicast signal to anyone on a
    /// bus, and one that names the service's interface is not the service's unless the service's
    /// owner sent it. Nobody owning the name matches nothing.
    func matches(_ message: Message, owner: (String) -> String?) -> Bool {
        guard message.kind == .signal else { return false }
        if let sender {
            let expected = Self.isWellKnown(sender) ? owner(sender) : sender
            guard let expected, message.sender == expected else { return false }
        }
        if let interface, message.interface != interface { return false }
        if let member, message.member != member { return false }
        if let path, message.path != path { return false }
        if let destination, message.destination != destination { return false }
        if let arg0 {
            guard let first = try? message.arguments().first?.stringValue, first == arg0 else { return false }
        }
        return true
    }
}
