/// What a resumable upload knows of its place on the server (`UploadSpec.resumable`), stored with
/// the task and carried in resume data, so that a restart, `ResumeWithData` or a new connection
/// asks the server for the offset and goes on from there. The confirmed offset itself is the
/// task's durable offset (`BytesConfirmed`).
public struct ResumableUpload: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
        case ietf, tus
    }

    public var kind: Kind
    /// The IETF draft's interop version; 1 for tus 1.0.0.
    public var version: Int
    /// The upload resource (the `Location` of the creation), nil until it is made.
    public var resource: String?
    /// When the server forgets the resource (tus `Upload-Expires`, the draft's `Upload-Limit:
    /// max-age`), seconds since 1970; nil: not said.
    public var expires: Double?
    /// The tus checksum algorithm every `PATCH` carries (`sha1`, `sha256`), nil: none offered.
    public var checksum: String?
    /// tus: the server takes the first bytes with the creation (`creation-with-upload`).
    public var creationWithUpload: Bool
    /// tus: the server deletes an upload on `DELETE` (`termination`); the draft always may.
    public var termination: Bool
    /// The largest upload the server takes (`Tus-Max-Size`, `Upload-Limit: max-size`).
    public var maxSize: Int64?

    public init(
        kind: Kind, version: Int, resource: String? = nil, expires: Double? = nil, checksum: String? = nil,
        creationWithUpload: Bool = false, termination: Bool = true, maxSize: Int64? = nil
    ) {
        self.kind = kind
        self.version = version
        self.resource = resource
        self.expires = expires
        self.checksum = checksum
        self.creationWithUpload = creationWithUpload
        self.termination = termination
        self.maxSize = maxSize
    }

    /// The protocol as `downloadsctl status` and logs name it: `ietf (version 6)`, `tus 1.0.0`.
    public var displayName: String {
        switch kind {
        case .ietf: return "ietf (draft interop version \(version))"
        case .tus: return "tus 1.0.0"
        }
    }

    enum CodingKeys: String, CodingKey {
        case kind, version, resource, expires, checksum
        case creationWithUpload = "creation_with_upload"
        case termination
        case maxSize = "max_size"
    }
}
