import DBus
import DownloadsAPI
import Foundation
import LANShare

/// `ListShared` and `Unshare` (v1.5): the files a caller offers to the local network. Each
/// caller sees and withdraws its own: a host caller its user's, a sandboxed app its own app's
/// (another user's or app's file answers as one not shared, as a task does).
extension DownloadsService {
    func listShared(caller: Caller) -> DBusValue {
        configuration.sharing?.expire(at: Int64(Date().timeIntervalSince1970))
        let files = (configuration.sharing?.list(owner: caller.uid) ?? []).filter { Self.owns(caller, $0) }
        return .array(
            element: .dictionary(key: .string, value: .variant),
            files.map { file in
                .vardict([
                    "sha256": .string(file.sha256), "name": .string(file.name),
                    "size": .uint64(UInt64(max(0, file.size))),
                    "expires": .int64(file.expires), "shares": .uint32(file.shares),
                    "share_limit": .uint32(file.shareLimit), "task": .objectPath(DownloadsAPI.taskPath(file.task)),
                ])
            })
    }

    func unshare(_ sha256: String, caller: Caller) throws {
        guard PassimRequest.isSHA256(sha256) else {
            throw DownloadsErrorName.invalidArgument.error("sha256 must be 64 hexadecimal digits")
        }
        let hash = sha256.lowercased()
        guard let index = configuration.sharing,
            let file = index.list(owner: caller.uid).first(where: { $0.sha256 == hash }), Self.owns(caller, file),
            index.remove(hash, owner: caller.uid)
        else {
            throw DownloadsErrorName.notFound.error("no file of yours is shared as \(hash)")
        }
        logger.info("uid \(caller.uid) withdrew \(hash) from the local network")
    }

    private static func owns(_ caller: Caller, _ file: SharedFile) -> Bool {
        file.owner == caller.uid && (!caller.isSandboxed || file.app == caller.app)
    }
}
