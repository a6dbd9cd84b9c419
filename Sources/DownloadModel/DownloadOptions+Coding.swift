import ProxyRules

/// The one written form of options, in the store's `options` column and in resume data: JSON
/// with the snake_case keys of the D-Bus option names (documented in data/schema.md), never
/// Swift's property names, so renaming a property cannot change what is on disk.
extension DownloadOptions: Codable {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case headers
        /// Written by versions before `checksum`: read as `checksum` `sha256:HEX`.
        case sha256
        case checksum
        case title
        case taskDescription = "description"
        case metadata
        case earliestBegin = "earliest_begin"
        case mirrors
        case pieces
        case metalinkURL = "metalink_url"
        case credentialsOrigin = "credentials_origin"
        case promisedLength = "promised_length"
        case useMetalinkHeaders = "use_metalink_headers"
        case priority
        case maxBytesPerSecond = "max_bytes_per_second"
        case connections
        case overwrite
        case allowMetered = "allow_metered"
        case requiresACPower = "requires_ac_power"
        case connectTimeout = "connect_timeout"
        case stallTimeout = "stall_timeout"
        case resourceTimeout = "resource_timeout"
        case desktopEntry = "desktop_entry"
        case lowSpeedLimit = "low_speed_limit"
        case lowSpeedTime = "low_speed_time"
        case proxy
        case background
        case pinnedPublicKeys = "pinned_public_keys"
        case trustPinnedOnly = "trust_pinned_only"
        case referrer
        case originAttributes = "origin_attributes"
        case addToRecent = "add_to_recent"
        case share
        case lanPeers = "lan_peers"
        case ifModifiedSince = "if_modified_since"
        case ifNoneMatch = "if_none_match"
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        headers = try container.decodeIfPresent([String: String].self, forKey: .headers) ?? [:]
        if let text = try container.decodeIfPresent(String.self, forKey: .checksum) {
            do {
                checksum = try Checksum.parse(text)
            } catch {
                throw DecodingError.dataCorruptedError(
                    forKey: .checksum, in: container, debugDescription: error.message)
            }
        } else if let hex = try container.decodeIfPresent(String.self, forKey: .sha256) {
            do {
                checksum = try Checksum(.sha256, hex: hex)
            } catch {
                throw DecodingError.dataCorruptedError(forKey: .sha256, in: container, debugDescription: error.message)
            }
        }
        title = try container.decodeIfPresent(String.self, forKey: .title)
        taskDescription = try container.decodeIfPresent(String.self, forKey: .taskDescription)
        metadata = try container.decodeIfPresent([String: MetadataValue].self, forKey: .metadata) ?? [:]
        earliestBegin = try container.decodeIfPresent(UInt64.self, forKey: .earliestBegin)
        mirrors = try container.decodeIfPresent([String].self, forKey: .mirrors) ?? []
        metalinkURL = try container.decodeIfPresent(String.self, forKey: .metalinkURL)
        credentialsOrigin = try container.decodeIfPresent(String.self, forKey: .credentialsOrigin)
        promisedLength = try container.decodeIfPresent(Int64.self, forKey: .promisedLength)
        if let stored = try container.decodeIfPresent(StoredPieces.self, forKey: .pieces) {
            do throws(Checksum.Invalid) {
                guard let algorithm = Checksum.Algorithm(rawValue: stored.algorithm) else {
                    throw Checksum.Invalid(message: "unknown piece hash algorithm '\(stored.algorithm.prefix(32))'")
                }
                pieces = try PieceHashes(algorithm, length: stored.length, concatenated: stored.hashes)
            } catch {
                throw DecodingError.dataCorruptedError(forKey: .pieces, in: container, debugDescription: error.message)
            }
        }
        useMetalinkHeaders = try container.decodeIfPresent(Bool.self, forKey: .useMetalinkHeaders) ?? true
        if let text = try container.decodeIfPresent(String.self, forKey: .priority) {
            guard let value = Priority(rawValue: text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .priority, in: container, debugDescription: "unknown priority '\(text)'")
            }
            priority = value
        }
        maxBytesPerSecond = try container.decodeIfPresent(UInt64.self, forKey: .maxBytesPerSecond) ?? 0
        connections = try container.decodeIfPresent(Int.self, forKey: .connections) ?? 1
        overwrite = try container.decodeIfPresent(Bool.self, forKey: .overwrite) ?? false
        allowMetered = try container.decodeIfPresent(Bool.self, forKey: .allowMetered) ?? true
        requiresACPower = try container.decodeIfPresent(Bool.self, forKey: .requiresACPower) ?? false
        connectTimeout = try container.decodeIfPresent(Double.self, forKey: .connectTimeout)
        stallTimeout = try container.decodeIfPresent(Double.self, forKey: .stallTimeout)
        resourceTimeout = try container.decodeIfPresent(Double.self, forKey: .resourceTimeout)
        desktopEntry = try container.decodeIfPresent(String.self, forKey: .desktopEntry)
        lowSpeedLimit = try container.decodeIfPresent(UInt64.self, forKey: .lowSpeedLimit)
        lowSpeedTime = try container.decodeIfPresent(Double.self, forKey: .lowSpeedTime)
        background = try container.decodeIfPresent(Bool.self, forKey: .background) ?? false
        pinnedPublicKeys = try container.decodeIfPresent([String].self, forKey: .pinnedPublicKeys) ?? []
        trustPinnedOnly = try container.decodeIfPresent(Bool.self, forKey: .trustPinnedOnly) ?? false
        referrer = try container.decodeIfPresent(String.self, forKey: .referrer)
        originAttributes = try container.decodeIfPresent(Bool.self, forKey: .originAttributes) ?? true
        addToRecent = try container.decodeIfPresent(Bool.self, forKey: .addToRecent) ?? false
        share = try container.decodeIfPresent(ShareTerms.self, forKey: .share)
        lanPeers = try container.decodeIfPresent(Bool.self, forKey: .lanPeers) ?? false
        ifModifiedSince = try container.decodeIfPresent(Int64.self, forKey: .ifModifiedSince)
        ifNoneMatch = try container.decodeIfPresent(String.self, forKey: .ifNoneMatch)
        if let text = try container.decodeIfPresent(String.self, forKey: .proxy) {
            do {
                proxy = try ProxySetting.parse(text)
            } catch {
                throw DecodingError.dataCorruptedError(
                    forKey: .proxy, in: container, debugDescription: "a proxy that does not parse")
            }
        }
    }

    /// Defaults are left out, so a row or blob names only what the client chose.
    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if !headers.isEmpty { try container.encode(headers, forKey: .headers) }
        try container.encodeIfPresent(checksum?.text, forKey: .checksum)
        try container.encodeIfPresent(title, forKey: .title)
        try container.encodeIfPresent(taskDescription, forKey: .taskDescription)
        if !metadata.isEmpty { try container.encode(metadata, forKey: .metadata) }
        try container.encodeIfPresent(earliestBegin, forKey: .earliestBegin)
        if !mirrors.isEmpty { try container.encode(mirrors, forKey: .mirrors) }
        try container.encodeIfPresent(metalinkURL, forKey: .metalinkURL)
        try container.encodeIfPresent(credentialsOrigin, forKey: .credentialsOrigin)
        try container.encodeIfPresent(promisedLength, forKey: .promisedLength)
        if let pieces {
            try container.encode(
                StoredPieces(algorithm: pieces.algorithm.rawValue, length: pieces.length, hashes: pieces.hexDigests),
                forKey: .pieces
            )
        }
        if !useMetalinkHeaders { try container.encode(useMetalinkHeaders, forKey: .useMetalinkHeaders) }
        if priority != .normal { try container.encode(priority.rawValue, forKey: .priority) }
        if maxBytesPerSecond != 0 { try container.encode(maxBytesPerSecond, forKey: .maxBytesPerSecond) }
        if connections != 1 { try container.encode(connections, forKey: .connections) }
        if overwrite { try container.encode(overwrite, forKey: .overwrite) }
        if !allowMetered { try container.encode(allowMetered, forKey: .allowMetered) }
        if requiresACPower { try container.encode(requiresACPower, forKey: .requiresACPower) }
        try container.encodeIfPresent(connectTimeout, forKey: .connectTimeout)
        try container.encodeIfPresent(stallTimeout, forKey: .stallTimeout)
        try container.encodeIfPresent(resourceTimeout, forKey: .resourceTimeout)
        try container.encodeIfPresent(desktopEntry, forKey: .desktopEntry)
        try container.encodeIfPresent(lowSpeedLimit, forKey: .lowSpeedLimit)
        try container.encodeIfPresent(lowSpeedTime, forKey: .lowSpeedTime)
        try container.encodeIfPresent(proxy?.text, forKey: .proxy)
        try container.encodeIfPresent(referrer, forKey: .referrer)
        if !originAttributes { try container.encode(originAttributes, forKey: .originAttributes) }
        if addToRecent { try container.encode(addToRecent, forKey: .addToRecent) }
        try container.encodeIfPresent(share, forKey: .share)
        if lanPeers { try container.encode(lanPeers, forKey: .lanPeers) }
        try container.encodeIfPresent(ifModifiedSince, forKey: .ifModifiedSince)
        try container.encodeIfPresent(ifNoneMatch, forKey: .ifNoneMatch)
        if background { try container.encode(background, forKey: .background) }
        if !pinnedPublicKeys.isEmpty { try container.encode(pinnedPublicKeys, forKey: .pinnedPublicKeys) }
        if trustPinnedOnly { try container.encode(trustPinnedOnly, forKey: .trustPinnedOnly) }
    }

    /// `pieces` as written: `{"algorithm": "sha1", "length": 262144, "hashes": "<hex digests, one after another>"}`.
    private struct StoredPieces: Codable {
        var algorithm: String
        var length: Int64
        var hashes: String
    }
}
