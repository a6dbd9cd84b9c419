/// An incoming method call as a handler sees it. The arguments already match the declared signature.
public struct MethodCall: Sendable {
    public let connection: Connection
    public let message: Message
    /// The caller's unique bus name (`:1.42`).
    public let sender: String
    public let path: ObjectPath
    public let interface: String
    public let member: String
    public let arguments: [DBusValue]

    /// The caller's uid and pid, asked of the bus.
    public func credentials() async throws -> Credentials {
        try await connection.credentials(of: sender)
    }
}
