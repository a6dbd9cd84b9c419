import DBus
import Foundation
import TestHTTPServer
import TestSupport
import XCTest

extension DownloadsctlTests {
    static let members = "Basic " + Data("dana:opensesame".utf8).base64EncodedString()

    func membersRoute(_ content: [UInt8]) -> Route {
        var route = Route(content: content)
        route.requiredAuthorization = Self.members
        return route
    }

    func testGetWithALoginAnswersTheServersQuestion() async throws {
        let content = Self.content(250_000, seed: 44)
        http.set("/members.bin", membersRoute(content))
        let target = directory.file("members.bin")
        let out = try await ctl(["get", "-u", "dana:opensesame", http.url("/members.bin"), "-o", target])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        XCTAssertEqual(http.requests(for: "/members.bin").map(\.status), [401, 200])
        for name in try FileManager.default.subpathsOfDirectory(atPath: stateDirectory) {
            let data = FileManager.default.contents(atPath: stateDirectory + "/" + name) ?? Data()
            XCTAssertNil(data.range(of: Data("opensesame".utf8)), "\(name) holds the password")
        }
    }

    func testGetAsksThePasswordOnTheTerminalAndNotWithoutOne() async throws {
        let content = Self.content(100_000, seed: 45)
        http.set("/asked.bin", membersRoute(content))
        // On a terminal (a pty python3 makes, as a person's): asked, typed once asked, not echoed.
        let target = directory.file("asked.bin")
        let person = """
            import os, pty, select, sys, time
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], sys.argv[1:])
            out, typed, deadline = b'', False, time.time() + 50
            while time.time() < deadline:
                if select.select([fd], [], [], 0.1)[0]:
                    try:
                        data = os.read(fd, 4096)
                    except OSError:
                        break
                    if not data:
                        break
                    out += data
                    if not typed and b'Password for' in out:
                        os.write(fd, b'opensesame\\n')
                        typed = True
            _, status = os.waitpid(pid, 0)
            sys.stdout.write(out.decode('utf-8', 'replace'))
            sys.exit(os.waitstatus_to_exitcode(status))
            """
        let typed = try await ProcessRunner.run(
            [
                "/usr/bin/python3", "-c", person, Self.ctl, "--address", bus.address, "get", "-u", "dana",
                http.url("/asked.bin"), "-o", target,
            ],
            environment: bus.environment, timeout: 60)
        XCTAssertEqual(typed.status, 0, typed.description)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
        XCTAssertTrue(typed.stdout.contains("Password for dana at 127.0.0.1 (test): "), typed.stdout)
        XCTAssertFalse(typed.stdout.contains("opensesame"), "the password is not echoed: \(typed.stdout)")
        // Without a terminal nobody can type it: the download fails as without -u.
        let alone = try await ProcessRunner.run(
            [
                "/usr/bin/setsid", "-w", Self.ctl, "--address", bus.address, "get", "-u", "dana",
                http.url("/asked.bin"),
                "-o", directory.file("alone.bin"),
            ],
            environment: bus.environment, timeout: 60)
        XCTAssertNotEqual(alone.status, 0, alone.description)
        XCTAssertTrue(alone.stderr.contains("401"), alone.stderr)
    }

    func testGetWithAProxyUserAnswersTheProxy() async throws {
        let guarded = try TinyProxy(in: directory.path, credentials: ("erin", "pr0xy"))
        defer { guarded.stop() }
        let content = Self.content(150_000, seed: 46)
        http.set("/proxied.bin", Route(content: content))
        let target = directory.file("proxied.bin")
        let out = try await ctl([
            "get", "--proxy-user", "erin:pr0xy", "--proxy", guarded.url, http.url("/proxied.bin"), "-o", target,
        ])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(content))
    }

    func testGetAnswersTheServiceAloneNotAnotherPeer() async throws {
        var route = membersRoute(Self.content(3_000_000, seed: 47))
        route.bytesPerSecond = 1_000_000
        http.set("/slow-members.bin", route)
        let target = directory.file("slow-members.bin")
        let arguments = [
            Self.ctl, "--address", bus.address, "get", "-u", "dana:opensesame", http.url("/slow-members.bin"), "-o",
            target,
        ]
        let environment = bus.environment
        let got = Task { try await ProcessRunner.run(arguments, environment: environment, timeout: 60) }
        // While it follows its download, another peer of the bus asks its object for the login.
        var answerer: String?
        try await until("get registered its answerer") {
            let log = (try? String(contentsOfFile: self.daemonLog, encoding: .utf8)) ?? ""
            answerer = log.split(separator: "\n").last { $0.contains("/org/example/downloadsctl/agent") }
                .flatMap { $0.split(separator: " ").first { $0.hasPrefix(":") } }.map(String.init)
            return answerer != nil
        }
        do {
            _ = try await client.call(
                destination: try XCTUnwrap(answerer), path: "/org/example/downloadsctl/agent",
                interface: "org.example.Downloads.Client", method: "HandleChallenge",
                arguments: [
                    .objectPath("/org/example/Downloads/tasks/1"), .string("http-auth"),
                    .vardict(["scheme": .string("Basic"), "failures": .uint32(0)]),
                ])
            XCTFail("a peer that is not the service got an answer")
        } catch let error as BusError {
            XCTAssertEqual(error.name, BusError.accessDeniedName)
        }
        let out = try await got.value
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(sha256(ofFile: target), Self.sha256(Self.content(3_000_000, seed: 47)))
    }
}

extension DownloadsctlTests {
    func testUploadWithALoginAnswersTheServersQuestion() async throws {
        let content = Self.content(150_000, seed: 46)
        let source = directory.file("report.txt")
        try Data(content).write(to: URL(fileURLWithPath: source))
        var route = Route.receiving(status: 201, reply: "{\"id\": 7}")
        route.requiredAuthorization = Self.members
        http.set("/reports", route)
        let out = try await ctl([
            "upload", "-u", "dana:opensesame", "--method", "POST", "--protocol", "plain", source, http.url("/reports"),
        ])
        XCTAssertEqual(out.status, 0, out.description)
        XCTAssertEqual(http.requests(for: "/reports").map(\.status), [401, 201])
        let received = try XCTUnwrap(http.received("/reports").last)
        XCTAssertEqual(Self.sha256(received.body), Self.sha256(content))
        XCTAssertTrue(out.stdout.contains("\"id\": 7"), out.description)
    }
}
