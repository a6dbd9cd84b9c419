import ArgumentParser

/// A number of bytes (per second) as curl's `--limit-rate` and aria2c's `--max-download-limit`
/// take it: `500000`, `500K`, `1.5M`, `2G`; `k`, `KB` and `KiB` alike (K = 1024, as curl's and
/// aria2c's units, and as `downloadsctl` prints sizes).
struct ByteRate: ExpressibleByArgument {
    let bytes: UInt64

    private static let powers: [String: Int] = ["k": 1, "m": 2, "g": 3]

    init?(argument: String) {
        var text = Substring(argument)
        let binary = text.hasSuffix("iB")
        if binary { text = text.dropLast(2) } else if text.hasSuffix("B") { text = text.dropLast() }
        var unit: Double = 1
        if let last = text.last, let power = Self.powers[last.lowercased()] {
            unit = Double(1 << (10 * power))
            text = text.dropLast()
        } else if binary {
            return nil
        }
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            text.filter({ $0 == "." }).count <= 1, let value = Double(text)
        else { return nil }
        let bytes = (value * unit).rounded()
        guard bytes < Double(UInt64.max) else { return nil }
        self.bytes = UInt64(bytes)
    }
}
