import DBus
import Logging

/// The advert of the shared files on the local network, as Passim makes it: one service
/// `_cache._tcp` on the share server's port with TXT `ranges=1` (this server takes ranges, as
/// Passim's does not), and one subtype a file, `_<first 60 hex of its SHA-256>._sub._cache._tcp`,
/// through avahi-daemon's D-Bus API on the system bus. Avahi takes at most 31 subtypes in one
/// entry group, so every 31 files are one group (one service of its own name). Each `publish`
/// makes the advert what `current` says then (the latest state wins however calls interleave);
/// nothing shared: every group freed. Without avahi-daemon it logs once and advertises nothing;
/// the files are still served to whoever knows their hash.
public actor AvahiPublisher {
    /// Subtypes one entry group takes (avahi-core's limit).
    public static let subtypesPerGroup = 31

    private let bus: Connection.Bus
    private let name: String
    private let current: @Sendable () -> (hashes: [String], port: Int?)
    /// The interfaces the advert goes on (nil: every one Avahi uses).
    private let interfaces: @Sendable () -> [Int32]?
    private let logger: Logger
    private var connection: Connection?
    private var groups: [ObjectPath] = []
    private var unavailable = false

    /// - Parameters:
    ///   - name: the services' name (the host's, made unique per group with a number).
    ///   - current: the hashes shared now and the port they are served on (nil: not listening).
    ///   - interfaces: the indexes of the interfaces to advertise on, read at each `publish` (the
    ///     daemon: the LANs, `LANInterfaces.indexes`); nil: every one Avahi uses.
    public init(
        bus: Connection.Bus = .system, name: String, logger: Logger,
        interfaces: @escaping @Sendable () -> [Int32]? = { nil },
        current: @escaping @Sendable () -> (hashes: [String], port: Int?)
    ) {
        self.bus = bus
        self.name = name
        self.logger = logger
        self.interfaces = interfaces
        self.current = current
    }

    /// The subtype a file is found by.
    public static func subtype(_ sha256: String) -> String { "_\(sha256.prefix(60))._sub._cache._tcp" }

    public func publish() async {
        let (hashes, port) = current()
        let on = interfaces() ?? [-1]
        let wanted = port == nil || on.isEmpty ? [] : chunks(hashes.sorted())
        do {
            guard !wanted.isEmpty || !groups.isEmpty else { return }
            let connection = try await connected()
            while groups.count < wanted.count {
                let reply = try await connection.avahi("/", "Server", "EntryGroupNew")
                guard let path = reply.first?.objectPathValue else {
                    throw AvahiError("EntryGroupNew answered \(reply)")
                }
                groups.append(path)
            }
            for (index, group) in groups.enumerated() {
                _ = try await connection.avahi(group, "EntryGroup", "Reset")
                guard index < wanted.count, let port else { continue }
                let service = index == 0 ? name : "\(name) (\(index + 1))"
                for interface in on {
                    _ = try await connection.avahi(
                        group, "EntryGroup", "AddService",
                        [
                            .int32(interface), .int32(0), .uint32(0), .string(service), .string("_cache._tcp"),
                            .string(""), .string(""), .uint16(UInt16(clamping: port)),
                            .array(element: .array(.byte), [.byteArray(Array("ranges=1".utf8))]),
                        ])
                    for hash in wanted[index] {
                        _ = try await connection.avahi(
                            group, "EntryGroup", "AddServiceSubtype",
                            [
                                .int32(interface), .int32(0), .uint32(0), .string(service), .string("_cache._tcp"),
                                .string(""), .string(Self.subtype(hash)),
                            ])
                    }
                }
                _ = try await connection.avahi(group, "EntryGroup", "Commit")
            }
            // Groups no longer needed are freed, the last first.
            while groups.count > wanted.count, let last = groups.last {
                _ = try? await connection.avahi(last, "EntryGroup", "Free")
                groups.removeLast()
            }
            unavailable = false
        } catch {
            if !unavailable {
                logger.warning("the local network is not told of the shared files (avahi-daemon: \(error))")
            }
            unavailable = true
            // Start again from nothing at the next publish (avahi-daemon may have restarted).
            connection?.close()
            connection = nil
            groups = []
        }
    }

    /// Frees every group (at exit: closing the connection would too).
    public func stop() {
        connection?.close()
        connection = nil
        groups = []
    }

    private func chunks(_ hashes: [String]) -> [[String]] {
        stride(from: 0, to: hashes.count, by: Self.subtypesPerGroup).map {
            Array(hashes[$0..<min($0 + Self.subtypesPerGroup, hashes.count)])
        }
    }

    private func connected() async throws -> Connection {
        if let connection { return connection }
        let opened = try await Connection.open(bus, logger: logger)
        connection = opened
        return opened
    }
}
