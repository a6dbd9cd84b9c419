import CDBus
@testable import DBus
import Foundation
import NIOConcurrencyHelpers
import XCTest

/// `WireWriter` and `Message.signal(…, arguments:)`: a signal written in one pass is the message
/// libdbus builds from the same values, byte for byte, and refuses what libdbus's path refuses.
final class WireWriterTests: BusTestCase {
    private static let path: ObjectPath = "/org/example/Downloads/tasks/7"

    /// The message as libdbus builds it (the path `Message.signal(…, arguments:)` replaces).
    private func byLibdbus(_ arguments: [DBusValue], destination: String? = nil) throws -> Message {
        let message = try Message.signal(path: Self.path, interface: "org.example.Wire", name: "Changed")
        if let destination { try message.setDestination(destination) }
        try message.append(arguments)
        return message
    }

    /// Written in one pass, or nil where it is left to libdbus.
    private func written(_ arguments: [DBusValue], destination: String? = nil) throws -> Message? {
        try Message.written(
            path: Self.path, interface: "org.example.Wire", name: "Changed", destination: destination,
            arguments: arguments)
    }

    private func inOnePass(_ arguments: [DBusValue], destination: String? = nil) throws -> Message {
        try Message.signal(
            path: Self.path, interface: "org.example.Wire", name: "Changed", destination: destination,
            arguments: arguments)
    }

    /// The body's bytes as libdbus would send them (the serial set, as the connection does).
    private func body(_ message: Message) throws -> [UInt8] {
        dbus_message_set_serial(message.raw, 9)
        var bytes: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        guard dbus_message_marshal(message.raw, &bytes, &length) != 0, let bytes else { throw BusError.noMemory() }
        defer { free(bytes) }
        let whole = UnsafeRawBufferPointer(start: bytes, count: Int(length))
        let bodyLength = Int(whole.loadUnaligned(fromByteOffset: 4, as: UInt32.self).littleEndian)
        return Array(whole.suffix(bodyLength))
    }

    static let cases: [[DBusValue]] = [
        [],
        [.objectPath(path), .string("running")],
        [
            .string("org.example.Downloads.Task"),
            .vardict(["BytesWritten": .int64(65536), "BytesExpected": .int64(-1)]), .strings([]),
        ],
        [
            .byte(0xFF), .boolean(true), .int16(-2), .uint16(65535), .int32(Int32.min), .uint32(UInt32.max),
            .int64(Int64.min), .uint64(UInt64.max), .double(-0.5), .double(.infinity), .signature("a{sv}(ii)"),
        ],
        [.byte(1), .int64(2), .byte(3), .int16(4), .byte(5), .double(6), .string(""), .string("ü → 日本 🙂")],
        [.byteArray([]), .byteArray([1, 2, 3]), .bytes(Array(repeating: 7, count: 1000))],
        [
            .array(element: .int64, []), .array(element: .int64, [.int64(1), .int64(2)]),
            .array(element: .structure([.byte, .int64]), []),
        ],
        [.array(element: .array(.string), [.strings(["a", "bc"]), .strings([]), .strings(["d"])])],
        [
            .structure([.byte(1), .int64(2), .structure([.string("x"), .double(3)])]),
            .variant(.variant(.structure([.byte(9)]))),
        ],
        [
            .dictionary(
                key: .int32, value: .array(.structure([.string, .variant])),
                [
                    .init(
                        .int32(1),
                        .array(
                            element: .structure([.string, .variant]),
                            [.structure([.string("k"), .variant(.uint16(3))])])),
                    .init(.int32(2), .array(element: .structure([.string, .variant]), [])),
                ])
        ],
        [
            .objectPaths(["/", "/a/b", path]), .variant(.byteArray([0, 1])),
            .variant(.vardict(["n": .variant(.string("deep"))])),
        ],
        [
            .vardict([
                "Id": .uint64(7), "URL": .string("https://example.org/f"), "State": .string("finished"),
                "Metadata": .vardict(["a": .int32(1)]),
                "Background": .boolean(false), "BytesWritten": .int64(1 << 40), "Title": .string(""),
            ])
        ],
    ]

