import DBus
import DownloadEngine
import DownloadModel
import DownloadsAPI

/// The administrator's view: root, or a caller that polkit authorizes for
/// `org.example.Downloads.manage-all`, may list every user's tasks, read their properties and
/// cancel them (never pause, resume or take their resume data). For anyone else another user's
/// task stays exactly like a missing one.
extension DownloadsService {
    static let manageAllAction = "org.example.Downloads.manage-all"

    /// Whether the caller may manage every user's tasks: root, or polkit says yes for the
    /// caller's connection (`system-bus-name` subject, no interaction). No polkit on the bus, or
    /// any failure asking it, is a no.
    func mayManageAll(_ call: MethodCall, caller: Caller) async -> Bool {
        // A sandboxed app manages its own tasks and nothing else, whoever runs it.
        guard !caller.isSandboxed else { return false }
        if caller.uid == 0 { return true }
        do {
            let reply = try await connection.call(
                destination: "org.freedesktop.PolicyKit1", path: ObjectPath("/org/freedesktop/PolicyKit1/Authority"),
                interface: "org.freedesktop.PolicyKit1.Authority", method: "CheckAuthorization",
                arguments: [
                    .structure([.string("system-bus-name"), .vardict(["name": .string(call.sender)])]),
                    .string(Self.manageAllAction),
                    .dictionary(key: .string, value: .string, []),
                    .uint32(0),
                    .string(""),
                ],
                timeout: .seconds(10), autoStart: configuration.systemBus
            )
            guard case .structure(let fields)? = reply.first, let authorized = fields.first?.boolValue else {
                return false
            }
            return authorized
        } catch {
            logger.debug("polkit: \(error)")
            return false
        }
    }

    /// The task a path names if the caller may see it: its owner, root, or (when `asAdmin`) an
    /// administrator. Anyone else gets exactly a missing task's answer.
    func task(_ path: ObjectPath, for call: MethodCall, caller: Caller, asAdmin: Bool) async throws -> TaskSnapshot {
        do {
            return try task(path, for: caller)
        } catch {
            guard asAdmin, let id = DownloadsAPI.taskID(path), let snapshot = engine.snapshot(id),
                await mayManageAll(call, caller: caller)
            else { throw error }
            return snapshot
        }
    }

    func listAllTasks(_ call: MethodCall, caller: Caller) async throws -> [ObjectPath] {
        guard await mayManageAll(call, caller: caller) else {
            throw DownloadsErrorName.accessDenied.error(
                "listing every user's tasks needs root or the polkit action \(Self.manageAllAction)"
            )
        }
        return engine.snapshots().map { DownloadsAPI.taskPath($0.id) }
    }
}
