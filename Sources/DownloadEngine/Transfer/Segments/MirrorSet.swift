import DownloadModel
import Foundation

/// The sources of a download with mirrors (option `mirrors`) or LAN peers (`lan_peers`): its URL,
/// the mirrors' URLs of the same file and the peers that joined while it ran, which of them the
/// next range request goes to, and which were dropped and why.
/// As aria2 spreads a download's pieces over its URIs: at most `perServer` connections to one
/// server (scheme, host and port), the source with the fewest connections first, a LAN peer
/// then the fastest so far on a tie. A source that fails, answers for another file or runs far slower than the
/// fastest is dropped for the rest of the run (its ranges go to the others); the last one left
/// is never dropped. Pure bookkeeping, tested without I/O.
struct MirrorSet: Sendable {
    /// One source of the download and how it fares.
    struct Entry: Sendable, Equatable {
        var url: String
        /// `origin`: the first URL the caller gave (the download's own URL, where its redirects
        /// lead); `mirror`: one of the same file's mirrors; `peer`: a machine of the local
        /// network that has the file by its hash.
        let kind: Source.Kind
        /// A Passim peer answers one request per hash an hour: it is taken for one request.
        var oneRequest = false
        /// Requests it was taken for.
        var requests = 0
        var connections = 0
        /// Why it was dropped; nil while it is used.
        var dropped: String?
        /// Body bytes and seconds of its finished requests (its speed).
        var bytes: Int64 = 0
        var seconds: Double = 0
        var redirects = 0
        /// A connection's speed over its last window (bytes per second, `observe`), and whether
        /// one of its connections was found far slower than the fastest source's.
        var windowSpeed: Double = 0
        var foundSlow = false
        /// A piece it wrote matched its hash (with piece hashes; until then it gets one piece a request).
        var proven = false

        var isPrimary: Bool { kind == .origin }
        var server: String { Source.server(of: url) }
        var rate: Double { seconds > 0 ? Double(bytes) / seconds : 0 }
    }

    private(set) var sources: [Entry]
    let perServer: Int
    /// A source is dropped as slow when it runs below `slowFraction` of the fastest one's speed:
    /// measured over finished requests of at least `slowAfter` seconds, or by a connection's
    /// window of `slowAfter` seconds while it fetches (`observe`).
    static let slowAfter: Double = 3
    static let slowFraction: Double = 0.1

    init(primary: String, mirrors: [String], perServer: Int) {
        sources =
            [Entry(url: primary, kind: .origin)]
            + mirrors.filter { $0 != primary }.map { Entry(url: $0, kind: .mirror) }
        self.perServer = max(1, perServer)
    }

    var active: [Int] { sources.indices.filter { sources[$0].dropped == nil } }

    /// The source the next request goes to, counted as one more connection; nil when every
    /// active source's server has `perServer` connections. On `probation` (pieces are checked), a
    /// source no matching piece has proven yet gets one connection (one piece at a time), so a
    /// corrupt one costs one piece; the others wait for a proof (`awaitsProof`).
    mutating func take(probation: Bool = false) -> Int? {
        var perServerNow: [String: Int] = [:]
        for source in sources { perServerNow[source.server, default: 0] += source.connections }
        let open = active.filter {
            perServerNow[sources[$0].server, default: 0] < perServer
                && !(sources[$0].oneRequest && sources[$0].requests > 0)
                // A peer that has not yet sent a range gets one connection: one that stalls or
                // refuses costs one request.
                && !(sources[$0].kind == .peer && sources[$0].bytes == 0 && sources[$0].connections > 0)
                && !(probation && !sources[$0].proven && sources[$0].connections > 0)
        }
        guard
            let chosen = open.min(by: { a, b in
                let x = sources[a], y = sources[b]
                if x.connections != y.connections { return x.connections < y.connections }
                // A peer of the local network before a server across the uplink.
                if (x.kind == .peer) != (y.kind == .peer) { return x.kind == .peer }
                if x.rate != y.rate { return x.rate > y.rate }
                return a < b
            })
        else { return nil }
        sources[chosen].connections += 1
        sources[chosen].requests += 1
        return chosen
    }

