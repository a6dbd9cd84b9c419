import AsyncHTTPClient
import Crypto
import DownloadEngine
import DownloadModel
import DownloadStore
import Foundation
import Logging
import NIOCore

/// Runs `count` downloads of `base + "/pN.bin"` into `directory`, `inFlight` at once, after
/// `warm` of them to warm the pools, and prints the wall time and this process's CPU per task.
struct SmallFilesRun {
    let layer: SmallFilesLayer
    let base: String
    let directory: String
    let count: Int
    let inFlight = 64
    let warm = 50

    func run() async throws {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: Self.clientConfiguration())
        var configuration = SessionManager.Configuration()
        configuration.progressInterval = 0.1  // the daemon's --progress-rate 10
        let waiter = FinishWaiter()
        var logger = Logger(label: "downloads.engine")
        logger.logLevel = .warning
        var observers: [any DownloadObserver] = [waiter]
        var stateDirectory: String?
        if layer == .store {
            let made = try Self.makeStateDirectory()
            stateDirectory = made
            observers.insert(
                StoreObserver(
                    store: try DownloadStore(
                        path: made + "/downloads.sqlite", secrets: StoreSecrets(rootKey: SymmetricKey(size: .bits256))),
                    logger: logger), at: 0)
        }
        defer { if let stateDirectory { try? FileManager.default.removeItem(atPath: stateDirectory) } }
        let manager = SessionManager(
            configuration: configuration, resumeDataKey: SymmetricKey(size: .bits256),
            delegate: EventDelivery(observers: observers), logger: logger
        )
        let download: @Sendable (Int, String) async throws -> Void = { index, prefix in
            let url = "\(base)/p\(index % 1000).bin"
            let target = "\(directory)/\(prefix)p\(index).bin"
            switch layer {
            case .http: try await Self.get(client, url: url, into: nil)
            case .file: try await Self.get(client, url: url, into: target)
            case .engine, .store: try await waiter.download(manager, url: url, to: target)
            }
        }
        try await Self.many(Array(0..<warm), inFlight: inFlight) { try await download($0, "warm-") }
        let before = Self.cpuSeconds()
        let start = ContinuousClock.now
        try await Self.many(Array(0..<count), inFlight: inFlight) { try await download($0, "") }
        let wall = ContinuousClock.now - start
        let cpu = Self.cpuSeconds() - before
        let seconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
        print(
            String(
                format: "%@ %5d tasks  wall %.3f s  CPU %.3f s  %.3f ms CPU per task",
                layer.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0) as NSString, count, seconds, cpu,
                cpu * 1000 / Double(count)))
        await manager.shutdown()
        try await client.shutdown()
    }

    /// The engine's shared client's settings, with the engine's defaults (16 HTTP/1.1 connections).
    static func clientConfiguration() -> HTTPClient.Configuration {
        let defaults = SessionManager.Configuration()
        return HTTPClientSettings.configuration(
            http1Only: false, tls: HTTPClientSettings.tls(caFile: nil), connectTimeout: defaults.connectTimeout,
            connectionsPerHost: defaults.maxConnections, idleTimeout: HTTPClientSettings.idleTimeout
        )
    }

    /// A fresh state directory on disk (not a tmpfs), as the daemon's is by default.
    static func makeStateDirectory() throws -> String {
        var template = Array("/var/tmp/engine-bench-state.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw FileBodyDelegate.Failed(what: "mkdtemp: errno \(errno)") }
        return String(cString: made)
    }

    static func get(_ client: HTTPClient, url: String, into path: String?) async throws {
        let request = try HTTPClient.Request(url: url)
        let delegate = FileBodyDelegate(path: path)
        try await client.execute(request: request, delegate: delegate).futureResult.get()
    }

    static func many(
        _ indices: [Int], inFlight: Int, _ body: @escaping @Sendable (Int) async throws -> Void
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            while next < min(inFlight, indices.count) {
                let index = indices[next]
                group.addTask { try await body(index) }
                next += 1
            }
            while try await group.next() != nil {
                if next < indices.count {
                    let index = indices[next]
                    group.addTask { try await body(index) }
                    next += 1
                }
            }
        }
    }

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
