import Dispatch
import DownloadsAPI
import NIOConcurrencyHelpers

/// Work on a file a caller handed over or named (its descriptor's `fstat` and reads: a client
/// certificate, an upload's source, a destination directory, a Metalink document), which blocks
/// for as long as the file's file system wants: a FUSE file whose read never answers, a stuck NFS
/// mount. It runs on a thread of its own, never on the cooperative pool every call shares (two
/// threads on two cores: two stuck reads there left every user's calls unanswered), and the call
/// fails after `deadline` while the read stays stuck on its thread. A caller (a user's app, or
/// its host processes) holds at most `perCaller` such reads and a user `perUser`, the stuck ones
/// included, so one caller's stuck files stall that caller's calls alone (another app of the same
/// user keeps its own) and cannot pile up threads.
final class CallerFileReads: Sendable {
    static let deadline: Duration = .seconds(10)

    let perCaller: Int
    let perUser: Int
    private struct Counts {
        var byCaller: [Caller: Int] = [:]
        var byUser: [UInt32: Int] = [:]
    }
    private let inFlight = NIOLockedValueBox(Counts())

    init(perCaller: Int = 4, perUser: Int = 8) {
        self.perCaller = perCaller
        self.perUser = perUser
    }

    /// Reads of `caller`'s files not yet returned (a stuck one counts until its file answers).
    func count(_ caller: Caller) -> Int { inFlight.withLockedValue { $0.byCaller[caller, default: 0] } }

    /// `body`'s result, run on a thread of its own for `caller`; `what` names the file in errors
    /// ("client_certificate"). Throws `FileError` when the file does not answer within
    /// `deadline`, or when `caller` (or its user) has as many reads as it may that have not returned.
    func run<T: Sendable>(
        for caller: Caller, what: String, deadline: Duration = CallerFileReads.deadline,
        _ body: @escaping @Sendable () throws -> T
    ) async throws -> T {
        let admitted = inFlight.withLockedValue { counts -> Bool in
            guard counts.byCaller[caller, default: 0] < perCaller, counts.byUser[caller.uid, default: 0] < perUser
            else { return false }
            counts.byCaller[caller, default: 0] += 1
            counts.byUser[caller.uid, default: 0] += 1
            return true
        }
        guard admitted else {
            throw DownloadsErrorName.fileError.error(
                "\(what): \(perCaller) reads of your files have not returned yet (a network or FUSE mount that does not answer?); nothing was changed"
            )
        }
        let outcome = Outcome<T>()
        return try await withCheckedThrowingContinuation { continuation in
            outcome.set(continuation)
            DispatchQueue(label: "org.example.Downloads.caller-file").async { [inFlight] in
                let result = Result { try body() }
                inFlight.withLockedValue { counts in
                    counts.byCaller[caller, default: 1] -= 1
                    if counts.byCaller[caller] == 0 { counts.byCaller[caller] = nil }
                    counts.byUser[caller.uid, default: 1] -= 1
                    if counts.byUser[caller.uid] == 0 { counts.byUser[caller.uid] = nil }
                }
                outcome.resume(with: result)
            }
            outcome.set(
                timer: Task {
                    // Cancelled when the read returned first: no sleeper is left behind for each read.
                    do { try await Task.sleep(for: deadline) } catch { return }
                    outcome.resume(
                        with: .failure(
                            DownloadsErrorName.fileError.error(
                                "\(what) did not answer within \(deadline.components.seconds) s (a network or FUSE mount that hangs?); nothing was changed"
                            )))
                })
        }
    }

    /// The first of the read's end and the deadline resumes the call; the deadline's timer is
    /// cancelled then.
    private final class Outcome<T: Sendable>: Sendable {
        private struct Waiting {
            var continuation: CheckedContinuation<T, Error>?
            var timer: Task<Void, Never>?
            var resumed = false
        }
        private let waiting = NIOLockedValueBox(Waiting())

        func set(_ continuation: CheckedContinuation<T, Error>) {
            waiting.withLockedValue { $0.continuation = continuation }
        }

        /// The deadline's timer; cancelled at once when the read already returned.
        func set(timer: Task<Void, Never>) {
            let resumed = waiting.withLockedValue { waiting -> Bool in
                if !waiting.resumed { waiting.timer = timer }
                return waiting.resumed
            }
            if resumed { timer.cancel() }
        }

        func resume(with result: Result<T, Error>) {
            let (continuation, timer) = waiting.withLockedValue { waiting in
                defer {
                    waiting.continuation = nil
                    waiting.timer = nil
                    waiting.resumed = true
                }
                return (waiting.continuation, waiting.timer)
            }
            timer?.cancel()
            continuation?.resume(with: result)
        }
    }
}
