/// How an upload's body reaches the server (option `protocol`).
public enum UploadProtocol: String, Sendable, Hashable, Codable, CaseIterable {
    /// One request with the whole body; a cut sends it again from byte 0.
    case plain
    /// The IETF's resumable uploads (draft-ietf-httpbis-resumable-upload), as URLSession speaks it.
    case ietf
    /// tus 1.0.0 (tus.io): `url` is the tus endpoint.
    case tus
    /// Asks the server first (`OPTIONS`): the IETF protocol when it says so, tus when it says
    /// so, otherwise a plain upload.
    case auto

    /// The IETF draft's interop versions spoken (`Upload-Draft-Interop-Version`), the newest last:
    /// those of swift-nio-extras' `NIOResumableUpload`, the reference server the tests run.
    public static let ietfVersions = [3, 5, 6]
}
