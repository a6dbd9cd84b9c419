/// The HTTP client of each request: shared, or pinned for owners held to `deniedNetworks`.
extension SessionManager {
    /// The client for one request of `owner` (see `HTTPClients`): a shared one; or, when the
    /// owner's downloads are held to `deniedNetworks`, one pinned to an address of the host
    /// outside them. The caller hands the lease back to `clients` after its request.
    func client(_ kind: HTTPClients.Kind, for owner: UInt32, host: String, port: Int) async throws -> HTTPClients.Lease {
        let denied = configuration.deniedNetworks
        guard owner != 0, !denied.isEmpty else { return clients.lease(kind) }
        func deniedRange(_ address: String) -> NetworkRange? { denied.first { $0.contains(address) } }
        if NetworkRange.parse(host) != nil {
            if let range = deniedRange(host) {
                throw DownloadError.accessDenied("\(host) is in a network this service does not reach for you (\(range))")
            }
            return clients.lease(kind)
        }
        let addresses = try await AddressResolver.resolve(host, port: port)
        guard let allowed = addresses.first(where: { deniedRange($0) == nil }) else {
            let ranges = Set(addresses.compactMap { deniedRange($0)?.description }).sorted().joined(separator: ", ")
            throw DownloadError.accessDenied("every address of \(host) is in a network this service does not reach for you (\(ranges))")
        }
        return clients.lease(kind, owner: owner, host: host, port: port, address: allowed)
    }
}
