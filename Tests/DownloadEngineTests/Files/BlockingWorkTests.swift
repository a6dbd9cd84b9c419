@testable import DownloadModel
@testable import DownloadEngine
import Foundation
import XCTest

/// Calls that block (delay probes, address lookups) do not hold each other back.
final class BlockingWorkTests: XCTestCase {
    /// More delay probes than the machine has cores, each waiting on a listener whose accept
    /// queue is full (the handshake's SYN is dropped, as on a full link, until the probe's
    /// timeout), do not keep an address lookup waiting: it is answered while every probe still
    /// waits. (On `DispatchQueue.global()`, as wide as the cores, the lookup waited for them.)
    func testDelayProbesOnAFullLinkDoNotHoldBackAnAddressLookup() async throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(listener, 0)
        var fillers: [Int32] = []
        defer {
            close(listener)
            for filler in fillers { close(filler) }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                guard bind(listener, raw, length) == 0, listen(listener, 0) == 0,
                    getsockname(listener, raw, &length) == 0
                else {
                    throw XCTSkip("cannot listen on 127.0.0.1: \(errno)")
                }
            }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        // Fill the accept queue (backlog 0 holds one connection), and wait until the listener
        // holds it: a SYN that comes before would find room (and a SYN cookie would connect it).
        let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, length) }
        }
        fillers.append(filler)
        let filled = Date() + 10
        while acceptQueue(of: port) < 1, Date() < filled { try await Task.sleep(for: .milliseconds(10)) }
        XCTAssertEqual(acceptQueue(of: port), 1, "the listener's accept queue is full")
        let fillerPorts = Set(
            fillers.map { filler -> String in
                var local = sockaddr_in()
                var size = socklen_t(MemoryLayout<sockaddr_in>.size)
                _ = withUnsafeMutablePointer(to: &local) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(filler, $0, &size) }
                }
                return String(format: "0100007F:%04X", Int(UInt16(bigEndian: local.sin_port)))
            })
        let probes = ProcessInfo.processInfo.activeProcessorCount + 2
        let ended = EndCount()
        let probing = Task {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<probes {
                    group.addTask {
                        let started = Date()
                        let delay = await DelayProbe.connectTime(address: "127.0.0.1", port: port, timeout: 3)
                        ended.add(
                            "\(delay.map { String(format: "connected in %.3f s", $0) } ?? "no answer") after \(String(format: "%.3f", Date().timeIntervalSince(started))) s"
                        )
                    }
                }
            }
        }
        // Every probe's handshake is under way (its socket in SYN-SENT towards the listener).
        let deadline = Date() + 10
        while synSent(to: port, besides: fillerPorts) < probes, Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(
            synSent(to: port, besides: fillerPorts), probes,
            "the probes are waiting on the full queue: \(ended.outcomes)")
        let addresses = try await AddressResolver.resolve("localhost", port: 80)
        XCTAssertFalse(addresses.isEmpty)
        XCTAssertEqual(ended.value, 0, "the lookup was answered while every probe still waited: \(ended.outcomes)")
        await probing.value
        XCTAssertEqual(ended.value, probes)
    }

    /// /proc/net/tcp, read to its end (`String(contentsOfFile:)` stops after the first page of a
    /// proc file: with the sockets a full test run leaves behind, the probes' lines were past it).
    private static func tcpTable() -> String {
        let file = open("/proc/net/tcp", O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return "" }
        defer { close(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The connections waiting in the accept queue of the listener on 127.0.0.1:`port` (the
    /// `rx_queue` of its LISTEN line in /proc/net/tcp).
    private func acceptQueue(of port: Int) -> Int {
        let table = Self.tcpTable()
        let local = String(format: "0100007F:%04X", port)
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 4, fields[1] == local, fields[3] == "0A" else { continue }
            return fields[4].split(separator: ":").last.flatMap { Int($0, radix: 16) } ?? 0
        }
        return 0
    }

    /// Sockets in SYN-SENT towards `port` on 127.0.0.1 (from /proc/net/tcp), other than those
    /// bound to `besides` (local addresses as the table writes them).
    private func synSent(to port: Int, besides: Set<String>) -> Int {
        let table = Self.tcpTable()
        let remote = String(format: "0100007F:%04X", port)
        return table.split(separator: "\n").filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[2] == remote && fields[3] == "02" && !besides.contains(String(fields[1]))
        }.count
    }
}

private final class EndCount: @unchecked Sendable {
    private let lock = NSLock()
    private var ends: [String] = []
    var value: Int { lock.withLock { ends.count } }
    /// How each probe that ended did (for a failure's message).
    var outcomes: [String] { lock.withLock { ends } }
    func add(_ outcome: String) { lock.withLock { ends.append(outcome) } }
}
