import DBus
import Foundation
import TestSupport
import XCTest

/// Starts a private dbus-daemon and exports `TestService` under its well-known name.
class BusTestCase: XCTestCase {
    var bus: PrivateBus!
    var service: Connection!
    var testService: TestService!
    /// The bus's message size limit in these tests.
    static let maxMessageSize = 4 * 1024 * 1024

    override func setUp() async throws {
        bus = try PrivateBus(limits: ["max_message_size": BusTestCase.maxMessageSize])
        service = try await Connection.open(.address(bus.address))
        testService = TestService(connection: service)
        try testService.export()
        try await service.requestName(TestService.name)
    }

    override func tearDown() async throws {
        service?.close()
        bus?.stop()
    }

    /// Runs a client program against the private bus.
    func run(
        _ arguments: [String], stdin: String? = nil, timeout: TimeInterval = 60
    ) async throws -> ProcessRunner.Output {
        try await ProcessRunner.run(
            arguments, environment: bus.environment, stdin: stdin.map { Data($0.utf8) }, timeout: timeout
        )
    }

    func busctl(_ arguments: [String]) async throws -> ProcessRunner.Output {
        try await run(["busctl", "--address=\(bus.address)", "--"] + arguments)
    }

    func busctlCall(_ method: String, _ signature: String, _ arguments: [String]) async throws -> String {
        let output = try await busctl(
            ["call", TestService.name, TestService.path.rawValue, TestService.interfaceName, method, signature]
                + arguments
        )
        XCTAssertEqual(output.status, 0, output.description)
        return output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func gdbusCall(_ method: String, _ arguments: [String]) async throws -> ProcessRunner.Output {
        try await run(
            [
                "gdbus", "call", "--address", bus.address, "--dest", TestService.name,
                "--object-path", TestService.path.rawValue, "--method", "\(TestService.interfaceName).\(method)",
            ] + arguments)
    }

    /// Runs a python3-dbus script (Debian's python3, which has the dbus module). `BUS` is the address.
    func python(_ script: String, timeout: TimeInterval = 60) async throws -> ProcessRunner.Output {
        try await run(["/usr/bin/python3", "-c", script], timeout: timeout)
    }

    func client() async throws -> Connection {
        try await Connection.open(.address(bus.address))
    }
}
