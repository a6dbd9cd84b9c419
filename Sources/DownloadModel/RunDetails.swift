import FileIdentities

/// What a task's runs learned, kept apart from the rest of its record (`DownloadTaskRecord`
/// reads each field as its own): nil for a task that never ran, so a queued task holds none of
/// it (`Sparse`). Each field is documented where the record names it.
public struct RunDetails: Sendable, Hashable, EmptyInitializable {
    public var resolvedPath: String?
    public var segments: [ByteRange]?
    public var validator: String?
    public var finalURL: String?
    public var partialFile: FileIdentity?
    public var errorName: String?
    public var errorMessage: String?
    public var metrics: TaskMetrics?
    public var responseStatus: Int?
    public var lastModified: Int64?

    public init() {}
}
