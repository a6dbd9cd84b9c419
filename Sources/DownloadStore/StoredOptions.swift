import DownloadModel

/// A task's `options` column: `DownloadOptions`' documented JSON without its secrets, and
/// `sealed_secrets` beside its keys when it has any (see `StoreSecrets`, data/schema.md).
/// Rows written before secrets were sealed still read: their `headers` and `proxy` are in clear
/// until `DownloadStore` seals them as it opens.
struct StoredOptions: Codable {
    var options: DownloadOptions
    var sealed: String?

    private enum CodingKeys: String, CodingKey {
        case sealed = "sealed_secrets"
    }

    /// The key of the sealed part as it appears in the column's text.
    static let sealedKey = "\"\(CodingKeys.sealed.rawValue)\""

    init(options: DownloadOptions, sealed: String?) {
        self.options = options
        self.sealed = sealed
    }

    init(from decoder: Decoder) throws {
        options = try DownloadOptions(from: decoder)
        sealed = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(String.self, forKey: .sealed)
    }

    func encode(to encoder: Encoder) throws {
        try options.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(sealed, forKey: .sealed)
    }
}
