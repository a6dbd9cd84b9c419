/// Who is at the other end of a bus connection, as the bus daemon says (never from arguments).
public struct Credentials: Sendable, Hashable {
    public let uid: UInt32
    public let pid: UInt32?
    /// The LSM label of the connection (`LinuxSecurityLabel`, e.g. AppArmor's `snap.NAME.APP
    /// (enforce)`), when the bus knows one.
    public let securityLabel: String?

    public init(uid: UInt32, pid: UInt32?, securityLabel: String? = nil) {
        self.uid = uid
        self.pid = pid
        self.securityLabel = securityLabel
    }
}
