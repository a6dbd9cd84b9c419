import Crypto
import DBus
import DownloadEngine
import DownloadModel
import DownloadStore
import DownloadsAPI
import DownloadsService
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// The service in the test process (engine, store on a real SQLite file, D-Bus layer) on a
/// private dbus-daemon, called through a second connection as any client would.
class InProcessServiceTestCase: XCTestCase {
    var bus: PrivateBus!
    var http: TestHTTPServer!
    var directory: TemporaryDirectory!
    var service: DownloadsService?
    var serviceConnection: Connection?
    var client: Connection!
    let key = SymmetricKey(data: [UInt8](repeating: 3, count: 32))
    let signals = NIOLockedValueBox([ManagerSignal]())
    var databasePath: String { directory.file("downloads.sqlite") }
    /// What the service is started with (a test may lower its limits before `startService`).
    var serviceConfiguration = DownloadsService.Configuration()

    override func setUp() async throws {
        bus = try PrivateBus()
        http = try TestHTTPServer()
        directory = try TemporaryDirectory(prefix: "service-test")
        try await startService()
        client = try await Connection.open(.address(bus.address))
        _ = try await client.subscribe(MatchRule(interface: DownloadsInterfaces.manager.name)) { [signals] message in
            if let signal = ManagerSignal(name: message.member ?? "", arguments: (try? message.arguments()) ?? []) {
                signals.withLockedValue { $0.append(signal) }
            }
        }
    }

    override func tearDown() async throws {
        await stopService()
        client?.close()
        http?.stop()
        bus?.stop()
        directory?.remove()
    }

    func startService() async throws {
        let connection = try await Connection.open(.address(bus.address))
        var configuration = SessionManager.Configuration()
        configuration.checkpointBytes = 64 * 1024
        let engine = SessionManager(configuration: configuration, resumeDataKey: key)
        let service = DownloadsService(
            connection: connection, engine: engine,
            store: try DownloadStore(path: databasePath, secrets: StoreSecrets(rootKey: key)),
            configuration: serviceConfiguration
        )
        try await service.start()
        self.service = service
        serviceConnection = connection
    }

    func stopService() async {
        await service?.shutdown()
        serviceConnection?.close()
        service = nil
        serviceConnection = nil
    }

    func call(_ method: String, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await client.call(
            destination: DownloadsAPI.busName, path: DownloadsAPI.managerPath,
            interface: DownloadsInterfaces.manager.name,
            method: method, arguments: arguments
        )
    }

    func start(_ url: String, _ destination: String, _ options: TaskOptions = TaskOptions()) async throws -> ObjectPath
    {
        let reply = try await call("Start", [.string(url), .string(destination), .vardict(options.dictionary)])
        return try XCTUnwrap(reply.first?.objectPathValue)
    }

    func property(_ path: ObjectPath, _ property: TaskProperty) async throws -> DBusValue? {
        try await client.call(
            destination: DownloadsAPI.busName, path: path, interface: "org.freedesktop.DBus.Properties", method: "Get",
            arguments: [.string(DownloadsInterfaces.task.name), .string(property.name)]
        ).first?.variantValue
    }

    @discardableResult
    func waitState(_ path: ObjectPath, _ states: Set<TaskState>, seconds: Double = 30) async throws -> TaskState? {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var last: TaskState?
        while ContinuousClock.now < deadline {
            if let text = try? await property(path, .state)?.stringValue, let state = TaskState(rawValue: text) {
                last = state
                if states.contains(state) { return state }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTFail("\(path) did not reach \(states) (is \(last.map(\.rawValue) ?? "nothing"))")
        return last
    }

    func waitBytes(_ path: ObjectPath, atLeast bytes: Int64, seconds: Double = 30) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if let written = try? await property(path, .bytesWritten)?.int64Value, written >= bytes { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTFail("\(path) did not write \(bytes) bytes")
    }

    /// Waits (bounded) for a signal matching `match`.
    func waitSignal(seconds: Double = 10, _ match: (ManagerSignal) -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if signals.withLockedValue({ $0 }).contains(where: match) { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTFail("no such signal in \(signals.withLockedValue { $0 })")
    }

    /// The JSON line of a resume-data blob.
    static func description(of blob: [UInt8]) throws -> [String: Any] {
        let lines = blob.split(separator: 10)
        XCTAssertEqual(lines.count, 3)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(lines[1])) as? [String: Any])
    }
}
