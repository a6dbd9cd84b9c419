import CUserFiles
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// apt's sandbox, entered as apt's own methods enter it (`DropPrivileges` in apt's fileutl.cc):
/// apt starts a method as root and the method, once it has apt's configuration, becomes
/// `APT::Sandbox::User` (`_apt`): its supplementary groups dropped to that user's group, its
/// group and user ids (real, effective, saved) changed, `PR_SET_NO_NEW_PRIVS` set and root
/// checked to be out of reach (the file helper's `uf_drop_privileges`). The method then asks the
/// service as `_apt`, and the files it makes for apt are `_apt`'s.
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
    }
}
