import Foundation

/// microsocks (Debian's) on 127.0.0.1: a SOCKS5 proxy without authentication that resolves the
/// names it is sent (so `socks5h://` works through it).
public final class MicroSocks: @unchecked Sendable {
    public let port: Int
    private var process: ChildProcess?

    public init() throws {
        port = try FreePort.pick()
        process = try ChildProcess(["/usr/bin/microsocks", "-i", "127.0.0.1", "-p", String(port)])
        let deadline = Date().addingTimeInterval(20)
        while !FreePort.accepts(port: port) {
            guard Date() < deadline, process?.hasExited == false else {
                stop()
                throw POSIXError(.EIO, userInfo: [NSLocalizedDescriptionKey: "microsocks did not start"])
            }
            usleep(20_000)
        }
    }

    public func url(resolvingNames: Bool) -> String { "\(resolvingNames ? "socks5h" : "socks5")://127.0.0.1:\(port)" }

    public func stop() {
        process?.stop()
        process = nil
    }
}
