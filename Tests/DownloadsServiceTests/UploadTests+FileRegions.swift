import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

/// A plain-http upload's file goes as file regions (`sendfile(2)`): the three ways that went wrong
/// when first tried (Benchmarks/RESULTS.md, "Uploads") tried again as an adversary would. Many
/// large bodies at once to a server that reads slowly, one of them a form (bytes around the
/// regions), each byte checked (SHA-256 of what the server got); a file cut short while its
/// regions are out (sendfile sends nothing there and NIO would try again for ever); a task
/// cancelled with regions out and another sent again after a cut (no descriptor of the file left
/// open, none closed early).
extension UploadTests {
    func testManyLargeBodiesToASlowReaderArriveByteForByte() async throws {
        var slow = Route.receiving()
        slow.readBytesPerSecond = 6_000_000
        var files: [(path: String, content: [UInt8], route: String)] = []
        for index in 0..<5 {
            // Sizes off any region's boundary, so a region cut short would show.
            let (path, content) = try makeFile(
                "big\(index).bin", size: 6_000_000 + index * 77_777, seed: 80 + UInt32(index))
            http.set("/slow\(index)", slow)
            files.append((path, content, "/slow\(index)"))
        }
        var tasks: [ObjectPath] = []
        for (index, file) in files.enumerated() {
            let options: [String: DBusValue] =
                index == 0
                ? ["method": .string("POST"), "form": .vardict(["field": .string("upload")])] : [:]
            tasks.append(try await upload(http.url(file.route), file.path, options))
        }
        for task in tasks { try await waitState(task, ["finished"], seconds: 120) }
        for (index, file) in files.enumerated() {
            let received = try XCTUnwrap(http.received(file.route).last)
            XCTAssertTrue(received.complete)
            if index == 0 {
                // The form's head and end around the file: the file's bytes are between them.
                let body = received.body
                let start = try XCTUnwrap(Self.find(Array("\r\n\r\n".utf8), in: body)) + 4
                XCTAssertEqual(
                    Self.sha256(Array(body[start..<start + file.content.count])), Self.sha256(file.content),
                    "the file inside the form")
                XCTAssertTrue(
                    String(decoding: body[(start + file.content.count)...], as: UTF8.self).hasPrefix("\r\n--"),
                    "the form's end follows the file")
            } else {
                XCTAssertEqual(received.bytes, file.content.count)
                XCTAssertEqual(Self.sha256(received.body), Self.sha256(file.content), "the bytes of \(file.path)")
            }
        }
    }

    /// A file cut short while its regions are out: `SourceChanged` soon after (the file's size is
    /// looked at while a region is out), not at the stall timeout, and nothing spins.
    func testAFileCutShortWhileItsRegionsAreOutIsSourceChangedSoon() async throws {
        let size = 24_000_000
        let (task, path, _) = try await uploadToASlowReader(
            "shrinking.bin", size: size, seed: 86, at: "/shrink", readingPerSecond: 3_000_000, until: 3_000_000,
            ["stall_timeout": .uint32(600)])
        XCTAssertEqual(truncate(path, 1_000_000), 0)
        let started = Date()
        let state = try await waitState(task, ["failed", "finished"], seconds: 60)
        XCTAssertEqual(state, "failed")
        let error = try await property(task, "Error")
        XCTAssertEqual(error?.stringValue, "org.example.Downloads.Error.SourceChanged")
        XCTAssertLessThan(Date().timeIntervalSince(started), 60, "ended by the size check, not the 600 s stall timeout")
        XCTAssertLessThan(http.received("/shrink").first?.bytes ?? size, size)
        try await until("no descriptor of the file is left open") { try self.daemonDescriptors(of: path) == 0 }
        // The daemon goes on: the same file, now 1 MB, goes whole.
        http.set("/after", Route.receiving())
        let again = try await upload(http.url("/after"), path)
        try await waitState(again, ["finished"], seconds: 60)
        XCTAssertEqual(http.received("/after").last?.bytes, 1_000_000)
    }

    /// Cancelled with regions out, and cut then sent again: each region's descriptor is closed once
    /// its write ended, none before (the second attempt's bytes are the file's).
    func testACancelAndACutLeaveNoDescriptorAndTheRetryIsTheFile() async throws {
        let size = 20_000_000
        let (task, path, content) = try await uploadToASlowReader(
            "cancelled.bin", size: size, seed: 87, at: "/cancel", readingPerSecond: 4_000_000, until: 2_000_000)
        XCTAssertGreaterThan(try daemonDescriptors(of: path), 0, "the file is open while it is sent")
        _ = try await client.call(
            destination: "org.example.Downloads", path: task, interface: "org.example.Downloads.Task",
            method: "Cancel")
        try await waitState(task, ["cancelled"])
        try await until("no descriptor of the file is left open") { try self.daemonDescriptors(of: path) == 0 }

        var cut = Route.receiving()
        cut.readBytesPerSecond = 8_000_000
        cut.cutUploadAfter = 5_000_000
        cut.misbehaveTimes = 1
        http.set("/cut-regions", cut)
        let retried = try await upload(http.url("/cut-regions"), path)
        try await waitState(retried, ["finished"], seconds: 120)
        let bodies = http.received("/cut-regions")
        XCTAssertEqual(bodies.count, 2)
        XCTAssertEqual(bodies.last?.bytes, size)
        XCTAssertEqual(bodies.last.map { Self.sha256($0.body) }, Self.sha256(content))
        try await until("no descriptor of the file is left open") { try self.daemonDescriptors(of: path) == 0 }
    }

    /// A file of `size` bytes uploaded to `route`, whose server reads `rate` bytes a second;
    /// returns once the server has read `received` of them.
    func uploadToASlowReader(
        _ name: String, size: Int, seed: UInt32, at route: String, readingPerSecond rate: Int, until received: Int,
        _ options: [String: DBusValue] = [:]
    ) async throws -> (task: ObjectPath, path: String, content: [UInt8]) {
        let (path, content) = try makeFile(name, size: size, seed: seed)
        var slow = Route.receiving()
        slow.readBytesPerSecond = rate
        http.set(route, slow)
        let task = try await upload(http.url(route), path, options)
        try await until("the server read \(received) bytes") {
            (self.http.received(route).first?.bytes ?? 0) >= received
        }
        return (task, path, content)
    }

    /// How many of the daemon's descriptors name `path`.
    func daemonDescriptors(of path: String) throws -> Int {
        let pid = try XCTUnwrap(daemon?.pid)
        let directory = "/proc/\(pid)/fd"
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        return names.filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\($0)")) == path
        }
        .count
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count)
        where haystack[start..<start + needle.count].elementsEqual(needle) {
            return start
        }
        return nil
    }
}
