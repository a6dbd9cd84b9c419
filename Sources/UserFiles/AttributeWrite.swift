/// What became of the origin attributes asked for at a publish (`OriginAttributes`): a file
/// system that keeps no user attributes (`ENOTSUP`: a FAT stick, an ext4 mounted without
/// `user_xattr`, a tmpfs before Linux 6.6), or an attribute too long for the inode, leaves the
/// file without them and is no error of the download.
public enum AttributeWrite: Sendable, Equatable {
    /// None were asked for.
    case notAsked
    case written
    /// The errno of the first that failed, and that attribute's name (`OriginAttributes`).
    case refused(Int32, attribute: String)
}
