/// A signal match rule (the subset this layer needs), sent to the bus with AddMatch and applied
/// locally to route each signal to its subscribers.
public struct MatchRule: Sendable, Hashable {
    public var sender: String?
    public var interface: String?
    public var member: String?
    public var path: ObjectPath?
    /// Only unicast signals sent to us (the bus's `destination` key).
    public var destination: String?

    public init(
        sender: String? = nil, interface: String? = nil, member: String? = nil,
        path: ObjectPath? = nil, destination: String? = nil
    ) {
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.destination = destination
    }

    public var text: String {
        var parts = ["type='signal'"]
        if let sender { parts.append("sender='\(sender)'") }
        if let interface { parts.append("interface='\(interface)'") }
        if let member { parts.append("member='\(member)'") }
        if let path { parts.append("path='\(path.rawValue)'") }
        if let destination { parts.append("destination='\(destination)'") }
        return parts.joined(separator: ",")
    }

    /// Local match. A well-known `sender` cannot be checked locally (messages carry unique names),
    /// so only unique names and the bus itself are compared.
    func matches(_ message: Message) -> Bool {
        guard message.kind == .signal else { return false }
        if let sender, sender.hasPrefix(":") || sender == "org.freedesktop.DBus", message.sender != sender {
            return false
        }
        if let interface, message.interface != interface { return false }
        if let member, message.member != member { return false }
        if let path, message.path != path { return false }
        if let destination, message.destination != destination { return false }
        return true
    }
}
