import DBus
import Foundation
import NIOConcurrencyHelpers
import TestSupport
import XCTest

/// The connection as a Swift client and service use it, on a real private bus.
final class ConnectionTests: BusTestCase {
    static func callTest(
        _ client: Connection, _ method: String, _ arguments: [DBusValue] = []
    ) async throws -> [DBusValue] {
        try await client.call(
            destination: TestService.name, path: TestService.path, interface: TestService.interfaceName,
            method: method, arguments: arguments
        )
    }

    func testSwiftClientRoundTripsEveryType() async throws {
        let client = try await client()
        defer { client.close() }
        let basics: [DBusValue] = [
            .byte(1), .boolean(true), .int16(-2), .uint16(3), .int32(-4), .uint32(5), .int64(-6), .uint64(7),
            .double(8.5), .string("nine ✓"), .objectPath("/ten"), .signature("a{sv}"),
        ]
        let echoed = try await Self.callTest(client, "EchoAll", basics)
        XCTAssertEqual(echoed, basics)
        let complex: [DBusValue] = [
            .vardict(["a": .int32(1), "b": .variant(.strings(["x"])), "c": .structure([.byte(1), .double(2)])]),
            .array(
                element: .structure([.int32, .uint32, .string]), [.structure([.int32(1), .uint32(2), .string("s")])]),
            .array(element: .array(.byte), [.bytes([1, 2, 3]), .bytes([])]),
            .dictionary(
                key: .string, value: .dictionary(key: .string, value: .variant),
                [
                    .init(.string("outer"), .vardict(["inner": .boolean(false)]))
                ]),
        ]
        let echoedComplex = try await Self.callTest(client, "EchoComplex", complex)
        XCTAssertEqual(echoedComplex, complex)
    }

    func testBadValuesAreErrorsNotCrashes() async throws {
        let client = try await client()
        defer { client.close() }
        let message = try Message.methodCall(
            destination: TestService.name, path: TestService.path, interface: TestService.interfaceName, member: "Echo")
        func throwsBusError(
            _ body: @autoclosure () throws -> some Any, name: String = BusError.invalidArgsName, line: UInt = #line
        ) {
            XCTAssertThrowsError(try body(), line: line) { error in
                XCTAssertEqual((error as? BusError)?.name, name, "\(error)", line: line)
            }
        }
        throwsBusError(try message.append([.variant(.string("nul\0inside"))]))
        throwsBusError(try message.append([.array(element: .int32, [.string("not an int")])]))
        throwsBusError(try message.append([.signature("a{vs}")]), name: BusError.invalidSignatureName)
        let trailing = "/trailing/"
        throwsBusError(try ObjectPath(trailing))
        throwsBusError(try Message.methodCall(destination: nil, path: "/", interface: "bad", member: "M"))
        // A correct call still works on the same connection.
        let reply = try await Self.callTest(client, "Echo", [.variant(.int32(1))])
        XCTAssertEqual(reply, [.variant(.int32(1))])
    }

    func testFileDescriptorPassingBetweenSwiftPeers() async throws {
        let client = try await client()
        defer { client.close() }
        XCTAssertTrue(client.canPassUnixFDs)
        let reply = try await Self.callTest(client, "MakeFD", [.bytes(Array("through a pipe".utf8))])
        let fd = try XCTUnwrap(reply.first?.unixFDValue)
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = read(fd.fd, &buffer, buffer.count)
        XCTAssertEqual(String(decoding: buffer[0..<max(0, n)], as: UTF8.self), "through a pipe")
        let back = try await Self.callTest(client, "ReadFD", [.unixFD(fd)])
        XCTAssertEqual(back, [.bytes([])], "the pipe was drained")
    }

