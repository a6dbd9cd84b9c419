import CUserFiles
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// apt's sandbox, entered as apt's own methods enter it (`DropPrivileges` in apt's fileutl.cc):
/// apt starts a method as root and the method, once it has apt's configuration, becomes
/// `APT::Sandbox::User` (`_apt`): its supplementary groups dropped to that user's group, its
/// group and user ids (real, effective, saved) changed, `PR_SET_NO_NEW_PRIVS` set and root
/// checked to be out of reach (the file helper's `uf_drop_privileges`), then made dumpable again so
/// its /proc entries are `_apt`'s, and every thread checked to be that user (glibc changes the
/// user of all threads but one that is exiting: `AptMethodMain` keeps its main thread alive for
/// that). The method then asks the service as `_apt`, and the files it makes for apt are `_apt`'s.
enum Sandbox {
    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    /// Becomes `user` when running as root (nothing otherwise, as apt's methods do).
    static func enter(as user: String) throws {
        guard getuid() == 0 else {
            _ = uf_set_no_new_privs()
            return
        }
        guard let entry = getpwnam(user) else { throw Refused(description: "no user \(user), can not drop rights") }
        var groups = [entry.pointee.pw_gid]
        guard uf_drop_privileges(entry.pointee.pw_uid, entry.pointee.pw_gid, &groups, 1) == 0 else {
            throw Refused(description: "could not become \(user): \(String(cString: strerror(errno)))")
        }
        // The kernel made the process undumpable when it changed user, its /proc entries root's:
        // the service tells which app calls by reading /proc/PID/root as the caller (through
        // `_apt`'s file helper), which it could then not do. Dumpable again: `_apt`'s own.
        _ = uf_set_dumpable()
        let uid = entry.pointee.pw_uid
        if let root = threadsNotOf(uid).first {
            throw Refused(description: "could not become \(user): thread \(root) is still of another user")
        }
    }

    /// The threads of this process whose real, effective or saved uid is not `uid`.
    static func threadsNotOf(_ uid: uid_t) -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { thread in
            guard let status = try? String(contentsOfFile: "/proc/self/task/\(thread)/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") })
            else { return false }  // a thread that ended meanwhile
            let ids = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().prefix(3)
            return ids.count != 3 || ids.contains { $0 != Substring(String(uid)) }
        }
    }
}
