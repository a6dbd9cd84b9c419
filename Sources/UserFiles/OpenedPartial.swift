import FileIdentities
/// A partial file opened for reading and writing: the descriptor (the caller closes it), which
/// file it is, and whether it was just created (empty) rather than kept.
public struct OpenedPartial: Sendable {
    public var descriptor: Int32
    public var identity: FileIdentity
    public var created: Bool

    public init(descriptor: Int32, identity: FileIdentity, created: Bool) {
        self.descriptor = descriptor
        self.identity = identity
        self.created = created
    }
}
