import Foundation
import TestSupport
import XCTest

/// `SystemBusTestCase` with the two real users of `TestUsers` (made once for the class, removed
/// after it) and a home each below the test's directory.
class TwoUsersTestCase: SystemBusTestCase {
    nonisolated(unsafe) static var madeUsers: TestUsers?

    override class func tearDown() {
        if madeUsers != nil { TestUsers.remove() }
        madeUsers = nil
        super.tearDown()
    }

    var users: TestUsers { Self.madeUsers! }

    override func setUp() async throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: creates users and runs the daemon as root") }
        if Self.madeUsers == nil { Self.madeUsers = try TestUsers.create() }
        try await super.setUp()
        chmod(directory.path, 0o755)
    }

    /// `script` in python3 as `user`, left running (stop it when done): a client whose main loop
    /// answers the service while the test goes on.
    func pythonProcess(as user: TestUsers.User, _ script: String) throws -> ChildProcess {
        try ChildProcess([
            "setpriv", "--reuid=\(user.uid)", "--regid=\(user.gid)", "--init-groups", "--reset-env",
            "/usr/bin/python3", "-c", script,
        ])
    }

    /// A directory `user` owns, mode 0700, below the test's directory.
    func home(_ name: String, _ user: TestUsers.User) throws -> String {
        let path = directory.file(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        chown(path, user.uid, user.gid)
        chmod(path, 0o700)
        return path
    }
}
