import ArgumentParser
import DownloadsClient
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Which service to talk to, shared by every command.
struct ServiceOptions: ParsableArguments {
    @Flag(name: .customLong("user"), help: "The service on your session bus (the default).") var user = false
    @Flag(name: .customLong("system"), help: "The system service (every user's downloads, each with their own files).")
    var system = false
    @Option(
        name: .customLong("address"),
        help: ArgumentHelp("The service on the bus at this D-Bus address.", valueName: "address"))
    var address: String?
    @Flag(help: "Show D-Bus error names with errors.") var verbose = false

    func validate() throws {
        guard [user, system, address != nil].filter({ $0 }).count <= 1 else {
            throw ValidationError("choose one of --user, --system and --address")
        }
    }

    var bus: DownloadsProxy.Bus {
        if system { return .system }
        if let address { return .address(address) }
        return .session
    }

    /// A command line to suggest (`downloadsctl [--system | --address ADDR] WORDS…`), naming the
    /// same service as this one.
    func command(_ words: String...) -> String {
        command(words)
    }

    func command(_ words: [String]) -> String {
        var all = ["downloadsctl"]
        if system { all.append("--system") }
        if let address { all += ["--address", address] }
        return (all + words).joined(separator: " ")
    }

    /// Connects, runs `body`, closes; any error becomes one line on stderr and an exit status.
    func run(_ body: (DownloadsProxy) async throws -> Void) async throws {
        let proxy: DownloadsProxy
        do {
            proxy = try await DownloadsProxy.connect(bus)
        } catch {
            CommandFailure(error, verbose: verbose, status: 69, prefix: "cannot reach the bus").exit()
        }
        defer { proxy.close() }
        do {
            try await body(proxy)
        } catch let exit as ExitCode {
            throw exit
        } catch let failure as CommandFailure {
            failure.exit()
        } catch {
            CommandFailure(error, verbose: verbose).exit()
        }
    }

    /// Runs `body` for each task in turn, as `systemctl stop A B` does: a task's failure is its
    /// line on standard error and the others still run; the exit status is 1 when any failed.
    /// A service that is gone ends it at once (nothing else would work).
    func forEach(_ tasks: [TaskArgument], _ body: (TaskArgument) async throws -> Void) async throws {
        var failed = false
        for task in tasks {
            do {
                try await body(task)
            } catch let exit as ExitCode {
                throw exit
            } catch {
                let failure = error as? CommandFailure ?? CommandFailure(error, verbose: verbose)
                if failure.status == 69 { failure.exit() }
                failure.report()
                failed = true
            }
        }
        if failed { throw ExitCode(1) }
    }
}
