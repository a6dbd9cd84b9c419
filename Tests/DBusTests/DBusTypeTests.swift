import DBus
import XCTest

final class DBusTypeTests: XCTestCase {
    func testParsesAndRendersSignatures() throws {
        for signature in ["y", "a{sv}", "a{oa{sa{sv}}}", "(ius)", "aay", "a(sv)", "v", "h", "a{t(ss)}"] {
            XCTAssertEqual(try DBusType(signature).signature, signature)
        }
        XCTAssertEqual(try DBusType.parse("sa{sv}u").map(\.signature), ["s", "a{sv}", "u"])
        XCTAssertEqual(try DBusType.parse(""), [])
    }

    func testRejectsInvalidSignatures() {
        for bad in [
            "a", "(", "()", "{sv}", "a{vs}", "a{s}", "a{svs}", "z", "(i", String(repeating: "a", count: 33) + "i",
            String(repeating: "(", count: 33) + "i" + String(repeating: ")", count: 33),
            String(repeating: "i", count: 256),
        ] {
            XCTAssertThrowsError(try DBusType.parse(bad), bad)
        }
        XCTAssertThrowsError(try DBusType("ii"))
    }

    func testObjectPathValidation() {
        for good in ["/", "/a", "/a/b_c/D9"] { XCTAssertTrue(ObjectPath.isValid(good), good) }
        for bad in ["", "a", "//", "/a/", "/a//b", "/a-b", "/ä"] { XCTAssertFalse(ObjectPath.isValid(bad), bad) }
    }

    func testInterfaceAndErrorNameValidation() {
        let longest = "a." + String(repeating: "b", count: 253)
        for good in ["a.b", "org.example.Downloads1", "_a.B_9", "org.freedesktop.DBus.Error.Failed", longest] {
            XCTAssertTrue(BusError.isValidName(good), good)
        }
        for bad in ["", "a", ".", "a.", ".a", "a..b", "a.9b", "9a.b", "a.b-c", "a.bä", "a b.c", longest + "b"] {
            XCTAssertFalse(BusError.isValidName(bad), bad)
        }
    }

    func testExportedInterfaceMustImplementExactlyItsMethods() {
        let description = InterfaceDescription("org.example.X", methods: [.init("A"), .init("B")])
        XCTAssertThrowsError(try ExportedInterface(description, methods: ["A": { _ in [] }]))
        XCTAssertThrowsError(
            try ExportedInterface(description, methods: ["A": { _ in [] }, "B": { _ in [] }, "C": { _ in [] }]))
        XCTAssertNoThrow(try ExportedInterface(description, methods: ["A": { _ in [] }, "B": { _ in [] }]))
    }

    func testIntrospectionDocumentShape() {
        let description = InterfaceDescription(
            "org.example.X",
            methods: [.init("M", in: [.init("a", .string)], out: [.init("b", .array(.objectPath))])],
            signals: [.init("S", [.init("x", .int64)])],
            properties: [.init("P", .uint32), .init("Q", .string, access: .readwrite, emitsChanged: .const)]
        )
        XCTAssertEqual(
            description.introspectionDocument,
            """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>
              <interface name="org.example.X">
                <method name="M">
                  <arg name="a" type="s" direction="in"/>
                  <arg name="b" type="ao" direction="out"/>
                </method>
                <signal name="S">
                  <arg name="x" type="x"/>
                </signal>
                <property name="P" type="u" access="read"/>
                <property name="Q" type="s" access="readwrite">
                  <annotation name="org.freedesktop.DBus.Property.EmitsChangedSignal" value="const"/>
                </property>
              </interface>
            </node>

            """)
    }
}
