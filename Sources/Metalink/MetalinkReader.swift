#if canImport(FoundationXML)
import FoundationXML
#endif
import Foundation

/// `XMLParser`'s delegate for `MetalinkDocument.parse`: elements of the Metalink v4 namespace
/// only, text gathered per element, limits on counts so a hostile document stays small.
final class MetalinkReader: NSObject, XMLParserDelegate {
    static let namespace = "urn:ietf:params:xml:ns:metalink"
    static let maximumFiles = 1000
    static let maximumSources = 1000
    static let maximumPieces = 1 << 20

    private(set) var files: [MetalinkDocument.File] = []
    private(set) var sawRoot = false
    private(set) var failure: String?

    private var file: MetalinkDocument.File?
    private var text = ""
    private var hashType: String?
    private var pieces: MetalinkDocument.Pieces?
    private var source: MetalinkDocument.Source?

    func parser(
        _ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        guard namespaceURI == Self.namespace else { return }
        text = ""
        switch element {
        case "metalink":
            sawRoot = true
        case "file":
            guard files.count < Self.maximumFiles else { return stop(parser, "more than \(Self.maximumFiles) files") }
            file = MetalinkDocument.File(name: attributes["name"] ?? "")
        case "hash":
            hashType = attributes["type"]?.lowercased()
        case "pieces":
            guard let type = attributes["type"]?.lowercased(), let length = attributes["length"].flatMap({ Int64($0) }),
                length > 0
            else {
                return stop(parser, "<pieces> needs a type and a positive length")
            }
            pieces = MetalinkDocument.Pieces(type: type, length: length, hashes: [])
        case "url":
            source = MetalinkDocument.Source(
                url: "", priority: attributes["priority"].flatMap { Int($0) },
                location: attributes["location"]?.lowercased()
            )
        default:
            break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard text.utf8.count < 16 * 1024 else { return stop(parser, "an element's text is longer than 16 KiB") }
        text += string
    }

    func parser(_ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?) {
        guard namespaceURI == Self.namespace else { return }
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        switch element {
        case "file":
            if let file { files.append(file) }
            file = nil
        case "size":
            guard let size = Int64(value), size >= 0 else { return stop(parser, "<size> is not a number of bytes") }
            file?.size = size
        case "hash":
            if pieces != nil {
                guard pieces?.hashes.count ?? 0 < Self.maximumPieces else {
                    return stop(parser, "too many piece hashes")
                }
                pieces?.hashes.append(value.lowercased())
            } else if let hashType {
                file?.hashes.append(MetalinkDocument.Hash(type: hashType, hex: value.lowercased()))
            }
            hashType = nil
        case "pieces":
            file?.pieces = pieces
            pieces = nil
        case "url":
            guard var source else { return }
            source.url = value
            guard file?.sources.count ?? 0 < Self.maximumSources else {
                return stop(parser, "more than \(Self.maximumSources) URLs")
            }
            if !value.isEmpty { file?.sources.append(source) }
            self.source = nil
        default:
            break
        }
        text = ""
    }

    private func stop(_ parser: XMLParser, _ why: String) {
        if failure == nil { failure = why }
        parser.abortParsing()
    }
}
