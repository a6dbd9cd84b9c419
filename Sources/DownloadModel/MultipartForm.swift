/// An upload sent as `multipart/form-data` (RFC 7578): the file as the part `field` named
/// `filename`, after the text parts `fields`. The boundary is chosen once, when the task is made,
/// and kept with it, so every attempt (after a cut connection, a restart) sends the same bytes.
public struct MultipartForm: Sendable, Hashable, Codable {
    public var field: String
    public var filename: String
    /// Other parts, sent before the file, in the order of their names.
    public var fields: [String: String]
    public var boundary: String

    public init(
        field: String, filename: String, fields: [String: String] = [:], boundary: String = MultipartForm.makeBoundary()
    ) {
        self.field = field
        self.filename = filename
        self.fields = fields
        self.boundary = boundary
    }

    /// A boundary no file is likely to hold: 32 random hex digits after a fixed prefix.
    public static func makeBoundary() -> String {
        var generator = SystemRandomNumberGenerator()
        let hex = (0..<16).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(byte, radix: 16).count == 1 ? "0" + String(byte, radix: 16) : String(byte, radix: 16)
        }.joined()
        return "org.example.Downloads-\(hex)"
    }

    /// The request's `Content-Type`.
    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// Everything before the file's bytes: the text parts and the file part's head.
    public func prefix(contentType fileType: String?) -> [UInt8] {
        var text = ""
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) {
            text += "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(Self.quoted(name))\"\r\n\r\n\(value)\r\n"
        }
        text +=
            "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(Self.quoted(field))\"; filename=\"\(Self.quoted(filename))\"\r\n"
        text += "Content-Type: \(fileType ?? "application/octet-stream")\r\n\r\n"
        return Array(text.utf8)
    }

    /// Everything after the file's bytes.
    public var suffix: [UInt8] { Array("\r\n--\(boundary)--\r\n".utf8) }

    /// A name or file name inside a quoted-string of `Content-Disposition`: `"` as `%22`, CR and
    /// LF as `%0D` and `%0A` (as the HTML form encoding does), a backslash doubled. Names the
    /// caller gives with the option cannot hold CR, LF or NUL (`TaskOptions.checkedForm`); the
    /// default file name is the source's, which may: it never breaks the part's head.
    static func quoted(_ text: String) -> String {
        text.replacingAll("\\", with: "\\\\").replacingAll("\"", with: "%22").replacingAll("\r", with: "%0D")
            .replacingAll("\n", with: "%0A")
    }
}

extension String {
    /// Every `target` replaced by `replacement` (without Foundation), scalar by scalar: a CR
    /// before an LF is two scalars, though one `Character`.
    fileprivate func replacingAll(_ target: Unicode.Scalar, with replacement: String) -> String {
        var result = ""
        for scalar in unicodeScalars {
            if scalar == target { result += replacement } else { result.unicodeScalars.append(scalar) }
        }
        return result
    }
}
