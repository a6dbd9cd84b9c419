import Crypto
import Foundation
import ProxyRules

/// Resume data: a versioned blob a person can read (`cat` shows three lines: a header, the JSON
/// description of the download, and an HMAC-SHA256 over the first two), authenticated with a key
/// only the daemon knows, so a forged, truncated or altered blob is refused.
///
/// It binds the owner's uid and app (another user's blob, or another sandboxed app's, is
/// refused) and never carries header values in
/// clear text: the request headers (which may hold an `Authorization` or a `Cookie`) and the
/// `proxy` option (which may hold a password) are sealed
/// with ChaCha20-Poly1305 under a key derived from the daemon's key; their names are not shown
/// either. Everything else stays readable.
public struct ResumeData: Sendable, Hashable {
    public static let header = "org.example.Downloads.ResumeData/3"
    /// Older blobs still read: version 2 had no segments (one stream).
    static let readableHeaders = [header, "org.example.Downloads.ResumeData/2"]
    /// A Metalink document's piece hashes travel in it (up to ~0.8 MiB of hex).
    public static let maximumSize = 2 << 20

    public var taskID: UInt64
    public var owner: UInt32
    /// The sandboxed app the task belongs to ("" for a host caller's task).
    public var app: String
    public var writesInPlace: Bool
    public var session: String
    public var url: String
    public var finalURL: String?
    public var destination: String
    public var destinationIsDirectory: Bool
    public var resolvedPath: String?
    public var offset: Int64
    public var validator: String?
    public var expectedLength: Int64
    /// A segmented download's ranges still to fetch; nil for one stream (`offset` is then a prefix).
    public var segments: [ByteRange]?
    public var options: DownloadOptions
    /// An upload's file and form (its reply left out): a plain upload resumes from byte 0.
    public var upload: UploadSpec?

    public init(record: DownloadTaskRecord) {
        taskID = record.id
        owner = record.owner
        app = record.app
        writesInPlace = record.writesInPlace
        session = record.session
        url = record.url
        finalURL = record.finalURL
        destination = record.destination
        destinationIsDirectory = record.destinationIsDirectory
        resolvedPath = record.resolvedPath
        offset = record.durableOffset
        validator = record.validator
        expectedLength = record.expectedLength
        segments = record.segments
        options = record.options
        upload = record.upload.map { spec in
            var spec = spec
            spec.responseStatus = 0
            spec.replyHeaders = [:]
            spec.newReplyBody = nil
            spec.sentWhole = nil
            return spec
        }
    }

    /// The request a task made from this data starts with (its partial file is adopted separately).
    public var request: DownloadRequest {
        var request = DownloadRequest(
            owner: owner, session: session, url: url, destination: destination,
            destinationIsDirectory: destinationIsDirectory, options: options
        )
        request.app = app
        request.writesInPlace = writesInPlace
        request.upload = upload
        return request
    }

    /// The JSON line: explicit keys, headers sealed.
    private struct Body: Codable {
        var task_id: UInt64
        var owner_uid: UInt32
        /// Absent for a host caller's task (and in blobs made before apps were told apart).
        var app: String?
        var writes_in_place: Bool?
        var session: String
        var url: String
        var final_url: String?
        var destination: String
        var destination_is_directory: Bool
        var resolved_path: String?
        var offset: Int64
        var validator: String?
        var expected_length: Int64
        var segments: [ByteRange]?
        var options: DownloadOptions
        /// An upload's file and form; absent for a download.
        var upload: UploadSpec?
        /// The headers, `proxy` and client certificate, sealed together as the store seals them
        /// (`SealedSecrets`, bound to the task's id); absent without any.
        var sealed_secrets: String?
        /// Blobs made before: base64 of ChaCha20-Poly1305 (nonce, ciphertext, tag) over the
        /// headers' JSON, the `proxy` option's text, the client certificate (`SealedCertificate`'s
        /// JSON), each alone and unbound. Read, never written.
        var sealed_headers: String?
        var sealed_proxy: String?
        var sealed_client_certificate: String?
    }

    /// A client certificate as blobs made before sealed it.
    private struct SealedCertificate: Codable {
        var bytes: Data
        var passphrase: String?
    }

    /// The secrets' sealing for resume data (its own derived key, as before).
    private static func secrets(_ key: SymmetricKey) -> SealedSecrets {
        SealedSecrets(rootKey: key, purpose: "org.example.Downloads resume-data headers")
    }

    private static func binding(_ id: UInt64) -> [UInt8] { Array("resume data of task \(id)".utf8) }

