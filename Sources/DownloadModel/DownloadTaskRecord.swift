import FileIdentities

/// Everything the engine needs to run (or re-run after a restart) one download: the request,
/// where it writes, and how far it durably got. The store persists exactly this.
public struct DownloadTaskRecord: Sendable, Hashable {
    public var id: UInt64
    /// What was asked (`Start`, `Upload`, a group's file, a resume): the owner, the app, the URL,
    /// the destination, the options, an upload's file. Its fields read as the record's own
    /// (`owner`, `url`, …) below; the record adds where the task got to.
    public var request: DownloadRequest
    /// The group the task is a file of (`DownloadGroupRecord.id`), 0 for none.
    public var group: UInt64 = 0
    /// The file that will exist on success (known once the name is chosen).
    public var resolvedPath: String? {
        get { details.resolvedPath }
        _modify { yield &details.resolvedPath }
    }
    public var state: DownloadState
    /// Bytes of the partial file that are fsynced: what a restart keeps. With one stream the
    /// file's first `durableOffset` bytes; for a segmented download the count of bytes outside
    /// `segments`.
    public var durableOffset: Int64
    /// A segmented download's ranges still to fetch (everything else of `expectedLength` is
    /// fsynced); nil for one stream.
    public var segments: [ByteRange]? {
        get { details.segments }
        _modify { yield &details.segments }
    }
    /// -1 when unknown.
    public var expectedLength: Int64
    /// A strong validator for If-Range (an ETag, or an HTTP-date).
    public var validator: String? {
        get { details.validator }
        _modify { yield &details.validator }
    }
    public var finalURL: String? {
        get { details.finalURL }
        _modify { yield &details.finalURL }
    }
    /// The partial file the task created (device, inode): only this file is ever resumed or
    /// published, never one put in its place.
    public var partialFile: FileIdentity? {
        get { details.partialFile }
        _modify { yield &details.partialFile }
    }
    public var errorName: String? {
        get { details.errorName }
        _modify { yield &details.errorName }
    }
    public var errorMessage: String? {
        get { details.errorMessage }
        _modify { yield &details.errorMessage }
    }
    /// A download's: the status of the last response that brought its bytes (200, 206), or 304
    /// when a conditional download found the caller's copy current (`ResponseStatus`).
    public var responseStatus: Int? {
        get { details.responseStatus }
        _modify { yield &details.responseStatus }
    }
    /// The `Last-Modified` of the response that brought the file (Unix seconds; `LastModified`).
    public var lastModified: Int64? {
        get { details.lastModified }
        _modify { yield &details.lastModified }
    }
    /// Where its time went (`GetMetrics`): nil until it first runs.
    public var metrics: TaskMetrics? {
        get { details.metrics }
        _modify { yield &details.metrics }
    }
    /// When this daemon made it (Unix microseconds, whole milliseconds: the store's `createdAt`
    /// keeps milliseconds); 0 for a task read from the store (its `createdAt` says).
    public var queuedAt: Int64 = 0
    /// The fields above a run sets (from `resolvedPath` to `metrics`), behind one reference made
    /// when the first of them is given a value (`Sparse`: a nil set on a task without one makes
    /// none): a queued task that never ran holds a nil pointer for all eight.
    @Sparse public var details = RunDetails()

    // MARK: The request's fields

