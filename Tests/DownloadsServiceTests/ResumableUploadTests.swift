import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// Resumable uploads against real servers: swift-nio-extras' `NIOResumableUpload` (the IETF
/// draft's reference server, interop versions 3, 5 and 6) and PyPI's `resumable-upload` (tus
/// 1.0.0) behind a relay that cuts connections and damages bytes. A cut costs what was in flight:
/// the server's log shows every byte sent once (the IETF server keeps what it got; the tus
/// server keeps whole parts); pauses, restarts, kill -9, 409, expired resources, checksums,
/// `auto`, `Cancel`'s `DELETE`, and a changed file.
final class ResumableUploadTests: DaemonTestCase {
    func upload(_ url: String, _ source: String, _ options: [String: DBusValue] = [:]) async throws -> ObjectPath {
        let reply = try await call("Upload", [.string(url), .string(source), .vardict(options)])
        return try XCTUnwrap(reply.first?.objectPathValue)
    }

    func taskCall(_ task: ObjectPath, _ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await client.call(
            destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task", method: method,
            arguments: arguments
        )
    }

    func makeFile(_ name: String, size: Int, seed: UInt32) throws -> (String, [UInt8]) {
        let content = Self.content(size, seed: seed)
        let path = directory.file(name)
        try Data(content).write(to: URL(fileURLWithPath: path))
        return (path, content)
    }

    func confirmed(_ task: ObjectPath) async throws -> Int64 {
        try await property(task, "BytesConfirmed")?.int64Value ?? -1
    }

    func ietfServer(keepsUploadsFor seconds: Int64 = 3600) throws -> ResumableUploadServer {
        let server = try ResumableUploadServer(keepsUploadsFor: seconds)
        addTeardownBlock { server.stop() }
        return server
    }

    /// The tus server behind a cutting relay.
    func tusServer(_ options: [String] = ["--checksum-algorithms", "sha1,sha256"]) throws -> (TusServer, CuttingProxy) {
        let server: TusServer
        do {
            server = try TusServer(in: directory.path, options: options)
        } catch let error as TusServer.Unavailable {
            throw XCTSkip(error.description)
        }
        let proxy = try CuttingProxy(to: server.port)
        addTeardownBlock {
            proxy.stop()
            server.stop()
        }
        return (server, proxy)
    }

    // MARK: Cuts

    func testIETFCutsAt30And60And99PercentGoOnFromTheServersOffsetInEachVersion() async throws {
        for version in [3, 5, 6] {
            let server = try ietfServer()
            let size = 4_000_000
            let (path, content) = try makeFile("v\(version).bin", size: size, seed: UInt32(100 + version))
            let cuts = [0.3, 0.6, 0.99].map { Int64(Double(size) * $0) }
            server.cut(atTotals: cuts)
            let task = try await upload(
                server.url("/uploads/v\(version)"), path,
                [
                    "protocol": .string("ietf"), "ietf_version": .uint32(UInt32(version)),
                ])
            try await waitState(task, ["finished"], seconds: 90)
            XCTAssertEqual(
                server.uploads.map(\.sha256), [Self.sha256(content)], "version \(version): the app got the file whole")
            XCTAssertEqual(server.bodyBytes, Int64(size), "version \(version): every byte reached the server once")
            let log = server.log
            XCTAssertTrue(
                log.allSatisfy { $0.version == String(version) }, "version \(version) on every request: \(log)")
            XCTAssertEqual(
                log.filter { $0.method == "PATCH" }.map(\.offset), [0] + cuts, "appends from each cut: \(log)")
            XCTAssertEqual(log.filter { $0.method == "HEAD" }.count, 3, "the offset asked after each cut: \(log)")
            let confirmedBytes = try await confirmed(task)
            XCTAssertEqual(confirmedBytes, Int64(size))
            let reply = try await taskCall(task, "GetReply")
            XCTAssertEqual(reply.first?.uint32Value, 201)
            XCTAssertTrue(
                String(decoding: reply[2].bytesValue ?? [], as: UTF8.self).contains(Self.sha256(content)),
                "the app's reply is the task's")
        }
    }

