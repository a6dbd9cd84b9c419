import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Ctrl-C (SIGINT) as a flag the command checks, instead of dying mid-call.
final class Interrupt: Sendable {
    private let raised = Mutex(false)
    nonisolated(unsafe) private let source: DispatchSourceSignal

    init() {
        signal(SIGINT, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { [weak self] in self?.raised.withLock { $0 = true } }
        source.resume()
    }

    var isRaised: Bool { raised.withLock { $0 } }
}
