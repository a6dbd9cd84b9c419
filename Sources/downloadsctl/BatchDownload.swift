import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
import ShownText
#endif

/// `get` of several URLs (arguments, or a list as `wget -i` and `aria2c -i` read it): every file
/// into one directory, named by its server. The list is started as one group (`StartGroup`, one
/// call for up to 10,000 files; `--atomic`: all files land together or none); when the service
/// refuses a group for the caller's task quota, the files are started one by one instead, at
/// most `window` started and not ended at once (fewer when the service says the caller has as
/// many tasks as they may). The end of each file comes as a signal, not by asking. Each finished file's path is printed (standard output) as it
/// lands and its task removed from the list; a failure is one line on standard error, the task
/// kept to be resumed or looked at, and the exit status 1 at the end. Ctrl-C pauses the started
/// tasks and says how to resume them.
struct BatchDownload {
    let proxy: DownloadsProxy
    let urls: [String]
    let directory: String
    let options: TaskOptions
    let service: ServiceOptions
    var window = 64
    /// One group whose files are published together or not at all (no fallback to single tasks).
    var atomic = false
    /// Files in one `StartGroup` call (the service's limit).
    static let groupSize = 10_000

    private enum Event: Sendable {
        case started(Int, ObjectPath)
        case refused(Int, DownloadsClientError)
        case service(ServiceSignals.Item)
        case removed
    }

    /// The lines of a URL list: one URL (or Metalink file) a line; blank lines and lines starting
    /// with `#` are skipped, as `wget -i` and `aria2c -i` do.
    static func urls(inList text: String) -> [String] {
        // By bytes: a list may have a million lines, and only ASCII separates them.
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        var urls: [String] = []
        for line in text.utf8.split(whereSeparator: { $0 == 0x0A || $0 == 0x0D }) {
            guard let first = line.firstIndex(where: { !blank($0) }), let last = line.lastIndex(where: { !blank($0) }),
                line[first] != UInt8(ascii: "#")
            else { continue }
            urls.append(String(Substring(line[first...last])))
        }
        return urls
    }

