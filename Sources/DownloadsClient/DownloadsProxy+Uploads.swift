import DBus
import DownloadsAPI
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Uploads through the proxy: `Upload` with the file's path, or, inside a sandbox, `UploadAt`
/// with the file opened here (the service reads no path for a sandboxed app); the reply.
extension DownloadsProxy {
    /// An upload's final response (`GetReply`).
    public struct Reply: Sendable, Hashable {
        public var status: UInt32
        /// Header names lower-cased.
        public var headers: [String: String]
        /// At most 1 MiB; empty when a `reply_destination` took it.
        public var body: [UInt8]
    }

    /// Sends the file `source` to `url` (`Upload`; `UploadAt` with the file opened here inside a
    /// sandbox, or always with `byDescriptor`). The session's proxy as for `start`.
    public func upload(
        url: String, source: String, options: TaskOptions = TaskOptions(), byDescriptor: Bool = false
    ) async throws -> ObjectPath {
        var options = options
        if options.proxy == nil, let proxies { options.proxy = await proxies.proxy(for: url) }
        guard Self.isSandboxed || byDescriptor else {
            return try path(try await manager("Upload", [.string(url), .string(source), .vardict(options.dictionary)]))
        }
        let fd = Glibc.open(source, O_RDONLY | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else {
            throw DownloadsClientError(
                name: DownloadsErrorName.fileError.fullName,
                message: "cannot open \(source): \(String(cString: strerror(errno)))"
            )
        }
        return try await upload(url: url, from: UnixFD(owning: fd), options: options)
    }

    /// `UploadAt`: the file behind `file`, a descriptor open for reading.
    public func upload(url: String, from file: UnixFD, options: TaskOptions = TaskOptions()) async throws -> ObjectPath
    {
        try path(try await manager("UploadAt", [.string(url), .unixFD(file), .vardict(options.dictionary)]))
    }

    /// The final response of an upload that ended (`WrongState` before).
    public func reply(_ task: ObjectPath) async throws -> Reply {
        let reply = try await call(task, DownloadsInterfaces.task.name, "GetReply", [])
        guard reply.count == 3, let status = reply[0].uint32Value else {
            throw DownloadsClientError(name: BusError.invalidArgsName, message: "the service sent no reply")
        }
        return Reply(status: status, headers: reply[1].stringDictValue ?? [:], body: reply[2].bytesValue ?? [])
    }
}
