// Method-call round trips and signal throughput through a private dbus-daemon, with
// `busctl call org.freedesktop.DBus / org.freedesktop.DBus.Peer Ping` timed in the same run as
// the reference. Prints figures; asserts nothing.
import DBus
import Foundation
import NIOConcurrencyHelpers
import TestSupport

let calls = Int(ProcessInfo.processInfo.environment["BENCH_CALLS"] ?? "") ?? 20_000
let signals = Int(ProcessInfo.processInfo.environment["BENCH_SIGNALS"] ?? "") ?? 50_000
let busctlRuns = 200

let bus = try PrivateBus()
let service = try await Connection.open(.address(bus.address))
let interface = InterfaceDescription(
    "org.example.Bench",
    methods: [
        .init("Echo", in: [.init("value", .string)], out: [.init("value", .string)]),
        .init("Emit", in: [.init("count", .uint32)]),
    ],
    signals: [.init("Tick", [.init("n", .uint32)])]
)
try service.export(
    ExportedObject(
        path: "/bench",
        interfaces: [
            ExportedInterface(
                interface,
                methods: [
                    "Echo": { call in call.arguments },
                    "Emit": { call in
                        for n in 0..<(call.arguments[0].uint32Value ?? 0) {
                            try call.connection.emitSignal(
                                path: "/bench", interface: "org.example.Bench", name: "Tick", arguments: [.uint32(n)])
                        }
                        return []
                    },
                ])
        ]))
try await service.requestName("org.example.Bench")
let client = try await Connection.open(.address(bus.address))

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

// Sequential round trips: one call in flight.
var start = ContinuousClock.now
for i in 0..<calls {
    _ = try await client.call(
        destination: "org.example.Bench", path: "/bench", interface: "org.example.Bench", method: "Echo",
        arguments: [.string("\(i)")])
}
let sequential = Double(calls) / seconds(ContinuousClock.now - start)

// Pipelined: 32 calls in flight.
start = ContinuousClock.now
try await withThrowingTaskGroup(of: Void.self) { group in
    for worker in 0..<32 {
        group.addTask {
            for i in stride(from: worker, to: calls, by: 32) {
                _ = try await client.call(
                    destination: "org.example.Bench", path: "/bench", interface: "org.example.Bench", method: "Echo",
                    arguments: [.string("\(i)")])
            }
        }
    }
    try await group.waitForAll()
}
let pipelined = Double(calls) / seconds(ContinuousClock.now - start)

// Signals: the service emits, the client counts them all.
let received = NIOLockedValueBox(0)
try await client.subscribe(MatchRule(interface: "org.example.Bench", member: "Tick")) { _ in
    received.withLockedValue { $0 += 1 }
}
start = ContinuousClock.now
_ = try await client.call(
    destination: "org.example.Bench", path: "/bench", interface: "org.example.Bench", method: "Emit",
    arguments: [.uint32(UInt32(signals))], timeout: .seconds(300))
while received.withLockedValue({ $0 }) < signals { try await Task.sleep(for: .milliseconds(1)) }
let signalRate = Double(signals) / seconds(ContinuousClock.now - start)

// Building one signal (no bus): a task's PropertiesChanged through libdbus's appends, and
// written in one pass and loaded by libdbus (what Connection.emitSignal does).
let builds = 100_000
let changed: [DBusValue] = [
    .string("org.example.Downloads.Task"), .vardict(["BytesWritten": .int64(65536), "BytesExpected": .int64(65536)]),
    .strings([]),
]
start = ContinuousClock.now
for _ in 0..<builds {
    let message = try Message.signal(
        path: "/org/example/Downloads/tasks/1", interface: "org.freedesktop.DBus.Properties", name: "PropertiesChanged")
    try message.append(changed)
}
let appended = seconds(ContinuousClock.now - start) / Double(builds) * 1e6
start = ContinuousClock.now
for _ in 0..<builds {
    _ = try Message.signal(
        path: "/org/example/Downloads/tasks/1", interface: "org.freedesktop.DBus.Properties", name: "PropertiesChanged",
        destination: nil, arguments: changed
    )
}
let onePass = seconds(ContinuousClock.now - start) / Double(builds) * 1e6

