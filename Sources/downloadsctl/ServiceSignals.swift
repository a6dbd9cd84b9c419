import DBus
import DownloadsAPI
import DownloadsClient

/// The service's signals about tasks, and a tick every `interval`, handed to `deliver` until
/// `close()`: for a command that follows tasks by what it hears (`get` of a list, `wait`).
/// Opened before the command's first look at its tasks, so no end is missed.
final class ServiceSignals: Sendable {
    enum Item: Sendable {
        case signal(ManagerSignal)
        case tick
    }

    private let proxy: DownloadsProxy
    private let subscription: UInt64
    private let ticker: Task<Void, Never>

    init(_ proxy: DownloadsProxy, tick interval: Duration, deliver: @escaping @Sendable (Item) -> Void) async throws {
        self.proxy = proxy
        subscription = try await proxy.connection.subscribe(
            MatchRule(sender: DownloadsAPI.busName, interface: DownloadsInterfaces.manager.name)
        ) { message in
            guard let signal = ManagerSignal(name: message.member ?? "", arguments: (try? message.arguments()) ?? []),
                signal.task != nil
            else { return }
            deliver(.signal(signal))
        }
        ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                deliver(.tick)
            }
        }
    }

    func close() {
        ticker.cancel()
        Task { [proxy, subscription] in await proxy.connection.unsubscribe(subscription) }
    }
}
