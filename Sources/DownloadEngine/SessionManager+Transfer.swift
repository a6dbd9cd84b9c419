import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// Running one task: attempts, redirects, retries, checkpoints, the final rename.
extension SessionManager {
    /// Why an attempt stopped without a download error: somebody asked.
    struct StopRequested: Error {}

    enum AttemptOutcome {
        case complete
        case restart(String)
    }

    func run(_ task: DownloadTask) async {
        var attempt = 0
        var file: PartialFile?
        defer { file?.close() }
        while true {
            do {
                if file == nil { file = try await openPartial(task) }
                guard let partial = file else { throw DownloadError.file("no partial file") }
                switch try await attemptTransfer(task, file: partial) {
                case .complete:
                    try await finish(task, file: partial)
                    file = nil
                    return end(task)
                case .restart(let reason):
                    logger.info("task \(task.id): restarting from zero: \(reason)")
                    try restartFromZero(task, file: partial)
                    attempt += 1
                    guard attempt <= configuration.retry.maxAttempts else {
                        throw DownloadError.invalidResponse("gave up after \(attempt) restarts: \(reason)")
                    }
                }
            } catch {
                if let reason = task.state.withLockedValue({ $0.stopReason }) {
                    await stopped(task, file: file, reason: reason)
                    file = nil
                    return end(task)
                }
                let failure = classify(error)
                attempt += 1
                if failure.isRetryable,
                   let delay = configuration.retry.delay(forRetry: attempt, retryAfter: failure.retryAfter, random: Double.random(in: 0..<1))
                {
                    logger.info("task \(task.id): \(failure); retry \(attempt) in \(String(format: "%.1f", delay)) s")
                    if let partial = file { await checkpointNow(task, file: partial) }
                    guard move(task, to: .retrying) != nil else { continue }
                    do {
                        try await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
                    } catch {
                        // Cancelled: a stop was requested; the next pass handles it.
                    }
                    if task.state.withLockedValue({ $0.stopReason }) != nil { continue }
                    move(task, to: .running)
                    continue
                }
                await failed(task, file: file, error: failure)
                file = nil
                return end(task)
            }
        }
    }

    private func end(_ task: DownloadTask) {
        task.update { $0.runner = nil; $0.request = nil }
        state.withLockedValue { $0.scheduler.remove(task.id) }
        schedule()
        let snapshot = task.snapshot
        if !snapshot.state.isActive { sessionMayBeIdle(snapshot.session) }
    }

