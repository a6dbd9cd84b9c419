import CallerApps
import Foundation
import TestSupport
import XCTest

/// Which app a process is, asked of real processes: bubblewrap sandboxes with a `/.flatpak-info`
/// at `/` as Flatpak lays one out, and with the things an attacker would put there instead.
final class AppIdentityTests: XCTestCase {
    var directory: TemporaryDirectory!

    override func setUp() async throws {
        directory = try TemporaryDirectory(prefix: "app-identity")
    }

    override func tearDown() async throws {
        directory?.remove()
    }

    // MARK: Pure parsing

    func testFlatpakInfoNamesTheApp() {
        let info = """
            [Application]
            name=org.example.Player
            runtime=runtime/org.freedesktop.Platform/x86_64/23.08

            [Instance]
            instance-id=1234
            """
        XCTAssertEqual(AppIdentity.flatpakAppID(fromInfo: info), "org.example.Player")
        XCTAssertNil(
            AppIdentity.flatpakAppID(fromInfo: "[Runtime]\nname=org.example.Player\n"), "a runtime, not an app")
        XCTAssertNil(AppIdentity.flatpakAppID(fromInfo: "[Application]\nname=not-an-id\n"))
        XCTAssertNil(
            AppIdentity.flatpakAppID(fromInfo: "[Application]\nname=org.example.9lives\n"),
            "an element starts with a digit")
        XCTAssertNil(AppIdentity.flatpakAppID(fromInfo: "[Application]\nname=org/../evil\n"))
        XCTAssertNil(AppIdentity.flatpakAppID(fromInfo: "root:x:0:0::/root:/bin/bash\n"))
        // As GKeyFile reads it (what Flatpak and the portal see): the last of two names counts,
        // also across a group given twice.
        XCTAssertEqual(
            AppIdentity.flatpakAppID(fromInfo: "[Application]\nname=org.example.First\nname=org.example.Last\n"),
            "org.example.Last")
        XCTAssertEqual(
            AppIdentity.flatpakAppID(
                fromInfo:
                    "[Application]\nname=org.example.First\n[Instance]\nx=1\n[Application]\nname=org.example.Last\n"),
            "org.example.Last"
        )
        XCTAssertNil(
            AppIdentity.flatpakAppID(fromInfo: "[Application]\nname=org.example.Fine\nname=not-an-id\n"),
            "the last is the one")
        // The service's own name, and below it, belong to no app.
        XCTAssertNil(AppIdentity.flatpakAppID(fromInfo: "[Application]\nname=org.example.Downloads\n"))
        XCTAssertNil(AppIdentity.flatpakAppID(fromInfo: "[Application]\nname=org.example.Downloads.Agent\n"))
        XCTAssertEqual(
            AppIdentity.flatpakAppID(fromInfo: "[Application]\nname=org.example.DownloadsPlus\n"),
            "org.example.DownloadsPlus")
    }

    func testSnapFromCgroupAndLabel() {
        XCTAssertEqual(
            AppIdentity.snapName(
                fromCgroup:
                    "0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.firefox.firefox-2b5f.scope\n"),
            "firefox"
        )
        XCTAssertEqual(
            AppIdentity.snapName(fromCgroup: "1:name=systemd:/system.slice/snap.lxd.daemon.service\n"), "lxd")
        XCTAssertNil(AppIdentity.snapName(fromCgroup: "0::/user.slice/user-1000.slice/session-2.scope\n"))
        XCTAssertNil(AppIdentity.snapName(fromCgroup: "0::/user.slice/app-snap.fake.scope\n"), "not a snap unit")
        XCTAssertEqual(AppIdentity.snapName(fromLabel: "snap.spotify.spotify (enforce)"), "spotify")
        XCTAssertNil(AppIdentity.snapName(fromLabel: "unconfined"))
        XCTAssertNil(AppIdentity.snapName(fromLabel: "/usr/bin/evince (enforce)"))
    }

    // MARK: Real processes

    func testAHostProcessIsTheHost() throws {
        XCTAssertEqual(try AppIdentity.app(pid: UInt32(getpid()), uid: getuid()), "")
    }

    func testAFlatpakSandboxIsItsApp() throws {
        let info = directory.file("info")
        try "[Application]\nname=org.example.Player\n".write(toFile: info, atomically: true, encoding: .utf8)
        XCTAssertEqual(try app(inSandboxWith: ["--ro-bind", info, "/.flatpak-info"]), "org.example.Player")
    }

    func testALinkAtFlatpakInfoIsRefused() throws {
        XCTAssertThrowsError(try app(inSandboxWith: ["--symlink", "/etc/shadow", "/.flatpak-info"]))
    }

    func testAFifoAtFlatpakInfoIsRefusedWithoutHanging() throws {
        let fifo = directory.file("fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        XCTAssertThrowsError(try app(inSandboxWith: ["--ro-bind", fifo, "/.flatpak-info"]))
    }

    func testAHugeFlatpakInfoIsRefused() throws {
        let big = directory.file("big")
        let line = "[Application]\nname=org.example.Player\n" + String(repeating: "#", count: 1023) + "\n"
        try String(repeating: line, count: 10 * 1024).write(toFile: big, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try app(inSandboxWith: ["--ro-bind", big, "/.flatpak-info"]))
    }

    /// As user nobody: a file only root may read, mounted at /.flatpak-info by the caller itself
    /// (a user namespace lets anyone mount what they can name), is not read by a root daemon.
    func testAnotherUsersFileAtFlatpakInfoIsRefused() throws {
        try XCTSkipUnless(getuid() == 0, "needs root to run a process as nobody")
        XCTAssertThrowsError(try app(inSandboxWith: ["--ro-bind", "/etc/shadow", "/.flatpak-info"], as: 65534))
    }

    func testAProcessThatIsGoneIsRefused() throws {
        let child = try ChildProcess(["true"])
        child.wait()
        XCTAssertThrowsError(try AppIdentity.app(pid: UInt32(child.pid), uid: getuid()))
    }

    /// Runs `sh` in a bwrap sandbox laid out as Flatpak does (an empty root with /usr and /etc),
    /// plus `extra`, as `uid`; returns what `AppIdentity` says of it.
    private func app(inSandboxWith extra: [String], as uid: UInt32? = nil) throws -> String {
        let drop = uid.map { ["setpriv", "--reuid=\($0)", "--regid=\($0)", "--clear-groups"] } ?? []
        let child = try ChildProcess(
            drop + [
                "bwrap", "--tmpfs", "/", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
                "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                "--proc", "/proc", "--dev", "/dev", "--unshare-user", "--disable-userns",
            ] + extra + ["sh", "-c", "echo $$; exec sleep 60"])
        defer { child.stop() }
        let line = String(decoding: child.stdout.readLine(), as: UTF8.self)
        let pid = try XCTUnwrap(
            UInt32(line.trimmingCharacters(in: .whitespacesAndNewlines)),
            "the sandbox did not start: \(String(decoding: child.stderr.availableData, as: UTF8.self))")
        return try AppIdentity.app(pid: pid, uid: uid ?? getuid())
    }
}

extension FileHandle {
    /// Bytes up to the first newline (or the end).
    fileprivate func readLine() -> [UInt8] {
        var bytes: [UInt8] = []
        while true {
            let chunk = readData(ofLength: 1)
            guard let byte = chunk.first, byte != 10 else { return bytes }
            bytes.append(byte)
        }
    }
}
