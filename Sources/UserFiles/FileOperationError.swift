#if canImport(Glibc)
import Glibc
#endif

/// Why a file operation done for a user failed, in words fit for that user.
public struct FileOperationError: Error, Sendable, CustomStringConvertible {
    public enum Kind: UInt8, Sendable {
        /// The target exists and may not be replaced.
        case exists = 1
        /// Any other failure (the message says which).
        case other = 2
        /// The helper did not answer or died; only this user's operations are affected.
        case helper = 3
    }

    public var kind: Kind
    public var code: Int32
    public var message: String

    public init(_ kind: Kind, code: Int32 = 0, _ message: String) {
        self.kind = kind
        self.code = code
        self.message = message
    }

    /// `what`, then the text of errno `code`.
    static func system(_ what: String, _ code: Int32 = errno) -> FileOperationError {
        FileOperationError(code == EEXIST ? .exists : .other, code: code, "\(what): \(String(cString: strerror(code)))")
    }

    public var description: String { message }
}
