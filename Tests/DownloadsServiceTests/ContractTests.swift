import DBus
import DownloadEngine
@testable import DownloadModel
import DownloadsAPI
import Foundation
import TestSupport
import XCTest

/// The contract's tables agree with each other and with the engine.
final class ContractTests: XCTestCase {
    func testEveryEngineErrorHasAnEntryInTheErrorTable() {
        for name in DownloadError.allNames {
            XCTAssertNotNil(DownloadsErrorName(rawValue: name), "\(name) is missing from DownloadsErrorName")
        }
        XCTAssertEqual(DownloadsErrorName(fullName: "org.example.Downloads.Error.NotFound"), .notFound)
        XCTAssertNil(DownloadsErrorName(fullName: "org.freedesktop.DBus.Error.Failed"))
    }

    /// The two tables written twice, the engine's and the bus's, held equal: every error name is
    /// in both but those only the service gives; every option the store keeps is kept under its
    /// bus name, and the bus options the store does not keep are the ones listed here.
    func testTheModelsAndTheAPIsTablesAgree() {
        let serviceOnly = Set(DownloadsErrorName.allCases.map(\.rawValue)).subtracting(DownloadError.allNames)
        XCTAssertEqual(serviceOnly, ["Failed", "QuotaExceeded", "StorageFull"], "errors only the service gives")
        let internalOnly: Set<String> = ["pieces", "metalink_url", "credentials_origin", "promised_length"]
        let stored = Set(DownloadOptions.CodingKeys.allCases.map(\.rawValue)).subtracting(internalOnly)
        let bus = Set(TaskOptions.Key.allCases.map(\.rawValue))
        XCTAssertEqual(stored.subtracting(bus), [], "options the store keeps under a name the bus does not use")
        XCTAssertEqual(
            bus.subtracting(stored),
            [
                "session", "url", "destination_fd", "metalink", "method", "content_type", "form", "reply_destination",
                "snapshot",
                "protocol", "ietf_version", "terminate_on_cancel", "client_certificate",
                "client_certificate_passphrase",
                // Kept inside the stored `share` ({"max_age", "limit"}).
                "share_max_age", "share_limit",
                // Kept as `promised_length`, the promise a Metalink's `<size>` makes too.
                "expected_size",
            ], "bus options the store keeps elsewhere (the record, the upload, sealed, share's terms) or not at all")
    }

    /// What `downloadsctl` calls worth resuming is what the engine retries (curl's set).
    func testTheClientsAndTheEnginesTransientStatusesAgree() {
        for status in 400...599 {
            let error = DownloadError.http(status: status, reason: "Reason")
            XCTAssertEqual(
                DownloadsErrorName.httpError.isWorthResuming(message: error.message), error.isRetryable, "\(status)")
        }
    }

    /// The API reference's error table is the code's: a name added to one is in the other; so
    /// are its options.
    func testTheAPIReferenceNamesEveryErrorAndOption() throws {
        let api = try String(contentsOf: PackageRoot.url.appendingPathComponent("docs/api.md"), encoding: .utf8)
        for name in DownloadsErrorName.allCases {
            XCTAssertTrue(
                api.contains("| `\(name.rawValue)`") || api.contains(", `\(name.rawValue)`"),
                "docs/api.md's error table lacks \(name.rawValue)")
        }
        for option in TaskOptions.startKeys {
            XCTAssertTrue(
                api.contains("| `\(option.rawValue)` |"), "docs/api.md's options table lacks \(option.rawValue)")
        }
        for option in TaskOptions.resumeKeys {
            XCTAssertTrue(
                api.contains("`\(option.rawValue)`"),
                "docs/api.md does not name the ResumeWithData option \(option.rawValue)")
        }
    }

