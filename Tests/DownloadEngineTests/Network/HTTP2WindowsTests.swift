import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import TestSupport
import XCTest

@testable import DownloadEngine

/// What an HTTP/2 server is told of the service's windows, as nghttpd (Debian's nghttp2-server,
/// `-v`: every frame it receives, line-buffered by `stdbuf`) reads it: the streams' initial
/// window, the connection's raised to 64 MiB, and the stream's window given back as its reader
/// takes the body.
final class HTTP2WindowsTests: XCTestCase {
    func testAServerIsToldTheWindowsAndHearsThemOpenAgainAsTheBodyIsRead() async throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        for folder in ["certificates", "www"] {
            try FileManager.default.createDirectory(atPath: work.file(folder), withIntermediateDirectories: true)
        }
        let certificates = try TestCertificates(in: work.file("certificates"))
        // Larger than a stream's window: the server must hear it open again to send the rest.
        let body = TestData.content(24 << 20, seed: 77)
        FileManager.default.createFile(atPath: work.file("www/body.bin"), contents: Data(body))
        let port = try FreePort.pick()
        let server = try ChildProcess([
            "stdbuf", "-oL", "/usr/sbin/nghttpd", "-v", "-d", work.file("www"), "--address=127.0.0.1", String(port),
            certificates.serverKey, certificates.good,
        ])
        defer { server.stop() }
        let output = OutputCollector(server.stdout)
        let deadline = Date().addingTimeInterval(20)
        while !FreePort.accepts(port: port) {
            guard Date() < deadline, !server.hasExited else { return XCTFail("nghttpd did not start") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let clients = HTTPClients(
            connectTimeout: 5, caFile: certificates.caFile, connectionsPerHost: 4, offerHTTP2: true)
        let lease = clients.lease(.multiplexed)
        let response = try await lease.client.execute(
            request: try HTTPClient.Request(url: "https://127.0.0.1:\(port)/body.bin")
        ).get()
        clients.release(lease)
        await clients.shutdown()
        XCTAssertEqual(response.status.code, 200)
        XCTAssertEqual(response.version.major, 2, "ALPN chose HTTP/2")
        let received = response.body.map { Array($0.readableBytesView) } ?? []
        XCTAssertEqual(SHA256.hash(data: received), SHA256.hash(data: body))
        // What nghttpd printed of the frames it received, once it printed the last window update.
        let until = Date().addingTimeInterval(10)
        while !output.text.contains("window_size_increment"), Date() < until {
            try await Task.sleep(for: .milliseconds(20))
        }
        server.stop()
        let log = await output.finish()
        XCTAssertTrue(
            log.contains("SETTINGS_INITIAL_WINDOW_SIZE(0x04):\(HTTP2Windows.stream)"),
            "the streams' window in a SETTINGS frame")
        // WINDOW_UPDATE frames as nghttpd prints them: the stream, then the increment.
        let updates = log.matches(
            of: /recv WINDOW_UPDATE frame <length=4, flags=0x00, stream_id=(\d+)>\s+\(window_size_increment=(\d+)\)/
        ).map { (stream: Int($0.1) ?? -1, increment: Int($0.2) ?? -1) }
        XCTAssertEqual(
            updates.first { $0.stream == 0 }?.increment, HTTP2Windows.connection - 65_535,
            "the connection's window raised to 64 MiB: \(updates)")
        // Only what its reader took opens the stream's window again, a MiB or more at a time (at
        // the end of a read), and never more than it took.
        let stream = updates.filter { $0.stream != 0 }
        XCTAssertFalse(stream.isEmpty, "the stream's window given back as it was read: \(updates)")
        XCTAssertTrue(stream.allSatisfy { $0.increment >= HTTP2Windows.quantum }, "\(stream)")
        XCTAssertLessThanOrEqual(stream.map(\.increment).reduce(0, +), body.count)
    }

    /// Without `offerHTTP2` (the daemon's default) a server that speaks only HTTP/2 (nghttpd) is
    /// offered HTTP/1.1 alone: the request fails at once, it does not hang.
    func testAnHTTP2OnlyServerIsRefusedWithoutOfferingHTTP2() async throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        for folder in ["certificates", "www"] {
            try FileManager.default.createDirectory(atPath: work.file(folder), withIntermediateDirectories: true)
        }
        let certificates = try TestCertificates(in: work.file("certificates"))
        FileManager.default.createFile(atPath: work.file("www/small.bin"), contents: Data("small".utf8))
        let port = try FreePort.pick()
        let server = try ChildProcess([
            "/usr/sbin/nghttpd", "-d", work.file("www"), "--address=127.0.0.1", String(port),
            certificates.serverKey, certificates.good,
        ])
        defer { server.stop() }
        let deadline = Date().addingTimeInterval(20)
        while !FreePort.accepts(port: port) {
            guard Date() < deadline, !server.hasExited else { return XCTFail("nghttpd did not start") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let clients = HTTPClients(connectTimeout: 5, caFile: certificates.caFile, connectionsPerHost: 4)
        let lease = clients.lease(.multiplexed)
        do {
            let response = try await lease.client.execute(
                request: try HTTPClient.Request(url: "https://127.0.0.1:\(port)/small.bin"),
                deadline: .now() + .seconds(10)
            ).get()
            XCTFail("an HTTP/2-only server answered \(response.status) over HTTP/\(response.version.major)")
        } catch {
            // nghttpd takes the handshake, reads an HTTP/1.1 request and closes: the task's
            // "the connection closed early", retried as any interrupted attempt.
            XCTAssertEqual(error as? HTTPClientError, .remoteConnectionClosed, "\(error)")
        }
        clients.release(lease)
        await clients.shutdown()
    }
}
