/// How a finished file is offered to the local network by its SHA-256 (the `share` option):
/// for `maxAge` seconds from its finish, or until it was served `limit` times.
public struct ShareTerms: Sendable, Hashable, Codable {
    public var maxAge: UInt32
    public var limit: UInt32

    public static let defaultMaxAge: UInt32 = 86_400
    public static let defaultLimit: UInt32 = 5

    public init(maxAge: UInt32 = ShareTerms.defaultMaxAge, limit: UInt32 = ShareTerms.defaultLimit) {
        self.maxAge = maxAge
        self.limit = limit
    }

    enum CodingKeys: String, CodingKey {
        case maxAge = "max_age"
        case limit
    }
}
