import DBus
import Logging
import NIOConcurrencyHelpers

/// Finds the machines of the local network that offer a file, by its subtype
/// (`_<first 60 hex>._sub._cache._tcp`), through avahi-daemon on the system bus, as Passim's
/// client does, with what Debian 12's avahi 0.8 needs: `Server2.ServiceBrowserPrepare`, the
/// browser's signals subscribed (from avahi-daemon only), then `Start`; each item resolved with
/// the synchronous `Server.ResolveService` (0.8's resolver objects send `Found` before `Start`),
/// IPv4 only (a link-local IPv6 address is usable only with its interface). A peer is taken only
/// on the link it was found on (`onLink`), a loopback one only when Avahi says the service is
/// this machine's own; at most `limit` are taken (an advert flood of hundreds of peers for one
/// hash yields a few).
public final class AvahiBrowser: Sendable {
    /// `AVAHI_LOOKUP_RESULT_LOCAL`: the service is published by this machine.
    static let localResult: UInt32 = 0x8

    private let bus: Connection.Bus
    private let logger: Logger
    private let onLink: @Sendable (String, Int32) -> Bool

    public init(
        bus: Connection.Bus = .system, logger: Logger,
        onLink: @escaping @Sendable (String, Int32) -> Bool = LinkCheck.isOnLink
    ) {
        self.bus = bus
        self.logger = logger
        self.onLink = onLink
    }

    /// The peers that offer `sha256`, found until Avahi says it has told all it knows
    /// (`AllForNow`, about a second with a cold cache) or `timeout`, at most `limit`.
    public func find(_ sha256: String, timeout: Duration = .seconds(3), limit: Int = 8) async throws -> [LANPeer] {
        // Fails as the browse would when avahi-daemon is not there (the stream only logs it).
        try await Connection.open(bus, logger: logger).close()
        return await withTaskGroup(of: [LANPeer]?.self) { group in
            group.addTask {
                var found: [LANPeer] = []
                for await event in self.peers(sha256, limit: limit) {
                    switch event {
                    case .found(let peer): found.append(peer)
                    case .gone(let peer): found.removeAll { $0 == peer }
                    case .allForNow: return found
                    }
                    if found.count >= limit { return found }
                }
                return found
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            var result: [LANPeer] = []
            for await case let found? in group {
                result = found
                break
            }
            group.cancelAll()
            return result
        }
    }

    /// The peers that offer `sha256` as Avahi finds them, each as soon as it is resolved, and
    /// those that go, until the consumer stops iterating (its task cancelled, or it breaks out);
    /// at most `limit` are found (an advert flood yields a few). avahi-daemon missing or failing
    /// ends the stream (a log line).
    public func peers(_ sha256: String, limit: Int = 8) -> AsyncStream<PeerEvent> {
        let (stream, out) = AsyncStream.makeStream(of: PeerEvent.self)
        let work = Task {
            do {
                try await browse(sha256, limit: limit, into: out)
            } catch {
                logger.info("no LAN peers are looked for: \(error)")
            }
            out.finish()
        }
        out.onTermination = { _ in work.cancel() }
        return stream
    }

    private func browse(_ sha256: String, limit: Int, into out: AsyncStream<PeerEvent>.Continuation) async throws {
        let connection = try await Connection.open(bus, logger: logger)
        defer { connection.close() }
        let type = AvahiPublisher.subtype(sha256)
        let prepared = try await connection.avahi(
            "/", "Server2", "ServiceBrowserPrepare",
            [.int32(-1), .int32(0), .string(type), .string(""), .uint32(0)])
        guard let browser = prepared.first?.objectPathValue else {
            throw AvahiError("ServiceBrowserPrepare answered \(prepared)")
        }
        let (events, sink) = AsyncStream.makeStream(of: BrowserEvent.self)
        let subscription = try await connection.subscribe(
            MatchRule(sender: "org.freedesktop.Avahi", interface: "org.freedesktop.Avahi.ServiceBrowser", path: browser)
        ) { message in
            let arguments = (try? message.arguments()) ?? []
            switch message.member {
            case "ItemNew", "ItemRemove":
                guard arguments.count == 6, let interface = arguments[0].int32Value,
                    let name = arguments[2].stringValue,
                    let found = arguments[3].stringValue, let domain = arguments[4].stringValue
                else { return }
                sink.yield(
                    message.member == "ItemNew"
                        ? .item(interface: interface, name: name, type: found, domain: domain)
                        : .removed(interface: interface, name: name))
            case "AllForNow": sink.yield(.done)
            case "Failure": sink.finish()
            default: break
            }
        }
        _ = try await connection.avahi(browser, "ServiceBrowser", "Start")
        var peers: [String: LANPeer] = [:]
        var seen: Set<String> = []
        await withTaskCancellationHandler {
            for await event in events {
                switch event {
                case .item(let interface, let name, let found, let domain):
                    guard peers.count < limit, seen.insert("\(interface) \(name)").inserted,
                        let peer = try? await resolve(
                            connection, interface: interface, name: name, type: found, domain: domain)
                    else { continue }
                    peers["\(interface) \(name)"] = peer
                    out.yield(.found(peer))
                case .removed(let interface, let name):
                    seen.remove("\(interface) \(name)")
                    if let peer = peers.removeValue(forKey: "\(interface) \(name)") { out.yield(.gone(peer)) }
                case .done:
                    out.yield(.allForNow)
                }
            }
        } onCancel: {
            sink.finish()
        }
        await connection.unsubscribe(subscription)
        _ = try? await connection.avahi(browser, "ServiceBrowser", "Free")
    }

    private func resolve(
        _ connection: Connection, interface: Int32, name: String, type: String, domain: String
    ) async throws -> LANPeer? {
        let reply = try await connection.avahi(
            "/", "Server", "ResolveService",
            [.int32(interface), .int32(0), .string(name), .string(type), .string(domain), .int32(0), .uint32(0)])
        guard reply.count == 11, let host = reply[5].stringValue, let address = reply[7].stringValue,
            let port = reply[8].uint16Value, let flags = reply[10].uint32Value
        else { throw AvahiError("ResolveService answered \(reply)") }
        let local = flags & Self.localResult != 0
        if LinkCheck.isLoopback(address) {
            guard local else {
                logger.info("a peer advertising the loopback (\(address)) from the network is not taken")
                return nil
            }
        } else if !local, !onLink(address, interface) {
            logger.info("a peer advertising \(address), not on the link it was found on, is not taken")
            return nil
        }
        return LANPeer(
            address: address, port: Int(port), interface: interface, name: name, hostName: host,
            takesRanges: Self.txt(reply[9]).contains("ranges=1"))
    }

    static func txt(_ value: DBusValue) -> [String] {
        guard case .array(_, let records) = value else { return [] }
        return records.compactMap { record -> String? in
            switch record {
            case .byteArray(let bytes): String(decoding: bytes, as: UTF8.self)
            case .array(_, let bytes): String(decoding: bytes.compactMap(\.byteValue), as: UTF8.self)
            default: nil
            }
        }
    }
}