    /// A peer joins the running download (`lan_peers`); `oneRequest` for a Passim peer. Its
    /// index, or nil when its URL is a source already.
    @discardableResult
    mutating func add(peer url: String, oneRequest: Bool) -> Int? {
        guard !sources.contains(where: { $0.url == url }) else { return nil }
        var entry = Entry(url: url, kind: .peer)
        entry.oneRequest = oneRequest
        sources.append(entry)
        return sources.count - 1
    }

    /// Body bytes the peers' finished requests fetched in this run (dropped peers' too).
    var peerBytes: Int64 { sources.filter { $0.kind == .peer }.reduce(0) { $0 + $1.bytes } }

    /// Peers used now (joined, not dropped).
    var activePeers: Int { active.filter { sources[$0].kind == .peer }.count }

    /// Drops every peer for the rest of the run (a whole-file check failed with their bytes).
    mutating func dropPeers(because reason: String) {
        for index in sources.indices where sources[index].kind == .peer && sources[index].dropped == nil {
            sources[index].dropped = reason
        }
    }

    /// The index of the source at `url`.
    func index(of url: String) -> Int? { sources.firstIndex { $0.url == url } }

    /// A request to `index` ended, having fetched `bytes` of body in `seconds`.
    mutating func release(_ index: Int, bytes: Int64, seconds: Double) {
        guard sources.indices.contains(index) else { return }
        sources[index].connections = max(0, sources[index].connections - 1)
        sources[index].bytes += max(0, bytes)
        sources[index].seconds += max(0, seconds)
        // A request too short for a whole window still says how fast its source is.
        if seconds >= 0.5 { sources[index].windowSpeed = Double(max(0, bytes)) / seconds }
    }

    /// On probation, whether a source may open to more connections once a piece proves it.
    var awaitsProof: Bool {
        active.contains { !sources[$0].proven && sources[$0].connections > 0 }
    }

    /// A piece written by `indices` matched its hash.
    mutating func proved(_ indices: [Int]) {
        for index in indices where sources.indices.contains(index) { sources[index].proven = true }
    }

    /// Drops `index` for the rest of the run; false (and nothing changes) when it is the last
    /// source still used, or already dropped.
    @discardableResult
    mutating func drop(_ index: Int, because reason: String) -> Bool {
        guard sources.indices.contains(index), sources[index].dropped == nil, active.count > 1 else { return false }
        sources[index].dropped = reason
        return true
    }

    /// `index` is used again (its drop was provisional).
    mutating func restore(_ index: Int) {
        guard sources.indices.contains(index) else { return }
        sources[index].dropped = nil
    }

    /// The download's own URL is now `url` (the run followed a redirect of it).
    mutating func follow(primary url: String) {
        if let index = sources.firstIndex(where: \.isPrimary) { sources[index].url = url }
    }

    /// `index` redirected to `url`: later requests go there (at most `limit` times, then false).
    mutating func redirect(_ index: Int, to url: String, limit: Int) -> Bool {
        guard sources.indices.contains(index), sources[index].redirects < limit else { return false }
        sources[index].redirects += 1
        sources[index].url = url
        return true
    }

    /// A connection to `index` ran at `speed` over its last window: the floor it is held to,
    /// `slowFraction` of the fastest other source's window speed (0 while there is none, or when
    /// it is the last source). Below it, the source is marked slow (`foundSlow`).
    mutating func observe(_ index: Int, speed: Double) -> UInt64 {
        guard sources.indices.contains(index) else { return 0 }
        sources[index].windowSpeed = speed
        let others = active.filter { $0 != index }.map { sources[$0].windowSpeed }
        guard let fastest = others.max(), fastest > 0 else { return 0 }
        let floor = fastest * MirrorSet.slowFraction
        if speed < floor { sources[index].foundSlow = true }
        return UInt64(floor)
    }

    /// Active sources measured long enough that run below `slowFraction` of the fastest.
    func tooSlow() -> [Int] {
        let measured = active.filter { sources[$0].seconds >= MirrorSet.slowAfter }
        guard measured.count > 1, let fastest = measured.map({ sources[$0].rate }).max(), fastest > 0 else { return [] }
        return measured.filter { sources[$0].rate < fastest * MirrorSet.slowFraction }
    }
}
