import AptMethod
import DBus
import Foundation
import NIOConcurrencyHelpers
import TestHTTPServer
import TestSupport
import XCTest

/// The apt method (`downloads-apt-method`) spoken to as apt speaks to it, over its standard input
/// and output (apt's doc/method.dbk), against the daemon on a private bus it takes for the
/// system bus: capabilities first, an item fetched into the file apt names and answered `200 URI
/// Start` and `201 URI Done` with its size and SHA-256, pipelined items side by side, a 404 and a
/// wrong hash answered `400 URI Failure` with apt's `FailReason`, a URI that is not ours refused,
/// and the service missing named.
final class AptMethodTests: DaemonTestCase {
    static let method = DaemonTestCase.aptMethod

    /// The method, its answers as they come.
    final class Method: @unchecked Sendable {
        let process: ChildProcess
        let answers = NIOLockedValueBox<[AptMessage]>([])

        init(busAddress: String) throws {
            process = try ChildProcess([AptMethodTests.method], environment: ["DBUS_SYSTEM_BUS_ADDRESS": busAddress])
            let output = process.stdout
            let answers = answers
            Thread.detachNewThread {
                var reader = AptMessageReader()
                while true {
                    let data = output.availableData
                    if data.isEmpty { break }
                    let messages = reader.take(Array(data))
                    answers.withLockedValue { $0 += messages }
                }
            }
        }

        /// Written as apt writes; a method that has ended is not written to (no trap on EPIPE).
        func send(_ message: AptMessage) {
            try? process.stdin.write(contentsOf: Data(message.text.utf8))
        }

        func acquire(
            _ uri: String, into file: String, sha256: String? = nil, lastModified: String? = nil,
            maximumSize: Int? = nil, size: Int? = nil
        ) {
            var fields: [AptMessage.Field] = [.init("URI", uri), .init("Filename", file)]
            if let maximumSize { fields.append(.init("Maximum-Size", String(maximumSize))) }
            if let size { fields.append(.init("Expected-Checksum-FileSize", String(size))) }
            if let sha256 { fields.append(.init("Expected-SHA256", sha256)) }
            if let lastModified { fields.append(.init("Last-Modified", lastModified)) }
            send(AptMessage(600, "URI Acquire", fields))
        }

        /// The first answer `code` for `uri`, waited for (bounded).
        func answer(
            _ code: Int, for uri: String? = nil, seconds: Double = 30, pollEvery: Duration = .milliseconds(20)
        ) async throws -> AptMessage {
            let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
            while ContinuousClock.now < deadline {
                if let found = answers.withLockedValue({
                    $0.first { $0.code == code && (uri == nil || $0["URI"] == uri) }
                }) {
                    return found
                }
                try await Task.sleep(for: pollEvery)
            }
            XCTFail("no \(code) for \(uri ?? "-"): \(answers.withLockedValue { $0 })")
            throw CancellationError()
        }

        func codes(for uri: String) -> [Int] { answers.withLockedValue { $0.filter { $0["URI"] == uri }.map(\.code) } }
    }

    var methods: [Method] = []

    override func tearDown() async throws {
        for method in methods { method.process.stop() }
        try await super.tearDown()
    }

    func method() throws -> Method {
        let method = try Method(busAddress: bus.address)
        methods.append(method)
        return method
    }

    func testAnItemComesIntoTheFileAptNamesAndIsAnsweredAsAptExpects() async throws {
        let apt = try method()
        let capabilities = try await apt.answer(100)
        XCTAssertEqual(capabilities["Pipeline"], "true")
        XCTAssertEqual(capabilities["Send-Config"], "true")
        apt.send(AptMessage(601, "Configuration", [.init("Config-Item", "Acquire::downloads::Background=false")]))

        let content = Self.content(700_000, seed: 79)
        let hash = Self.sha256(content)
        http.set("/pool/hello.deb", Route(content: content))
        let partial = directory.file("partial")
        try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)
        let uri = "downloads+" + http.url("/pool/hello.deb")
        apt.acquire(uri, into: partial + "/hello.deb", sha256: hash)
        let done = try await apt.answer(201, for: uri)
        XCTAssertEqual(done["Size"], "700000")
        XCTAssertEqual(done["SHA256-Hash"], hash)
        XCTAssertEqual(done["Filename"], partial + "/hello.deb")
        XCTAssertEqual(sha256(ofFile: partial + "/hello.deb"), hash)
        XCTAssertEqual(apt.codes(for: uri).filter { $0 != 102 }, [200, 201], "Start, then Done")
        let start = try await apt.answer(200, for: uri)
        XCTAssertEqual(start["Size"], "700000")
        XCTAssertEqual(http.requests(for: "/pool/hello.deb").count, 1)
        // The ended task is taken off the service's list: apt's items do not pile up there.
        try await until("the task is taken off the list") {
            let listed = try await self.call("ListTasks", [.string("")])
            return "\(listed)".contains("tasks/") == false
        }

