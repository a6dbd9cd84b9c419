import Foundation

/// Runs real programs (busctl, gdbus, dbus-send, python3, curl…) without blocking Swift's
/// cooperative thread pool.
public enum ProcessRunner {
    public struct Output: Sendable, CustomStringConvertible {
        public let status: Int32
        public let stdout: String
        public let stderr: String
        public var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
    }

    /// Runs `arguments[0]` (looked up in PATH) and waits for it. `timeout` kills it (SIGKILL).
    public static func run(
        _ arguments: [String], environment: [String: String] = [:], stdin: Data? = nil,
        timeout: TimeInterval = 60
    ) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    continuation.resume(returning: try runBlocking(arguments, environment: environment, stdin: stdin, timeout: timeout))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    public static func runBlocking(
        _ arguments: [String], environment: [String: String] = [:], stdin: Data? = nil,
        timeout: TimeInterval = 60
    ) throws -> Output {
        let child = try ChildProcess(arguments, environment: environment)
        let group = DispatchGroup()
        nonisolated(unsafe) var outData = Data()
        nonisolated(unsafe) var errData = Data()
        group.enter()
        DispatchQueue.global().async {
            outData = child.stdout.readDataToEndOfFile()
            group.leave()
        }
        group.enter()
        DispatchQueue.global().async {
            errData = child.stderr.readDataToEndOfFile()
            group.leave()
        }
        if let stdin { try? child.stdin.write(contentsOf: stdin) }
        try? child.stdin.close()
        let killer = DispatchWorkItem { child.signal(SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
        let status = child.wait()
        killer.cancel()
        group.wait()
        return Output(
            status: status,
            stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self)
        )
    }
}
