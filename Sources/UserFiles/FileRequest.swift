import FileIdentities
/// One operation asked of a user's file helper (one datagram).
public enum FileRequest: Sendable, Equatable {
    case openPartial(path: String, reuse: PartialReuse)
    case publish(
        partial: String, identity: FileIdentity?, destination: String, replace: Bool, mode: UInt32?,
        origin: OriginAttributes?)
    case remove(path: String)
    case isDirectory(path: String)
    case exists(path: String)
    case syncDirectory(path: String)
    case isWritableDirectory(path: String)
    case isFile(path: String, identity: FileIdentity)
    /// A regular file the user can read, opened read-only (a document they named).
    case openForReading(path: String)
    /// The missing directories of `relative` below `base`, made beneath it (`StartGroupAt`).
    case makeDirectories(relative: String, base: String, mode: UInt32?)
    /// `/.flatpak-info` of a process of the helper's user, opened (`UserFileOperations.openAppInfo`).
    case openAppInfo(pid: UInt32)

    func encoded() -> [UInt8] {
        var writer = WireWriter()
        switch self {
        case .openPartial(let path, let reuse):
            writer.byte(1)
            writer.string(path)
            switch reuse {
            case .never: writer.byte(0)
            case .ifOwned: writer.byte(1)
            case .ifSame(let identity):
                writer.byte(2)
                writer.u64(identity.device)
                writer.u64(identity.inode)
            case .onlyIfSame(let identity):
                writer.byte(3)
                writer.u64(identity.device)
                writer.u64(identity.inode)
            }
        case .publish(let partial, let identity, let destination, let replace, let mode, let origin):
            writer.byte(2)
            writer.string(partial)
            writer.bool(identity != nil)
            writer.u64(identity?.device ?? 0)
            writer.u64(identity?.inode ?? 0)
            writer.string(destination)
            writer.bool(replace)
            writer.bool(mode != nil)
            writer.u32(mode ?? 0)
            writer.bool(origin != nil)
            writer.string(origin?.url ?? "")
            writer.bool(origin?.referrer != nil)
            writer.string(origin?.referrer ?? "")
        case .remove(let path):
            writer.byte(3)
            writer.string(path)
        case .isDirectory(let path):
            writer.byte(4)
            writer.string(path)
        case .exists(let path):
            writer.byte(5)
            writer.string(path)
        case .syncDirectory(let path):
            writer.byte(6)
            writer.string(path)
        case .isWritableDirectory(let path):
            writer.byte(7)
            writer.string(path)
        case .isFile(let path, let identity):
            writer.byte(8)
            writer.string(path)
            writer.u64(identity.device)
            writer.u64(identity.inode)
        case .openForReading(let path):
            writer.byte(9)
            writer.string(path)
        case .makeDirectories(let relative, let base, let mode):
            writer.byte(10)
            writer.string(relative)
            writer.string(base)
            writer.bool(mode != nil)
            writer.u32(mode ?? 0)
        case .openAppInfo(let pid):
            writer.byte(11)
            writer.u32(pid)
        }
        return writer.bytes
    }

    /// The tag of a request done below a descriptor the caller handed over (`DescriptorAnchor`):
    /// the descriptor rides along as SCM_RIGHTS, its kind and path come first in the datagram.
    static let anchoredTag: UInt8 = 0xA0

    /// The datagram of this request done below `anchor` (its descriptor is sent beside it).
    func encoded(below anchor: DescriptorAnchor) -> [UInt8] {
        var writer = WireWriter()
        writer.byte(Self.anchoredTag)
        writer.byte(anchor.kind.rawValue)
        writer.string(anchor.path)
        return writer.bytes + encoded()
    }

    /// A datagram and the descriptor that came with it: the request, and the anchor it is done
    /// below when it is an anchored one (which then owns `passed`; otherwise the caller closes it).
    static func decode(_ bytes: [UInt8], passed: Int32) throws -> (FileRequest, DescriptorAnchor?) {
        guard bytes.first == anchoredTag else { return (try decode(bytes), nil) }
        var reader = WireReader(Array(bytes.dropFirst()))
        guard passed >= 0, let kind = DescriptorAnchor.Kind(rawValue: try reader.byte()) else {
            throw WireReader.Malformed()
        }
        let path = try reader.string()
        let request = try decode(reader.remaining)
        return (request, DescriptorAnchor(owning: passed, kind: kind, path: path))
    }

