import AptMethod
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// The apt method in apt's sandbox, against the service in system mode: started as root as apt
/// starts it, it becomes `APT::Sandbox::User` (`_apt`) in every thread when apt's configuration
/// comes, and the service then serves it as `_apt` (it tells which app calls by reading the
/// method's `/proc/PID/root` as `_apt`: a thread left root would refuse every item).
final class AptSandboxTests: SystemBusTestCase {
    /// `_apt`'s uid and group, or a skip.
    func aptUser() throws -> (uid: uid_t, gid: gid_t) {
        guard getuid() == 0 else { throw XCTSkip("needs root to start the method as apt does") }
        guard let entry = getpwnam("_apt") else { throw XCTSkip("no _apt user (apt is not installed)") }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }

    /// The uids (real, effective, saved, fs) of every thread of `pid`.
    func threadUIDs(_ pid: pid_t) -> [String: [String]] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var found: [String: [String]] = [:]
        for thread in tasks {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") })
            else { continue }
            found[thread] = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().map(String.init)
        }
        return found
    }

    func testTheMethodBecomesAptsUserInEveryThreadAndTheServiceServesIt() async throws {
        let (uid, gid) = try aptUser()
        chmod(directory.path, 0o755)
        let partial = directory.file("partial")
        try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: false)
        chown(partial, uid, gid)
        chmod(partial, 0o700)  // as apt makes its partial directories

        let apt = try AptMethodTests.Method(busAddress: bus.address)
        defer { apt.process.stop() }
        _ = try await apt.answer(100)
        apt.send(AptMessage(601, "Configuration", [.init("Config-Item", "APT::Sandbox::User=_apt")]))
        let content = Self.content(400_000, seed: 791)
        http.set("/pool/sandboxed.deb", Route(content: content))
        let uri = "downloads+" + http.url("/pool/sandboxed.deb")
        apt.acquire(uri, into: partial + "/sandboxed.deb", sha256: Self.sha256(content))
        let done = try await apt.answer(201, for: uri)
        XCTAssertEqual(done["SHA256-Hash"], Self.sha256(content))
        XCTAssertEqual(sha256(ofFile: partial + "/sandboxed.deb"), Self.sha256(content))
        var info = stat()
        XCTAssertEqual(stat(partial + "/sandboxed.deb", &info), 0)
        XCTAssertEqual(info.st_uid, uid, "the file the method made for apt is _apt's")

        // Every thread, the main one too, is _apt's; and so the process as /proc shows it.
        let threads = threadUIDs(apt.process.pid)
        XCTAssertFalse(threads.isEmpty)
        for (thread, ids) in threads {
            XCTAssertEqual(ids, Array(repeating: String(uid), count: 4), "thread \(thread)")
        }
        XCTAssertEqual(stat("/proc/\(apt.process.pid)", &info), 0)
        XCTAssertEqual(info.st_uid, uid, "the method's /proc entries are _apt's (dumpable)")

        // The task was _apt's: root's list of the session holds none of it.
        let listed = try await call("ListTasks", [.string("apt")])
        XCTAssertFalse("\(listed)".contains("tasks/"), "\(listed)")
    }

    /// A sandbox user that does not exist ends the method as apt's own methods end (status 100,
    /// the reason on standard error), before anything is asked of the service.
    func testAnUnknownSandboxUserEndsTheMethodWithTheReason() async throws {
        _ = try aptUser()
        let apt = try AptMethodTests.Method(busAddress: bus.address)
        defer { apt.process.stop() }
        _ = try await apt.answer(100)
        apt.send(AptMessage(601, "Configuration", [.init("Config-Item", "APT::Sandbox::User=no-such-user-79")]))
        let status = apt.process.wait()
        XCTAssertEqual(status, 100)
        let said = String(decoding: apt.process.stderr.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(said.contains("no user no-such-user-79"), said)
    }
}
