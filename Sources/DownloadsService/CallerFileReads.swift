import Dispatch
import DownloadsAPI
import NIOConcurrencyHelpers

/// Work on a file a caller handed over or named (its descriptor's `fstat` and reads: a client
/// certificate, an upload's source, a destination directory, a Metalink document), which blocks
/// for as long as the file's file system wants: a FUSE file whose read never answers, a stuck NFS
/// mount. It runs on a thread of its own, never on the cooperative pool every call shares (two
/// threads on two cores: two stuck reads there left every user's calls unanswered), and the call
/// fails after `deadline` while the read stays stuck on its thread. A user holds at most
/// `perOwner` such reads, the stuck ones included, so one user's stuck files stall that user's
/// calls alone and cannot pile up threads.
final class CallerFileReads: Sendable {
    static let deadline: Duration = .seconds(10)

    let perOwner: Int
    private let inFlight = NIOLockedValueBox([UInt32: Int]())

    init(perOwner: Int = 4) {
        self.perOwner = perOwner
    }

    /// Reads of `owner`'s files not yet returned (a stuck one counts until its file answers).
    func count(owner: UInt32) -> Int { inFlight.withLockedValue { $0[owner, default: 0] } }

    /// `body`'s result, run on a thread of its own for `owner`; `what` names the file in errors
    /// ("client_certificate"). Throws `FileError` when the file does not answer within
    /// `deadline`, or when `owner` has `perOwner` reads that have not returned.
    func run<T: Sendable>(
        owner: UInt32, what: String, deadline: Duration = CallerFileReads.deadline,
        _ body: @escaping @Sendable () throws -> T
    ) async throws -> T {
        let admitted = inFlight.withLockedValue { counts -> Bool in
            guard counts[owner, default: 0] < perOwner else { return false }
            counts[owner, default: 0] += 1
            return true
        }
        guard admitted else {
            throw DownloadsErrorName.fileError.error(
                "\(what): \(perOwner) reads of your files have not returned yet (a network or FUSE mount that does not answer?); nothing was changed"
            )
        }
        let outcome = Outcome<T>()
        return try await withCheckedThrowingContinuation { continuation in
            outcome.set(continuation)
            DispatchQueue(label: "org.example.Downloads.caller-file").async { [inFlight] in
                let result = Result { try body() }
                inFlight.withLockedValue { counts in
                    counts[owner, default: 1] -= 1
                    if counts[owner] == 0 { counts[owner] = nil }
                }
                outcome.resume(with: result)
            }
            Task {
                try? await Task.sleep(for: deadline)
                outcome.resume(
                    with: .failure(
                        DownloadsErrorName.fileError.error(
                            "\(what) did not answer within \(deadline.components.seconds) s (a network or FUSE mount that hangs?); nothing was changed"
                        )))
            }
        }
    }

    /// The first of the read's end and the deadline resumes the call.
    private final class Outcome<T: Sendable>: Sendable {
        private let continuation = NIOLockedValueBox<CheckedContinuation<T, Error>?>(nil)

        func set(_ continuation: CheckedContinuation<T, Error>) {
            self.continuation.withLockedValue { $0 = continuation }
        }

        func resume(with result: Result<T, Error>) {
            let taken = continuation.withLockedValue { stored -> CheckedContinuation<T, Error>? in
                defer { stored = nil }
                return stored
            }
            taken?.resume(with: result)
        }
    }
}