    func testTusCutsAt30And60And99PercentCostAtMostThePartInFlight() async throws {
        let (server, proxy) = try tusServer()
        let size = 10_000_000
        let (path, content) = try makeFile("shard.bin", size: size, seed: 120)
        proxy.cut(atTotals: [0.3, 0.6, 0.99].map { Int64(Double(size) * $0) })
        let task = try await upload(proxy.url + "/files", path, ["protocol": .string("tus")])
        try await waitState(task, ["finished"], seconds: 90)
        XCTAssertEqual(Array(server.files.values), [Self.sha256(content)], "the server holds the file")
        let patches = server.log.filter { $0.method == "PATCH" && $0.status == 204 }
        let ranges = patches.map { (Int64($0.offset ?? "") ?? -1, Int64($0.length ?? "") ?? -1) }
        XCTAssertEqual(ranges.first?.0, 0)
        for (previous, next) in zip(ranges, ranges.dropFirst()) {
            XCTAssertEqual(previous.0 + previous.1, next.0, "parts follow each other, none twice: \(server.log)")
        }
        XCTAssertTrue(
            patches.allSatisfy { $0.checksum?.hasPrefix("sha256 ") == true }, "every part carries its checksum")
        let part: Int64 = 1 << 20  // a 400th of the file, at least 1 MiB
        XCTAssertEqual(ranges.dropLast().map(\.1), Array(repeating: part, count: ranges.count - 1), "1 MiB parts")
        XCTAssertLessThanOrEqual(
            proxy.forwarded, Int64(size) + 3 * part + 64 * 1024, "at most the part in flight again per cut")
        let confirmedBytes = try await confirmed(task)
        XCTAssertEqual(confirmedBytes, Int64(size))
    }

    // MARK: auto

    func testAutoSpeaksIETFToItsServerTusToTusAndPlainToAPlainServer() async throws {
        let (path, content) = try makeFile("photos.zip", size: 1_500_000, seed: 130)
        let ietf = try ietfServer()
        let toIETF = try await upload(ietf.url("/auto"), path)
        try await waitState(toIETF, ["finished"])
        XCTAssertEqual(ietf.uploads.map(\.sha256), [Self.sha256(content)])
        XCTAssertEqual(
            ietf.log.map(\.method), ["OPTIONS", "PUT", "PATCH"], "asked, made careful, appended: \(ietf.log)")
        XCTAssertEqual(ietf.log.last?.version, "6", "the newest version spoken")

        let (tus, proxy) = try tusServer()
        let toTus = try await upload(proxy.url + "/files", path, ["content_type": .string("application/zip")])
        try await waitState(toTus, ["finished"])
        XCTAssertEqual(Array(tus.files.values), [Self.sha256(content)])
        XCTAssertEqual(
            tus.log.map(\.method), ["OPTIONS", "POST"], "a file of one part goes with the creation: \(tus.log)")

        http.set("/plain", Route.receiving(status: 201, reply: "stored\n"))
        let toPlain = try await upload(http.url("/plain"), path)
        try await waitState(toPlain, ["finished"])
        XCTAssertEqual(
            http.received("/plain").map { Self.sha256($0.body) }, [Self.sha256(content)], "a plain upload, whole")
        let reply = try await taskCall(toPlain, "GetReply")
        XCTAssertEqual(String(decoding: reply[2].bytesValue ?? [], as: UTF8.self), "stored\n")
        let plainConfirmed = try await confirmed(toPlain)
        XCTAssertEqual(plainConfirmed, 1_500_000, "a finished plain upload: all confirmed")
    }

    // MARK: Pause, restart, kill -9