    func testBurstOfTenThousandCallsWithConcurrentSignals() async throws {
        let client = try await client()
        defer { client.close() }
        let received = NIOLockedValueBox([UInt32]())
        try await client.subscribe(MatchRule(interface: TestService.interfaceName, member: "Tick")) { message in
            if let n = try? message.arguments().first?.uint32Value {
                received.withLockedValue { $0.append(n) }
            }
        }
        let calls = 10_000
        let signals: UInt32 = 10_000
        // Signals are emitted from other tasks on the service side while the calls run.
        async let emitted: Void = {
            for _ in 0..<10 {
                _ = try await Self.callTest(client, "Emit", [.uint32(signals / 10)])
            }
        }()
        let correct = try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in 0..<50 {
                group.addTask {
                    var ok = 0
                    for i in 0..<(calls / 50) {
                        let value = Int32(worker * 1000 + i)
                        let reply = try await Self.callTest(client, "Echo", [.variant(.int32(value))])
                        if reply == [.variant(.int32(value))] { ok += 1 }
                    }
                    return ok
                }
            }
            return try await group.reduce(0, +)
        }
        try await emitted
        XCTAssertEqual(correct, calls)
        // Every signal arrives: wait for the tail without a timed assertion on speed.
        for _ in 0..<200 where received.withLockedValue({ $0.count }) < Int(signals) {
            try await Task.sleep(for: .milliseconds(50))
        }
        let got = received.withLockedValue { $0 }
        XCTAssertEqual(got.count, Int(signals))
        XCTAssertEqual(got.filter { $0 == 0 }.count, 10, "ten batches, each numbered from zero, all in order")
    }

    func testSignalsSentFromOtherThreadsGoOutAtOnce() async throws {
        // No incoming traffic on the service: a loop blocked in read_write_dispatch would hold these.
        let client = try await client()
        defer { client.close() }
        let received = NIOLockedValueBox(0)
        try await client.subscribe(MatchRule(interface: TestService.interfaceName, member: "Tick")) { _ in
            received.withLockedValue { $0 += 1 }
        }
        let service = self.service!
        let thread = Thread {
            try? service.emitSignal(
                path: TestService.path, interface: TestService.interfaceName, name: "Tick", arguments: [.uint32(1)])
        }
        thread.start()
        for _ in 0..<100 where received.withLockedValue({ $0 }) == 0 {
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(received.withLockedValue { $0 }, 1)
    }

    func testMessagesNearTheBusSizeLimit() async throws {
        let client = try await client()
        defer { client.close() }
        let size = BusTestCase.maxMessageSize - 4096
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let reply = try await Self.callTest(client, "EchoBytes", [.bytes(payload)])
        XCTAssertEqual(reply.first?.bytesValue, payload)

        // Over the limit: the bus drops that client; the service is unharmed. The oversized
        // message is sent by another process (python3-dbus): sent from this process, libdbus
        // crashed now and then inside dbus_connection_send_with_reply (_dbus_list_prepend_link)
        // while the bus dropped the connection; see the session note on the system-bus issue.
        let script = """
            import dbus, sys
            bus = dbus.bus.BusConnection('\(bus.address)')
            try:
                bus.call_blocking('\(TestService.name)', '\(TestService.path.rawValue)', '\(TestService.interfaceName)', 'EchoBytes',
                                  'ay', [dbus.ByteArray(b'\\x01' * \(BusTestCase.maxMessageSize + 1024))], timeout=3)
                print('accepted')
            except dbus.DBusException as e:
                print('refused', e.get_dbus_name())
            """
        let oversized = try await run(["python3", "-c", script])
        XCTAssertFalse(oversized.stdout.contains("accepted"), "an oversized message cannot succeed: \(oversized)")
        let after = try await Self.callTest(client, "Echo", [.variant(.string("alive"))])
        XCTAssertEqual(after, [.variant(.string("alive"))])
    }

    func testNameTakenIsAClearError() async throws {
        let other = try await client()
        defer { other.close() }
        do {
            try await other.requestName(TestService.name)
            XCTFail("the name is owned by the service")
        } catch let error as BusError {
            XCTAssertEqual(error.name, BusError.nameTakenName)
            XCTAssertTrue(error.message.contains(TestService.name))
        }
    }

    func testOutgoingCallTimeoutAndAutoStartControl() async throws {
        let client = try await client()
        defer { client.close() }
        let start = ContinuousClock.now
        do {
            _ = try await client.call(
                destination: TestService.name, path: TestService.path, interface: TestService.interfaceName,
                method: "Sleep", arguments: [.uint32(3000)], timeout: .milliseconds(200)
            )
            XCTFail("expected a timeout")
        } catch let error as BusError {
            XCTAssertEqual(error.name, BusError.noReplyName)
        }
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(3))
        do {
            _ = try await client.call(
                destination: "org.example.NotRunning", path: "/", interface: "org.example.X", method: "M",
                autoStart: false
            )
            XCTFail("nobody owns that name")
        } catch let error as BusError {
            XCTAssertEqual(error.name, "org.freedesktop.DBus.Error.NameHasNoOwner")
        }
    }

    func testAutoStartLaunchesAnActivatableService() async throws {
        let script = bus.directory.file("activated.py")
        try """
        import dbus, dbus.service, dbus.mainloop.glib
        from gi.repository import GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        bus = dbus.SessionBus()
        name = dbus.service.BusName('org.example.Activated', bus)
        class O(dbus.service.Object):
            @dbus.service.method('org.example.Activated', in_signature='s', out_signature='s')
            def Hello(self, who):
                GLib.timeout_add(100, loop.quit)
                return 'hello ' + who
        o = O(bus, '/org/example/Activated')
        loop = GLib.MainLoop(); loop.run()
        """.write(toFile: script, atomically: true, encoding: .utf8)
        try """
        [D-BUS Service]
        Name=org.example.Activated
        Exec=/usr/bin/python3 \(script)
        """.write(toFile: bus.servicesDirectory + "/org.example.Activated.service", atomically: true, encoding: .utf8)
        let client = try await client()
        defer { client.close() }
        let reply = try await client.call(
            destination: "org.example.Activated", path: "/org/example/Activated", interface: "org.example.Activated",
            method: "Hello", arguments: [.string("swift")], timeout: .seconds(20)
        )
        XCTAssertEqual(reply, [.string("hello swift")])
    }

    func testUnicastSignalsReachOnlyTheirDestination() async throws {
        let alice = try await client()
        let bob = try await client()
        defer { alice.close(); bob.close() }
        let aliceGot = NIOLockedValueBox(0)
        let bobGot = NIOLockedValueBox(0)
        try await alice.subscribe(MatchRule(interface: "org.example.Unicast")) { _ in
            aliceGot.withLockedValue { $0 += 1 }
        }
        try await bob.subscribe(MatchRule(interface: "org.example.Unicast")) { _ in bobGot.withLockedValue { $0 += 1 } }
        try service.emitSignal(path: "/", interface: "org.example.Unicast", name: "Hi", destination: alice.uniqueName)
        try service.emitSignal(path: "/", interface: "org.example.Unicast", name: "Hi")
        // A round trip through the bus orders us after the signals.
        for _ in 0..<100 where aliceGot.withLockedValue({ $0 }) < 2 {
            try await Task.sleep(for: .milliseconds(20))
        }
        _ = try await Self.callTest(bob, "Echo", [.variant(.byte(0))])
        XCTAssertEqual(aliceGot.withLockedValue { $0 }, 2)
        XCTAssertEqual(bobGot.withLockedValue { $0 }, 1)
    }

    /// A subscription naming a well-known sender takes signals only from the unique name that
    /// owns it now (as GDBus does): another connection's unicast signal in the service's interface
    /// is dropped, and when the name moves, the old owner's signals are dropped too.
    func testASignalFromAnotherConnectionIsNotTakenForTheNamesOwners() async throws {
        let victim = try await client()
        let forger = try await client()
        defer { victim.close(); forger.close() }
        let got = NIOLockedValueBox([String]())
        try await victim.subscribe(MatchRule(sender: TestService.name, interface: "org.example.Test")) { message in
            got.withLockedValue { $0.append((try? message.arguments().first?.stringValue) ?? "") }
        }
        XCTAssertEqual(victim.followedOwner(of: TestService.name), service.uniqueName)
        func emit(_ from: Connection, _ text: String) throws {
            try from.emitSignal(
                path: TestService.path, interface: "org.example.Test", name: "Finished", arguments: [.string(text)],
                destination: victim.uniqueName)
        }
        try emit(forger, "forged")
        try emit(service, "real")
        try await waitUntil { got.withLockedValue { $0 } == ["real"] }
        // The name moves to another connection: the old owner is a stranger now.
        let successor = try await client()
        defer { successor.close() }
        try await service.releaseName(TestService.name)
        try await successor.requestName(TestService.name)
        try await waitUntil { victim.followedOwner(of: TestService.name) == successor.uniqueName }
        try emit(service, "old owner")
        try emit(forger, "forged again")
        try emit(successor, "new owner")
        try await waitUntil { got.withLockedValue { $0 }.count >= 2 }
        // A round trip through the bus orders us after anything else in flight.
        _ = try await victim.nameOwner(TestService.name)
        XCTAssertEqual(got.withLockedValue { $0 }, ["real", "new owner"])
    }

    private func waitUntil(_ condition: @escaping () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { return XCTFail("the condition did not hold within 10 s") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    func testObjectManagerAndPropertiesChangedSignals() async throws {
        let client = try await client()
        defer { client.close() }
        let events = NIOLockedValueBox([String]())
        try await client.subscribe(
            MatchRule(sender: service.uniqueName, interface: "org.freedesktop.DBus.ObjectManager")
        ) { message in
            let args = (try? message.arguments()) ?? []
            events.withLockedValue { $0.append("\(message.member ?? "") \(args.first?.stringValue ?? "")") }
        }
        try await client.subscribe(MatchRule(sender: service.uniqueName, interface: "org.freedesktop.DBus.Properties"))
        { message in
            let args = (try? message.arguments()) ?? []
            let changed = args.count > 1 ? (args[1].vardictValue?["Label"]?.stringValue ?? "") : ""
            events.withLockedValue { $0.append("\(message.member ?? "") \(changed)") }
        }
        let path = try await Self.callTest(client, "AddChild", [.string("c1")])
        XCTAssertEqual(path, [.objectPath("/org/example/Test/c1")])
        let managed = try await client.call(
            destination: TestService.name, path: TestService.path, interface: "org.freedesktop.DBus.ObjectManager",
            method: "GetManagedObjects"
        )
        XCTAssertEqual(
            managed,
            [
                .dictionary(
                    key: .objectPath,
                    value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)),
                    [
                        .init(
                            .objectPath("/org/example/Test/c1"),
                            .dictionary(
                                key: .string, value: .dictionary(key: .string, value: .variant),
                                [.init(.string("org.example.Test.Child"), .vardict(["Name": .string("c1")]))]
                            ))
                    ]
                )
            ])
        _ = try await client.call(
            destination: TestService.name, path: TestService.path, interface: "org.freedesktop.DBus.Properties",
            method: "Set", arguments: [.string(TestService.interfaceName), .string("Label"), .variant(.string("new"))]
        )
        _ = try await Self.callTest(client, "RemoveChild", [.string("c1")])
        let removed = try await Self.callTest(client, "Echo", [.variant(.byte(1))])
        XCTAssertEqual(removed.count, 1)
        for _ in 0..<100 where events.withLockedValue({ $0.count }) < 3 {
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(
            events.withLockedValue { $0 },
            [
                "InterfacesAdded /org/example/Test/c1", "PropertiesChanged new",
                "InterfacesRemoved /org/example/Test/c1",
            ])
        do {
            _ = try await client.call(
                destination: TestService.name, path: "/org/example/Test/c1",
                interface: "org.freedesktop.DBus.Properties",
                method: "GetAll", arguments: [.string("org.example.Test.Child")]
            )
            XCTFail("the object is gone")
        } catch let error as BusError {
            XCTAssertEqual(error.name, BusError.unknownObjectName)
        }
    }

    func testNameOwnerChangedTellsWhenAClientLeaves() async throws {
        let gone = NIOLockedValueBox([String]())
        try await service.onNameOwnerChanged { name, _, new in
            if new.isEmpty { gone.withLockedValue { $0.append(name) } }
        }
        let client = try await client()
        let name = client.uniqueName
        let credentials = try await service.credentials(of: name)
        XCTAssertEqual(credentials.uid, getuid())
        XCTAssertEqual(credentials.pid, UInt32(getpid()))
        client.close()
        for _ in 0..<100 where !gone.withLockedValue({ $0.contains(name) }) {
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertTrue(gone.withLockedValue { $0.contains(name) })
        do {
            _ = try await service.credentials(of: name)
            XCTFail("a client that left has no credentials")
        } catch let error as BusError {
            XCTAssertFalse(error.name.isEmpty)
        }
    }

    /// An interface that can read all its properties at once answers GetAll with that one read
    /// (a task's two dozen properties are one snapshot); Get still asks the getter; what the
    /// reader gives that is undeclared or of the wrong type is left out; a reader that finds
    /// the object gone answers as for a missing object.
    func testGetAllReadsEveryPropertyAtOnceWhenTheInterfaceCan() async throws {
        let description = InterfaceDescription(
            "org.example.Snapshot",
            properties: [.init("Name", .string), .init("Size", .int64), .init("Typed", .uint32)]
        )
        let reads = NIOLockedValueBox((getter: 0, all: 0))
        let gone = NIOLockedValueBox(false)
        try service.export(
            ExportedObject(
                path: "/snapshot",
                interfaces: [
                    ExportedInterface(
                        description,
                        getProperty: { name in
                            reads.withLockedValue { $0.getter += 1 }
                            return name == "Name" ? .string("one") : nil
                        },
                        readAll: {
                            reads.withLockedValue { $0.all += 1 }
                            guard !gone.withLockedValue({ $0 }) else { return nil }
                            return [
                                "Name": .string("one"), "Size": .int64(42), "Typed": .string("not a u"),
                                "Undeclared": .string("x"),
                            ]
                        })
                ]))
        let client = try await client()
        defer { client.close() }
        let properties = "org.freedesktop.DBus.Properties"
        let all = try await client.call(
            destination: TestService.name, path: "/snapshot", interface: properties, method: "GetAll",
            arguments: [.string("org.example.Snapshot")])
        XCTAssertEqual(all.first?.vardictValue, ["Name": .string("one"), "Size": .int64(42)])
        XCTAssertEqual(reads.withLockedValue { $0.all }, 1)
        XCTAssertEqual(reads.withLockedValue { $0.getter }, 0, "GetAll read the object once, not per property")
        let one = try await client.call(
            destination: TestService.name, path: "/snapshot", interface: properties, method: "Get",
            arguments: [.string("org.example.Snapshot"), .string("Name")])
        XCTAssertEqual(one.first?.variantValue, .string("one"))
        XCTAssertEqual(reads.withLockedValue { $0.getter }, 1)
        gone.withLockedValue { $0 = true }
        do {
            _ = try await client.call(
                destination: TestService.name, path: "/snapshot", interface: properties, method: "GetAll",
                arguments: [.string("org.example.Snapshot")])
            XCTFail("the object went away")
        } catch let error as BusError {
            XCTAssertEqual(error.name, BusError.unknownObjectName)
        }
    }

    func testAccessCheckGuardsMethodsPropertiesAndSetters() async throws {
        let description = InterfaceDescription(
            "org.example.Guarded", methods: [.init("Touch")],
            properties: [.init("Secret", .string), .init("Value", .string, access: .readwrite)]
        )
        let touched = NIOLockedValueBox(false)
        let value = NIOLockedValueBox("v")
        try service.export(
            ExportedObject(
                path: "/guarded",
                interfaces: [
                    ExportedInterface(
                        description,
                        methods: [
                            "Touch": { _ in
                                touched.withLockedValue { $0 = true }; return []
                            }
                        ],
                        getProperty: { name in
                            name == "Secret" ? .string("s3cret") : .string(value.withLockedValue { $0 })
                        },
                        setProperty: { _, new in value.withLockedValue { $0 = new.stringValue ?? "" } }
                    )
                ]
            ) { _ in throw BusError(name: BusError.accessDeniedName, message: "not yours") })
        let client = try await client()
        defer { client.close() }
        let properties = "org.freedesktop.DBus.Properties"
        let attempts: [(String, String, [DBusValue])] = [
            ("org.example.Guarded", "Touch", []),
            (properties, "Get", [.string("org.example.Guarded"), .string("Secret")]),
            (properties, "GetAll", [.string("org.example.Guarded")]),
            (properties, "Set", [.string("org.example.Guarded"), .string("Value"), .variant(.string("changed"))]),
        ]
        for (interface, method, arguments) in attempts {
            do {
                _ = try await client.call(
                    destination: TestService.name, path: "/guarded", interface: interface, method: method,
                    arguments: arguments)
                XCTFail("\(method) must be refused")
            } catch let error as BusError {
                XCTAssertEqual(error.name, BusError.accessDeniedName, method)
                XCTAssertEqual(error.message, "not yours")
            }
        }
        XCTAssertFalse(touched.withLockedValue { $0 })
        XCTAssertEqual(value.withLockedValue { $0 }, "v", "the setter never ran")
        // Introspection reveals no state and stays open.
        let xml = try await client.call(
            destination: TestService.name, path: "/guarded", interface: "org.freedesktop.DBus.Introspectable",
            method: "Introspect")
        XCTAssertTrue(xml.first?.stringValue?.contains("org.example.Guarded") ?? false)
    }
}
