import DBus
import DownloadEngine
import DownloadModel
import DownloadsAPI
import Foundation
import TerminalOutput
import UserFiles
import ShownText

/// `Upload`, `UploadAt` and a task's `GetReply`: an upload is a task like a download (the same
/// sessions, quotas, scheduling, signals and completion call), whose request sends a file.
extension DownloadsService {
    /// Where an upload's file comes from: a path the caller can read (`Upload`), or a
    /// descriptor it opened for reading (`UploadAt`).
    enum UploadSource {
        case path(String)
        case descriptor(UnixFD)
    }

    /// Longest `content_type`, in bytes.
    static let maxContentTypeBytes = 255

    /// The options of `Upload`/`UploadAt`: a download's option is refused by name.
    func uploadOptions(_ value: DBusValue) throws -> TaskOptions {
        let given = try vardict(value)
        if let name = given.keys.sorted().first(where: {
            TaskOptions.Key(rawValue: $0).map(TaskOptions.downloadOnlyKeys.contains) ?? false
        }) {
            throw DownloadsErrorName.invalidArgument.error(
                "option '\(name)' applies to downloads only, not to an upload")
        }
        return try TaskOptions(given, allowed: TaskOptions.uploadKeys)
    }

    /// `Upload` and `UploadAt` (the URL their first argument) once their source and options are
    /// checked: the new task's object, its files made with the caller's umask.
    func upload(
        _ call: MethodCall, options: TaskOptions, source: UploadSource, caller: Caller
    ) async throws
        -> [DBusValue]
    {
        let pid = try? await call.credentials().pid
        let path = try await upload(
            url: call.arguments[0].stringValue ?? "", source: source, options: options, caller: caller,
            fileMode: CallerUmask.fileMode(pid: pid))
        return [.objectPath(path)]
    }

    func upload(
        url given: String, source: UploadSource, options: TaskOptions, caller: Caller, fileMode: UInt32?
    ) async throws -> ObjectPath {
        let owner = caller.uid
        let (url, engineOptions) = try await checkedTask(url: given, options: options, caller: caller)
        let method = (options.method ?? "PUT").uppercased()
        guard UploadSpec.methods.contains(method) else {
            throw DownloadsErrorName.invalidArgument.error(
                "method must be PUT, POST or PATCH, not '\(DisplayText.quoted(options.method ?? "", limit: 20))'")
        }
        if let type = options.contentType {
            guard type.utf8.count <= Self.maxContentTypeBytes, HTTPFieldRules.isMediaType(type) else {
                throw DownloadsErrorName.invalidArgument.error(
                    "content_type must be a media type (type/subtype; parameters, as RFC 9110 §8.3.1 writes it) of at most \(Self.maxContentTypeBytes) bytes"
                )
            }
        }
        let transferProtocol = try Self.checkedProtocol(options)
        var replyDestination: String?
        if let path = options.replyDestination {
            guard !caller.isSandboxed else {
                throw DownloadsErrorName.accessDenied.error(
                    "a sandboxed app reads the reply with the task's GetReply(), not from a path")
            }
            replyDestination = try StartRequest.checkDestination(path, what: "reply_destination")
        }
        let session = try admitNewTask(session: options.session, caller: caller)
        // The file as the caller reaches it (their file helper on the system bus), and the
        // reply's place: checked now, so a mistake is this call's error, not a failed task.
        let shownSource: String
        var identity: SourceIdentity
        let descriptor: Int32?
        switch source {
        case .path(let path):
            shownSource = path
            descriptor = nil
            identity = try await BlockingWork.run { [engine] in try engine.inspectSource(path, owner: owner) }
        case .descriptor(let fd):
            shownSource = DescriptorAnchor.path(of: fd.fd)
            descriptor = fd.fd
            identity = try await callerReads.run(for: caller, what: "source") {
                try SessionManager.inspectSource(descriptor: fd.fd)
            }
        }
        if let replyDestination {
            let isDirectory = try await BlockingWork.run { [engine] in
                try engine.checkDestination(replyDestination, overwrite: true, owner: owner)
            }
            if isDirectory {
                throw DownloadsErrorName.invalidArgument.error("reply_destination must name a file, not a directory")
            }
        }
        var snapshot: String?
        // The copy counts against its owner's budget from now until the task holds it.
        var reservation: (bytes: Int64, owner: SnapshotBudget.Owner)?
        defer { if let reservation { snapshotBudget.release(reservation.bytes, for: reservation.owner) } }
        if options.snapshot == true {
            if configuration.systemBus {
                let budgetOwner = SnapshotBudget.Owner(uid: owner, app: caller.app)
                let (held, heldByApp) = snapshotBytesHeld(by: budgetOwner)
                try snapshotBudget.reserve(identity.size, for: budgetOwner, held: held, heldByApp: heldByApp)
                reservation = (identity.size, budgetOwner)
            }
            let directory = FilePaths.join(store.directory, "uploads")
            let (copy, copied) = try await BlockingWork.run { [engine, identity] in
                try engine.snapshot(
                    of: shownSource, descriptor: descriptor, owner: owner, recorded: identity, into: directory)
            }
            snapshot = copy
            identity = copied
        }
        let form = options.form.map { form in
            MultipartForm(
                field: form.field, filename: form.filename ?? FilePaths.name(of: shownSource), fields: form.fields)
        }
        // The record's destination is the reply's file; without one the source (the store keeps
        // an absolute path there), which nothing writes: `Destination` shows "".
        var request = DownloadRequest(
            owner: owner, session: session, url: url, destination: replyDestination ?? shownSource,
            destinationIsDirectory: false,
            options: engineOptions, fileMode: fileMode
        )
        request.app = caller.app
        request.upload = UploadSpec(
            source: shownSource, reopensByPath: descriptor == nil, method: method, contentType: options.contentType,
            form: form,
            replyDestination: replyDestination, snapshot: snapshot, identity: identity
        )
        request.upload?.transferProtocol = transferProtocol
        request.upload?.ietfVersion = options.ietfVersion.map { Int($0) }
        request.upload?.terminateOnCancel = options.terminateOnCancel
        do {
            return try await record(request, caller: caller) {
                try engine.createUpload(request, descriptor: snapshot == nil ? descriptor : nil)
            }
        } catch {
            if let snapshot { unlink(snapshot) }
            throw error
        }
    }