    func testPauseResumeDataAcrossARestartGoesOnFromTheServersOffset() async throws {
        let ietf = try ietfServer()
        let (tus, proxy) = try tusServer()
        let size = 9_000_000
        let (path, content) = try makeFile("dataset.bin", size: size, seed: 140)
        for (url, name) in [(ietf.url("/paused"), "ietf"), (proxy.url + "/files", "tus")] {
            let task = try await upload(
                url, path, ["protocol": .string(name), "max_bytes_per_second": .uint64(3_000_000)])
            try await waitBytes(task, atLeast: 5_000_000)
            let data = try await taskCall(task, "Pause").first?.bytesValue ?? []
            try await waitState(task, ["paused"])
            let kept = try await confirmed(task)
            if name == "tus" {
                XCTAssertTrue(kept >= 4 << 20 && kept % (1 << 20) == 0, "tus: whole parts confirmed (\(kept))")
            }
            stopDaemon()
            try await startDaemon()
            let resumed = try await call(
                "ResumeWithData", [.bytes(data), .vardict(["max_bytes_per_second": .uint64(0)])]
            ).first?.objectPathValue
            XCTAssertEqual(resumed, task)
            try await waitState(task, ["finished"], seconds: 60)
        }
        XCTAssertEqual(ietf.uploads.map(\.sha256), [Self.sha256(content)])
        XCTAssertEqual(ietf.bodyBytes, Int64(size), "the IETF server got every byte once")
        XCTAssertEqual(ietf.log.map(\.method), ["PUT", "PATCH", "HEAD", "PATCH"], "\(ietf.log)")
        XCTAssertEqual(Array(tus.files.values), [Self.sha256(content)])
        XCTAssertLessThanOrEqual(
            proxy.forwarded, Int64(size) + (1 << 20) + 64 * 1024, "at most the part in flight again")
        XCTAssertTrue(tus.log.contains { $0.method == "HEAD" }, "the offset asked after the restart")
    }

    func testAKillMidPatchAsksTheServerAndGoesOn() async throws {
        let ietf = try ietfServer()
        let (tus, proxy) = try tusServer()
        let size = 9_000_000
        let (path, content) = try makeFile("model.bin", size: size, seed: 150)
        for (url, name) in [(ietf.url("/killed"), "ietf"), (proxy.url + "/files", "tus")] {
            let task = try await upload(
                url, path, ["protocol": .string(name), "max_bytes_per_second": .uint64(3_000_000)])
            try await waitBytes(task, atLeast: 5_000_000)
            killDaemon()
            try await startDaemon()
            let afterRestart = try await confirmed(task)
            XCTAssertGreaterThanOrEqual(
                afterRestart, name == "tus" ? 4 << 20 : 0, "\(name): what was confirmed before the kill is kept")
            try await waitState(task, ["finished"], seconds: 60)
        }
        XCTAssertEqual(ietf.uploads.map(\.sha256), [Self.sha256(content)])
        XCTAssertEqual(ietf.bodyBytes, Int64(size), "every byte once: the server said where it was")
        XCTAssertEqual(Array(tus.files.values), [Self.sha256(content)])
        XCTAssertLessThanOrEqual(
            proxy.forwarded, Int64(size) + (1 << 20) + 64 * 1024, "at most the part in flight again")
    }

    // MARK: 409, expiry, checksums, refusals

