/// Turns a complete partial file into the destination: fdatasync, the SHA-256 read through the
/// open descriptor, the atomic publish through `FileAccess` (never replacing a file unless
/// `overwrite`), the directory synced. Runs inside a `PartialFileWriter.perform` body, so it
/// comes after every queued write.
struct TransferFinalizer: Sendable {
    let fileAccess: any FileAccess

    /// Returns where the file now is. A checksum mismatch removes the partial file.
    func finalize(_ record: DownloadTaskRecord, length: Int64, writer: PartialFileWriter) throws -> String {
        try writer.openIfNeeded()
        try writer.sync()
        if let expected = record.options.sha256 {
            let actual = try writer.sha256(length: length)
            guard actual == expected else {
                writer.close()
                try? fileAccess.remove(writer.path)
                throw DownloadError.checksumMismatch(expected: expected, actual: actual)
            }
        }
        let destination = try publish(record, from: writer.path)
        fileAccess.syncDirectory(FilePaths.directory(of: destination))
        writer.close()
        return destination
    }

    private func publish(_ record: DownloadTaskRecord, from partial: String) throws -> String {
        guard record.destinationIsDirectory else {
            try fileAccess.rename(partial, to: record.destination, replace: record.options.overwrite)
            return record.destination
        }
        // The name chosen at the response may have been taken meanwhile: take the next free one.
        let name = record.resolvedPath.map { String($0.split(separator: "/").last ?? "download") }
            ?? HTTPHeaderRules.fileName(contentDisposition: nil, url: record.finalURL ?? record.url)
        for _ in 0..<100 {
            let candidate = uniquePath(in: record.destination, name: name)
            do {
                try fileAccess.rename(partial, to: candidate, replace: false)
                return candidate
            } catch let error as DownloadError where error.name == "FileExists" {
                continue
            }
        }
        throw DownloadError.file("no free file name for \(name) in \(record.destination)")
    }

    /// A name in `directory` not taken yet: `name`, `name (1)`, `name (2)`…, keeping the extension.
    func uniquePath(in directory: String, name: String) -> String {
        let candidate = FilePaths.join(directory, name)
        guard fileAccess.exists(candidate) else { return candidate }
        let dot = name.lastIndex(of: ".").flatMap { $0 == name.startIndex ? nil : $0 }
        let stem = dot.map { String(name[..<$0]) } ?? name
        let ext = dot.map { String(name[$0...]) } ?? ""
        for n in 1..<10_000 {
            let path = FilePaths.join(directory, "\(stem) (\(n))\(ext)")
            if !fileAccess.exists(path) { return path }
        }
        return FilePaths.join(directory, "\(stem) (\(UInt64.random(in: 10_000...UInt64.max)))\(ext)")
    }
}
