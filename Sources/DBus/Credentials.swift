/// Who is at the other end of a bus connection, as the bus daemon says (never from arguments).
public struct Credentials: Sendable, Hashable {
    public let uid: UInt32
    public let pid: UInt32?

    public init(uid: UInt32, pid: UInt32?) {
        self.uid = uid
        self.pid = pid
    }
}
