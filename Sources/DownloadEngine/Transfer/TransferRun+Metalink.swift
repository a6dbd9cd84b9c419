import DownloadModel
import Metalink
import TerminalOutput
import ShownText

/// A URL answered with a Metalink document (`application/metalink4+xml`, a 200 from the start,
/// when the task takes Metalink from its responses: `use_metalink_headers`), as aria2's
/// `--follow-metalink` and dnf's mirror lists do: the document's file becomes the download.
extension TransferRun {
    /// Reads the document `result` brought from `url` and makes its file the task's: its first
    /// http(s) URL the task's URL (kept, so a restart goes there, not to the document), the
    /// others mirrors, its strongest hash the checksum unless one was given, its piece hashes
    /// checked as pieces complete. URLs a redirect from `url` could not go to (https to http)
    /// are left out, and so are URLs a caller could not give (`RedirectRules.acceptableAsTaskURL`).
    /// Followed once per task: a document that names another document is downloaded as it is.
    /// The next request goes to the new URL (counted as a redirect), and so do the run's retries
    /// and restarts (`Outcome.followedDocument`); the caller's credentials go there only if it is
    /// the origin they were given for. Its `<size>` and piece hashes are promises the finish
    /// holds the server to.
    func followMetalink(_ result: TransferDelegate.Result, from url: String) -> TransferStateMachine.Outcome {
        if let length = result.headers.first(name: "content-length").flatMap(Int64.init), result.bodyBytes != length {
            return .failed(.interrupted("received \(result.bodyBytes) of the Metalink document's \(length) bytes"))
        }
        let source = DisplayText.quoted(url, limit: 200)
        let document: MetalinkDocument
        do throws(MetalinkDocument.Invalid) {
            document = try MetalinkDocument.parse(result.document)
        } catch {
            return .failed(.invalidResponse("the Metalink document at \(source): \(error.message)"))
        }
        guard let file = document.files.first else {
            return .failed(.invalidResponse("the Metalink document at \(source) describes no file"))
        }
        // Checked as Start's URL is: a URL with a password or of 15 KB does not become the task's.
        let named = file.downloadURLs(from: url)
        let urls = named.filter(RedirectRules.acceptableAsTaskURL)
        if urls.count < named.count {
            owner.logger.info(
                "task \(task.id): \(named.count - urls.count) URL(s) of the Metalink document at \(source) left out (a password, a space, or over 8 KiB)"
            )
        }
        guard let primary = urls.first else {
            return .failed(
                .invalidResponse("the Metalink document at \(source) names no http(s) URL this download may go to"))
        }
        let pieces: PieceHashes?
        do throws(Checksum.Invalid) {
            pieces = try file.pieceHashes()
        } catch {
            return .failed(.invalidResponse("\(error.message) (at \(source))"))
        }
        // Several files: a group of them, this task the first (its name a path below its
        // directory); made only once the task's own file is known to be one it can fetch.
        var joining: (group: UInt64, name: String?) = (0, file.fileName)
        if document.files.count > 1 {
            let record = task.record
            guard record.destinationIsDirectory, record.resolvedPath == nil, record.group == 0 else {
                return .failed(
                    .invalidResponse(
                        "the Metalink document at \(source) describes \(document.files.count) files: "
                            + (record.group == 0
                                ? "give a directory as the destination to fetch them as a group"
                                : "a file of a group cannot become a group")
                    ))
            }
            do {
                joining = (try owner.makeGroup(of: task, from: document, at: url), file.name)
            } catch let error as DownloadError {
                return .failed(error)
            } catch {
                return .failed(.invalidResponse("the Metalink document at \(source): \(error)"))
            }
        }
        owner.apply(
            .followedDocument(
                .init(
                    document: url, file: file, urls: urls, primary: primary, pieces: pieces, group: joining.group,
                    name: joining.name)), to: task)
        owner.apply(.wantsConnections(task.record.options.connections), to: task)
        if let algorithm = task.record.options.checksum?.algorithm {
            writer.enqueue { $0.startDigest(algorithm) }
        }
        owner.logger.info(
            "task \(task.id): \(source) is a Metalink document: \(DisplayText.quoted(primary, limit: 200)) and \(urls.count - 1) mirror(s)\(pieces.map { ", \($0.count) piece hashes" } ?? "")"
        )
        return .followedDocument(location: primary)
    }

    /// A task's options once it follows `file` of a document fetched from `document`: the file's
    /// other URLs its mirrors, its strongest hash the checksum unless one was given, its piece
    /// hashes and size promises; the caller's credentials stay with `given`, the URL they came with.
    static func options(
        _ base: DownloadOptions, following file: MetalinkDocument.File, urls: [String], primary: String,
        pieces: PieceHashes?,
        document: String, given: String
    ) -> DownloadOptions {
        var options = base
        options.metalinkURL = document
        if options.credentialsOrigin == nil { options.credentialsOrigin = given }
        options.mirrors = DownloadOptions.mirrors(options.mirrors, adding: urls, besides: primary)
        if options.checksum == nil { options.checksum = file.strongestChecksum }
        options.pieces = pieces
        options.promisedLength = file.size
        if options.connections == 1 && !options.mirrors.isEmpty {
            // Spread over every source, as a Start with the document would be.
            options.connections = DownloadOptions.connections(mirrors: options.mirrors.count)
        }
        return options
    }
}