    private func classify(_ error: Error) -> DownloadError {
        if let error = error as? DownloadError { return error }
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout: return .timeout("could not connect in time")
            case .deadlineExceeded, .readTimeout: return .timeout("\(error)")
            case .remoteConnectionClosed: return .interrupted("the connection closed early")
            default: return .network("\(error)")
            }
        }
        let text = String(describing: error)
        if text.contains("NIOSSL") || text.contains("handshake") || text.contains("certificate") {
            return .tls(text)
        }
        if text.contains("HTTPParserError") {
            return .invalidResponse("malformed HTTP response: \(text)")
        }
        return .network(text)
    }

    // MARK: Files

    private func openPartial(_ task: DownloadTask) async throws -> PartialFile {
        let record = task.record
        let path = record.partialPath
        let fileAccess = self.fileAccess
        let fd = try await task.onSyncQueue { try fileAccess.openPartial(path) }
        let file = PartialFile(fd: fd, path: path)
        // After a crash the file may hold bytes past the last durable checkpoint: drop them.
        // A file shorter than the checkpoint lost data: start again from zero.
        let size = file.size
        var offset = record.durableOffset
        if size < offset {
            logger.warning("task \(task.id): partial file is shorter than its checkpoint; restarting")
            offset = 0
            task.update { state in
                state.record.validator = nil
                state.record.durableOffset = 0
            }
        }
        try file.truncate(to: offset)
        task.update { $0.bytesWritten = offset }
        return file
    }

    private func restartFromZero(_ task: DownloadTask, file: PartialFile) throws {
        try file.truncate(to: 0)
        let snapshot = task.update { state in
            state.epoch += 1
            state.bytesWritten = 0
            state.record.durableOffset = 0
            state.record.validator = nil
            state.record.expectedLength = -1
        }
        delegate.checkpointed(snapshot)
    }

    /// fdatasync, then record everything before the position read first as durable.
    func checkpointNow(_ task: DownloadTask, file: PartialFile) async {
        let (position, epoch) = task.state.withLockedValue { ($0.bytesWritten, $0.epoch) }
        do {
            try await task.onSyncQueue { try file.sync() }
        } catch {
            logger.error("task \(task.id): \(error)")
            return
        }
        recordDurable(task, position: position, epoch: epoch)
    }

    private func recordDurable(_ task: DownloadTask, position: Int64, epoch: Int) {
        let snapshot: TaskSnapshot? = task.state.withLockedValue { state in
            guard state.epoch == epoch, position >= state.record.durableOffset || position == 0 else { return nil }
            state.record.durableOffset = position
            return TaskSnapshot(record: state.record, bytesWritten: state.bytesWritten)
        }
        if let snapshot { delegate.checkpointed(snapshot) }
    }

    // MARK: One attempt

    private func attemptTransfer(_ task: DownloadTask, file: PartialFile) async throws -> AttemptOutcome {
        var url = task.record.url
        var redirects = 0
        while true {
            let record = task.record
            let offset = task.state.withLockedValue { $0.bytesWritten }
            var headers = HTTPHeaders()
            for (name, value) in record.options.headers.sorted(by: { $0.key < $1.key }) {
                headers.add(name: name, value: value)
            }
            headers.replaceOrAdd(name: "User-Agent", value: "org.example.Downloads/1")
            headers.replaceOrAdd(name: "Accept-Encoding", value: "identity")
            var requestOffset: Int64 = 0
            if offset > 0, let validator = record.validator {
                headers.replaceOrAdd(name: "Range", value: "bytes=\(offset)-")
                headers.replaceOrAdd(name: "If-Range", value: validator)
                requestOffset = offset
            } else if offset > 0 {
                // No strong validator: a range could splice two versions. Start again.
                return .restart("no strong validator to resume with")
            }
            let request: HTTPClient.Request
            do {
                request = try HTTPClient.Request(url: url, method: .GET, headers: headers)
            } catch {
                throw DownloadError.invalidArgument("cannot request \(url): \(error)")
            }
            let epoch = task.state.withLockedValue { $0.epoch }
            let transfer = TransferDelegate(
                file: file, requestedOffset: requestOffset, knownLength: record.expectedLength,
                validator: record.validator,
                hooks: hooks(for: task, url: url, epoch: epoch, file: file),
                maxBytesPerSecond: record.options.maxBytesPerSecond,
                connectTimeout: record.options.connectTimeout ?? configuration.connectTimeout,
                stallTimeout: record.options.stallTimeout ?? configuration.stallTimeout,
                checkpointBytes: configuration.checkpointBytes, checkpointInterval: configuration.checkpointInterval,
                retryAfterCap: configuration.retry.retryAfterCap
            )
            let deadline = record.options.resourceTimeout.map { NIODeadline.now() + .milliseconds(Int64($0 * 1000)) }
            let httpTask: HTTPClient.Task<TransferDelegate.Result> = try task.state.withLockedValue { state in
                if state.stopReason != nil { throw StopRequested() }
                let httpTask = client.execute(request: request, delegate: transfer, deadline: deadline)
                state.request = httpTask
                return httpTask
            }
            let result: TransferDelegate.Result
            do {
                result = try await httpTask.futureResult.get()
            } catch is DecisionReached {
                guard let partial = transfer.partialResult else { throw DownloadError.invalidResponse("no response") }
                result = partial
            }
            task.update { $0.request = nil }
            switch result.decision {
            case .redirect(let location):
                redirects += 1
                guard redirects <= configuration.maxRedirects else {
                    throw DownloadError.tooManyRedirects(configuration.maxRedirects)
                }
                url = try SessionManager.checkedRedirect(from: url, to: location)
                continue
            case .alreadyComplete:
                return .complete
            case .restartFromZero(let reason):
                return .restart(reason)
            case .fail(let error):
                throw error
            case .write(_, _, let expected, _):
                // A body shorter than announced is an interruption (retried, resuming).
                if let length = result.headers.first(name: "content-length").flatMap(Int64.init),
                   result.bodyBytes != length
                {
                    throw DownloadError.interrupted("received \(result.bodyBytes) of \(length) bytes")
                }
                if expected >= 0, result.endOffset != expected {
                    throw DownloadError.interrupted("the file holds \(result.endOffset) of \(expected) bytes")
                }
                return .complete
            }
        }
    }

    private func hooks(for task: DownloadTask, url: String, epoch: Int, file: PartialFile) -> TransferDelegate.Hooks {
        let delegate = self.delegate
        return TransferDelegate.Hooks(
            head: { [self] status, headers, decision in
                guard case .write(let offset, let truncated, let expected, let validator) = decision else { return }
                let snapshot = task.update { state in
                    state.bytesWritten = offset
                    state.record.finalURL = url
                    state.record.expectedLength = expected
                    state.record.validator = validator
                    if truncated {
                        state.epoch += 1
                        state.record.durableOffset = 0
                    }
                    if state.record.destinationIsDirectory && state.record.resolvedPath == nil {
                        let name = HTTPHeaderRules.fileName(
                            contentDisposition: headers.first(name: "content-disposition"), url: url
                        )
                        state.record.resolvedPath = uniquePath(in: state.record.destination, name: name)
                    }
                }
                if truncated { delegate.checkpointed(snapshot) }
                delegate.receivedResponse(snapshot, status: status)
            },
            wrote: { count, position in
                let snapshot = task.update { $0.bytesWritten = position }
                delegate.wroteData(snapshot, bytes: count)
            },
            checkpoint: { [self] position in
                let currentEpoch = task.state.withLockedValue { $0.epoch }
                task.syncQueue.async {
                    do {
                        try file.sync()
                    } catch {
                        self.logger.error("task \(task.id): \(error)")
                        return
                    }
                    self.recordDurable(task, position: position, epoch: currentEpoch)
                }
            }
        )
    }

    /// A name in `directory` not taken yet: `name`, `name (1)`, `name (2)`…, keeping the extension.
    func uniquePath(in directory: String, name: String) -> String {
        let candidate = FilePaths.join(directory, name)
        guard fileAccess.exists(candidate) else { return candidate }
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        let stem = dot.map { String(name[..<$0]) } ?? name
        let ext = dot.map { String(name[$0...]) } ?? ""
        for n in 1..<10_000 {
            let path = FilePaths.join(directory, "\(stem) (\(n))\(ext)")
            if !fileAccess.exists(path) { return path }
        }
        return FilePaths.join(directory, "\(stem) (\(UInt64.random(in: 10_000...UInt64.max)))\(ext)")
    }

    /// Each hop: only http/https, never from https down to http.
    static func checkedRedirect(from current: String, to location: String) throws -> String {
        guard let base = URL(string: current), let next = URL(string: location, relativeTo: base)?.absoluteURL,
              let scheme = next.scheme?.lowercased()
        else {
            throw DownloadError.invalidResponse("redirect to an invalid location '\(location)'")
        }
        guard scheme == "http" || scheme == "https" else {
            throw DownloadError.insecureRedirect("redirect to a '\(scheme)' URL is not followed")
        }
        if base.scheme?.lowercased() == "https" && scheme == "http" {
            throw DownloadError.insecureRedirect("redirect from https to http is not followed")
        }
        guard let host = next.host, !host.isEmpty else {
            throw DownloadError.invalidResponse("redirect to a URL without a host")
        }
        return next.absoluteString
    }

    // MARK: Endings

    private func finish(_ task: DownloadTask, file: PartialFile) async throws {
        await checkpointNow(task, file: file)
        let record = task.record
        if let expected = record.options.sha256 {
            let path = record.partialPath
            let actual = try await task.onSyncQueue { try SessionManager.sha256(of: path) }
            if actual != expected {
                file.close()
                try? fileAccess.remove(path)
                task.update { state in
                    state.record.durableOffset = 0
                    state.bytesWritten = 0
                    state.record.validator = nil
                }
                throw DownloadError.checksumMismatch(expected: expected, actual: actual)
            }
        }
        let fileAccess = self.fileAccess
        let destination: String
        if record.destinationIsDirectory {
            // Another download may have taken the chosen name meanwhile: take the next free one.
            let name = record.resolvedPath.map { String($0.split(separator: "/").last ?? "download") }
                ?? HTTPHeaderRules.fileName(contentDisposition: nil, url: record.finalURL ?? record.url)
            destination = try await task.onSyncQueue { [self] in
                for _ in 0..<100 {
                    let candidate = uniquePath(in: record.destination, name: name)
                    do {
                        try fileAccess.rename(record.partialPath, to: candidate, replace: false)
                        return candidate
                    } catch let error as DownloadError where error.name == "FileExists" {
                        continue
                    }
                }
                throw DownloadError.file("no free file name for \(name) in \(record.destination)")
            }
        } else {
            destination = record.destination
            let overwrite = record.options.overwrite
            try await task.onSyncQueue {
                try fileAccess.rename(record.partialPath, to: destination, replace: overwrite)
            }
        }
        fileAccess.syncDirectory(FilePaths.directory(of: destination))
        file.close()
        move(task, to: .finished, { $0.record.resolvedPath = destination }, then: { [delegate] snapshot in
            delegate.finished(snapshot, location: destination)
        })
    }

    private func stopped(_ task: DownloadTask, file: PartialFile?, reason: DownloadTask.StopReason) async {
        if let file {
            await checkpointNow(task, file: file)
            file.close()
        }
        let next: DownloadState = reason == .pause ? .paused : reason == .cancel ? .cancelled : .queued
        move(task, to: next, { $0.stopReason = nil }, then: { [self] snapshot in
            if next == .cancelled {
                try? fileAccess.remove(snapshot.record.partialPath)
                delegate.completed(snapshot, error: .cancelled, resumeData: nil)
            }
        })
    }

    private func failed(_ task: DownloadTask, file: PartialFile?, error: DownloadError) async {
        if let file {
            await checkpointNow(task, file: file)
            file.close()
        }
        logger.info("task \(task.id) failed: \(error)")
        move(task, to: .failed, { state in
            state.record.errorName = error.name
            state.record.errorMessage = error.message
        }, then: { [self] snapshot in
            let resumable = snapshot.record.validator != nil && snapshot.durableOffset > 0
            let resumeData = resumable ? try? ResumeData(record: snapshot.record).encoded(key: key) : nil
            delegate.completed(snapshot, error: error, resumeData: resumeData)
        })
    }

    static func sha256(of path: String) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw DownloadError.file("cannot read \(path) to verify it")
        }
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            hasher.update(data: chunk)
        }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
