/// What a new download is asked to do, before the engine gives it an id.
public struct DownloadRequest: Sendable, Hashable {
    // The small fields first, together: a hundred thousand queued tasks each hold this inline.
    public var owner: UInt32
    /// The finished file's mode (from the caller's umask); nil leaves it 0600.
    public var fileMode: UInt32?
    /// `destination` is the caller's own file, written in place (`StartAt` with a file descriptor).
    public var writesInPlace = false
    public var destinationIsDirectory: Bool
    /// The sandboxed app asking ("" for a host caller).
    public var app: String = ""
    public var session: String
    public var url: String
    /// A file path, or a directory (then `destinationIsDirectory`).
    public var destination: String
    /// Behind one reference (`Shared`): copies of the record share it.
    @Shared public var options: DownloadOptions
    /// The file's name in a destination directory when the caller's description gives one (a
    /// Metalink document's, already made safe); nil: the response names it.
    public var fileName: String?
    /// An upload's file and form (nil: a download).
    @SharedIfAny public var upload: UploadSpec? = nil

    public init(
        owner: UInt32, session: String, url: String, destination: String, destinationIsDirectory: Bool,
        options: DownloadOptions = DownloadOptions(), fileMode: UInt32? = nil, fileName: String? = nil
    ) {
        self.fileName = fileName
        self.owner = owner
        self.session = session
        self.url = url
        self.destination = destination
        self.destinationIsDirectory = destinationIsDirectory
        self.options = options
        self.fileMode = fileMode
    }

    /// Makes consecutive requests with equal options share one copy of them (a group's files,
    /// which mostly have the group's options alone): a hundred thousand queued files hold a
    /// reference each, not a copy each.
    public static func shareOptions(_ requests: inout [DownloadRequest]) {
        guard var last = requests.first?.$options else { return }
        for index in requests.indices.dropFirst() {
            if requests[index].$options == last {
                requests[index].$options = last
            } else {
                last = requests[index].$options
            }
        }
    }
}
