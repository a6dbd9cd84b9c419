import Foundation

/// A Flatpak app as Flatpak runs one, made of Flatpak's own pieces (no Flatpak runtime):
/// `xdg-dbus-proxy --filter --talk=org.example.Downloads` in a bubblewrap sandbox of its own
/// whose `/.flatpak-info` (`--perms 0600 --file FD`) names the app, and the app in
/// `bwrap --unshare-user --disable-userns --unshare-pid` with that `/.flatpak-info`, its bus at
/// `/run/flatpak/bus` (the proxy's socket), its home's `Downloads` bound writable and `Music`
/// read-only, nothing else of the home. The app is `Tests/sandbox/app.py` (python3-dbus), driven
/// by one JSON command per line.
public final class FlatpakApp: @unchecked Sendable {
    public let id: String
    /// The home directory as the host sees it (`Downloads`, `Music`, `.config/autostart` and
    /// `.bashrc` exist there; the sandbox sees only the first two).
    public let home: String
    private let proxy: ChildProcess
    private let app: ChildProcess
    private let output: OutputCollector
    private let errors: OutputCollector
    private var answered = 0
    /// bwrap and its arguments up to the program: the app's sandbox.
    private let sandbox: [String]
    /// The app's unique name on the bus (through the proxy).
    public private(set) var uniqueName = ""

    /// Starts the proxy and the app for `id` on the bus at `busDirectory`'s socket `busAddress`,
    /// as `uid` (nil: this process's user), in `directory`'s `flatpak-ID`. `proxyInfo`: bwrap
    /// arguments that put something else at the proxy's `/.flatpak-info` (what an attacker
    /// would), instead of Flatpak's file.
    public init(
        id: String, busAddress: String, busDirectory: String, systemBus: Bool = false, uid: UInt32? = nil,
        directory: TemporaryDirectory, proxyInfo: [String]? = nil
    ) async throws {
        self.id = id
        let root = directory.file("flatpak-\(id)")
        home = root + "/home"
        let proxyDirectory = root + "/proxy"
        let info = root + "/flatpak-info"
        let manager = FileManager.default
        for path in [home + "/Downloads", home + "/Music", home + "/.config/autostart", proxyDirectory] {
            try manager.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        try "# the user's own\n".write(toFile: home + "/.bashrc", atomically: true, encoding: .utf8)
        try
            "[Application]\nname=\(id)\nruntime=runtime/org.freedesktop.Platform/x86_64/23.08\n\n[Context]\nfilesystems=xdg-download;xdg-music:ro;\n"
            .write(toFile: info, atomically: true, encoding: .utf8)
        chmod(root, 0o755)
        chmod(proxyDirectory, 0o777)
        if let uid {
            // The user's own home, as on a desktop: everything in it theirs (Music too: the
            // sandbox's read-only mount, not the permissions, keeps the app out of it).
            for path in [
                home, home + "/Downloads", home + "/Music", home + "/.config", home + "/.config/autostart",
                home + "/.bashrc", info,
            ] {
                chown(path, uid, uid)
            }
        }
        let drop = uid.map { ["setpriv", "--reuid=\($0)", "--regid=\($0)", "--clear-groups"] } ?? []
        let base = [
            "bwrap", "--tmpfs", "/", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev", "--die-with-parent",
        ]
        // The proxy: Flatpak hands it /.flatpak-info as a file descriptor (fd 9 here).
        proxy = try ChildProcess(
            drop + ["sh", "-c", "exec 9<\"$0\"; exec \"$@\"", info] + base + [
                "--unshare-user", "--disable-userns", "--bind", busDirectory, busDirectory, "--bind", proxyDirectory,
                proxyDirectory,
            ] + (proxyInfo ?? ["--perms", "0600", "--file", "9", "/.flatpak-info"]) + [
                "xdg-dbus-proxy", busAddress, proxyDirectory + "/bus", "--filter", "--talk=org.example.Downloads",
            ])
        let socket = proxyDirectory + "/bus"
        let deadline = Date().addingTimeInterval(20)
        while !manager.fileExists(atPath: socket) {
            guard Date() < deadline, !proxy.hasExited else {
                proxy.stop()
                throw FlatpakAppError(
                    "xdg-dbus-proxy did not start: \(String(decoding: proxy.stderr.availableData, as: UTF8.self))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let script = PackageRoot.url.appendingPathComponent("Tests/sandbox/app.py").path
        // The project's build (read-only) and the Swift runtime it links, for running our own
        // programs (downloadsctl) as the app.
        let build = PackageRoot.url.appendingPathComponent(".build").path
        sandbox =
            drop + base + [
                "--unshare-user", "--disable-userns", "--unshare-pid",
                "--ro-bind", info, "/.flatpak-info",
                "--dir", "/run/flatpak", "--bind", socket, "/run/flatpak/bus",
                "--dir", home, "--bind", home + "/Downloads", home + "/Downloads", "--ro-bind", home + "/Music",
                home + "/Music",
                "--ro-bind", script, "/app/app.py", "--ro-bind", "/opt", "/opt", "--ro-bind", build, build,
                "--setenv", "HOME", home, "--setenv", "APP_BUS", systemBus ? "system" : "session",
                "--setenv", "DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/flatpak/bus",
                "--setenv", "DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/run/flatpak/bus",
            ]
        app = try ChildProcess(sandbox + ["/usr/bin/python3", "/app/app.py"])
        output = OutputCollector(app.stdout)
        errors = OutputCollector(app.stderr)
        let ready = try await nextLine(seconds: 30)
        guard let name = ready["ready"] as? String else {
            throw FlatpakAppError("the app did not start: \(ready) \(errors.text)")
        }
        uniqueName = name
    }

    /// What one command answered: the value, or the D-Bus error's name and message.
    public struct Reply: CustomStringConvertible {
        public let value: Any?
        public let error: String?
        public let message: String?
        public var description: String { error.map { "\($0): \(message ?? "")" } ?? "\(value ?? "nil")" }
    }

    /// Sends one command (`Tests/sandbox/app.py` lists them) and waits for its answer.
    public func send(_ command: [String: Any], seconds: Double = 60) async throws -> Reply {
        let line = try JSONSerialization.data(withJSONObject: command) + Data([10])
        app.stdin.write(line)
        let answer = try await nextLine(seconds: seconds)
        return Reply(value: answer["ok"], error: answer["error"] as? String, message: answer["message"] as? String)
    }

    private func nextLine(seconds: Double) async throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            // One read of the output: a second could hold more than the first, and take a line
            // the first saw half of for a whole one.
            let text = output.text
            let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
            if lines.count > answered, text.hasSuffix("\n") || lines.count > answered + 1 {
                let line = lines[answered]
                answered += 1
                guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                    throw FlatpakAppError("the app answered '\(line)'")
                }
                return object
            }
            if app.hasExited { throw FlatpakAppError("the app exited: \(errors.text)") }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw FlatpakAppError("the app did not answer within \(seconds) s; its stderr: \(errors.text)")
    }

    /// Runs a program inside another sandbox of the same app (its own bus through the proxy,
    /// the same files), as a second process of the app would.
    public func run(_ arguments: [String], timeout: TimeInterval = 60) async throws -> ProcessRunner.Output {
        try await ProcessRunner.run(sandbox + arguments, timeout: timeout)
    }

    public func stop() {
        app.stop()
        proxy.stop()
    }
}

public struct FlatpakAppError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
