/// A session of one user: the owner's uid and the session's name, two typed fields. Sessions
/// of different users never meet, even when their names are equal.
public struct SessionID: Hashable, Sendable, CustomStringConvertible {
    public var owner: UInt32
    public var name: String

    public init(owner: UInt32, name: String) {
        self.owner = owner
        self.name = name
    }

    public var description: String { "session '\(name)' of uid \(owner)" }
}
