import Metalink
import XCTest

/// Metalink v4 documents as distributions publish them, and what is refused.
final class MetalinkDocumentTests: XCTestCase {
    static let document = """
        <?xml version="1.0" encoding="UTF-8"?>
        <metalink xmlns="urn:ietf:params:xml:ns:metalink">
          <published>2026-11-23T00:00:00Z</published>
          <file name="debian-13.iso">
            <size>1048576</size>
            <hash type="sha-256">E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855</hash>
            <hash type="md5">d41d8cd98f00b204e9800998ecf8427e</hash>
            <pieces type="sha-1" length="262144">
              <hash>da39a3ee5e6b4b0d3255bfef95601890afd80709</hash>
              <hash>da39a3ee5e6b4b0d3255bfef95601890afd80709</hash>
            </pieces>
            <url location="de" priority="2">http://ftp.de.example/debian-13.iso</url>
            <url location="fr" priority="1">https://ftp.fr.example/debian-13.iso</url>
            <url>http://last.example/debian-13.iso</url>
            <metaurl mediatype="torrent">http://example/debian-13.torrent</metaurl>
          </file>
        </metalink>
        """

    func testADistributionsDocumentIsRead() throws {
        let parsed = try MetalinkDocument.parse(Array(Self.document.utf8))
        XCTAssertEqual(parsed.files.count, 1)
        let file = try XCTUnwrap(parsed.files.first)
        XCTAssertEqual(file.name, "debian-13.iso")
        XCTAssertEqual(file.size, 1_048_576)
        XCTAssertEqual(file.hashes.map(\.type), ["sha-256", "md5"])
        XCTAssertEqual(file.hashes.first?.hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(file.pieces?.length, 262_144)
        XCTAssertEqual(file.pieces?.hashes.count, 2)
        XCTAssertEqual(
            file.sources.map(\.url),
            [
                "https://ftp.fr.example/debian-13.iso", "http://ftp.de.example/debian-13.iso",
                "http://last.example/debian-13.iso",
            ], "by priority, 1 first, unprioritised last; metaurls are not URLs of the file")
        XCTAssertEqual(file.sources.first?.location, "fr")
    }

    func testWhatIsNotAMetalinkDocumentIsRefusedWithAReason() {
        func refused(_ text: String, _ words: String, line: UInt = #line) {
            XCTAssertThrowsError(try MetalinkDocument.parse(Array(text.utf8)), line: line) { error in
                let message = (error as? MetalinkDocument.Invalid)?.message ?? ""
                XCTAssertTrue(message.contains(words), "'\(message)' should say '\(words)'", line: line)
            }
        }
        refused("not xml at all", "does not parse")
        refused("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink3\"/>", "not a Metalink v4 document")
        refused(
            "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><size>-1</size></file></metalink>",
            "<size>")
        refused(
            "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><pieces type=\"sha-1\"></pieces></file></metalink>",
            "<pieces>")
        refused(String(repeating: " ", count: MetalinkDocument.maximumSize + 1), "at most")
        // An external entity is never read.
        let entity = """
            <?xml version="1.0"?><!DOCTYPE m [<!ENTITY x SYSTEM "file:///etc/hostname">]>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="a"><url>http://h/&x;</url></file></metalink>
            """
        let parsed = try? MetalinkDocument.parse(Array(entity.utf8))
        let hostname =
            (try? String(contentsOfFile: "/etc/hostname", encoding: .utf8))?.trimmingCharacters(
                in: .whitespacesAndNewlines) ?? "\u{0}"
        XCTAssertFalse(
            parsed?.files.first?.sources.first?.url.contains(hostname) ?? false, "no file read through an entity")
    }
}