    /// The bytes of the service's copies that `owner`'s user (all of its apps) and its app hold:
    /// the copies of its uploads that are not finished or cancelled (those copies are removed).
    func snapshotBytesHeld(by owner: SnapshotBudget.Owner) -> (user: Int64, app: Int64) {
        var user: Int64 = 0, app: Int64 = 0
        for task in engine.snapshots(owner: owner.uid) {
            guard let spec = task.record.upload, spec.snapshot != nil, task.state != .finished, task.state != .cancelled
            else { continue }
            user += spec.identity.size
            if task.record.app == owner.app { app += spec.identity.size }
        }
        return (user, app)
    }

    /// Options `protocol` and `ietf_version`: a form is one request's body, so it goes plain
    /// (`auto` sends it plain; `ietf` and `tus` refuse it).
    static func checkedProtocol(_ options: TaskOptions) throws -> UploadProtocol {
        let name = options.transferProtocol ?? UploadProtocol.auto.rawValue
        guard let chosen = UploadProtocol(rawValue: name) else {
            let known = UploadProtocol.allCases.map(\.rawValue).joined(separator: ", ")
            throw DownloadsErrorName.invalidArgument.error(
                "protocol must be one of \(known), not '\(DisplayText.quoted(name, limit: 20))'")
        }
        if let version = options.ietfVersion, !UploadProtocol.ietfVersions.contains(Int(version)) {
            let spoken = UploadProtocol.ietfVersions.map(String.init).joined(separator: ", ")
            throw DownloadsErrorName.invalidArgument.error(
                "ietf_version must be one of \(spoken) (the draft's interop versions spoken), not \(version)")
        }
        if options.form != nil {
            switch chosen {
            case .ietf, .tus:
                throw DownloadsErrorName.invalidArgument.error(
                    "a form is sent as one request: protocol \(chosen.rawValue) cannot send it (use plain or auto)")
            case .plain, .auto:
                return .plain
            }
        }
        return chosen
    }

    /// `GetReply`: an upload's final response, once it ended. Its body is read from the store
    /// (the only place it is kept), once the task's ending has been written there.
    func reply(of task: TaskSnapshot) async throws -> [DBusValue] {
        guard let spec = task.record.upload else {
            throw DownloadsErrorName.wrongState.error("task \(task.id) is a download; only an upload has a reply")
        }
        guard task.state.isTerminal || spec.responseStatus != 0 else {
            throw DownloadsErrorName.wrongState.error(
                "task \(task.id) is \(task.state.rawValue); its reply is there once it ends")
        }
        await engine.eventsDelivered(task.id)
        let body = try await BlockingWork.run { [store] in try store.replyBody(of: task.id) }
        return [.uint32(UInt32(clamping: spec.responseStatus)), .stringDict(spec.replyHeaders), .bytes(body)]
    }
}
