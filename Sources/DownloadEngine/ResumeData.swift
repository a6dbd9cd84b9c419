import Crypto
import Foundation

/// Resume data: a versioned blob a person can read (`cat` shows three lines: a header, the JSON
/// description of the download, and an HMAC-SHA256 over the first two), authenticated with a key
/// only the daemon knows, so a forged, truncated or altered blob is refused.
public struct ResumeData: Sendable, Hashable, Codable {
    public static let header = "org.example.Downloads.ResumeData/1"
    public static let maximumSize = 64 * 1024

    public var taskID: UInt64
    public var session: String
    public var url: String
    public var finalURL: String?
    public var destination: String
    public var destinationIsDirectory: Bool
    public var resolvedPath: String?
    public var offset: Int64
    public var validator: String?
    public var expectedLength: Int64
    public var options: DownloadOptions

    public init(record: DownloadTaskRecord) {
        taskID = record.id
        session = record.session
        url = record.url
        finalURL = record.finalURL
        destination = record.destination
        destinationIsDirectory = record.destinationIsDirectory
        resolvedPath = record.resolvedPath
        offset = record.durableOffset
        validator = record.validator
        expectedLength = record.expectedLength
        options = record.options
    }

    /// The blob: header line, JSON line, `hmac-sha256:<hex>` line.
    public func encoded(key: SymmetricKey) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = Array(ResumeData.header.utf8) + [10] + Array(try encoder.encode(self))
        let mac = HMAC<SHA256>.authenticationCode(for: body, using: key)
        return body + Array("\nhmac-sha256:".utf8) + Array(mac.map { String(format: "%02x", $0) }.joined().utf8) + [10]
    }

    /// Verifies and decodes a blob; every failure is `InvalidResumeData` with a reason.
    public static func decode(_ blob: [UInt8], key: SymmetricKey) throws -> ResumeData {
        guard !blob.isEmpty else { throw DownloadError.invalidResumeData("the resume data is empty") }
        guard blob.count <= maximumSize else {
            throw DownloadError.invalidResumeData("the resume data is larger than \(maximumSize) bytes")
        }
        var lines = blob.split(separator: 10, omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        guard lines.count == 3 else { throw DownloadError.invalidResumeData("the resume data is truncated or malformed") }
        guard Array(lines[0]) == Array(header.utf8) else {
            throw DownloadError.invalidResumeData("unknown resume data version (expected \(header))")
        }
        let prefix = Array("hmac-sha256:".utf8)
        let macLine = Array(lines[2])
        guard macLine.starts(with: prefix), let mac = hexBytes(macLine.dropFirst(prefix.count)), mac.count == 32 else {
            throw DownloadError.invalidResumeData("the resume data has no valid HMAC line")
        }
        let body = Array(lines[0]) + [10] + Array(lines[1])
        guard HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: body, using: key) else {
            throw DownloadError.invalidResumeData("the resume data was not made by this service or was altered")
        }
        do {
            let data = try JSONDecoder().decode(ResumeData.self, from: Data(lines[1]))
            guard data.offset >= 0 else { throw DownloadError.invalidResumeData("negative offset") }
            return data
        } catch let error as DownloadError {
            throw error
        } catch {
            throw DownloadError.invalidResumeData("the resume data's description does not decode: \(error)")
        }
    }

    private static func hexBytes<C: Collection>(_ text: C) -> [UInt8]? where C.Element == UInt8 {
        guard text.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var high: UInt8?
        for character in text {
            let nibble: UInt8
            switch character {
            case 48...57: nibble = character - 48
            case 97...102: nibble = character - 87
            default: return nil
            }
            if let h = high {
                bytes.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }
}
