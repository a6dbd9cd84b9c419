import CrashPoints
import Foundation
import TestSupport
import XCTest
@testable import UserFiles
import FileIdentities

/// The per-user file helper as the daemon uses it: a real `downloads-file-helper` process,
/// descriptors passed back over its socket, credentials dropped, a hung helper killed.
final class FileHelperTests: XCTestCase {
    static let helper = PackageRoot.debugBinary("downloads-file-helper")

    var directory: TemporaryDirectory!

    override func setUp() async throws {
        directory = try TemporaryDirectory(prefix: "file-helper-test")
    }

    override func tearDown() async throws {
        directory?.remove()
    }

    private func write(_ text: String, to descriptor: Int32) {
        let bytes = Array(text.utf8)
        XCTAssertEqual(bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }, bytes.count)
    }

    func testHelperOpensAndPublishesThroughTheSocket() throws {
        let client = FileHelperClient(uid: getuid(), executable: Self.helper, timeout: 10)
        defer { client.stop() }
        let partial = directory.file(".p.part"), destination = directory.file("done.txt")
        let (reply, descriptor) = try client.perform(.openPartial(path: partial, reuse: .never))
        guard case .opened(let identity, let created) = reply else { return XCTFail("\(reply)") }
        XCTAssertTrue(created)
        XCTAssertGreaterThanOrEqual(descriptor, 0, "the descriptor came over SCM_RIGHTS")
        write("hello", to: descriptor)
        close(descriptor)
        let (published, _) = try client.perform(
            .publish(
                partial: partial, identity: identity, destination: destination, replace: false, mode: 0o640, origin: nil
            ))
        guard case .published = published else { return XCTFail("\(published)") }
        XCTAssertEqual(try String(contentsOfFile: destination, encoding: .utf8), "hello")
        var info = stat()
        XCTAssertEqual(stat(destination, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o640)
        // How a restart finds a file it published before a crash: by the partial file's identity.
        let (found, _) = try client.perform(.isFile(path: destination, identity: identity))
        XCTAssertEqual("\(found)", "\(FileReply.answer(true))")
        let (other, _) = try client.perform(
            .isFile(path: destination, identity: FileIdentity(device: identity.device, inode: identity.inode + 1)))
        XCTAssertEqual("\(other)", "\(FileReply.answer(false))")
        let link = directory.file("link.txt")
        XCTAssertEqual(symlink(destination, link), 0)
        let (throughLink, _) = try client.perform(.isFile(path: link, identity: identity))
        XCTAssertEqual("\(throughLink)", "\(FileReply.answer(false))", "a link is not followed")
        // RENAME_NOREPLACE: an existing destination is FileExists, and the partial file stays.
        let (second, secondDescriptor) = try client.perform(.openPartial(path: partial, reuse: .never))
        if secondDescriptor >= 0 { close(secondDescriptor) }
        guard case .opened(let secondIdentity, _) = second else { return XCTFail("\(second)") }
        let (refused, _) = try client.perform(
            .publish(
                partial: partial, identity: secondIdentity, destination: destination, replace: false, mode: nil,
                origin: nil))
        guard case .failed(let error) = refused else { return XCTFail("\(refused)") }
        XCTAssertEqual(error.kind, .exists)
        XCTAssertEqual(try String(contentsOfFile: destination, encoding: .utf8), "hello")
        XCTAssertTrue(FileManager.default.fileExists(atPath: partial))
        // A file that is not the recorded one is not published.
        let (swapped, _) = try client.perform(
            .publish(
                partial: partial, identity: FileIdentity(device: 1, inode: 1), destination: directory.file("other"),
                replace: false, mode: nil, origin: nil
            ))
        guard case .failed(let swapError) = swapped else { return XCTFail("\(swapped)") }
        XCTAssertTrue(swapError.message.contains("was replaced"), swapError.message)
    }

    /// The helper killed between creating a partial file and replying (its crash point): the
    /// daemon's call fails as a helper failure instead of hanging, the next call starts a new
    /// helper, which opens the file the dead one left, and publishing it works.
    func testHelperKilledBetweenCreateAndReply() throws {
        let client = FileHelperClient(uid: getuid(), executable: Self.helper, timeout: 10)
        defer { client.stop() }
        let partial = directory.file(".crash.part"), destination = directory.file("crash.txt")
        setenv(CrashPoint.environmentVariable, "\(CrashPoint.helperCreated.rawValue):1", 1)
        defer { unsetenv(CrashPoint.environmentVariable) }
        XCTAssertThrowsError(try client.perform(.openPartial(path: partial, reuse: .never))) { error in
            XCTAssertEqual((error as? FileOperationError)?.kind, .helper, "\(error)")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: partial), "created before the crash")
        unsetenv(CrashPoint.environmentVariable)
        let (reply, descriptor) = try client.perform(.openPartial(path: partial, reuse: .never))
        guard case .opened(let identity, _) = reply else { return XCTFail("\(reply)") }
        write("after", to: descriptor)
        close(descriptor)
        let (published, _) = try client.perform(
            .publish(
                partial: partial, identity: identity, destination: destination, replace: false, mode: nil, origin: nil))
        guard case .published = published else { return XCTFail("\(published)") }
        XCTAssertEqual(try String(contentsOfFile: destination, encoding: .utf8), "after")
        XCTAssertFalse(FileManager.default.fileExists(atPath: partial))
    }

    func testHelperRunsAsTheUserWithNoWayBack() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to start a helper for another user") }
        let nobody: UInt32 = 65534
        chmod(directory.path, 0o777)
        let client = FileHelperClient(uid: nobody, executable: Self.helper, timeout: 10)
        defer { client.stop() }
        let (reply, descriptor) = try client.perform(.openPartial(path: directory.file(".n.part"), reuse: .never))
        guard case .opened = reply else { return XCTFail("\(reply)") }
        close(descriptor)
        var info = stat()
        XCTAssertEqual(stat(directory.file(".n.part"), &info), 0)
        XCTAssertEqual(info.st_uid, nobody, "created with the user's uid")
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        // What the user cannot do, the helper cannot do.
        let (denied, _) = try client.perform(.openPartial(path: "/etc/.downloads-test.part", reuse: .never))
        guard case .failed(let error) = denied else { return XCTFail("\(denied)") }
        XCTAssertTrue(error.message.contains("Permission denied"), error.message)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/etc/.downloads-test.part"))
        let (unreachable, _) = try client.perform(.isDirectory(path: "/root"))
        XCTAssertEqual("\(unreachable)", "\(FileReply.answer(true))", "/root itself can be stat'ed by anyone")
        let (inside, _) = try client.perform(.exists(path: "/root/.bashrc"))
        XCTAssertEqual("\(inside)", "\(FileReply.answer(false))", "what is inside /root reads as missing")
        let pid = try XCTUnwrap(client.pid)
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        XCTAssertTrue(status.contains("NoNewPrivs:\t1"), status)
        XCTAssertTrue(status.contains("CapEff:\t0000000000000000"), status)
        XCTAssertTrue(
            status.contains("Groups:\t65534") || status.contains("Groups:\t\n") || status.contains("Groups:\n"), status)
    }

    /// A document the user names (a `metalink` path) is opened read-only as the user: what they
    /// may read comes back as a descriptor; what they may not, and what is no regular file, does not.
    func testHelperOpensForReadingOnlyWhatTheUserMayRead() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to start a helper for another user") }
        chmod(directory.path, 0o755)
        let open = directory.file("open.meta4"), secret = directory.file("secret.meta4")
        try "<metalink/>".write(toFile: open, atomically: false, encoding: .utf8)
        try "<secret/>".write(toFile: secret, atomically: false, encoding: .utf8)
        chmod(open, 0o644)
        chmod(secret, 0o600)
        let client = FileHelperClient(uid: 65534, executable: Self.helper, timeout: 10)
        defer { client.stop() }
        let (reply, descriptor) = try client.perform(.openForReading(path: open))
        guard case .opened = reply, descriptor >= 0 else { return XCTFail("\(reply)") }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(descriptor, &buffer, buffer.count)
        close(descriptor)
        XCTAssertEqual(String(decoding: buffer[0..<max(0, count)], as: UTF8.self), "<metalink/>")
        XCTAssertEqual(fcntl(descriptor, F_GETFD), -1, "closed")
        for (path, reason) in [
            (secret, "Permission denied"), (directory.path, "not a regular file"), ("/dev/zero", "not a regular file"),
        ] {
            let (refused, leaked) = try client.perform(.openForReading(path: path))
            XCTAssertLessThan(leaked, 0)
            guard case .failed(let error) = refused else { return XCTFail("\(path): \(refused)") }
            XCTAssertTrue(error.message.contains(reason), "\(path): \(error.message)")
        }
    }

    func testHungHelperIsKilledAndReplaced() throws {
        let script = directory.file("hang.sh")
        try "#!/bin/sh\nexec sleep 60\n".write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        let client = FileHelperClient(uid: getuid(), executable: script, timeout: 0.3)
        let started = ContinuousClock.now
        XCTAssertThrowsError(try client.perform(.exists(path: "/"))) { error in
            let failure = error as? FileOperationError
            XCTAssertEqual(failure?.kind, .helper)
            XCTAssertTrue(failure?.message.contains("did not answer within") == true, "\(error)")
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(10))
        XCTAssertNil(client.pid, "the hung helper is gone from the client")
        let leftover = try ProcessRunner.runBlocking(["pgrep", "-f", "sleep 60"])
        let pids = leftover.stdout.split(separator: "\n").compactMap { Int32($0) }
        // Reaped in the background: give it a moment.
        for _ in 0..<100 where pids.contains(where: { kill($0, 0) == 0 && isChild($0) }) { usleep(20_000) }
        XCTAssertFalse(pids.contains(where: { kill($0, 0) == 0 && isChild($0) }), "killed")
    }

    /// Whether `pid` is a child of this process.
    private func isChild(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
        let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
        return fields.count > 2 && Int32(fields[1]) == getpid()
    }

    func testMalformedDatagramsAreRefusedNotTrusted() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let length = Int.random(in: 0..<64, using: &generator)
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = try? FileRequest.decode(bytes)
            _ = try? FileReply.decode(bytes)
        }
        let request = FileRequest.publish(
            partial: "/a/b", identity: FileIdentity(device: 7, inode: .max), destination: "/a/c", replace: true,
            mode: 0o644, origin: nil)
        XCTAssertEqual(try FileRequest.decode(request.encoded()), request)
        for origin in [
            OriginAttributes(url: "https://example.org/a.iso"),
            OriginAttributes(url: "https://example.org/a.iso", referrer: "https://example.org/"),
        ] {
            let withOrigin = FileRequest.publish(
                partial: "/a/b", identity: nil, destination: "/a/c", replace: false, mode: nil, origin: origin)
            XCTAssertEqual(try FileRequest.decode(withOrigin.encoded()), withOrigin)
        }
        for write in [
            AttributeWrite.notAsked, .written, .refused(95, attribute: OriginAttributes.originName),
            .refused(7, attribute: OriginAttributes.referrerName),
        ] {
            guard case .published(let decoded) = try FileReply.decode(FileReply.published(write).encoded()) else {
                return XCTFail("not a publish reply")
            }
            XCTAssertEqual(decoded, write)
        }
        let isFile = FileRequest.isFile(path: "/a/c", identity: FileIdentity(device: 3, inode: 4))
        XCTAssertEqual(try FileRequest.decode(isFile.encoded()), isFile)
        for mode in [UInt32?.none, 0o640] {
            let make = FileRequest.makeDirectories(relative: "a/b", base: "/d", mode: mode)
            XCTAssertEqual(try FileRequest.decode(make.encoded()), make)
        }
        XCTAssertThrowsError(try FileRequest.decode(request.encoded() + [0]), "trailing bytes")
        XCTAssertThrowsError(try FileRequest.decode([1, 255, 255, 255, 255]), "a length past the end")
    }

    func testIdleHelperExitsAndTheNextOperationStartsAnother() throws {
        let client = FileHelperClient(uid: getuid(), executable: Self.helper, timeout: 10)
        defer { client.stop() }
        _ = try client.perform(.exists(path: "/"))
        let first = try XCTUnwrap(client.pid)
        client.stopIfIdle(for: 3600)
        XCTAssertEqual(client.pid, first, "used a moment ago: kept")
        client.stopIfIdle(for: 0)
        XCTAssertNil(client.pid)
        for _ in 0..<100 where kill(first, 0) == 0 { usleep(20_000) }
        XCTAssertNotEqual(kill(first, 0), 0, "the idle helper exited")
        let (reply, _) = try client.perform(.isDirectory(path: "/"))
        XCTAssertEqual("\(reply)", "\(FileReply.answer(true))")
        XCTAssertNotEqual(client.pid, first)
    }

    /// Several processes for one user: a request goes to the first free one, so one process
    /// serves requests made one at a time, and more start only when requests meet; every
    /// request is answered right whichever process takes it, and all of them end with `stop`.
    func testRequestsThatMeetAreServedBySeveralHelpers() throws {
        let client = FileHelperClient(uid: getuid(), executable: Self.helper, timeout: 10, processes: 3)
        defer { client.stop() }
        for _ in 0..<20 { _ = try client.perform(.exists(path: "/")) }
        XCTAssertEqual(client.pids.count, 1, "one at a time: one process")
        let directory = self.directory!
        let failures = NSLock()
        nonisolated(unsafe) var failed: [String] = []
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for n in 0..<40 {
                do {
                    let partial = directory.file(".\(worker)-\(n).part"),
                        destination = directory.file("\(worker)-\(n).txt")
                    let (reply, descriptor) = try client.perform(.openPartial(path: partial, reuse: .never))
                    guard case .opened(let identity, _) = reply, descriptor >= 0 else {
                        throw FileOperationError(.other, "\(reply)")
                    }
                    let text = Array("\(worker)/\(n)".utf8)
                    _ = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
                    close(descriptor)
                    let (published, _) = try client.perform(
                        .publish(
                            partial: partial, identity: identity, destination: destination, replace: false, mode: 0o644,
                            origin: nil
                        ))
                    guard case .published = published else { throw FileOperationError(.other, "\(published)") }
                } catch {
                    failures.withLock { failed.append("\(worker)/\(n): \(error)") }
                }
            }
        }
        XCTAssertEqual(failures.withLock { failed }, [])
        for worker in 0..<8 {
            for n in 0..<40 {
                XCTAssertEqual(
                    try String(contentsOfFile: directory.file("\(worker)-\(n).txt"), encoding: .utf8), "\(worker)/\(n)")
            }
        }
        let pids = client.pids
        XCTAssertGreaterThan(pids.count, 1, "requests that met started more processes")
        XCTAssertLessThanOrEqual(pids.count, 3)
        client.stop()
        for pid in pids {
            for _ in 0..<100 where kill(pid, 0) == 0 { usleep(20_000) }
            XCTAssertNotEqual(kill(pid, 0), 0, "helper \(pid) exited")
        }
    }
}