    func testA409IsAnsweredByAskingTheOffset() async throws {
        let ietf = try ietfServer()
        let (path, content) = try makeFile("conflict.bin", size: 2_000_000, seed: 160)
        ietf.conflict(next: 1)
        let task = try await upload(ietf.url("/conflict"), path, ["protocol": .string("ietf")])
        try await waitState(task, ["finished"])
        XCTAssertEqual(ietf.uploads.map(\.sha256), [Self.sha256(content)])
        XCTAssertEqual(ietf.log.map(\.method), ["PUT", "PATCH", "HEAD", "PATCH"], "409, then HEAD: \(ietf.log)")

        // tus: a second client appends the part the task is sending; the task's PATCH is 409.
        let (tus, proxy) = try tusServer()
        let size = 4_500_000  // more than a creation carries: parts of 1 MiB
        let (tusPath, tusContent) = try makeFile("race.bin", size: size, seed: 161)
        let task2 = try await upload(
            proxy.url + "/files", tusPath, ["protocol": .string("tus"), "max_bytes_per_second": .uint64(500_000)])
        try await until("the first part confirmed", seconds: 30) { try await self.confirmed(task2) == 1 << 20 }
        let resource = try XCTUnwrap(tus.files.keys.first)
        let part = directory.file("part2")
        try Data(tusContent[(1 << 20)..<(2 << 20)]).write(to: URL(fileURLWithPath: part))
        let other = try await run([
            "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PATCH", "-H", "Tus-Resumable: 1.0.0",
            "-H", "Upload-Offset: \(1 << 20)", "-H", "Content-Type: application/offset+octet-stream", "--data-binary",
            "@" + part,
            tus.url + "/" + resource,
        ])
        XCTAssertEqual(other.stdout, "204", other.description)
        try await waitState(task2, ["finished"], seconds: 60)
        XCTAssertEqual(Array(tus.files.values), [Self.sha256(tusContent)])
        XCTAssertTrue(tus.log.contains { $0.method == "PATCH" && $0.status == 409 }, "\(tus.log)")
        let afterConflict = tus.log.drop { !($0.method == "PATCH" && $0.status == 409) }.dropFirst()
        XCTAssertEqual(afterConflict.first?.method, "HEAD", "a 409 is answered by a HEAD: \(tus.log)")
        XCTAssertEqual(afterConflict.dropFirst().first?.offset, String(2 << 20), "and goes on from the server's offset")
    }

    /// The trust issue's sibling: a 409 answered before the server read the append's body, then
    /// the connection closed under the sender (as nginx refuses). The head is the outcome at once
    /// (not the stall timeout, 60 s): HEAD, then the append again from the server's offset.
    func testAnEarly409ThenACloseIsNoticedAtOnce() async throws {
        let ietf = try ietfServer()
        let (path, content) = try makeFile("early.bin", size: 24_000_000, seed: 162)
        ietf.conflict(next: 1, early: true)
        let task = try await upload(ietf.url("/early"), path, ["protocol": .string("ietf")])
        // Well inside the stall timeout: the answer is heard, not waited out.
        try await waitState(task, ["finished"], seconds: 40)
        XCTAssertEqual(ietf.uploads.map(\.sha256), [Self.sha256(content)])
        let methods = ietf.log.map(\.method)
        XCTAssertEqual(Array(methods.prefix(3)), ["PUT", "PATCH", "HEAD"], "409, then HEAD: \(ietf.log)")
        let messages = try await property(task, "ErrorMessage")?.stringValue ?? ""
        XCTAssertFalse(messages.contains("Timeout"), messages)
    }

