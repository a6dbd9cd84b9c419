import Foundation
import TestSupport

/// Two unprivileged users the multi-user tests create (`useradd --system`, no home, no login)
/// and delete again; reused if a crashed run left them.
struct TestUsers {
    struct User {
        let name: String
        let uid: UInt32
        let gid: UInt32
    }

    let a: User
    let b: User

    static let names = ["dltest-a", "dltest-b"]

    static func create() throws -> TestUsers {
        var users: [User] = []
        for name in names {
            if try ProcessRunner.runBlocking(["id", "-u", name]).status != 0 {
                let made = try ProcessRunner.runBlocking([
                    "useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                    "--shell", "/usr/sbin/nologin", name,
                ])
                guard made.status == 0 else { throw TestUsersError(message: "useradd \(name): \(made.description)") }
            }
            let uid = try ProcessRunner.runBlocking(["id", "-u", name]).stdout.trimmingCharacters(
                in: .whitespacesAndNewlines)
            let gid = try ProcessRunner.runBlocking(["id", "-g", name]).stdout.trimmingCharacters(
                in: .whitespacesAndNewlines)
            guard let uid = UInt32(uid), let gid = UInt32(gid) else {
                throw TestUsersError(message: "no uid for \(name)")
            }
            users.append(User(name: name, uid: uid, gid: gid))
        }
        return TestUsers(a: users[0], b: users[1])
    }

    static func remove() {
        for name in names { _ = try? ProcessRunner.runBlocking(["userdel", name]) }
    }
}

struct TestUsersError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
