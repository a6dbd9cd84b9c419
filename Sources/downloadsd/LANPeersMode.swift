import ArgumentParser

/// What the administrator lets tasks do with the local network (`--lan-peers`): nothing, fetch
/// from peers that have a file, or that and offer finished files to them.
enum LANPeersMode: String, ExpressibleByArgument, CaseIterable, Sendable {
    case off, fetch, share
}
