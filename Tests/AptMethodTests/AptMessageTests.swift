import AptMethod
import XCTest

/// apt's method protocol as apt writes it (messages split at blank lines, fields looked up as
/// apt's `LookupTag` does) and as a method must answer (no value may end a line early).
final class AptMessageTests: XCTestCase {
    func testMessagesAreSplitAtBlankLinesHoweverTheBytesArrive() {
        let text = """
            601 Configuration
            Config-Item: Acquire::downloads::LanPeers=true
            Config-Item: Acquire::http::Proxy=http://proxy.example:3128/

            600 URI Acquire
            URI: downloads+http://deb.example/debian/pool/main/h/hello/hello_2.10-3_amd64.deb
            Filename: /var/cache/apt/archives/partial/hello_2.10-3_amd64.deb
            Expected-SHA256: \(String(repeating: "AB", count: 32))
            Expected-Checksum-FileSize: 55012
            Maximum-Size: 56000

            \n
            """
        var reader = AptMessageReader()
        var messages: [AptMessage] = []
        // One byte at a time, as a pipe may hand them over.
        for byte in Array(text.utf8) { messages += reader.take([byte]) }
        XCTAssertEqual(messages.map(\.code), [601, 600])
        // Whole, and in chunks that cut lines anywhere: the same messages.
        var whole = AptMessageReader()
        XCTAssertEqual(whole.take(Array(text.utf8)), messages)
        for size in [2, 7, 64] {
            var chunked = AptMessageReader()
            var got: [AptMessage] = []
            let bytes = Array(text.utf8)
            for start in stride(from: 0, to: bytes.count, by: size) {
                got += chunked.take(bytes[start..<min(start + size, bytes.count)])
            }
            XCTAssertEqual(got, messages, "chunks of \(size)")
        }
        XCTAssertEqual(messages[0].values("config-item").count, 2)
        XCTAssertEqual(messages[1].summary, "URI Acquire")
        XCTAssertEqual(messages[1]["filename"], "/var/cache/apt/archives/partial/hello_2.10-3_amd64.deb")

        let item = try? XCTUnwrap(AcquireItem(messages[1]))
        XCTAssertEqual(item?.url, "http://deb.example/debian/pool/main/h/hello/hello_2.10-3_amd64.deb")
        XCTAssertEqual(item?.expectedSHA256, String(repeating: "ab", count: 32), "lower-cased")
        XCTAssertEqual(item?.maximumSize, 56_000)
        XCTAssertEqual(item?.expectedSize, 55_012, "the task's expected_size")
        let settings = AptMethodSettings(messages[0])
        XCTAssertTrue(settings.lanPeers)
        XCTAssertFalse(settings.share)
        XCTAssertEqual(settings.proxy(for: "https://deb.example/x"), "http://proxy.example:3128/")
    }

    /// A line longer than `maxBytes`, whole or over several reads, is refused: the method stops
    /// reading rather than grow without bound.
    func testALineLongerThanTheLimitIsRefusedHoweverItArrives() {
        let long = [UInt8](repeating: UInt8(ascii: "x"), count: AptMessageReader.maxBytes + 10)
        var whole = AptMessageReader()
        _ = whole.take(long)
        XCTAssertTrue(whole.overflowed)
        var pieces = AptMessageReader()
        _ = pieces.take(Array(long[..<100]))
        XCTAssertFalse(pieces.overflowed)
        _ = pieces.take(Array(long[100...]) + [UInt8(ascii: "\n")])
        XCTAssertTrue(pieces.overflowed, "a line completed by a later read counts whole")
        var fine = AptMessageReader()
        XCTAssertEqual(fine.take(Array("600 URI Acquire\nURI: http://h/f\n\n".utf8)).count, 1)
        XCTAssertFalse(fine.overflowed)
    }

