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
try service.export(ExportedObject(path: "/bench", interfaces: [
    ExportedInterface(interface, methods: [
        "Echo": { call in call.arguments },
        "Emit": { call in
            for n in 0..<(call.arguments[0].uint32Value ?? 0) {
                try call.connection.emitSignal(path: "/bench", interface: "org.example.Bench", name: "Tick", arguments: [.uint32(n)])
            }
            return []
        },
    ]),
]))
try await service.requestName("org.example.Bench")
let client = try await Connection.open(.address(bus.address))

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

// Sequential round trips: one call in flight.
var start = ContinuousClock.now
for i in 0..<calls {
    _ = try await client.call(destination: "org.example.Bench", path: "/bench", interface: "org.example.Bench", method: "Echo", arguments: [.string("\(i)")])
}
let sequential = Double(calls) / seconds(ContinuousClock.now - start)

// Pipelined: 32 calls in flight.
start = ContinuousClock.now
try await withThrowingTaskGroup(of: Void.self) { group in
    for worker in 0..<32 {
        group.addTask {
            for i in stride(from: worker, to: calls, by: 32) {
                _ = try await client.call(destination: "org.example.Bench", path: "/bench", interface: "org.example.Bench", method: "Echo", arguments: [.string("\(i)")])
            }
        }
    }
    try await group.waitForAll()
}
let pipelined = Double(calls) / seconds(ContinuousClock.now - start)

// Signals: the service emits, the client counts them all.
let received = NIOLockedValueBox(0)
try await client.subscribe(MatchRule(interface: "org.example.Bench", member: "Tick")) { _ in received.withLockedValue { $0 += 1 } }
start = ContinuousClock.now
_ = try await client.call(destination: "org.example.Bench", path: "/bench", interface: "org.example.Bench", method: "Emit", arguments: [.uint32(UInt32(signals))], timeout: .seconds(300))
while received.withLockedValue({ $0 }) < signals { try await Task.sleep(for: .milliseconds(1)) }
let signalRate = Double(signals) / seconds(ContinuousClock.now - start)

// Reference: busctl's Ping of the bus daemon, one process per call.
start = ContinuousClock.now
for _ in 0..<busctlRuns {
    let output = try ProcessRunner.runBlocking(["busctl", "--address=\(bus.address)", "call", "org.freedesktop.DBus", "/", "org.freedesktop.DBus.Peer", "Ping"])
    precondition(output.status == 0, "busctl failed: \(output)")
}
let busctlRate = Double(busctlRuns) / seconds(ContinuousClock.now - start)

print("dbus-bench (private dbus-daemon, \(ProcessInfo.processInfo.activeProcessorCount) cores)")
print(String(format: "  Echo(s) round trips, 1 in flight:   %9.0f calls/s", sequential))
print(String(format: "  Echo(s) round trips, 32 in flight:  %9.0f calls/s", pipelined))
print(String(format: "  signals emitted and received:       %9.0f signals/s", signalRate))
print(String(format: "  reference busctl Ping (a process each): %6.0f calls/s", busctlRate))
print(String(format: "  ratio sequential / busctl: %.1fx", sequential / busctlRate))
client.close()
service.close()
bus.stop()
