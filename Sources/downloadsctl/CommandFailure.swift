import ArgumentParser
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
import ShownText
#endif

/// A failure shown as one line on standard error, with an exit status (never a stack trace).
struct CommandFailure: Error {
    let line: String
    let status: Int32

    init(_ error: Error, verbose: Bool, status: Int32 = 1, prefix: String? = nil) {
        let client = error as? DownloadsClientError
        // The service's message may quote a URL or a name a server chose.
        var text = DisplayText.escaped(client.map { $0.message } ?? "\(error)")
        if let client, verbose { text += " (\(client.name))" }
        if let client, client.serviceIsNotRunning {
            text = "the download service is not running on this bus" + (verbose ? " (\(client.name))" : "")
        }
        if let prefix { text = "\(prefix): \(text)" }
        line = text
        self.status = client?.serviceIsNotRunning == true ? 69 : status
    }

    init(message: String, status: Int32 = 1) {
        line = message
        self.status = status
    }

    /// Runs a `Start` of `destination`; its refusal for an existing file is said in this
    /// command's words (`--overwrite`) instead of the D-Bus option's (`overwrite=true`).
    static func sayingOverwrite<T>(_ destination: String, _ start: () async throws -> T) async throws -> T {
        do {
            return try await start()
        } catch let error as DownloadsClientError where error.code == .fileExists {
            throw CommandFailure(message: "\(DisplayText.escaped(destination)) exists; give --overwrite to replace it")
        }
    }

    /// Prints the line on standard error.
    func report() {
        Output.write("downloadsctl: \(line)\n", to: STDERR_FILENO)
    }

    /// Prints the line and exits.
    func exit() -> Never {
        report()
        Glibc.exit(status)
    }
}