    func testAGoneOrExpiredResourceIsMadeAgainAndSetURLGivesANewCreationURL() async throws {
        // IETF: a new creation URL (a presigned one's successor) is used only once the resource is gone.
        let first = try ResumableUploadServer()
        let port = first.port
        let (path, content) = try makeFile("presigned.bin", size: 6_000_000, seed: 170)
        let task = try await upload(
            first.url("/presigned?sig=old"), path,
            ["protocol": .string("ietf"), "max_bytes_per_second": .uint64(3_000_000)])
        try await waitBytes(task, atLeast: 1_000_000)
        _ = try await taskCall(task, "Pause")
        try await waitState(task, ["paused"])
        _ = try await taskCall(task, "SetURL", [.string(first.url("/presigned?sig=new"))])
        _ = try await taskCall(task, "Resume")
        try await waitBytes(task, atLeast: 3_000_000)
        let data = try await taskCall(task, "Pause").first?.bytesValue ?? []
        try await waitState(task, ["paused"])
        XCTAssertEqual(
            first.log.filter { $0.method == "PUT" }.map(\.path), ["/presigned?sig=old"],
            "the resource was still there: \(first.log)")
        // The server restarts and forgets its uploads: the resource is gone.
        first.stop()
        let second = try ResumableUploadServer(port: port)
        addTeardownBlock { second.stop() }
        _ = try await taskCall(task, "SetURL", [.string(second.url("/presigned?sig=newest"))])
        _ = try await call("ResumeWithData", [.bytes(data), .vardict(["max_bytes_per_second": .uint64(0)])])
        try await waitState(task, ["finished"], seconds: 60)
        XCTAssertEqual(second.uploads.map(\.sha256), [Self.sha256(content)])
        XCTAssertEqual(
            second.log.map(\.method), ["HEAD", "PUT", "PATCH"],
            "asked, gone (404), made again at the new URL: \(second.log)")
        XCTAssertEqual(second.log.first { $0.method == "PUT" }?.path, "/presigned?sig=newest")

        // tus: Upload-Expires passed: made again without asking.
        let (tus, proxy) = try tusServer(["--upload-expiry", "3", "--checksum-algorithms", "sha1"])
        let size = 9_000_000
        let (tusPath, tusContent) = try makeFile("expiring.bin", size: size, seed: 171)
        let task2 = try await upload(
            proxy.url + "/files", tusPath, ["protocol": .string("tus"), "max_bytes_per_second": .uint64(6_000_000)])
        try await until("the first part confirmed", seconds: 30) { try await self.confirmed(task2) >= 4 << 20 }
        let data2 = try await taskCall(task2, "Pause").first?.bytesValue ?? []
        try await waitState(task2, ["paused"])
        let resource = tus.url + "/" + (tus.files.keys.first ?? "")
        try await until("the server let the upload expire", seconds: 20) {
            let head = try await self.run([
                "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-I", "-H", "Tus-Resumable: 1.0.0", resource,
            ])
            return head.stdout == "410" || head.stdout == "404"
        }
        let asked = tus.log.count
        _ = try await call("ResumeWithData", [.bytes(data2), .vardict(["max_bytes_per_second": .uint64(0)])])
        try await waitState(task2, ["finished"], seconds: 60)
        XCTAssertEqual(tus.log.filter { $0.method == "POST" }.count, 2, "made again: \(tus.log)")
        XCTAssertEqual(
            tus.log.dropFirst(asked).first?.method, "POST", "Upload-Expires passed: made again without asking")
        XCTAssertTrue(
            tus.log.filter { $0.method == "PATCH" }.allSatisfy { $0.checksum?.hasPrefix("sha1 ") == true },
            "sha1 when only it is offered")
        XCTAssertTrue(tus.files.values.contains(Self.sha256(tusContent)))
    }

    func testADamagedPartIs460AndSentAgain() async throws {
        let (tus, proxy) = try tusServer()
        let size = 9_000_000
        let (path, content) = try makeFile("damaged.bin", size: size, seed: 180)
        proxy.damage(at: 6_000_000)
        let task = try await upload(proxy.url + "/files", path, ["protocol": .string("tus")])
        try await waitState(task, ["finished"], seconds: 60)
        XCTAssertEqual(Array(tus.files.values), [Self.sha256(content)], "the damaged part was not kept")
        let patches = tus.log.filter { $0.method == "PATCH" }
        let damaged = try XCTUnwrap(patches.firstIndex { $0.status == 460 }, "\(tus.log)")
        XCTAssertEqual(patches.filter { $0.status == 460 }.count, 1, "\(tus.log)")
        XCTAssertEqual(patches[damaged + 1].offset, patches[damaged].offset, "the same part again")
        XCTAssertEqual(patches[damaged + 1].status, 204)
    }

    func testAServerThatHasEveryByteAndRefusesIsNotSentAgain() async throws {
        let ietf = try ietfServer()
        ietf.appAnswers(503)
        let (path, content) = try makeFile("refused.bin", size: 1_000_000, seed: 190)
        let task = try await upload(ietf.url("/refused"), path, ["protocol": .string("ietf")])
        try await waitState(task, ["failed"])
        let error = try await property(task, "Error")
        XCTAssertEqual(error?.stringValue, "org.example.Downloads.Error.HTTPError")
        XCTAssertEqual(ietf.bodyBytes, 1_000_000, "sent once: the server holds it all and said no")
        XCTAssertEqual(ietf.uploads.map(\.sha256), [Self.sha256(content)])
        let reply = try await taskCall(task, "GetReply")
        XCTAssertEqual(reply.first?.uint32Value, 503)
    }