// A small task's signals as the service sends them (InterfacesAdded with its 15 properties, two
// StateChanged, two PropertiesChanged of the 10 that change, Progress, Finished), both ways.
let task: ObjectPath = "/org/example/Downloads/tasks/1042"
let properties: [String: DBusValue] = [
    "Id": .uint64(1042), "Session": .string("org.example.App"), "URL": .string("http://127.0.0.1:8080/p1042.bin"),
    "Destination": .string("/dev/shm/out/p1042.bin"), "State": .string("running"), "BytesWritten": .int64(0),
    "BytesExpected": .int64(-1), "Error": .string(""), "ErrorMessage": .string(""), "WaitingFor": .string(""),
    "DesktopEntry": .string(""), "Background": .boolean(false), "Title": .string(""), "Description": .string(""),
    "Metadata": .vardict([:]),
]
let changing = properties.filter { !["Id", "Session", "URL", "Destination", "DesktopEntry"].contains($0.key) }
let taskSignals: [(ObjectPath, String, String, [DBusValue])] = [
    (
        "/org/example/Downloads", "org.freedesktop.DBus.ObjectManager", "InterfacesAdded",
        [
            .objectPath(task),
            .dictionary(
                key: .string, value: .dictionary(key: .string, value: .variant),
                [
                    .init(.string("org.example.Downloads.Task"), .vardict(properties))
                ]),
        ]
    ),
    ("/org/example/Downloads", "org.example.Downloads", "StateChanged", [.objectPath(task), .string("running")]),
    (
        task, "org.freedesktop.DBus.Properties", "PropertiesChanged",
        [.string("org.example.Downloads.Task"), .vardict(changing), .strings([])]
    ),
    (
        "/org/example/Downloads", "org.example.Downloads", "Progress",
        [.objectPath(task), .int64(65536), .int64(65536), .int64(65536)]
    ),
    ("/org/example/Downloads", "org.example.Downloads", "StateChanged", [.objectPath(task), .string("finished")]),
    (
        task, "org.freedesktop.DBus.Properties", "PropertiesChanged",
        [.string("org.example.Downloads.Task"), .vardict(changing), .strings([])]
    ),
    (
        "/org/example/Downloads", "org.example.Downloads", "Finished",
        [.objectPath(task), .string("/dev/shm/out/p1042.bin")]
    ),
]
let tasks = 20_000
start = ContinuousClock.now
for _ in 0..<tasks {
    for (path, interface, name, arguments) in taskSignals {
        let message = try Message.signal(path: path, interface: interface, name: name)
        try message.append(arguments)
    }
}
let taskAppended = seconds(ContinuousClock.now - start) / Double(tasks) * 1e6
start = ContinuousClock.now
for _ in 0..<tasks {
    for (path, interface, name, arguments) in taskSignals {
        _ = try Message.signal(path: path, interface: interface, name: name, destination: nil, arguments: arguments)
    }
}
let taskOnePass = seconds(ContinuousClock.now - start) / Double(tasks) * 1e6

// Reference: busctl's Ping of the bus daemon, one process per call.
start = ContinuousClock.now
for _ in 0..<busctlRuns {
    let output = try ProcessRunner.runBlocking([
        "busctl", "--address=\(bus.address)", "call", "org.freedesktop.DBus", "/", "org.freedesktop.DBus.Peer", "Ping",
    ])
    precondition(output.status == 0, "busctl failed: \(output)")
}
let busctlRate = Double(busctlRuns) / seconds(ContinuousClock.now - start)

print("dbus-bench (private dbus-daemon, \(ProcessInfo.processInfo.activeProcessorCount) cores)")
print(String(format: "  Echo(s) round trips, 1 in flight:   %9.0f calls/s", sequential))
print(String(format: "  Echo(s) round trips, 32 in flight:  %9.0f calls/s", pipelined))
print(String(format: "  signals emitted and received:       %9.0f signals/s", signalRate))
print(String(format: "  PropertiesChanged built, libdbus appends: %6.2f µs", appended))
print(String(format: "  PropertiesChanged built, one pass:        %6.2f µs", onePass))
print(String(format: "  a small task's 7 signals built, libdbus appends: %6.1f µs", taskAppended))
print(String(format: "  a small task's 7 signals built, one pass:        %6.1f µs", taskOnePass))
print(String(format: "  reference busctl Ping (a process each): %6.0f calls/s", busctlRate))
print(String(format: "  ratio sequential / busctl: %.1fx", sequential / busctlRate))
client.close()
service.close()
bus.stop()