        // Pipelined: forty at once, as apt sends a package list (more than the service takes file
        // calls of one user at once: the method's starts go a few at a time), each answered.
        var expected: [String: String] = [:]
        for n in 0..<40 {
            let bytes = Self.content(30_000 + n, seed: UInt32(80 + n))
            http.set("/pool/p\(n).deb", Route(content: bytes))
            let uri = "downloads+" + http.url("/pool/p\(n).deb")
            expected[uri] = Self.sha256(bytes)
            apt.acquire(uri, into: partial + "/p\(n).deb", sha256: Self.sha256(bytes))
        }
        for (uri, hash) in expected {
            let done = try await apt.answer(201, for: uri)
            XCTAssertEqual(done["SHA256-Hash"], hash)
        }

        // As apt ends it: SIGINT the moment its last item is answered. The method ends once that
        // item's task is off the list too: none is left behind.
        http.set("/pool/last.deb", Route(content: content))
        let last = "downloads+" + http.url("/pool/last.deb")
        apt.acquire(last, into: partial + "/last.deb", sha256: hash)
        _ = try await apt.answer(201, for: last, pollEvery: .milliseconds(1))
        kill(apt.process.pid, SIGINT)
        XCTAssertEqual(apt.process.wait(), 128 + SIGINT)
        let listed = try await call("ListTasks", [.string("")])
        XCTAssertFalse("\(listed)".contains("tasks/"), "\(listed)")
    }

    /// An index apt has a copy of comes with its time (`Last-Modified` in the 600): unchanged,
    /// the answer is an `IMS-Hit` and no file is made; changed, the new file has the server's
    /// time, which the 201 gives as apt's http method does.
    func testAnIndexAptHasIsAnIMSHitUntilItChanges() async throws {
        let apt = try method()
        let partial = directory.file("partial")
        try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)
        var route = Route(content: Self.content(40_000, seed: 5))
        route.lastModified = Date(timeIntervalSince1970: 1_700_000_000)
        http.set("/dists/InRelease", route)
        let uri = "downloads+" + http.url("/dists/InRelease")
        apt.acquire(uri, into: partial + "/InRelease", lastModified: "Tue, 14 Nov 2023 22:13:20 GMT")
        let hit = try await apt.answer(201, for: uri)
        XCTAssertEqual(hit["IMS-Hit"], "true", "\(hit)")
        XCTAssertEqual(hit["Last-Modified"], "Tue, 14 Nov 2023 22:13:20 GMT")
        XCTAssertNil(hit["Size"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: partial + "/InRelease"), "no file made for a hit")
        XCTAssertEqual(http.requests(for: "/dists/InRelease").map(\.status), [304])

        // The index changed an hour later: the whole new file, timed as the server says.
        route.lastModified = Date(timeIntervalSince1970: 1_700_003_600)
        http.set("/dists/InRelease", route)
        let second = try method()
        second.acquire(uri, into: partial + "/InRelease", lastModified: "Tue, 14 Nov 2023 22:13:20 GMT")
        let fetched = try await second.answer(201, for: uri)
        XCTAssertNil(fetched["IMS-Hit"])
        XCTAssertEqual(fetched["Last-Modified"], "Tue, 14 Nov 2023 23:13:20 GMT")
        XCTAssertEqual(fetched["Size"], "40000")
        let attributes = try FileManager.default.attributesOfItem(atPath: partial + "/InRelease")
        XCTAssertEqual((attributes[.modificationDate] as? Date)?.timeIntervalSince1970, 1_700_003_600)
    }

    /// apt interrupted (Ctrl-C reaches the method as SIGINT) while a package comes: its task is
    /// paused and its bytes stay in the file apt named; apt's next run asks for the same file
    /// and the method goes on from those bytes (a range from where they end), the file whole and
    /// right. A task apt left more than a day ago is removed by the next run.
    func testAnItemCutByCtrlCGoesOnFromItsBytesInAptsNextRun() async throws {
        let partial = directory.file("partial")
        try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)
        let content = Self.content(6_000_000, seed: 93)
        let hash = Self.sha256(content)
        var route = Route(content: content)
        route.bytesPerSecondWithoutRange = 1_000_000
        http.set("/pool/big.deb", route)
        let uri = "downloads+" + http.url("/pool/big.deb")
        let file = partial + "/big.deb"

        // A task an apt run left two days ago, paused: removed when the method next starts work.
        let stale = try await start(
            http.url("/pool/big.deb"), directory.file("stale.deb"),
            [
                "session": .string("apt"),
                "metadata": .vardict(["apt_started": .int64(Int64(Date().timeIntervalSince1970) - 2 * 86_400)]),
                "max_bytes_per_second": .uint64(10_000),
            ])
        _ = try await call("Pause", [.objectPath(stale)])

        let first = try method()
        first.acquire(uri, into: file, sha256: hash)
        _ = try await first.answer(200, for: uri)
        try await until("a megabyte is in the file") {
            ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0) >= 1_000_000
        }
        first.process.signal(SIGINT)
        XCTAssertEqual(first.process.wait(), 128 + SIGINT)
        XCTAssertFalse(first.codes(for: uri).contains(201))
        XCTAssertTrue(FileManager.default.fileExists(atPath: file), "apt's partial file stays")
        let left = try await call("ListTasks", [.string("apt")]).first?.objectPathArrayValue ?? []
        XCTAssertEqual(left.count, 2, "the interrupted item's task and the stale one")
        for task in left where task != stale {
            let state = try await property(task, "State")?.stringValue
            XCTAssertEqual(state, "paused")
        }

        let second = try method()
        second.acquire(uri, into: file, sha256: hash)
        let done = try await second.answer(201, for: uri, seconds: 60)
        XCTAssertEqual(done["SHA256-Hash"], hash)
        XCTAssertEqual(sha256(ofFile: file), hash)
        let asked = http.requests(for: "/pool/big.deb")
        XCTAssertTrue(
            asked.contains { ($0.range ?? "").hasPrefix("bytes=") && $0.range != "bytes=0-" },
            "the next run asked for the rest: \(asked.map { $0.range ?? "-" })")
        let sent = asked.reduce(0) { $0 + $1.bodyBytesSent }
        XCTAssertLessThan(sent, content.count + 1_000_000, "not fetched whole twice")
        try await until("the answered task and the stale one are off the list") {
            (try await self.call("ListTasks", [.string("apt")]).first?.objectPathArrayValue ?? []).isEmpty
        }
    }

    func testFailuresAreAnsweredWithAptsReasons() async throws {
        let apt = try method()
        let partial = directory.file("partial")
        try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)

        let missing = "downloads+" + http.url("/pool/missing.deb")
        apt.acquire(missing, into: partial + "/missing.deb")
        let notFound = try await apt.answer(400, for: missing)
        XCTAssertEqual(notFound["FailReason"], "HttpError404", "\(notFound)")
        XCTAssertNil(notFound["Transient-Failure"])

        http.set("/pool/changed.deb", Route(content: Self.content(10_000, seed: 3)))
        let changed = "downloads+" + http.url("/pool/changed.deb")
        apt.acquire(changed, into: partial + "/changed.deb", sha256: String(repeating: "0", count: 64))
        let mismatch = try await apt.answer(400, for: changed)
        XCTAssertEqual(mismatch["FailReason"], "HashSumMismatch", "\(mismatch)")

        // A package of another length than its index says: refused at the response's head, as
        // apt's own size check would ("File has unexpected size"), and the file made for it gone.
        http.set("/pool/longer.deb", Route(content: Self.content(10_000, seed: 4)))
        let longer = "downloads+" + http.url("/pool/longer.deb")
        apt.acquire(longer, into: partial + "/longer.deb", size: 9_999)
        let unexpected = try await apt.answer(400, for: longer)
        XCTAssertEqual(unexpected["FailReason"], "HashSumMismatch", "\(unexpected)")
        XCTAssertTrue(unexpected["Message"]?.contains("promises 9999 bytes") ?? false, "\(unexpected)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: partial + "/longer.deb"))
        // The right length: fetched as any.
        http.set("/pool/right.deb", Route(content: Self.content(10_000, seed: 4)))
        let right = "downloads+" + http.url("/pool/right.deb")
        apt.acquire(right, into: partial + "/right.deb", size: 10_000)
        let done = try await apt.answer(201, for: right)
        XCTAssertEqual(done["Size"], "10000", "\(done)")

        let theirs = "ftp://127.0.0.1/pool/x.deb"
        apt.acquire(theirs, into: partial + "/x.deb")
        let refused = try await apt.answer(400, for: theirs)
        XCTAssertTrue(refused["Message"]?.contains("not a downloads") ?? false, "\(refused)")
    }

    /// apt's `Maximum-Size` (its defence against an endless InRelease): a file past it fails the
    /// item `MaximumSizeExceeded` whether its size was known from the start, learnt as it came
    /// or only once it was whole, and the file the method made is removed.
    func testAFileLargerThanAptsMaximumSizeFails() async throws {
        let apt = try method()
        let partial = directory.file("partial")
        try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)
        http.set("/dists/small/InRelease", Route(content: Self.content(10_000, seed: 6)))
        var endless = Route(content: Self.content(4_000_000, seed: 7))
        endless.bytesPerSecond = 500_000
        endless.chunked = true
        http.set("/dists/endless/InRelease", endless)
        for name in ["small", "endless"] {
            let uri = "downloads+" + http.url("/dists/\(name)/InRelease")
            apt.acquire(uri, into: partial + "/\(name)-InRelease", maximumSize: 1_000)
            let failure = try await apt.answer(400, for: uri, seconds: 30)
            XCTAssertEqual(failure["FailReason"], "MaximumSizeExceeded", "\(failure)")
            XCTAssertFalse(apt.codes(for: uri).contains(201))
            try await until("\(name): the file the method made is removed") {
                !FileManager.default.fileExists(atPath: partial + "/\(name)-InRelease")
            }
        }
        let endlessSent = http.requests(for: "/dists/endless/InRelease").reduce(0) { $0 + $1.bodyBytesSent }
        XCTAssertLessThan(endlessSent, 4_000_000, "the endless one was stopped on the way")
    }

    /// apt's proxy for a scheme is the task's: `Acquire::http::Proxy` sends the item through
    /// tinyproxy, and `DIRECT` past the service's own proxy.
    func testAptsProxySettingIsTheTasks() async throws {
        let proxy = try TinyProxy(in: directory.path)
        defer { proxy.stop() }
        let apt = try method()
        apt.send(AptMessage(601, "Configuration", [.init("Config-Item", "Acquire::http::Proxy=\(proxy.url)")]))
        let content = Self.content(20_000, seed: 8)
        http.set("/pool/proxied.deb", Route(content: content))
        let uri = "downloads+" + http.url("/pool/proxied.deb")
        apt.acquire(uri, into: directory.file("proxied.deb"), sha256: Self.sha256(content))
        _ = try await apt.answer(201, for: uri)
        XCTAssertEqual(sha256(ofFile: directory.file("proxied.deb")), Self.sha256(content))
        XCTAssertTrue(proxy.forwardedRequests.contains { $0.contains("/pool/proxied.deb") }, proxy.logText)

        let direct = try method()
        direct.send(AptMessage(601, "Configuration", [.init("Config-Item", "Acquire::http::Proxy=DIRECT")]))
        http.set("/pool/direct.deb", Route(content: content))
        let directURI = "downloads+" + http.url("/pool/direct.deb")
        direct.acquire(directURI, into: directory.file("direct.deb"), sha256: Self.sha256(content))
        _ = try await direct.answer(201, for: directURI)
        XCTAssertFalse(proxy.forwardedRequests.contains { $0.contains("/pool/direct.deb") }, proxy.logText)
    }

    func testWithoutTheServiceTheFailureNamesThePackage() async throws {
        stopDaemon()
        let apt = try method()
        let uri = "downloads+" + http.url("/pool/a.deb")
        apt.acquire(uri, into: directory.file("a.deb"))
        let failure = try await apt.answer(400, for: uri)
        XCTAssertTrue(failure["Message"]?.contains("org-example-downloads") ?? false, "\(failure)")
    }
}

