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
            let task = try await upload(server.url("/uploads/v\(version)"), path, [
                "protocol": .string("ietf"), "ietf_version": .uint32(UInt32(version)),
            ])
            try await waitState(task, ["finished"], seconds: 90)
            XCTAssertEqual(server.uploads.map(\.sha256), [Self.sha256(content)], "version \(version): the app got the file whole")
            XCTAssertEqual(server.bodyBytes, Int64(size), "version \(version): every byte reached the server once")
            let log = server.log
            XCTAssertTrue(log.allSatisfy { $0.version == String(version) }, "version \(version) on every request: \(log)")
            XCTAssertEqual(log.filter { $0.method == "PATCH" }.map(\.offset), [0] + cuts, "appends from each cut: \(log)")
            XCTAssertEqual(log.filter { $0.method == "HEAD" }.count, 3, "the offset asked after each cut: \(log)")
            let confirmedBytes = try await confirmed(task)
            XCTAssertEqual(confirmedBytes, Int64(size))
            let reply = try await taskCall(task, "GetReply")
            XCTAssertEqual(reply.first?.uint32Value, 201)
            XCTAssertTrue(String(decoding: reply[2].bytesValue ?? [], as: UTF8.self).contains(Self.sha256(content)), "the app's reply is the task's")
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
        XCTAssertTrue(patches.allSatisfy { $0.checksum?.hasPrefix("sha256 ") == true }, "every part carries its checksum")
        let chunk: Int64 = 4 << 20
        XCTAssertLessThanOrEqual(proxy.forwarded, Int64(size) + 3 * chunk + 64 * 1024, "at most the part in flight again per cut")
        let confirmedBytes = try await confirmed(task)
        XCTAssertEqual(confirmedBytes, Int64(size))
    }
}