    /// org.example.Downloads(5), the man page of the D-Bus API, lists the interfaces as
    /// data/man/dbus-interfaces.py renders them from the shipped XML (which another test keeps
    /// equal to what the daemon exports), so the page cannot drift from the contract.
    func testTheManPageListsTheShippedInterfaces() async throws {
        let root = PackageRoot.url
        let rendered = try await ProcessRunner.run([
            "/usr/bin/python3", root.appendingPathComponent("data/man/dbus-interfaces.py").path,
        ])
        XCTAssertEqual(rendered.status, 0, rendered.description)
        let page = try String(
            contentsOf: root.appendingPathComponent("data/man/org.example.Downloads.5"), encoding: .utf8)
        XCTAssertTrue(
            page.contains(rendered.stdout),
            "data/man/org.example.Downloads.5 drifted from dbus/*.xml: run data/man/dbus-interfaces.py")
        for member in [
            "StartAt", "ResumeWithData", "RegisterCompletionHandler", "HandleEventsForBackgroundSession", "SetURL",
            "App",
        ] {
            XCTAssertTrue(rendered.stdout.contains(member), member)
        }
        // And every error name the service can reply with or report.
        for name in DownloadsErrorName.allCases {
            XCTAssertTrue(
                page.contains("\\fB\(name.rawValue)\\fR"), "the man page does not name the error \(name.rawValue)")
        }
        let manpages = try String(contentsOf: root.appendingPathComponent("packaging/debian/manpages"), encoding: .utf8)
        XCTAssertTrue(manpages.contains("data/man/org.example.Downloads.5"), "the .deb installs it")
    }

