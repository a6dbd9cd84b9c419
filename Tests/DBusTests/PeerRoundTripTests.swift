import DBus
import Foundation
import TestSupport
import XCTest

/// Every type, both ways, through independent real peers: busctl, gdbus, dbus-send, python3-dbus.
final class PeerRoundTripTests: BusTestCase {
    func testBusctlRoundTripsEveryBasicType() async throws {
        let out = try await busctlCall(
            "EchoAll", "ybnqiuxtdsog",
            [
                "200", "true", "-5", "6", "-7", "8", "-9223372036854775808", "18446744073709551615", "1.5",
                "hé llo ✓", "/a/b_c", "a{sv}(ii)",
            ]
        )
        XCTAssertEqual(
            out,
            #"ybnqiuxtdsog 200 true -5 6 -7 8 -9223372036854775808 18446744073709551615 1.5 "h\303\251 llo \342\234\223" "/a/b_c" "a{sv}(ii)""#
        )
    }

    func testBusctlRoundTripsContainersInVariants() async throws {
        let out = try await busctlCall("Echo", "v", ["a{sv}", "2", "one", "i", "1", "two", "as", "2", "x", "y"])
        XCTAssertEqual(out, #"v a{sv} 2 "one" i 1 "two" as 2 "x" "y""#)
        let nested = try await busctlCall("Echo", "v", ["a(sv)", "1", "k", "v", "ai", "2", "7", "8"])
        XCTAssertEqual(nested, #"v a(sv) 1 "k" v ai 2 7 8"#)
    }

    func testGdbusRoundTripsComplexTypes() async throws {
        let output = try await gdbusCall(
            "EchoComplex",
            [
                "{'a': <int32 1>, 'b': <'text'>, 'c': <[byte 0x01, 0x02]>}",
                "[(int32 -1, uint32 2, 'three')]",
                "[[byte 0x01], @ay []]",
                "{'outer': {'inner': <(true, 2.5)>}}",
            ])
        XCTAssertEqual(output.status, 0, output.description)
        XCTAssertEqual(
            output.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
            "({'a': <1>, 'b': <'text'>, 'c': <[byte 0x01, 0x02]>}, [(-1, uint32 2, 'three')], [[byte 0x01], []], {'outer': {'inner': <(true, 2.5)>}})"
        )
    }

    func testDbusSendRoundTripsBasicsAndArrays() async throws {
        func dbusSend(_ method: String, _ args: [String]) async throws -> String {
            let output = try await run(
                [
                    "dbus-send", "--bus=\(bus.address)", "--print-reply=literal", "--dest=\(TestService.name)",
                    TestService.path.rawValue, "\(TestService.interfaceName).\(method)",
                ] + args)
            XCTAssertEqual(output.status, 0, output.description)
            return output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let uint64 = try await dbusSend("Echo", ["variant:uint64:18446744073709551615"])
        XCTAssertEqual(uint64, "variant       uint64 18446744073709551615")
        let text = try await dbusSend("Echo", ["variant:string:héllo"])
        XCTAssertEqual(text, "variant       héllo")
        let bytes = try await dbusSend("EchoBytes", ["array:byte:1,2,255"])
        XCTAssertEqual(
            bytes.split(whereSeparator: \.isWhitespace).joined(separator: " "), "array of bytes [ 01 02 ff ]")
    }

    func testPythonRoundTripsEveryTypeAndPassesFileDescriptors() async throws {
        let script = """
            import dbus, json, os, tempfile
            bus = dbus.bus.BusConnection('\(bus.address)')
            obj = bus.get_object('\(TestService.name)', '\(TestService.path)')
            t = dbus.Interface(obj, '\(TestService.interfaceName)')
            args = [dbus.Byte(255), dbus.Boolean(False), dbus.Int16(-32768), dbus.UInt16(65535), dbus.Int32(-2**31),
                    dbus.UInt32(2**32-1), dbus.Int64(-2**63), dbus.UInt64(2**64-1), dbus.Double(-0.125),
                    dbus.String('ünïcødé'), dbus.ObjectPath('/'), dbus.Signature('a{oa{sa{sv}}}')]
            back = t.EchoAll(*args)
            ok_basic = [type(a).__name__ for a in back] == [type(a).__name__ for a in args] and list(back) == args
            dict_in = dbus.Dictionary({'n': dbus.Int32(5), 'l': dbus.Array([dbus.String('x')], signature='s'),
                                       'v': dbus.Struct((dbus.Byte(1), dbus.Double(2.0)), variant_level=1)}, signature='sv')
            structs = dbus.Array([dbus.Struct((dbus.Int32(1), dbus.UInt32(2), dbus.String('s')))], signature='(ius)')
            nested = dbus.Array([dbus.ByteArray(b'abc'), dbus.ByteArray(b'')], signature='ay')
            deep = dbus.Dictionary({'a': dbus.Dictionary({'b': dbus.Boolean(True)}, signature='sv')}, signature='sa{sv}')
            c = t.EchoComplex(dict_in, structs, nested, deep, byte_arrays=True)
            ok_complex = (c[0]['n'] == 5 and list(c[0]['l']) == ['x'] and tuple(c[0]['v']) == (1, 2.0)
                          and tuple(c[1][0]) == (1, 2, 's') and [bytes(x) for x in c[2]] == [b'abc', b'']
                          and c[3]['a']['b'] == True)
            deep_variant = t.Echo(dbus.Array([dbus.Array([dbus.Array([dbus.Int32(1)])])]), signature='v')
            ok_deep = deep_variant == [[[1]]]
            with tempfile.TemporaryFile() as f:
                f.write(b'contents of a file'); f.flush()
                read_back = bytes(t.ReadFD(dbus.types.UnixFd(f.fileno()), byte_arrays=True))
            fd = t.MakeFD(dbus.ByteArray(b'from the service')).take()
            made = os.read(fd, 100); os.close(fd)
            print(json.dumps({'basic': ok_basic, 'complex': ok_complex, 'deep': ok_deep,
                              'read': read_back.decode(), 'made': made.decode()}))
            """
        let output = try await python(script)
        XCTAssertEqual(output.status, 0, output.description)
        let result = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any]
        XCTAssertEqual(result?["basic"] as? Bool, true)
        XCTAssertEqual(result?["complex"] as? Bool, true)
        XCTAssertEqual(result?["deep"] as? Bool, true)
        XCTAssertEqual(result?["read"] as? String, "contents of a file")
        XCTAssertEqual(result?["made"] as? String, "from the service")
    }

    func testCallerCredentialsComeFromTheBus() async throws {
        let output = try await python(
            """
            import dbus, os
            bus = dbus.bus.BusConnection('\(bus.address)')
            t = dbus.Interface(bus.get_object('\(TestService.name)', '\(TestService.path)'), '\(TestService.interfaceName)')
            uid, pid = t.WhoAmI()
            print(int(uid) == os.getuid(), int(pid) == os.getpid())
            """)
        XCTAssertEqual(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "True True", output.description)
    }

    func testStandardErrorNamesForBadCalls() async throws {
        func dbusSend(_ path: String, _ method: String, _ args: [String] = []) async throws -> String {
            let output = try await run(
                [
                    "dbus-send", "--bus=\(bus.address)", "--print-reply", "--dest=\(TestService.name)", path, method,
                ] + args)
            XCTAssertNotEqual(output.status, 0)
            return output.stderr
        }
        let path = TestService.path.rawValue
        let unknownObject = try await dbusSend("/no/such/object", "org.example.Test.Echo", ["variant:int32:1"])
        XCTAssertTrue(unknownObject.contains("org.freedesktop.DBus.Error.UnknownObject"), unknownObject)
        let unknownInterface = try await dbusSend(path, "org.example.Nope.Echo")
        XCTAssertTrue(unknownInterface.contains("org.freedesktop.DBus.Error.UnknownInterface"), unknownInterface)
        let unknownMethod = try await dbusSend(path, "org.example.Test.Nope")
        XCTAssertTrue(unknownMethod.contains("org.freedesktop.DBus.Error.UnknownMethod"), unknownMethod)
        let wrongSignature = try await dbusSend(path, "org.example.Test.Echo", ["string:not-a-variant"])
        XCTAssertTrue(wrongSignature.contains("org.freedesktop.DBus.Error.InvalidArgs"), wrongSignature)
        XCTAssertTrue(wrongSignature.contains("takes 'v', got 's'"), wrongSignature)
        let custom = try await dbusSend(
            path, "org.example.Test.Fail", ["string:org.example.Test.Error.Custom", "string:it went wrong"])
        XCTAssertTrue(custom.contains("org.example.Test.Error.Custom: it went wrong"), custom)
        let badReply = try await dbusSend(path, "org.example.Test.BadReply")
        XCTAssertTrue(badReply.contains("org.freedesktop.DBus.Error.Failed"), badReply)
        let unknownProperty = try await dbusSend(
            path, "org.freedesktop.DBus.Properties.Get", ["string:org.example.Test", "string:Nope"]
        )
        XCTAssertTrue(unknownProperty.contains("org.freedesktop.DBus.Error.UnknownProperty"), unknownProperty)
        let readOnly = try await dbusSend(
            path, "org.freedesktop.DBus.Properties.Set",
            ["string:org.example.Test", "string:Counter", "variant:uint64:5"]
        )
        XCTAssertTrue(readOnly.contains("org.freedesktop.DBus.Error.PropertyReadOnly"), readOnly)
        let wrongType = try await dbusSend(
            path, "org.freedesktop.DBus.Properties.Set", ["string:org.example.Test", "string:Label", "variant:int32:5"]
        )
        XCTAssertTrue(wrongType.contains("org.freedesktop.DBus.Error.InvalidArgs"), wrongType)
        // The service still answers.
        let ok = try await busctlCall("Echo", "v", ["s", "still here"])
        XCTAssertEqual(ok, #"v s "still here""#)
    }

    func testPropertiesThroughBusctlAndGdbus() async throws {
        let get = try await busctl([
            "get-property", TestService.name, TestService.path.rawValue, TestService.interfaceName, "Label",
        ])
        XCTAssertEqual(get.stdout.trimmingCharacters(in: .whitespacesAndNewlines), #"s "initial""#)
        let set = try await busctl([
            "set-property", TestService.name, TestService.path.rawValue, TestService.interfaceName, "Label", "s",
            "changed",
        ])
        XCTAssertEqual(set.status, 0, set.description)
        let forbidden = try await busctl([
            "set-property", TestService.name, TestService.path.rawValue, TestService.interfaceName, "Label", "s",
            "forbidden",
        ])
        XCTAssertNotEqual(forbidden.status, 0)
        XCTAssertTrue(forbidden.stderr.contains("that label is forbidden"), forbidden.stderr)
        let all = try await run([
            "gdbus", "call", "--address", bus.address, "--dest", TestService.name, "--object-path",
            TestService.path.rawValue,
            "--method", "org.freedesktop.DBus.Properties.GetAll", TestService.interfaceName,
        ])
        XCTAssertEqual(
            all.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
            "({'Counter': <uint64 0>, 'Label': <'changed'>},)")
    }

    func testIntrospectionParsedByGdbusAndBusctlTree() async throws {
        _ = try await busctlCall("AddChild", "s", ["kid"])
        let xml = try await run([
            "gdbus", "introspect", "--address", bus.address, "--dest", TestService.name,
            "--object-path", TestService.path.rawValue, "--xml",
        ])
        XCTAssertEqual(xml.status, 0, xml.description)
        XCTAssertTrue(xml.stdout.contains(TestService.interface.introspectionXML(indent: 2)), xml.stdout)
        XCTAssertTrue(xml.stdout.contains(#"<node name="kid"/>"#))
        let parsed = try await run([
            "gdbus", "introspect", "--address", bus.address, "--dest", TestService.name,
            "--object-path", TestService.path.rawValue,
        ])
        XCTAssertEqual(parsed.status, 0, parsed.description)
        XCTAssertTrue(parsed.stdout.contains("interface org.example.Test {"), parsed.stdout)
        XCTAssertTrue(parsed.stdout.contains("Echo(in  v value,"), parsed.stdout)
        XCTAssertTrue(parsed.stdout.contains("readwrite s Label = 'initial';"), parsed.stdout)
        XCTAssertTrue(parsed.stdout.contains("interface org.freedesktop.DBus.ObjectManager {"), parsed.stdout)
        let tree = try await run(["busctl", "--address=\(bus.address)", "--list", "tree", TestService.name])
        XCTAssertEqual(
            tree.stdout.split(separator: "\n").map(String.init),
            ["/", "/org", "/org/example", "/org/example/Test", "/org/example/Test/kid"]
        )
    }

    func testClientThatDisconnectsMidCallDoesNotHurtTheService() async throws {
        // busctl is killed while its call is being handled; the reply has nowhere to go.
        let killed = try await run(
            [
                "busctl", "--address=\(bus.address)", "call", TestService.name, TestService.path.rawValue,
                TestService.interfaceName, "Sleep", "u", "800",
            ], timeout: 0.3)
        XCTAssertNotEqual(killed.status, 0)
        // The handler finishes its 800 ms and replies into the void.
        let deadline = ContinuousClock.now + .seconds(20)
        while testService.state.withLockedValue({ $0.sleepsFinished }) < 1, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(testService.state.withLockedValue { $0.sleepsFinished }, 1)
        let ok = try await busctlCall("Echo", "v", ["u", "7"])
        XCTAssertEqual(ok, "v u 7")
    }
}
