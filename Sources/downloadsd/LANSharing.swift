import DownloadEngine
import DownloadModel
import FileIdentities
import Foundation
import LANShare
import Logging
import NIOConcurrencyHelpers
import ShownText

/// The daemon's sharing with the local network (`--lan-peers share`): each finished download
/// whose task asked (`share`) is offered by its SHA-256 through `ShareIndex`, answered by a
/// `ShareServer` that listens only while something is shared (started with the first file,
/// stopped when the last is withdrawn), its key made once in the state directory. Files are opened
/// as their owner through the engine's file access (a file helper on the system bus), never as
/// root. Nothing is offered on a LAN interface alone (`LANInterfaces`: the advert goes on those,
/// a connection to another interface's address is closed), nor while NetworkManager says the
/// network is metered (the server stops and the advert is withdrawn; the files stay shared and are
/// offered again once it is not).
final class LANSharing: DownloadObserver {
    let index: ShareIndex
    private let stateDirectory: String
    private let preferredPort: Int
    private let files: any FileAccessProvider
    private let logger: Logger
    private let server = NIOLockedValueBox<ShareServer?>(nil)
    /// One share or withdrawal at a time, off the delivery queue (a file helper may be slow).
    private let queue = DispatchQueue(label: "org.example.Downloads.sharing")
    /// Withdraws what expired, each minute (set once, then only running).
    private nonisolated(unsafe) let sweeper: DispatchSourceTimer
    /// The advert of what is shared (avahi-daemon on the system bus).
    private let publisher: AvahiPublisher
    /// NetworkManager says the network is metered: nothing is offered.
    private let metered = NIOLockedValueBox(false)
    /// The descriptor of each file shared since this daemon started, opened as its owner when it
    /// was shared and kept: a file renamed or moved since (apt moves a package from `partial/`
    /// into the archives once it has it) is still the same file, served through it. By
    /// SHA-256, with the task it came from (a replaced entry's is closed).
    private let held = NIOLockedValueBox<[String: (task: UInt64, descriptor: Int32)]>([:])

    init(stateDirectory: String, preferredPort: Int, files: any FileAccessProvider, logger: Logger) {
        self.stateDirectory = stateDirectory
        self.preferredPort = preferredPort
        self.files = files
        self.logger = logger
        let withdrawn = NIOLockedValueBox<(@Sendable (SharedFile, ShareIndex.Withdrawal) -> Void)?>(nil)
        index = ShareIndex { file, why in withdrawn.withLockedValue { $0 }?(file, why) }
        sweeper = DispatchSource.makeTimerSource(queue: queue)
        let advertised = NIOLockedValueBox<(@Sendable () -> (hashes: [String], port: Int?))>({ ([], nil) })
        publisher = AvahiPublisher(
            bus: .system, name: String(format: "Downloads-%04X", UInt16.random(in: 0...UInt16.max)), logger: logger,
            interfaces: { LANInterfaces.indexes() }, current: { advertised.withLockedValue { $0 }() })
        withdrawn.withLockedValue {
            $0 = { [weak self] file, why in self?.withdrew(file, why) }
        }
        advertised.withLockedValue {
            $0 = { [weak self] in (self?.index.list(owner: nil).map(\.sha256) ?? [], self?.port) }
        }
        sweeper.schedule(deadline: .now() + 60, repeating: 60)
        sweeper.setEventHandler { [weak self] in
            self?.index.expire(at: Int64(Date().timeIntervalSince1970))
            self?.save()
        }
        sweeper.resume()
        queue.async { [self] in restore() }
    }

    private var listPath: String { stateDirectory + "/shared.json" }

    /// What was shared before the restart, each file checked again (opened as its owner, the
    /// same inode, size and modification time) before it is offered.
    private func restore() {
        let kept: [SharedFile]
        do {
            kept = try SharedFileList.load(from: listPath)
        } catch {
            logger.warning("\(listPath): not read, nothing shared from before: \(error)")
            return
        }
        let now = Int64(Date().timeIntervalSince1970)
        var offered = 0
        for file in kept where file.isOffered(at: now) {
            guard let descriptor = file.openIfUnchanged(with: opener) else {
                logger.info("\(file.sha256) not shared again: its file is gone or changed since it was shared")
                continue
            }
            close(descriptor)
            index.add(file)
            offered += 1
        }
        if offered > 0 {
            do {
                try listen()
                logger.info("\(offered) file(s) shared again from before the restart")
            } catch {
                logger.warning("the share server did not start: \(error)")
            }
        }
        if offered != kept.count { save() }
        if offered > 0 { advertise() }
    }

    /// Makes the advert what is shared now (the publisher reads it when it runs).
    private func advertise() {
        Task { [publisher] in await publisher.publish() }
    }

    /// Writes what is shared now (called on `queue`).
    private func save() {
        do {
            try SharedFileList.save(index.list(owner: nil), to: listPath)
        } catch {
            logger.warning("\(listPath) not written: \(error)")
        }
    }