    /// The blob: header line, JSON line, `hmac-sha256:<hex>` line.
    public func encoded(key: SymmetricKey) throws -> [UInt8] {
        let (visible, sealed) = try Self.secrets(key).seal(options, binding: Self.binding(taskID))
        let body = Body(
            task_id: taskID, owner_uid: owner, app: app.isEmpty ? nil : app,
            writes_in_place: writesInPlace ? true : nil,
            session: session, url: url, final_url: finalURL, destination: destination,
            destination_is_directory: destinationIsDirectory, resolved_path: resolvedPath, offset: offset,
            validator: validator, expected_length: expectedLength, segments: segments, options: visible, upload: upload,
            sealed_secrets: sealed
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return SignedBlob.encode(header: ResumeData.header, json: Array(try encoder.encode(body)), key: key)
    }

    /// Verifies and decodes a blob made for `owner`; every failure is `InvalidResumeData` with a
    /// reason. A sandboxed `app` takes only its own blobs; a host caller ("") every blob of its user.
    public static func decode(_ blob: [UInt8], key: SymmetricKey, owner: UInt32, app: String = "") throws -> ResumeData
    {
        let json = try SignedBlob.decode(blob, key: key, maximumSize: maximumSize, what: "the resume data") { first in
            guard readableHeaders.contains(where: { first == Array($0.utf8) }) else {
                if first == Array(GroupResumeData.header.utf8) {
                    throw DownloadError.invalidResumeData(
                        "this is a group's resume data: give it to ResumeGroupWithData")
                }
                throw DownloadError.invalidResumeData("unknown resume data version (expected \(header))")
            }
        }
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(json))
        } catch {
            throw DownloadError.invalidResumeData("the resume data's description does not decode: \(error)")
        }
        // Checked after the HMAC, so the answer says nothing about other users' blobs' contents.
        guard body.owner_uid == owner else {
            throw DownloadError.invalidResumeData("the resume data belongs to another user")
        }
        guard app.isEmpty || (body.app ?? "") == app else {
            throw DownloadError.invalidResumeData("the resume data belongs to another app")
        }
        guard body.offset >= 0 else { throw DownloadError.invalidResumeData("negative offset") }
        if let segments = body.segments {
            guard body.validator != nil, ByteRange.valid(segments, length: body.expected_length),
                body.offset == ByteRange.held(length: body.expected_length, remaining: segments)
            else {
                throw DownloadError.invalidResumeData("the resume data's segments do not describe the file")
            }
        }
        var options = body.options
        let secrets = secrets(key)
        if let sealed = body.sealed_secrets {
            do {
                try secrets.open(sealed, into: &options, binding: binding(body.task_id))
            } catch {
                throw DownloadError.invalidResumeData("the resume data's \(error.message.dropFirst("its ".count))")
            }
        }
        // A blob made before: each secret sealed alone.
        if let sealed = body.sealed_headers {
            guard let plain = secrets.openBytes(sealed),
                let headers = try? JSONDecoder().decode([String: String].self, from: plain)
            else {
                throw DownloadError.invalidResumeData("the resume data's sealed headers do not open")
            }
            options.headers = headers
        }
        if let sealed = body.sealed_proxy {
            guard let plain = secrets.openBytes(sealed), let text = String(bytes: plain, encoding: .utf8),
                let proxy = try? ProxySetting.parse(text)
            else {
                throw DownloadError.invalidResumeData("the resume data's sealed proxy does not open")
            }
            options.proxy = proxy
        }
        if let sealed = body.sealed_client_certificate {
            guard let plain = secrets.openBytes(sealed),
                let certificate = try? JSONDecoder().decode(SealedCertificate.self, from: plain)
            else {
                throw DownloadError.invalidResumeData("the resume data's sealed client certificate does not open")
            }
            options.clientCertificate = ClientCertificate(
                bytes: Array(certificate.bytes), passphrase: certificate.passphrase)
        }
        var record = DownloadTaskRecord(
            id: body.task_id, owner: body.owner_uid, session: body.session, url: body.url,
            destination: body.destination,
            destinationIsDirectory: body.destination_is_directory, options: options, durableOffset: body.offset,
            expectedLength: body.expected_length, validator: body.validator, finalURL: body.final_url,
            resolvedPath: body.resolved_path
        )
        record.segments = body.segments
        record.app = body.app ?? ""
        record.writesInPlace = body.writes_in_place ?? false
        record.upload = body.upload
        return ResumeData(record: record)
    }
}
