#if canImport(Glibc)
import DownloadModel
import Glibc
#endif
import UserFiles
import FileIdentities

/// File access through one user's file helper (a process with that user's credentials); the
/// descriptors it opens come back over its socket.
struct HelperFileAccess: FileAccess {
    let helper: FileHelperClient
    /// A descriptor the caller handed over: every request is done below it (it goes with each).
    var anchor: DescriptorAnchor?

    func openPartial(_ path: String, reuse: PartialReuse) throws -> OpenedPartial {
        let (reply, descriptor) = try perform(.openPartial(path: path, reuse: reuse), path: path)
        guard case .opened(let identity, let created) = reply, descriptor >= 0 else {
            if descriptor >= 0 { close(descriptor) }
            throw DownloadError.file("the file helper for uid \(helper.uid) did not hand over \(path)")
        }
        return OpenedPartial(descriptor: descriptor, identity: identity, created: created)
    }

    func publish(
        _ partial: String, identity: FileIdentity?, to destination: String, replace: Bool, mode: UInt32?,
        origin: OriginAttributes?
    ) throws -> AttributeWrite {
        let (reply, descriptor) = try perform(
            .publish(
                partial: partial, identity: identity, destination: destination, replace: replace, mode: mode,
                origin: origin),
            path: destination)
        if descriptor >= 0 { close(descriptor) }
        guard case .published(let attributes) = reply else {
            throw DownloadError.file("the file helper for uid \(helper.uid) answered out of turn")
        }
        return attributes
    }

    func remove(_ path: String) throws {
        _ = try perform(.remove(path: path), path: path)
    }

    func isDirectory(_ path: String) throws -> Bool {
        try answer(.isDirectory(path: path), path: path)
    }

    func isWritableDirectory(_ path: String) throws -> Bool {
        try answer(.isWritableDirectory(path: path), path: path)
    }

    func exists(_ path: String) throws -> Bool {
        try answer(.exists(path: path), path: path)
    }

    func isFile(_ path: String, identity: FileIdentity) throws -> Bool {
        try answer(.isFile(path: path, identity: identity), path: path)
    }

    func openForReading(_ path: String) throws -> Int32 {
        let (reply, descriptor) = try perform(.openForReading(path: path), path: path)
        guard case .opened = reply, descriptor >= 0 else {
            if descriptor >= 0 { close(descriptor) }
            throw DownloadError.file("the file helper for uid \(helper.uid) did not hand over \(path)")
        }
        return descriptor
    }

    func openAppInfo(pid: UInt32) throws -> Int32? {
        let path = "/proc/\(pid)/root/.flatpak-info"
        let (reply, descriptor) = try perform(.openAppInfo(pid: pid), path: path)
        switch reply {
        case .answer(false):
            if descriptor >= 0 { close(descriptor) }
            return nil
        case .opened where descriptor >= 0:
            return descriptor
        default:
            if descriptor >= 0 { close(descriptor) }
            throw DownloadError.file("the file helper for uid \(helper.uid) did not hand over \(path)")
        }
    }

    func makeDirectories(_ relative: String, below base: String, mode: UInt32?) throws {
        _ = try perform(.makeDirectories(relative: relative, base: base, mode: mode), path: base + "/" + relative)
    }

    private func answer(_ request: FileRequest, path: String) throws -> Bool {
        guard case .answer(let value) = try perform(request, path: path).0 else {
            throw DownloadError.file("the file helper for uid \(helper.uid) answered out of turn")
        }
        return value
    }

    /// The reply (a failure thrown as the engine's error) and any descriptor with it.
    private func perform(_ request: FileRequest, path: String) throws -> (FileReply, Int32) {
        let result: (FileReply, Int32)
        do {
            result = try helper.perform(request, below: anchor)
        } catch let error as FileOperationError {
            throw error.downloadError(path: path)
        }
        if case .failed(let error) = result.0 {
            if result.1 >= 0 { close(result.1) }
            throw error.downloadError(path: path)
        }
        return result
    }
}