    /// The text of a URL list file, or of standard input for `-`; nil when it cannot be read or
    /// is not UTF-8.
    static func readList(_ path: String) -> String? {
        guard path == "-" else {
            return FileManager.default.contents(atPath: path).flatMap { String(data: $0, encoding: .utf8) }
        }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return count == 0 ? String(validating: bytes, as: UTF8.self) : nil }
            bytes += buffer[..<count]
        }
    }

    /// Throws `CommandFailure` when any download did not finish, `ExitCode(130)` on Ctrl-C.
    func run() async throws {
        let interrupt = Interrupt()
        let terminal = isatty(STDERR_FILENO) == 1
        let (events, sink) = AsyncStream.makeStream(of: Event.self)
        let signals = try await ServiceSignals(proxy, tick: .milliseconds(250)) { sink.yield(.service($0)) }
        defer {
            signals.close()
            sink.finish()
        }

        let began = Date().timeIntervalSince1970
        var window = self.window
        var next = 0
        var waiting: [Int] = []  // refused for the caller's quota: started again later
        var starting = 0
        var running: [ObjectPath: Int] = [:]
        var early: [ObjectPath: ManagerSignal] = [:]  // an end seen before its Start's reply
        var bytes: [ObjectPath: Int64] = [:]  // the last Progress of each task seen, ours or not yet known
        var doneBytes: Int64 = 0
        var finished = 0
        var total = urls.count  // files: a Metalink line may be several
        var failed: [String] = []
        var removing = 0
        var stopping = false  // Ctrl-C: no more Starts; the tasks are paused once those in flight are answered

        func startMore() {
            while !stopping, starting + running.count < window,
                let index = waiting.isEmpty ? (next < urls.count ? next : nil) : waiting.first
            {
                if waiting.isEmpty { next += 1 } else { waiting.removeFirst() }
                starting += 1
                let source = urls[index]
                Task { [proxy, directory, options] in
                    do {
                        var taskOptions = options
                        let url = try TaskOptionArguments.source(source, into: &taskOptions)
                        sink.yield(
                            .started(
                                index, try await proxy.start(url: url, destination: directory, options: taskOptions)))
                    } catch let error as DownloadsClientError {
                        sink.yield(.refused(index, error))
                    } catch {
                        sink.yield(
                            .refused(index, DownloadsClientError(name: BusError.failedName, message: "\(error)")))
                    }
                }
            }
        }

        /// On a terminal, the status line is cleared before a line is printed in its place.
        func clearLine() {
            if terminal { Output.write("\r\u{1B}[K", to: STDERR_FILENO) }
        }

        func fail(_ index: Int, _ reason: String) {
            // The URL as given, less a password in it (a script's log keeps these lines).
            let line = "\(DisplayText.escaped(URLCredentials.split(urls[index]).url)): \(reason)"
            failed.append(line)
            clearLine()
            Output.write("failed: \(line)\n", to: STDERR_FILENO)
        }

        func ended(_ path: ObjectPath, _ index: Int, _ signal: ManagerSignal) {
            switch signal {
            case .finished(_, let location):
                finished += 1
                doneBytes += bytes.removeValue(forKey: path) ?? 0
                clearLine()
                // Escaped on a terminal (as ls does); as it is for a script reading the paths.
                Output.write(
                    (isatty(STDOUT_FILENO) == 1 ? DisplayText.escaped(location) : location) + "\n", to: STDOUT_FILENO)
                removing += 1
                Task { [proxy] in
                    try? await proxy.cancel(path)  // an ended task: removed from the list
                    sink.yield(.removed)
                }
            case .failed(_, let name, let message, _):
                bytes[path] = nil
                var reason = DisplayText.escaped(message)
                if service.verbose { reason += " (\(name))" }
                fail(index, "\(reason) (task \(Paths.id(path)))")
            default:
                bytes[path] = nil
                fail(index, "the download was cancelled")
            }
        }

        /// On a terminal, the line under the paths: how many ended, the bytes so far, failures.
        func draw() {
            guard terminal else { return }
            var text =
                "[\(finished + failed.count)/\(total)] \(ByteCount.format(doneBytes + running.keys.reduce(0) { $0 + (bytes[$1] ?? 0) }))"
            if !failed.isEmpty { text += ", \(failed.count) failed" }
            Output.write("\r\u{1B}[K" + text, to: STDERR_FILENO)
        }

        func isEnd(_ signal: ManagerSignal) -> Bool {
            switch signal {
            case .finished, .failed: return true
            case .stateChanged(_, let state): return state == "cancelled"
            default: return false
            }
        }

        // The list as groups (one call each); a refusal for the quota (or a line a group cannot
        // take) falls back to starting the rest one by one, unless the group must be atomic.
        while next < urls.count {
            let chunk = next..<min(urls.count, next + Self.groupSize)
            do {
                var files: [DownloadGroupFile] = []
                for index in chunk {
                    var taskOptions = options
                    taskOptions.session = nil
                    let url = try TaskOptionArguments.source(urls[index], into: &taskOptions)
                    files.append(DownloadGroupFile(url: url, destination: directory, options: taskOptions))
                }
                var groupOptions = TaskOptions()
                groupOptions.session = options.session
                let (_, tasks) = try await proxy.startGroup(
                    files, options: groupOptions, group: DownloadsProxy.GroupOptions(atomic: atomic, taskSignals: true)
                )
                // A Metalink file of several files is several tasks: each counted, named by its line.
                total += tasks.count - chunk.count
                for (offset, path) in tasks.enumerated() {
                    running[path] = chunk.lowerBound + min(offset, chunk.count - 1)
                }
                next = chunk.upperBound
            } catch {
                if atomic { throw error }
                break
            }
        }
        startMore()
        for await event in events {
            switch event {
            case .started(let index, let path):
                starting -= 1
                if let end = early.removeValue(forKey: path) {
                    ended(path, index, end)
                } else {
                    running[path] = index
                }
            case .refused(let index, let error):
                starting -= 1
                if error.code == .quotaExceeded, starting + running.count + removing > 0 {
                    // The caller has as many tasks as they may: this one waits for one to end
                    // (or for a finished one's removal, which is still on its way).
                    waiting.append(index)
                    window = max(1, starting + running.count)
                } else {
                    var reason = DisplayText.escaped(error.message)
                    if service.verbose { reason += " (\(error.name))" }
                    fail(index, reason)
                }
            case .service(.signal(let signal)):
                guard let path = signal.task else { break }
                if case .progress(_, _, let total, _) = signal {
                    bytes[path] = total
                } else if isEnd(signal) {
                    if let index = running.removeValue(forKey: path) {
                        ended(path, index, signal)
                        draw()
                    } else if starting > 0 {
                        early[path] = signal
                    } else {
                        bytes[path] = nil  // another program's task
                    }
                }
            case .removed:
                removing -= 1
            case .service(.tick):
                stopping = stopping || interrupt.isRaised
                draw()
            }
            if stopping, starting == 0 {
                clearLine()
                try await pause(Array(running.keys), notStarted: urls.count - next + waiting.count)
            }
            startMore()
            if next == urls.count, waiting.isEmpty, starting == 0, running.isEmpty, removing == 0 { break }
        }

        clearLine()
        let seconds = max(0.001, Date().timeIntervalSince1970 - began)
        Output.write(
            "downloaded \(finished) of \(total) files, \(ByteCount.format(doneBytes)) in \(ByteCount.duration(seconds))\n",
            to: STDERR_FILENO
        )
        if !failed.isEmpty {
            throw CommandFailure(message: "\(failed.count) of \(total) downloads failed")
        }
    }

    /// Ctrl-C: the started tasks are paused (a task that ended meanwhile is left as it is), and
    /// the user told how to go on.
    private func pause(_ paths: [ObjectPath], notStarted: Int) async throws -> Never {
        var paused: [String] = []
        for path in paths.sorted(by: { (DownloadsAPI.taskID($0) ?? 0) < (DownloadsAPI.taskID($1) ?? 0) }) {
            if (try? await proxy.pause(path)) != nil { paused.append(Paths.id(path)) }
        }
        var text =
            paused.isEmpty
            ? "no task was running"
            : "paused tasks \(paused.joined(separator: " ")); resume them with: \(service.command(["resume"] + paused))"
        if notStarted > 0 { text += "; \(notStarted) not started" }
        Output.write(text + "\n", to: STDERR_FILENO)
        throw ExitCode(130)
    }
}