    /// The README is a front door and docs/ the reference: every local link of theirs leads to a
    /// file that exists (anchors are not checked).
    func testEveryLocalLinkOfTheDocumentationLeadsToAFile() throws {
        let root = PackageRoot.url
        let pages =
            ["README.md"]
            + (try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path))
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 }
        XCTAssertGreaterThan(pages.count, 5)
        let link = try NSRegularExpression(pattern: #"\]\(([^)#\s]+)(#[^)]*)?\)"#)
        for page in pages {
            let text = try String(contentsOf: root.appendingPathComponent(page), encoding: .utf8)
            let base = root.appendingPathComponent(page).deletingLastPathComponent()
            for match in link.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                guard let range = Range(match.range(at: 1), in: text) else { continue }
                let target = String(text[range])
                if target.contains("://") { continue }
                let path = base.appendingPathComponent(target).standardizedFileURL.path
                XCTAssertTrue(
                    FileManager.default.fileExists(atPath: path), "\(page) links to \(target), which does not exist")
            }
        }
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        XCTAssertLessThanOrEqual(
            readme.split(separator: "\n", omittingEmptySubsequences: false).count, 300, "the README is a front door")
    }

    func testEveryTaskPropertyIsDeclaredOnceWithItsType() {
        let declared = DownloadsInterfaces.task.properties
        XCTAssertEqual(declared.map(\.name), TaskProperty.allCases.map(\.name))
        for property in TaskProperty.allCases {
            XCTAssertEqual(DownloadsInterfaces.task.property(named: property.name)?.type, property.type)
        }
    }

    func testOptionsRoundTripThroughTheirDictionary() throws {
        var options = TaskOptions()
        options.session = "photos"
        options.headers = ["X-A": "b"]
        options.priority = .high
        options.maxBytesPerSecond = 10
        options.connections = 1
        options.overwrite = true
        options.allowMetered = false
        options.connectTimeout = 3
        options.desktopEntry = "org.gnome.Epiphany.desktop"
        options.lowSpeedLimit = 1000
        options.lowSpeedTime = 30
        XCTAssertEqual(try TaskOptions(options.dictionary), options)
    }

    func testOptionsAreRefusedWithAReason() {
        let cases: [([String: DBusValue], String)] = [
            (["nope": .string("x")], "unknown option 'nope'"),
            (["session": .uint32(1)], "must be of type s"),
            (["session": .string(String(repeating: "é", count: 128))], "1 to 255 bytes"),
            (["priority": .string("urgent")], "low, normal or high"),
            (["connections": .uint32(17)], "connections"),
            (["stall_timeout": .double(-1)], "between 0 and 604800"),
            (["desktop_entry": .string("../../evil.desktop")], "desktop file id"),
            (["desktop_entry": .string("firefox")], "desktop file id"),
            (["desktop_entry": .string(".desktop")], "desktop file id"),
            (["desktop_entry": .uint32(1)], "must be of type s"),
        ]
        for (dict, reason) in cases {
            XCTAssertThrowsError(try TaskOptions(dict)) { error in
                let bus = error as? BusError
                XCTAssertEqual(bus?.name, DownloadsErrorName.invalidArgument.fullName)
                XCTAssertTrue(bus?.message.contains(reason) == true, "\(bus?.message ?? "") should say \(reason)")
            }
        }
        XCTAssertThrowsError(try TaskOptions(["session": .string("s")], allowed: TaskOptions.resumeKeys)) { error in
            XCTAssertEqual((error as? BusError)?.name, DownloadsErrorName.invalidArgument.fullName)
        }
    }

    func testHeaderSizesAreCountedInBytes() {
        let long = String(repeating: "é", count: TaskOptions.maxHeaderBytes / 2 + 1)  // fewer characters, more bytes
        let cases: [[String: String]] = [
            ["X-Long": long],
            Dictionary(uniqueKeysWithValues: (0...TaskOptions.maxHeaders).map { ("X-\($0)", "v") }),
            Dictionary(uniqueKeysWithValues: (0..<5).map { ("X-\($0)", String(repeating: "a", count: 8000)) }),
        ]
        for headers in cases {
            XCTAssertThrowsError(try TaskOptions(["headers": .stringDict(headers)])) { error in
                XCTAssertEqual((error as? BusError)?.name, DownloadsErrorName.quotaExceeded.fullName)
            }
        }
        XCTAssertNoThrow(try TaskOptions(["headers": .stringDict(["X-Ok": String(repeating: "a", count: 4000)])]))
    }

    func testTaskPathsMapToOneIdEach() {
        XCTAssertEqual(DownloadsAPI.taskID(DownloadsAPI.taskPath(42)), 42)
        XCTAssertNil(DownloadsAPI.taskID("/org/example/Downloads/tasks/042"))
        XCTAssertNil(DownloadsAPI.taskID("/org/example/Downloads/tasks/4/2"))
        XCTAssertNil(DownloadsAPI.taskID("/org/example/Downloads/tasks"))
        XCTAssertNil(DownloadsAPI.taskID("/org/example/Downloads/tasks/x"))
    }

    func testSignalsDecodeWhatTheyEncode() {
        let signals: [ManagerSignal] = [
            .progress(task: DownloadsAPI.taskPath(1), bytesWritten: 1, totalBytesWritten: 2, totalBytesExpected: 3),
            .finished(task: DownloadsAPI.taskPath(1), location: "/tmp/x"),
            .failed(task: DownloadsAPI.taskPath(1), errorName: "e", message: "m", resumeData: [1, 2]),
            .stateChanged(task: DownloadsAPI.taskPath(1), state: "paused"),
            .eventsFinished(session: "s"),
            .groupProgress(
                group: DownloadsAPI.groupPath(2), bytesWritten: 5, bytesExpected: -1, filesFinished: 1, files: 3),
            .groupFinished(group: DownloadsAPI.groupPath(2)),
            .groupFailed(group: DownloadsAPI.groupPath(2), errorName: "e", message: "m"),
        ]
        for signal in signals {
            XCTAssertEqual(ManagerSignal(name: signal.name, arguments: signal.arguments), signal)
            let declared = DownloadsInterfaces.manager.signal(named: signal.name)
            XCTAssertEqual(declared?.signature, DBusType.signature(of: signal.arguments.map(\.type)), signal.name)
        }
    }
}