    func task(_ task: TaskSnapshot, didFinishDownloadingTo location: String) {
        let record = task.record
        guard let terms = record.options.share else { return }
        guard let checksum = record.options.checksum, checksum.algorithm == .sha256 else {
            logger.warning("task \(record.id): not shared, its SHA-256 is not known")
            return
        }
        queue.async { [self] in
            do {
                let descriptor = try files.files(for: record.owner).openForReading(location)
                var info = stat()
                guard fstat(descriptor, &info) == 0 else {
                    close(descriptor)
                    throw CocoaError(.fileReadUnknown)
                }
                let file = SharedFile(
                    sha256: checksum.hex, name: (location as NSString).lastPathComponent, path: location,
                    owner: record.owner, app: record.app, task: record.id,
                    identity: FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)),
                    size: Int64(info.st_size),
                    modified: SharedFile.nanoseconds(info.st_mtim),
                    expires: Int64(Date().timeIntervalSince1970) + Int64(terms.maxAge), shareLimit: terms.limit)
                do {
                    try listen()
                } catch {
                    close(descriptor)
                    throw error
                }
                hold(descriptor, of: file)
                index.add(file)
                save()
                advertise()
                logger.info(
                    "task \(record.id): \(DisplayText.quoted(file.name, limit: 200)) shared as \(file.sha256) for \(terms.maxAge) s or \(terms.limit) download(s)"
                )
            } catch {
                logger.warning("task \(record.id): \(DisplayText.quoted(location, limit: 200)) not shared: \(error)")
            }
        }
    }

    /// At the daemon's exit: what is shared written with its downloads counted, the server closed.
    func stop() async {
        queue.sync {
            sweeper.cancel()
            save()
            stopServer()
        }
        await publisher.stop()
    }

    /// A shared file for one answer: through the descriptor held since it was shared (a copy
    /// of it: answers read with `pread`, so they never move each other's offset), else opened by
    /// its path as its owner (through that user's file helper on the system bus), as after a
    /// restart.
    private var opener: ShareServer.Opener {
        { [files, held] file in
            if let kept = held.withLockedValue({ $0[file.sha256] }), kept.task == file.task {
                let copy = dup(kept.descriptor)
                guard copy >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EBADF) }
                return copy
            }
            return try files.files(for: file.owner).openForReading(file.path)
        }
    }

    /// Keeps `descriptor` as `file`'s (closing what another task's entry of the same hash held).
    private func hold(_ descriptor: Int32, of file: SharedFile) {
        let replaced = held.withLockedValue { held in
            defer { held[file.sha256] = (file.task, descriptor) }
            return held[file.sha256]?.descriptor
        }
        if let replaced { close(replaced) }
    }

    /// The port the server listens on, nil while nothing is shared.
    var port: Int? { server.withLockedValue { $0?.port } }

    /// What NetworkManager says of the network: a metered one stops the server and withdraws the
    /// advert, an unmetered one offers what is shared again; any change re-makes the advert (an
    /// interface may have come or gone).
    func networkChanged(_ status: NetworkStatus) {
        queue.async { [self] in
            let was = metered.withLockedValue { was in
                defer { was = status.metered }
                return was
            }
            if status.metered, !was {
                stopServer()
                if !index.isEmpty {
                    logger.info("the network is metered: shared files are not offered until it is not")
                }
            } else if !status.metered, was, !index.isEmpty {
                do {
                    try listen()
                    logger.info("the network is no longer metered: shared files are offered again")
                } catch {
                    logger.warning("the share server did not start: \(error)")
                }
            }
            advertise()
        }
    }

    private func stopServer() {
        server.withLockedValue { server in
            server?.stop()
            server = nil
        }
    }

    private func listen() throws {
        guard server.withLockedValue({ $0 }) == nil, !metered.withLockedValue({ $0 }) else { return }
        let key = try ShareKey.loadOrCreate(in: stateDirectory)
        let started = try ShareServer(
            index: index, key: key, preferredPort: preferredPort, accepts: LANInterfaces.acceptsConnection,
            open: opener)
        server.withLockedValue { $0 = started }
        logger.info(
            "sharing with the local network on port \(started.port) (certificate \(key.fingerprint.prefix(16))…)")
    }

    private func withdrew(_ file: SharedFile, _ why: ShareIndex.Withdrawal) {
        logger.info("\(file.sha256) no longer shared (\(why.rawValue))")
        // Its descriptor goes with it (not a newer entry's of the same hash).
        let descriptor = held.withLockedValue { held -> Int32? in
            guard let kept = held[file.sha256], kept.task == file.task else { return nil }
            held[file.sha256] = nil
            return kept.descriptor
        }
        if let descriptor { close(descriptor) }
        guard why != .replaced else { return }
        queue.async { [self] in
            save()
            defer { advertise() }
            guard index.isEmpty,
                let stopped = server.withLockedValue({ server -> ShareServer? in
                    defer { server = nil }
                    return server
                })
            else { return }
            stopped.stop()
            logger.info("nothing shared: the share server stopped listening")
        }
    }
}
