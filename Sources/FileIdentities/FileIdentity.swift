/// Which file a descriptor or path is (device and inode): recorded when the service creates a
/// partial file, compared before it reuses or publishes one.
public struct FileIdentity: Sendable, Hashable, CustomStringConvertible {
    public var device: UInt64
    public var inode: UInt64

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    public var description: String { "\(device):\(inode)" }
}
