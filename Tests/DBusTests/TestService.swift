import DBus
import Foundation
import NIOConcurrencyHelpers

/// The object the D-Bus tests export: one of each kind of method, signal and property.
final class TestService: Sendable {
    static let name = "org.example.DBusTest"
    static let path: ObjectPath = "/org/example/Test"
    static let interfaceName = "org.example.Test"

    static let interface = InterfaceDescription(
        interfaceName,
        methods: [
            .init("Echo", in: [.init("value", .variant)], out: [.init("value", .variant)]),
            .init(
                "EchoAll",
                in: basicArguments,
                out: basicArguments
            ),
            .init(
                "EchoComplex",
                in: complexArguments,
                out: complexArguments
            ),
            .init("EchoBytes", in: [.init("data", .array(.byte))], out: [.init("data", .array(.byte))]),
            .init("ReadFD", in: [.init("fd", .unixFD)], out: [.init("data", .array(.byte))]),
            .init("MakeFD", in: [.init("data", .array(.byte))], out: [.init("fd", .unixFD)]),
            .init("Fail", in: [.init("name", .string), .init("message", .string)]),
            .init("Sleep", in: [.init("milliseconds", .uint32)], out: [.init("slept", .boolean)]),
            .init("Emit", in: [.init("count", .uint32)]),
            .init("WhoAmI", out: [.init("uid", .uint32), .init("pid", .uint32)]),
            .init("AddChild", in: [.init("name", .string)], out: [.init("path", .objectPath)]),
            .init("RemoveChild", in: [.init("name", .string)]),
            .init("BadReply"),
        ],
        signals: [.init("Tick", [.init("n", .uint32)])],
        properties: [
            .init("Counter", .uint64),
            .init("Label", .string, access: .readwrite),
        ]
    )

    static let childInterface = InterfaceDescription(
        "org.example.Test.Child", properties: [.init("Name", .string, emitsChanged: .const)]
    )

    static let basicArguments: [InterfaceDescription.Argument] = [
        .init("y", .byte), .init("b", .boolean), .init("n", .int16), .init("q", .uint16),
        .init("i", .int32), .init("u", .uint32), .init("x", .int64), .init("t", .uint64),
        .init("d", .double), .init("s", .string), .init("o", .objectPath), .init("g", .signature),
    ]

    static let complexArguments: [InterfaceDescription.Argument] = [
        .init("dict", .dictionary(key: .string, value: .variant)),
        .init("structs", .array(.structure([.int32, .uint32, .string]))),
        .init("nested", .array(.array(.byte))),
        .init("deep", .dictionary(key: .string, value: .dictionary(key: .string, value: .variant))),
    ]

    struct State {
        var counter: UInt64 = 0
        var label = "initial"
        var sleepsFinished = 0
    }

    let state = NIOLockedValueBox(State())
    let connection: Connection

    init(connection: Connection) {
        self.connection = connection
    }

    func export() throws {
        let object = try ExportedObject(
            path: TestService.path,
            interfaces: [
                ExportedInterface(
                    TestService.interface,
                    methods: methods(),
                    getProperty: { [state] name in
                        state.withLockedValue { state in
                            switch name {
                            case "Counter": return .uint64(state.counter)
                            case "Label": return .string(state.label)
                            default: return nil
                            }
                        }
                    },
                    setProperty: { [state] name, value in
                        guard name == "Label", let label = value.stringValue else { throw BusError.invalidArgs("no") }
                        guard label != "forbidden" else {
                            throw BusError(name: "org.example.Test.Error.Forbidden", message: "that label is forbidden")
                        }
                        state.withLockedValue { $0.label = label }
                    }
                )
            ],
            isObjectManager: true
        )
        try connection.export(object)
    }

    private func count() {
        state.withLockedValue { $0.counter += 1 }
    }

    private func methods() -> [String: ExportedInterface.MethodHandler] {
        [
            "Echo": { [self] call in
                count(); return call.arguments
            },
            "EchoAll": { [self] call in
                count(); return call.arguments
            },
            "EchoComplex": { [self] call in
                count(); return call.arguments
            },
            "EchoBytes": { [self] call in
                count(); return call.arguments
            },
            "ReadFD": { call in
                guard let fd = call.arguments[0].unixFDValue else { throw BusError.invalidArgs("fd") }
                var data: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65536)
                lseek(fd.fd, 0, SEEK_SET)
                while true {
                    let n = read(fd.fd, &buffer, buffer.count)
                    if n <= 0 { break }
                    data += buffer[0..<n]
                }
                return [.bytes(data)]
            },
            "MakeFD": { call in
                let data = call.arguments[0].bytesValue ?? []
                var fds: [Int32] = [0, 0]
                guard pipe(&fds) == 0 else { throw BusError.failed("pipe") }
                _ = data.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
                close(fds[1])
                return [.unixFD(UnixFD(owning: fds[0]))]
            },
            "Fail": { call in
                throw BusError(name: call.arguments[0].stringValue ?? "", message: call.arguments[1].stringValue ?? "")
            },
            "Sleep": { [state] call in
                try await Task.sleep(for: .milliseconds(Int(call.arguments[0].uint32Value ?? 0)))
                state.withLockedValue { $0.sleepsFinished += 1 }
                return [.boolean(true)]
            },
            "Emit": { [connection] call in
                let count = call.arguments[0].uint32Value ?? 0
                for n in 0..<count {
                    try connection.emitSignal(
                        path: TestService.path, interface: TestService.interfaceName, name: "Tick",
                        arguments: [.uint32(n)]
                    )
                }
                return []
            },
            "WhoAmI": { call in
                let credentials = try await call.credentials()
                return [.uint32(credentials.uid), .uint32(credentials.pid ?? 0)]
            },
            "AddChild": { [connection] call in
                let path = try TestService.path.appending(call.arguments[0].stringValue ?? "")
                let name = call.arguments[0].stringValue ?? ""
                try connection.export(
                    ExportedObject(
                        path: path,
                        interfaces: [
                            ExportedInterface(TestService.childInterface, getProperty: { _ in .string(name) })
                        ]))
                return [.objectPath(path)]
            },
            "RemoveChild": { [connection] call in
                connection.unexport(try TestService.path.appending(call.arguments[0].stringValue ?? ""))
                return []
            },
            "BadReply": { _ in
                // Declared to return nothing: the layer must refuse to send this.
                [.string("not declared")]
            },
        ]
    }
}
