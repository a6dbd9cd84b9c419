#if canImport(FoundationXML)
import FoundationXML
#endif
import Foundation

/// A Metalink v4 document (RFC 5854, `.meta4`): for each file its name, size, whole-file hashes,
/// piece hashes and the URLs it can be fetched from, with their priority (1 first) and location.
/// Read with libxml2 through Foundation's `XMLParser`: no external entity is ever resolved, and a
/// document over `maximumSize` is refused before parsing.
public struct MetalinkDocument: Sendable, Equatable {
    public struct Hash: Sendable, Equatable {
        /// As the document names it (`sha-256`, `sha-1`, `md5`…), lower case.
        public var type: String
        public var hex: String
    }

    public struct Pieces: Sendable, Equatable {
        public var type: String
        public var length: Int64
        public var hashes: [String]
    }

    public struct Source: Sendable, Equatable {
        public var url: String
        /// 1 is the highest; nil when not given (after every given one).
        public var priority: Int?
        /// An ISO 3166-1 country code, when given.
        public var location: String?
    }

    public struct File: Sendable, Equatable {
        public var name: String
        public var size: Int64?
        public var hashes: [Hash] = []
        public var pieces: Pieces?
        /// In the order of their priority (1 first), then as written.
        public var sources: [Source] = []
    }

    /// Why a document was refused (the service's `InvalidArgument` message).
    public struct Invalid: Error, Sendable, Equatable {
        public let message: String
        public init(_ message: String) { self.message = message }
    }

    public var files: [File]

    /// The largest document read.
    public static let maximumSize = 1 << 20

    public static func parse(_ bytes: [UInt8]) throws(Invalid) -> MetalinkDocument {
        guard bytes.count <= maximumSize else {
            throw Invalid("the Metalink document is \(bytes.count) bytes; at most \(maximumSize)")
        }
        let reader = MetalinkReader()
        let parser = XMLParser(data: Data(bytes))
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = reader
        guard parser.parse() else {
            let why = reader.failure ?? parser.parserError.map { "\($0.localizedDescription)" } ?? "not XML"
            throw Invalid("the Metalink document does not parse (line \(parser.lineNumber)): \(why)")
        }
        if let failure = reader.failure { throw Invalid(failure) }
        guard reader.sawRoot else {
            throw Invalid("not a Metalink v4 document (no <metalink> in urn:ietf:params:xml:ns:metalink)")
        }
        var files = reader.files
        for index in files.indices {
            files[index].sources = files[index].sources.enumerated().sorted { a, b in
                let x = a.element.priority ?? Int.max, y = b.element.priority ?? Int.max
                return x != y ? x < y : a.offset < b.offset
            }.map(\.element)
        }
        return MetalinkDocument(files: files)
    }
}
