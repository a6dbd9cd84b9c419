import ArgumentParser
import DBus
import Foundation
import Glibc

/// `--cert` and `--key`: the descriptor `client_certificate` takes, opened here as you. A key of
/// its own is put after the certificate in an unlinked file of yours, so the service gets one PEM
/// file and no path.
enum ClientCertificateArgument {
    static func descriptor(certificate: String, key: String?) throws -> UnixFD {
        guard let key else {
            let fd = open(certificate, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                throw ValidationError("cannot open the certificate \(certificate): \(String(cString: strerror(errno)))")
            }
            return UnixFD(owning: fd)
        }
        guard let certificateBytes = FileManager.default.contents(atPath: certificate) else {
            throw ValidationError("cannot read the certificate \(certificate)")
        }
        guard let keyBytes = FileManager.default.contents(atPath: key) else {
            throw ValidationError("cannot read the key \(key)")
        }
        // A file of yours (0600) that no name leads to: made and unlinked at once.
        let base = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] ?? NSTemporaryDirectory()
        var template = Array("\(base)/downloadsctl-cert.XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw ValidationError("cannot make a file for the certificate: \(String(cString: strerror(errno)))")
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        let file = UnixFD(owning: fd)
        var joined = certificateBytes
        joined.append(0x0A)
        joined.append(keyBytes)
        let written = joined.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == joined.count else { throw ValidationError("cannot write the certificate and key together") }
        return file
    }
}