    func testEachCaseIsTheMessageLibdbusBuildsByteForByte() throws {
        for (index, arguments) in Self.cases.enumerated() {
            for destination in [nil, ":1.42"] {
                let expected = try byLibdbus(arguments, destination: destination)
                let message = try XCTUnwrap(
                    try written(arguments, destination: destination), "case \(index): libdbus accepts it as written")
                XCTAssertEqual(message.kind, .signal)
                XCTAssertEqual(message.serial, 0, "the connection gives the serial")
                XCTAssertEqual(message.path, Self.path)
                XCTAssertEqual(message.interface, "org.example.Wire")
                XCTAssertEqual(message.member, "Changed")
                XCTAssertEqual(message.destination, destination)
                XCTAssertEqual(message.signature, expected.signature, "case \(index)")
                XCTAssertEqual(try message.arguments(), arguments, "case \(index)")
                XCTAssertEqual(try body(message), try body(expected), "case \(index)")
                XCTAssertEqual(dbus_message_get_no_reply(message.raw), dbus_message_get_no_reply(expected.raw))
            }
        }
    }

    func testRefusesWhatLibdbusPathRefusesWithTheSameError() throws {
        let bad: [[DBusValue]] = [
            [.string("a\0b")],
            [.objectPath(ObjectPath(unchecked: "no/leading/slash"))],
            [.array(element: .int32, [.int32(1), .string("x")])],
            [.dictionary(key: .variant, value: .int32, [])],
            [.structure([])],
            [.signature("a{")],
        ]
        for arguments in bad {
            var expected: String?
            XCTAssertThrowsError(try byLibdbus(arguments)) { expected = "\($0)" }
            XCTAssertThrowsError(try inOnePass(arguments)) { XCTAssertEqual("\($0)", expected, "\(arguments)") }
        }
        XCTAssertThrowsError(try inOnePass([], destination: "a\0b"))
    }

    /// Nesting beyond the specification's limits: libdbus's validation refuses the written
    /// message, and libdbus's own path answers as it always did.
    func testWhatLibdbusValidationRefusesIsLeftToLibdbus() throws {
        var deep = DBusValue.int32(1)
        for _ in 0..<70 { deep = .variant(deep) }
        XCTAssertNil(try written([deep]))
        let viaLibdbus = Result { try byLibdbus([deep]).signature }
        let written = Result { try self.inOnePass([deep]).signature }
        XCTAssertEqual("\(viaLibdbus)", "\(written)")
    }

    func testAFileDescriptorIsLeftToLibdbus() throws {
        XCTAssertNil(try written([.unixFD(try UnixFD(duplicating: 0))]))
        let message = try inOnePass([.unixFD(try UnixFD(duplicating: 0)), .string("x")])
        XCTAssertEqual(message.signature, "hs")
        let read = try message.arguments()
        XCTAssertEqual(read.count, 2)
        XCTAssertEqual(read.last, .string("x"))
    }

    /// Sent on a real bus: each signal gets its own serial from the connection, in order, and
    /// arrives whole.
    func testSignalsOnTheBusGetTheConnectionsSerials() async throws {
        let client = try await client()
        defer { client.close() }
        let received = NIOLockedValueBox([(serial: UInt32, arguments: [DBusValue])]())
        try await client.subscribe(MatchRule(interface: "org.example.Wire")) { message in
            received.withLockedValue { $0.append((message.serial, (try? message.arguments()) ?? [])) }
        }
        for n in 0..<3 {
            try service.emitSignal(
                path: Self.path, interface: "org.example.Wire", name: "Changed",
                arguments: [.uint32(UInt32(n)), .vardict(["n": .int32(Int32(n))])])
        }
        for _ in 0..<250 where received.withLockedValue({ $0.count }) < 3 {
            try await Task.sleep(for: .milliseconds(20))
        }
        let got = received.withLockedValue { $0 }
        XCTAssertEqual(got.map(\.arguments), (0..<3).map { [.uint32(UInt32($0)), .vardict(["n": .int32(Int32($0))])] })
        XCTAssertFalse(got.contains { $0.serial == 0 })
        XCTAssertEqual(got.map(\.serial), got.map(\.serial).sorted())
        XCTAssertEqual(Set(got.map(\.serial)).count, 3)
    }
}