    // MARK: Cancel, a changed file, another client

    func testCancelDeletesTheUploadResource() async throws {
        let ietf = try ietfServer()
        let (tus, proxy) = try tusServer()
        let (path, _) = try makeFile("cancelled.bin", size: 9_000_000, seed: 200)
        for (url, name) in [(ietf.url("/cancelled"), "ietf"), (proxy.url + "/files", "tus")] {
            let task = try await upload(
                url, path, ["protocol": .string(name), "max_bytes_per_second": .uint64(2_000_000)])
            try await waitBytes(task, atLeast: 4_500_000)
            _ = try await taskCall(task, "Cancel")
            try await waitState(task, ["cancelled"])
        }
        try await until("the IETF resource deleted") { ietf.deletes == 1 }
        try await until("the tus resource deleted") { tus.log.contains { $0.method == "DELETE" && $0.status == 204 } }
        XCTAssertEqual(tus.files.count, 0, "the server freed it")
        let kept = try await upload(
            proxy.url + "/files", path,
            [
                "protocol": .string("tus"), "terminate_on_cancel": .boolean(false),
                "max_bytes_per_second": .uint64(2_000_000),
            ])
        try await waitBytes(kept, atLeast: 4_500_000)
        _ = try await taskCall(kept, "Cancel")
        try await waitState(kept, ["cancelled"])
        XCTAssertEqual(tus.log.filter { $0.method == "DELETE" }.count, 1, "terminate_on_cancel false: kept")
    }

    func testAChangedFileIsSourceChangedAtResumeWithData() async throws {
        let ietf = try ietfServer()
        let (path, _) = try makeFile("changing.bin", size: 6_000_000, seed: 210)
        let task = try await upload(
            ietf.url("/changing"), path, ["protocol": .string("ietf"), "max_bytes_per_second": .uint64(2_000_000)])
        try await waitBytes(task, atLeast: 1_000_000)
        let data = try await taskCall(task, "Pause").first?.bytesValue ?? []
        try await waitState(task, ["paused"])
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("more".utf8))
        try handle.close()
        do {
            _ = try await call("ResumeWithData", [.bytes(data), .vardict([:])])
            XCTFail("resumed with a changed file")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.example.Downloads.Error.SourceChanged", error.message)
        }
        _ = try await taskCall(task, "Resume")
        try await waitState(task, ["failed"])
        let error = try await property(task, "Error")
        XCTAssertEqual(error?.stringValue, "org.example.Downloads.Error.SourceChanged")
        XCTAssertEqual(ietf.uploads.count, 0, "nothing of the changed file was finished")
    }

    func testTuspyAndTheServiceUploadTheSameFileAlike() async throws {
        let (tus, _) = try tusServer()
        let (path, content) = try makeFile("both.bin", size: 5_000_000, seed: 220)
        let script = """
            import sys
            from tusclient import client
            uploader = client.TusClient(sys.argv[1]).uploader(sys.argv[2], chunk_size=1 << 20, metadata={"filename": "both.bin"})
            uploader.upload()
            print(uploader.url)
            """
        let tuspy = try await run(["/usr/bin/python3", "-c", script, tus.url, path])
        XCTAssertEqual(tuspy.status, 0, tuspy.description)
        let task = try await upload(tus.url, path, ["protocol": .string("tus")])
        try await waitState(task, ["finished"])
        XCTAssertEqual(Array(tus.files.values), [Self.sha256(content), Self.sha256(content)], "both hold the file")
        let creations = tus.log.filter { $0.method == "POST" }
        XCTAssertEqual(creations.count, 2)
        let patches = tus.log.filter { $0.method == "PATCH" }
        XCTAssertTrue(patches.allSatisfy { $0.status == 204 }, "\(tus.log)")
    }
}
