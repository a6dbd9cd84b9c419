/// What a URL given to the service (at `Start`, in a Metalink document, a proxy URL) may not hold:
/// a space or a control character anywhere. One rule for every place a URL comes in; here, the
/// module without dependencies, so that `ProxySetting` and the engine share it.
public enum URLCharacters {
    /// C0 and the space, DEL, C1 (U+009B is a terminal's CSI), and Unicode's other spaces. By
    /// scalar, not by Character (no grapheme breaking), and a Unicode property is looked up only
    /// beyond ASCII and C1.
    public static func containSpaceOrControl(_ text: String) -> Bool {
        text.unicodeScalars.contains { scalar in
            scalar.value <= 32 || (127...159).contains(scalar.value)
                || (scalar.value > 159 && scalar.properties.isWhitespace)
        }
    }
}
