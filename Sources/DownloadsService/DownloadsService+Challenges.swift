import DBus
import DownloadEngine
import DownloadModel
import DownloadStore
import DownloadsAPI

/// The questions tasks meet, carried to the app (`HandleChallenge` on the object it registered
/// with `RegisterCompletionHandler`, to its `bus_name` with activation as the completion call
/// goes): the engine's `ChallengeAgent`.
extension DownloadsService: ChallengeAgent {
    /// The kinds an answer may give now; the others are refused (the task fails as `default`).
    static let answerKeys: Set<String> = ["user", "password", "headers", "trust", "certificate", "passphrase", "url"]
    /// The most an answer's texts may hold together (a token is a few KiB at most).
    static let maximumAnswerBytes = 64 * 1024

    /// `RegisterCompletionHandler`'s `challenges`: names of `Challenge.Kind`, no others.
    static func checkedChallengeKinds(_ value: DBusValue) throws -> Set<String> {
        guard let names = value.stringArrayValue else {
            throw DownloadsErrorName.invalidArgument.error("challenges must be an array of strings (as)")
        }
        let known = Set(Challenge.Kind.allCases.map(\.rawValue))
        for name in names where !known.contains(name) {
            throw DownloadsErrorName.invalidArgument.error(
                "unknown challenge kind '\(LogText.escaped(name))' (known: \(known.sorted().joined(separator: ", ")))")
        }
        return Set(names)
    }

    public func answers(_ kind: Challenge.Kind, for task: TaskSnapshot) -> Bool {
        guard let handler = try? store.handler(task.sessionID) else { return false }
        return handler.challenges.contains(kind.rawValue)
    }

    public func ask(_ challenge: Challenge, refused: Int, for task: TaskSnapshot) async -> ChallengeAnswer {
        let session = task.sessionID.shownDescription
        do {
            guard let handler = try store.handler(task.sessionID), handler.challenges.contains(challenge.kind.rawValue)
            else {
                return .performDefault(why: "no app answers \(challenge.kind.rawValue) for \(session) any more")
            }
            guard let receiver = try await receiver(of: handler) else {
                return .performDefault(why: "the app of \(LogText.escaped(session)) is not there to ask")
            }
            let reply = try await callClient(
                handler, receiver: receiver, method: "HandleChallenge",
                arguments: [
                    .objectPath(DownloadsAPI.taskPath(task.id)), .string(challenge.kind.rawValue),
                    .vardict(Self.details(of: challenge, refused: refused)),
                ],
                timeout: .seconds(Int(handler.challengeTimeout)))
            return try await Self.answer(
                from: reply, caller: Caller(uid: handler.owner, app: SessionKey.app(handler.session)),
                reads: callerReads)
        } catch let error as BusError {
            return .performDefault(
                why: "the app gave no answer: \(LogText.escaped(error.name)): \(LogText.escaped(error.message))")
        } catch {
            return .performDefault(why: "its app's answer is refused: \(LogText.escaped("\(error)"))")
        }
    }

    /// `HandleChallenge`'s `details`.
    static func details(of challenge: Challenge, refused: Int) -> [String: DBusValue] {
        var details: [String: DBusValue] = [
            "host": .string(challenge.host), "port": .uint16(UInt16(clamping: challenge.port)),
            "url": .string(challenge.url), "failures": .uint32(UInt32(clamping: refused)),
        ]
        switch challenge.kind {
        case .linkExpired:
            details["status"] = .uint32(UInt32(clamping: challenge.status))
        case .clientCertificate:
            details["issuers"] = .array(element: .array(.byte), challenge.issuers.map { .bytes($0) })
        case .serverTrust:
            details["certificates"] = .array(element: .array(.byte), challenge.certificates.map { .bytes($0) })
            details["error"] = .string(challenge.error)
        default:
            details["scheme"] = .string(challenge.scheme)
            details["realm"] = .string(challenge.realm)
            details["status"] = .uint32(UInt32(clamping: challenge.status))
        }
        return details
    }

    /// The reply `(s disposition, a{sv} answer)` as an answer; throws why it is refused.
    static func answer(from reply: [DBusValue], caller: Caller, reads: CallerFileReads) async throws -> ChallengeAnswer
    {
        guard reply.count == 2, let disposition = reply[0].stringValue, case .string = reply[0],
            let answer = reply[1].vardictValue
        else {
            throw DownloadsErrorName.invalidArgument.error("the reply is not (s disposition, a{sv} answer)")
        }
        switch disposition {
        case "default": return .performDefault(why: "its app answered default")
        case "cancel": return .cancel
        case "use": break
        default:
            throw DownloadsErrorName.invalidArgument.error(
                "unknown disposition '\(LogText.escaped(String(disposition.prefix(40))))' (use, default, cancel)")
        }
        var credentials = ChallengeAnswer.Credentials()
        var bytes = 0
        var certificate: UnixFD?
        var passphrase: String?
        for (key, value) in answer {
            guard answerKeys.contains(key) else {
                throw DownloadsErrorName.invalidArgument.error(
                    "the answer's key '\(LogText.escaped(String(key.prefix(40))))' is not taken (known: \(answerKeys.sorted().joined(separator: ", ")))"
                )
            }
            switch key {
            case "certificate":
                guard case .unixFD(let fd) = value else {
                    throw DownloadsErrorName.invalidArgument.error("the answer's certificate must be a descriptor (h)")
                }
                certificate = fd
            case "passphrase":
                guard case .string(let text) = value else {
                    throw DownloadsErrorName.invalidArgument.error("the answer's passphrase must be a string (s)")
                }
                bytes += text.utf8.count
                passphrase = text
            case "url":
                guard case .string(let text) = value else {
                    throw DownloadsErrorName.invalidArgument.error("the answer's url must be a string (s)")
                }
                bytes += text.utf8.count
                credentials.url = try StartRequest.checkURL(text)
            case "trust":
                guard case .boolean(let flag) = value else {
                    throw DownloadsErrorName.invalidArgument.error("the answer's trust must be a boolean (b)")
                }
                credentials.trust = flag
            case "user", "password":
                guard case .string(let text) = value else {
                    throw DownloadsErrorName.invalidArgument.error("the answer's \(key) must be a string (s)")
                }
                bytes += text.utf8.count
                if key == "user" { credentials.user = text } else { credentials.password = text }
            default:
                guard let headers = value.stringDictValue else {
                    throw DownloadsErrorName.invalidArgument.error("the answer's headers must be a{ss}")
                }
                bytes += headers.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
                credentials.headers = headers
            }
            guard bytes <= maximumAnswerBytes else {
                throw DownloadsErrorName.invalidArgument.error("the answer holds over \(maximumAnswerBytes) bytes")
            }
        }
        if let certificate {
            credentials.certificate = try await reads.run(for: caller, what: "the answer's certificate") {
                [passphrase] in try ClientCertificateFile.read(certificate, passphrase: passphrase)
            }
        }
        return .use(credentials)
    }
}