    func testAnAnswerCannotBeEndedEarlyByWhatAServerOrCallerChose() {
        let message = AptMessage(
            400, "URI Failure", [.init("URI", "downloads+http://h/f"), .init("Message", "404\n\n201 URI Done\nX: y")])
        XCTAssertEqual(message.text, "400 URI Failure\nURI: downloads+http://h/f\nMessage: 404  201 URI Done X: y\n\n")
        var reader = AptMessageReader()
        XCTAssertEqual(reader.take(Array(message.text.utf8)), [message.replacingNewlines])
    }

    func testOnlyDownloadsURIsWithAFileAreItems() {
        func item(_ uri: String, file: String = "/tmp/f") -> AcquireItem? {
            AcquireItem(AptMessage(600, "URI Acquire", [.init("URI", uri), .init("Filename", file)]))
        }
        XCTAssertEqual(item("downloads+https://h/f")?.url, "https://h/f")
        XCTAssertEqual(item("DOWNLOADS+HTTP://h/f")?.url, "http://h/f")
        XCTAssertEqual(item("downloads://h/f")?.url, "https://h/f", "plain downloads: is https")
        XCTAssertEqual(item("http://h/f")?.url, "http://h/f", "Dir::Bin::Methods::http \"downloads\"")
        XCTAssertNil(item("ftp://h/f"))
        XCTAssertNil(item("downloads+ftp://h/f"))
        XCTAssertNil(item("downloads+https://"))
        XCTAssertNil(item("downloads+https://h/f", file: ""))
        XCTAssertNil(
            AcquireItem(
                AptMessage(
                    600, "URI Acquire",
                    [.init("URI", "downloads+https://h/f"), .init("Filename", "/f"), .init("Expected-SHA256", "zz")]))?
                .expectedSHA256, "not a SHA-256: none")
        for size in ["-5", "abc", "18446744073709551615", ""] {
            XCTAssertNil(
                AcquireItem(
                    AptMessage(
                        600, "URI Acquire",
                        [
                            .init("URI", "downloads+https://h/f"), .init("Filename", "/f"),
                            .init("Expected-Checksum-FileSize", size),
                        ]
                    ))?
                    .expectedSize, "not a file's length (\(size)): none")
        }
        XCTAssertNil(AptMessage.parse(["not a status line"]))
    }

    func testConfigurationIsDequotedAndItsBooleansAreApts() {
        let message = AptMessage(
            601, "Configuration",
            [
                .init("Config-Item", "Acquire::downloads::Share=yes"),
                .init("Config-Item", "Acquire::downloads::Background=0"),
                .init("Config-Item", "Acquire::https::Proxy=DIRECT"),
                .init("Config-Item", "Acquire::http::Proxy=http://u:p%3d@proxy:8080"),
            ])
        let settings = AptMethodSettings(message)
        XCTAssertTrue(settings.share)
        XCTAssertFalse(settings.background)
        XCTAssertEqual(settings.proxy(for: "https://h/"), "direct://", "apt's DIRECT: none")
        XCTAssertEqual(settings.proxy(for: "http://h/"), "http://u:p=@proxy:8080", "%3d is =")
        XCTAssertNil(AptMethodSettings().proxy(for: "http://h/"), "none named: the service's own")
    }

    /// The user apt's methods run as: apt's `_apt` by default, none for empty or `root`.
    func testTheSandboxUserIsAptsSetting() {
        func user(_ value: String) -> String? {
            AptMethodSettings(AptMessage(601, "Configuration", [.init("Config-Item", "APT::Sandbox::User=\(value)")]))
                .sandboxUser
        }
        XCTAssertEqual(user("_apt"), "_apt")
        XCTAssertNil(user(""))
        XCTAssertNil(user("root"))
        XCTAssertNil(AptMethodSettings().sandboxUser)
    }
}

extension AptMessage {
    /// As it reads back after going on the wire.
    fileprivate var replacingNewlines: AptMessage {
        AptMessage(
            code, summary,
            fields.map { .init($0.name, String($0.value.map { $0 == "\n" ? " " : $0 })) })
    }
}