    /// The uid the task belongs to (asked of the bus when it was created, never an argument).
    public var owner: UInt32 {
        get { request.owner }
        set { request.owner = newValue }
    }
    /// The sandboxed app the task belongs to (its app id, as the service found it from the
    /// caller's process), or "" for a host caller. Ownership is (owner, app).
    public var app: String {
        get { request.app }
        set { request.app = newValue }
    }
    /// The destination is the caller's own file, written where it is (`StartAt` with a file
    /// descriptor): no partial file beside it, no rename, never removed.
    public var writesInPlace: Bool {
        get { request.writesInPlace }
        set { request.writesInPlace = newValue }
    }
    /// The session's name as the client gave it (never combined with the owner).
    public var session: String {
        get { request.session }
        set { request.session = newValue }
    }
    public var url: String {
        get { request.url }
        set { request.url = newValue }
    }
    /// As the client gave it: a file path, or a directory.
    public var destination: String {
        get { request.destination }
        set { request.destination = newValue }
    }
    /// Whether `destination` names a directory (the file name then comes from the response).
    public var destinationIsDirectory: Bool {
        get { request.destinationIsDirectory }
        set { request.destinationIsDirectory = newValue }
    }
    public var options: DownloadOptions {
        get { request.options }
        set { request.options = newValue }
    }
    /// The finished file's mode (from the caller's umask); nil leaves it 0600.
    public var fileMode: UInt32? {
        get { request.fileMode }
        set { request.fileMode = newValue }
    }
    /// Set for an upload (`Upload`, `UploadAt`): the file it sends and the reply it got. An
    /// upload's `expectedLength` is its body's length, `durableOffset` stays 0 (a plain upload
    /// starts again from byte 0), and `destination` is its reply destination or, without one,
    /// its source (never written: the store takes only absolute paths there).
    public var upload: UploadSpec? {
        get { request.upload }
        set { request.upload = newValue }
    }

    /// `download` or `upload` (the task's `Kind`).
    public var kind: String { upload == nil ? "download" : "upload" }

    public init(
        id: UInt64, owner: UInt32, session: String, url: String, destination: String, destinationIsDirectory: Bool,
        options: DownloadOptions,
        state: DownloadState = .queued, durableOffset: Int64 = 0, expectedLength: Int64 = -1,
        validator: String? = nil, finalURL: String? = nil, resolvedPath: String? = nil
    ) {
        self.id = id
        self.request = DownloadRequest(
            owner: owner, session: session, url: url, destination: destination,
            destinationIsDirectory: destinationIsDirectory, options: options)
        self.state = state
        self.durableOffset = durableOffset
        self.expectedLength = expectedLength
        self.validator = validator
        self.finalURL = finalURL
        self.resolvedPath = resolvedPath
    }

    public init(id: UInt64, request: DownloadRequest) {
        self.id = id
        self.request = request
        // A name the caller's description gave is the resolved path's from here on.
        self.request.fileName = nil
        state = .queued
        durableOffset = 0
        expectedLength = request.upload?.bodyLength ?? -1
        name(inDirectory: request.fileName)
    }

    /// The file's name in a destination directory, from whichever source names it first (the
    /// caller's document, a followed document, the server's response); nothing for a file
    /// destination or once named. `name` is asked only then. The finaliser makes it unique when
    /// it publishes.
    public mutating func name(inDirectory name: @autoclosure () -> String?) {
        guard destinationIsDirectory, resolvedPath == nil, let name = name() else { return }
        resolvedPath = FilePaths.join(destination, name)
    }

    /// Sets the state. A task leaving `retrying` for anything but `failed` (running again,
    /// paused, cancelled, queued by a restart) drops the error the retry waited out: it says why
    /// a task is retrying or failed, nothing else.
    public mutating func enter(_ next: DownloadState) {
        if state == .retrying && next != .failed {
            errorName = nil
            errorMessage = nil
        }
        if next == .running, state != .retrying {
            // A run begins (the first, or one after a pause or a failure): it has not ended.
            if metrics == nil { metrics = TaskMetrics(startedAt: TaskMetrics.now) }
            metrics?.endedAt = nil
        }
        if next.isTerminal { metrics?.endedAt = TaskMetrics.now }
        state = next
    }

    public var sessionID: SessionID { SessionID(owner: owner, name: session) }

    /// Where the caller's credentials may go (`DownloadOptions.credentialsOrigin`).
    public var credentialsOrigin: String { options.credentialsOrigin ?? options.metalinkURL ?? url }

    /// The partial file: hidden, beside the destination (inside it when it is a directory),
    /// named after the task so a restart finds it again.
    public var partialPath: String {
        if writesInPlace { return destination }
        let directory = destinationIsDirectory ? destination : FilePaths.directory(of: destination)
        return FilePaths.join(directory, ".org.example.Downloads-\(id).part")
    }
}
