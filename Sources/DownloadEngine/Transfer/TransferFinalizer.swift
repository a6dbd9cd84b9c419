import DownloadModel
import TerminalOutput
import UserFiles
import ShownText
import FileIdentities

/// Turns a complete partial file into the destination: fdatasync, the checksum (hashed as the
/// bytes were written, the rest read through the open descriptor), the atomic publish through `FileAccess` (never replacing a file unless
/// `overwrite`), the directory synced. Runs inside a `PartialFileWriter.perform` body, so it
/// comes after every queued write.
struct TransferFinalizer: Sendable {
    let fileAccess: any FileAccess
    /// Written on the file before its rename (nil: none; see `origin(of:configuration:)`).
    var origin: OriginAttributes?
    /// Told when the file system would not keep them (the file is published without).
    var attributesRefused: @Sendable (_ code: Int32, _ attribute: String, _ path: String) -> Void = { _, _, _ in }

    /// Where `record`'s file came from, as its finished file records it: the task's URL and
    /// referrer without credentials, query or fragment (a signed URL's query is its bearer
    /// token, and every user who can read the file reads its attributes), unless the task or
    /// the daemon says none.
    static func origin(
        of record: DownloadTaskRecord, configuration: SessionManager.Configuration
    ) -> OriginAttributes? {
        guard configuration.originAttributes, record.options.originAttributes else { return nil }
        guard let url = Source(record.url)?.withoutCredentialsOrQuery else { return nil }
        return OriginAttributes(
            url: url, referrer: record.options.referrer.flatMap { Source($0)?.withoutCredentialsOrQuery })
    }

    /// Makes the whole file durable and checks it. A checksum mismatch removes the partial file.
    func complete(_ record: DownloadTaskRecord, length: Int64, writer: PartialFileWriter) throws {
        try writer.openIfNeeded()
        try writer.sync()
        try keepsTheDocumentsPromises(record, length: length, writer: writer)
        if let expected = record.options.checksum, let (actual, _) = try writer.digest(length: length) {
            guard actual == expected.hex else {
                writer.close()
                try? fileAccess.remove(writer.path)
                throw DownloadError.checksumMismatch(expected: expected, actual: actual)
            }
        }
    }

    /// A followed Metalink document's `<size>` (or the caller's `expected_size`) and piece hashes are promises: a file of another
    /// length, or whose pieces the hashes cannot describe or do not match, is not published
    /// (never a silent download of something else). Pieces are read back here unless a
    /// whole-file checksum checks the bytes next.
    private func keepsTheDocumentsPromises(
        _ record: DownloadTaskRecord, length: Int64, writer: PartialFileWriter
    ) throws {
        let document = record.options.metalinkURL.map { " at \(DisplayText.quoted($0, limit: 200))" } ?? ""
        var broken: DownloadError?
        if let promise = LengthPromise(record), promise.length != length {
            broken = .invalidResponse(promise.broken(by: length))
        } else if let pieces = record.options.pieces {
            if !pieces.fits(length) {
                broken = .invalidResponse(
                    "the Metalink document\(document) gives \(pieces.count) piece hashes of \(pieces.length) bytes, which do not describe the \(length) bytes the server sent"
                )
            } else if record.options.checksum == nil {
                for index in 0..<pieces.count {
                    let range = pieces.range(of: index, fileLength: length)
                    guard try writer.digest(of: range, pieces.algorithm) == pieces.hex(of: index) else {
                        broken = .checksumMismatch(
                            "piece \(index) (bytes \(range.start)–\(range.end - 1)) differs from the \(pieces.algorithm.rawValue) hash of the Metalink document\(document)"
                        )
                        break
                    }
                }
            }
        }
        guard let broken else { return }
        writer.close()
        try? fileAccess.remove(writer.path)
        throw broken
    }

    /// Renames the complete file into place; returns where it now is.
    func publish(_ record: DownloadTaskRecord, writer: PartialFileWriter) throws -> String {
        let destination = try publish(record, from: writer.path, identity: writer.identity)
        writer.close()
        return destination
    }

    /// Renames the complete partial file the record names (device and inode) into place, its
    /// descriptor closed (a file of an atomic group, published with the others).
    func publishRecorded(_ record: DownloadTaskRecord) throws -> String {
        guard let identity = record.partialFile else {
            throw DownloadError.file("the partial file of task \(record.id) was never recorded")
        }
        return try publish(record, from: record.partialPath, identity: identity)
    }

    /// Where a run before a crash published this task's partial file, when the crash came
    /// between the rename and the `finished` row: the partial file is gone and the recorded file
    /// (device and inode) is at the destination, or at one of the names tried after it.
    func publishedBeforeCrash(_ record: DownloadTaskRecord) throws -> String? {
        guard let identity = record.partialFile, !(try fileAccess.exists(record.partialPath)) else { return nil }
        guard record.destinationIsDirectory else {
            return try fileAccess.isFile(record.destination, identity: identity) ? record.destination : nil
        }
        let name = Self.name(of: record)
        // The names were tried in order and the first free one taken: it is among those that exist.
        for candidate in Self.candidates(in: record.destination, name: name) {
            guard try fileAccess.exists(candidate) else { return nil }
            if try fileAccess.isFile(candidate, identity: identity) { return candidate }
        }
        return nil
    }

    private func publish(_ record: DownloadTaskRecord, from partial: String, identity: FileIdentity?) throws -> String {
        guard record.destinationIsDirectory else {
            noteAttributes(
                try fileAccess.publish(
                    partial, identity: identity, to: record.destination, replace: record.options.overwrite,
                    mode: record.fileMode, origin: origin
                ), record.destination)
            return record.destination
        }
        // The name from the response, or the next free one: each try is a rename that refuses to
        // replace (the O_EXCL of renames), so no probe can be raced.
        let name = Self.name(of: record)
        for candidate in Self.candidates(in: record.destination, name: name) {
            do {
                noteAttributes(
                    try fileAccess.publish(
                        partial, identity: identity, to: candidate, replace: false, mode: record.fileMode,
                        origin: origin
                    ), candidate)
                return candidate
            } catch let error as DownloadError where error.code == .fileExists {
                continue
            }
        }
        throw DownloadError.file("no free file name for \(name) in \(record.destination)")
    }

    private func noteAttributes(_ write: AttributeWrite, _ path: String) {
        if case .refused(let code, let attribute) = write { attributesRefused(code, attribute, path) }
    }

    /// The name a download into a directory is published under (before the ` (n)` of a taken one).
    static func name(of record: DownloadTaskRecord) -> String {
        record.resolvedPath.map { String($0.split(separator: "/").last ?? "download") }
            ?? HTTPHeaderRules.fileName(contentDisposition: nil, url: record.finalURL ?? record.url)
    }

    /// `name`, `name (1)`, `name (2)`… `name (999)` in `directory`, keeping the extension; each
    /// made when it is tried (the first nearly always is taken: building all thousand made a
    /// download into a directory cost a quarter of a millisecond more than one to a file).
    static func candidates(in directory: String, name: String) -> LazyMapSequence<Range<Int>, String> {
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        let stem = dot.map { String(name[..<$0]) } ?? name
        let ext = dot.map { String(name[$0...]) } ?? ""
        return (0..<1000).lazy.map {
            $0 == 0 ? FilePaths.join(directory, name) : FilePaths.join(directory, "\(stem) (\($0))\(ext)")
        }
    }
}