    static func decode(_ bytes: [UInt8]) throws -> FileRequest {
        var reader = WireReader(bytes)
        let request: FileRequest
        switch try reader.byte() {
        case 1:
            let path = try reader.string()
            let reuse: PartialReuse
            switch try reader.byte() {
            case 0: reuse = .never
            case 1: reuse = .ifOwned
            case 2: reuse = .ifSame(FileIdentity(device: try reader.u64(), inode: try reader.u64()))
            case 3: reuse = .onlyIfSame(FileIdentity(device: try reader.u64(), inode: try reader.u64()))
            default: throw WireReader.Malformed()
            }
            request = .openPartial(path: path, reuse: reuse)
        case 2:
            let partial = try reader.string()
            let hasIdentity = try reader.bool()
            let identity = FileIdentity(device: try reader.u64(), inode: try reader.u64())
            let destination = try reader.string()
            let replace = try reader.bool()
            let hasMode = try reader.bool()
            let mode = try reader.u32()
            let hasOrigin = try reader.bool()
            let url = try reader.string()
            let hasReferrer = try reader.bool()
            let referrer = try reader.string()
            request = .publish(
                partial: partial, identity: hasIdentity ? identity : nil, destination: destination, replace: replace,
                mode: hasMode ? mode : nil,
                origin: hasOrigin ? OriginAttributes(url: url, referrer: hasReferrer ? referrer : nil) : nil
            )
        case 3: request = .remove(path: try reader.string())
        case 4: request = .isDirectory(path: try reader.string())
        case 5: request = .exists(path: try reader.string())
        case 6: request = .syncDirectory(path: try reader.string())
        case 7: request = .isWritableDirectory(path: try reader.string())
        case 8:
            request = .isFile(
                path: try reader.string(), identity: FileIdentity(device: try reader.u64(), inode: try reader.u64()))
        case 9: request = .openForReading(path: try reader.string())
        case 10:
            let relative = try reader.string()
            let base = try reader.string()
            let hasMode = try reader.bool()
            let mode = try reader.u32()
            request = .makeDirectories(relative: relative, base: base, mode: hasMode ? mode : nil)
        case 11: request = .openAppInfo(pid: try reader.u32())
        default: throw WireReader.Malformed()
        }
        guard reader.isAtEnd else { throw WireReader.Malformed() }
        return request
    }

    /// Does it here, with this process's credentials. The descriptor of an opened file is
    /// returned beside the reply.
    func perform(with operations: UserFileOperations) -> (FileReply, Int32) {
        do {
            switch self {
            case .openPartial(let path, let reuse):
                let opened = try operations.openPartial(path, reuse: reuse)
                return (.opened(opened.identity, created: opened.created), opened.descriptor)
            case .publish(let partial, let identity, let destination, let replace, let mode, let origin):
                let attributes = try operations.publish(
                    partial, identity: identity, to: destination, replace: replace, mode: mode, origin: origin)
                return (.published(attributes), -1)
            case .remove(let path):
                try operations.remove(path)
                return (.done, -1)
            case .isDirectory(let path):
                return (.answer(operations.isDirectory(path)), -1)
            case .exists(let path):
                return (.answer(operations.exists(path)), -1)
            case .syncDirectory(let path):
                operations.syncDirectory(path)
                return (.done, -1)
            case .isWritableDirectory(let path):
                return (.answer(operations.isWritableDirectory(path)), -1)
            case .isFile(let path, let identity):
                return (.answer(operations.isFile(path, identity: identity)), -1)
            case .openForReading(let path):
                let opened = try operations.openForReading(path)
                return (.opened(opened.identity, created: false), opened.descriptor)
            case .makeDirectories(let relative, let base, let mode):
                try operations.makeDirectories(relative, below: base, mode: mode)
                return (.done, -1)
            case .openAppInfo(let pid):
                guard let fd = try operations.openAppInfo(pid: pid) else { return (.answer(false), -1) }
                return (.opened(FileIdentity(device: 0, inode: 0), created: false), fd)
            }
        } catch let error as FileOperationError {
            return (.failed(error), -1)
        } catch {
            return (.failed(FileOperationError(.other, "\(error)")), -1)
        }
    }
}