/// apt itself, unmodified, through the method: `apt-get update` and `apt-get download` of a local
/// repository (made with dpkg-deb and apt-ftparchive, served by the test's HTTP server) whose
/// sources line is `deb [trusted=yes] downloads+http://…`, apt finding the method in a methods
/// directory beside its own; and a package whose bytes do not match the index refused by apt.
extension AptMethodTests {
    /// Serves the repository: the packages under /repo/, with `Packages` and `Release` made by
    /// apt-ftparchive over them.
    func serveRepository(_ packages: [String: [UInt8]]) async throws {
        let repo = directory.file("repo")
        try FileManager.default.createDirectory(atPath: repo, withIntermediateDirectories: true)
        for (file, bytes) in packages {
            FileManager.default.createFile(atPath: repo + "/" + file, contents: Data(bytes))
            http.set("/repo/./" + file, Route(content: bytes))
        }
        let index = try await run([
            "sh", "-c", "cd '\(repo)' && apt-ftparchive packages . > Packages && apt-ftparchive release . > Release",
        ])
        XCTAssertEqual(index.status, 0, index.stderr)
        for file in ["Packages", "Release"] {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: repo + "/" + file)))
            // A flat repository's indexes are asked as `REPO/./NAME` (a real server folds the `./`).
            var route = Route(content: bytes)
            route.lastModified = Date(timeIntervalSince1970: 1_700_000_000)
            http.set("/repo/" + file, route)
            http.set("/repo/./" + file, route)
        }
    }

    func testAptItselfUpdatesAndDownloadsThroughTheMethodAndRefusesWrongBytes() async throws {
        let payload = Self.content(200_000, seed: 791)
        let deb = try await makePackage("hello-downloads", payload: payload)
        try await serveRepository(["hello-downloads_1.0_all.deb": deb])
        let apt = try makeAptRoot(
            sources: "deb [trusted=yes] downloads+\(http.url("/repo")) ./\n")
        let environment = ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]

        let update = try await ProcessRunner.run(apt.arguments(["update"]), environment: environment, timeout: 60)
        XCTAssertEqual(update.status, 0, update.description)
        XCTAssertFalse(http.requests(for: "/repo/./Packages").isEmpty, "apt's index came through the service")

        // Nothing changed: the second update asks with the time of apt's copy and fetches no index.
        let before = http.requests.count
        let again = try await ProcessRunner.run(apt.arguments(["update"]), environment: environment, timeout: 60)
        XCTAssertEqual(again.status, 0, again.description)
        let asked = http.requests.dropFirst(before)
        XCTAssertFalse(asked.isEmpty)
        XCTAssertTrue(
            asked.allSatisfy { $0.status == 304 || $0.status == 404 }, "\(asked.map { ($0.path, $0.status) })")
        XCTAssertTrue(asked.contains { $0.path.hasSuffix("Release") && $0.status == 304 })
        XCTAssertTrue(again.stdout.contains("Hit:"), again.stdout)

        let cwd = directory.file("downloaded")
        try FileManager.default.createDirectory(atPath: cwd, withIntermediateDirectories: true)
        let download = try await ProcessRunner.run(
            ["sh", "-c", "cd '\(cwd)' && exec \"$@\"", "sh"] + apt.arguments(["download", "hello-downloads"]),
            environment: environment, timeout: 60)
        XCTAssertEqual(download.status, 0, download.description)
        XCTAssertEqual(sha256(ofFile: cwd + "/hello-downloads_1.0_all.deb"), Self.sha256(deb))
        XCTAssertEqual(http.requests(for: "/repo/./hello-downloads_1.0_all.deb").count, 1)

        // The package's bytes change under the index (a broken mirror): apt refuses them.
        var wrong = deb
        wrong[wrong.count / 2] ^= 0xFF
        http.set("/repo/./hello-downloads_1.0_all.deb", Route(content: wrong))
        try FileManager.default.removeItem(atPath: cwd + "/hello-downloads_1.0_all.deb")
        let refused = try await ProcessRunner.run(
            ["sh", "-c", "cd '\(cwd)' && exec \"$@\"", "sh"] + apt.arguments(["download", "hello-downloads"]),
            environment: environment, timeout: 60)
        XCTAssertNotEqual(refused.status, 0, refused.description)
        XCTAssertTrue(
            (refused.stdout + refused.stderr).contains("Hash Sum mismatch")
                || (refused.stdout + refused.stderr).contains("SHA256"), refused.description)
        XCTAssertFalse(FileManager.default.fileExists(atPath: cwd + "/hello-downloads_1.0_all.deb"), "nothing kept")
    }
}
