import DBus
import DownloadsAPI
import DownloadsClient
import NIOConcurrencyHelpers
import TerminalOutput
#if canImport(Glibc)
import Glibc
import ShownText
#endif

/// `get -u USER[:PASSWORD]` and `--proxy-user USER:PASSWORD`, as curl's: this process answers
/// the service's questions (`HandleChallenge`) for the one task it started, while it follows it.
/// It registers as its session's completion handler with the kinds it answers; a password not
/// given is asked on the terminal (not echoed) when the server asks for it, once. Credentials
/// reach the service only as an answer (kept in its memory, never stored).
final class ChallengeAnswerer: Sendable {
    struct Login: Sendable {
        var user: String
        var password: String?

        /// `USER[:PASSWORD]` (the first colon splits).
        init(_ text: String) {
            if let colon = text.firstIndex(of: ":") {
                user = String(text[..<colon])
                password = String(text[text.index(after: colon)...])
            } else {
                user = text
                password = nil
            }
        }
    }

    static let object: ObjectPath = "/org/example/downloadsctl/agent"

    private let server: Login?
    private let proxyLogin: Login?
    /// The task it answers for, once started (a question may come before `Start` returned).
    private let task = NIOLockedValueBox<ObjectPath?>(nil)
    /// The password asked on the terminal, kept for the next question of the same task.
    private let asked = NIOLockedValueBox<String?>(nil)

    init(server: Login?, proxy: Login?) {
        self.server = server
        proxyLogin = proxy
    }

    /// Exports the object and registers it for `session`.
    func register(on proxy: DownloadsProxy, session: String) async throws {
        try proxy.connection.export(
            ExportedObject(
                path: Self.object,
                interfaces: [
                    ExportedInterface(
                        DownloadsInterfaces.client,
                        methods: [
                            "HandleEventsForBackgroundSession": { _ in [] },
                            "HandleChallenge": { [self, connection = proxy.connection] call in
                                // Only the service is answered: any other peer that calls this
                                // object (the same user's other processes) learns nothing.
                                guard (try? await connection.nameOwner(DownloadsAPI.busName)) == call.sender else {
                                    throw BusError(
                                        name: BusError.accessDeniedName, message: "only the downloads service asks")
                                }
                                return await answer(call)
                            },
                        ])
                ]))
        var kinds: Set<String> = []
        if server != nil { kinds.insert("http-auth") }
        if proxyLogin != nil { kinds.insert("proxy-auth") }
        try await proxy.registerCompletionHandler(
            session: session, object: Self.object, busName: nil, challenges: kinds)
    }

    /// The task it answers for.
    func follow(_ path: ObjectPath) {
        task.withLockedValue { $0 = path }
    }

    private func answer(_ call: MethodCall) async -> [DBusValue] {
        let fallback: [DBusValue] = [.string("default"), .vardict([:])]
        guard call.arguments.count == 3, let path = call.arguments[0].objectPathValue,
            let kind = call.arguments[1].stringValue, let details = call.arguments[2].vardictValue
        else { return fallback }
        // Only its own task: another `get` of the session may have registered since.
        let deadline = ContinuousClock.now + .seconds(10)
        while task.withLockedValue({ $0 }) == nil, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        guard task.withLockedValue({ $0 }) == path else { return fallback }
        let failures = details["failures"]?.uint32Value ?? 0
        switch kind {
        case "proxy-auth":
            guard let login = proxyLogin, let password = login.password, failures == 0 else { return fallback }
            return [.string("use"), .vardict(["user": .string(login.user), "password": .string(password)])]
        case "http-auth":
            guard let login = server else { return fallback }
            if let password = login.password {
                // Refused once: the same password again would be refused again.
                guard failures == 0 else { return fallback }
                return [.string("use"), .vardict(["user": .string(login.user), "password": .string(password)])]
            }
            guard let password = prompt(login.user, details, again: failures > 0) else { return fallback }
            return [.string("use"), .vardict(["user": .string(login.user), "password": .string(password)])]
        default:
            return fallback
        }
    }

    /// Asks the terminal for `user`'s password (not echoed); nil without a terminal.
    private func prompt(_ user: String, _ details: [String: DBusValue], again: Bool) -> String? {
        if !again, let known = asked.withLockedValue({ $0 }) { return known }
        let tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else { return nil }
        defer { close(tty) }
        // Echo off before the question, as getpass(3) does: a password typed (or pasted) the moment
        // the question shows is never echoed.
        var saved = termios()
        let isTerminal = tcgetattr(tty, &saved) == 0
        if isTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(tty, TCSANOW, &quiet)
        }
        defer {
            if isTerminal { tcsetattr(tty, TCSANOW, &saved) }
            _ = write(tty, "\n", 1)
        }
        let realm = details["realm"]?.stringValue ?? ""
        let host = details["host"]?.stringValue ?? ""
        let question =
            "\r\u{1B}[K" + (again ? "That was refused. " : "")
            + "Password for \(DisplayText.escaped(user)) at \(DisplayText.escaped(host))"
            + (realm.isEmpty ? "" : " (\(DisplayText.escaped(realm)))") + ": "
        _ = question.withCString { write(tty, $0, strlen($0)) }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(tty, &byte, 1) == 1, byte != 10, byte != 13, bytes.count < 4096 { bytes.append(byte) }
        let password = String(decoding: bytes, as: UTF8.self)
        asked.withLockedValue { $0 = password }
        return password
    }
}
