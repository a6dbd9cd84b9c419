#if canImport(Glibc)
import Glibc
#endif

/// Unbuffered writes to a descriptor, so a pipe sees each line when it happens (no Foundation:
/// the command-line programs stay small).
public enum Output {
    public static func write(_ text: String, to descriptor: Int32) {
        write(Array(text.utf8), to: descriptor)
    }

    public static func write(_ bytes: [UInt8], to descriptor: Int32) {
        var bytes = bytes
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return Glibc.write(descriptor, base + done, buffer.count - done)
            }
            if n <= 0 { return }
            done += n
        }
    }
}
