#if canImport(Glibc)
import Glibc
#endif

/// A file descriptor carried in a D-Bus message (`h`). It owns its descriptor and closes it when
/// released; libdbus duplicates descriptors both when sending and when receiving.
public final class UnixFD: Sendable, Hashable, CustomStringConvertible {
    public let fd: Int32

    /// Takes ownership of `fd`.
    public init(owning fd: Int32) {
        self.fd = fd
    }

    /// Duplicates `fd`; the caller keeps its own.
    public convenience init(duplicating fd: Int32) throws {
        let copy = dup(fd)
        guard copy >= 0 else { throw BusError.failed("dup(\(fd)) failed: errno \(errno)") }
        self.init(owning: copy)
    }

    deinit { close(fd) }

    public static func == (lhs: UnixFD, rhs: UnixFD) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
    public var description: String { "fd \(fd)" }
}
