import FileIdentities
/// A file helper's answer to one `FileRequest` (one datagram; an opened file's descriptor rides
/// along as SCM_RIGHTS).
public enum FileReply: Sendable {
    case done
    case answer(Bool)
    case opened(FileIdentity, created: Bool)
    case failed(FileOperationError)
    /// The first datagram of a helper: it runs as this uid and gid now.
    case ready(uid: UInt32, gid: UInt32)
    /// A publish was done; what became of the origin attributes it carried.
    case published(AttributeWrite)

    func encoded() -> [UInt8] {
        var writer = WireWriter()
        switch self {
        case .done:
            writer.byte(0)
        case .answer(let value):
            writer.byte(1)
            writer.bool(value)
        case .opened(let identity, let created):
            writer.byte(2)
            writer.u64(identity.device)
            writer.u64(identity.inode)
            writer.bool(created)
        case .failed(let error):
            writer.byte(3)
            writer.byte(error.kind.rawValue)
            writer.u32(UInt32(bitPattern: error.code))
            writer.string(error.message)
        case .ready(let uid, let gid):
            writer.byte(4)
            writer.u32(uid)
            writer.u32(gid)
        case .published(let attributes):
            writer.byte(5)
            switch attributes {
            case .notAsked: writer.byte(0)
            case .written: writer.byte(1)
            case .refused(let code, let attribute):
                writer.byte(2)
                writer.u32(UInt32(bitPattern: code))
                writer.byte(attribute == OriginAttributes.referrerName ? 1 : 0)
            }
        }
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> FileReply {
        var reader = WireReader(bytes)
        let reply: FileReply
        switch try reader.byte() {
        case 0: reply = .done
        case 1: reply = .answer(try reader.bool())
        case 2:
            let identity = FileIdentity(device: try reader.u64(), inode: try reader.u64())
            reply = .opened(identity, created: try reader.bool())
        case 3:
            guard let kind = FileOperationError.Kind(rawValue: try reader.byte()) else { throw WireReader.Malformed() }
            let code = Int32(bitPattern: try reader.u32())
            reply = .failed(FileOperationError(kind, code: code, try reader.string()))
        case 4: reply = .ready(uid: try reader.u32(), gid: try reader.u32())
        case 5:
            switch try reader.byte() {
            case 0: reply = .published(.notAsked)
            case 1: reply = .published(.written)
            case 2:
                let code = Int32(bitPattern: try reader.u32())
                let attribute = try reader.byte() == 1 ? OriginAttributes.referrerName : OriginAttributes.originName
                reply = .published(.refused(code, attribute: attribute))
            default: throw WireReader.Malformed()
            }
        default: throw WireReader.Malformed()
        }
        guard reader.isAtEnd else { throw WireReader.Malformed() }
        return reply
    }
}
