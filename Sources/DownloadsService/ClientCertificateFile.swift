import DBus
import DownloadEngine
import DownloadModel
import DownloadsAPI
import Glibc

/// `client_certificate`: the caller's descriptor, read at once (as the caller opened it, so
/// nothing it could not read), a regular file of at most `ClientCertificate.maximumSize` bytes,
/// and checked as a task will use it.
enum ClientCertificateFile {
    static func read(_ fd: UnixFD, passphrase: String?) throws -> ClientCertificate {
        var info = stat()
        guard fstat(fd.fd, &info) == 0 else {
            throw DownloadsErrorName.invalidArgument.error("client_certificate: the descriptor cannot be read")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw DownloadsErrorName.invalidArgument.error(
                "client_certificate must be a descriptor of a regular file (a PEM file), not a directory, pipe or socket"
            )
        }
        guard info.st_size <= ClientCertificate.maximumSize else {
            throw DownloadsErrorName.invalidArgument.error(
                "client_certificate is \(info.st_size) bytes; at most \(ClientCertificate.maximumSize)")
        }
        var bytes = [UInt8](repeating: 0, count: ClientCertificate.maximumSize + 1)
        var filled = 0
        while filled < bytes.count {
            let n = bytes.withUnsafeMutableBytes {
                pread(fd.fd, $0.baseAddress! + filled, $0.count - filled, off_t(filled))
            }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else {
                throw DownloadsErrorName.invalidArgument.error("client_certificate cannot be read: errno \(errno)")
            }
            if n == 0 { break }
            filled += n
        }
        guard filled <= ClientCertificate.maximumSize else {
            throw DownloadsErrorName.invalidArgument.error(
                "client_certificate is over \(ClientCertificate.maximumSize) bytes")
        }
        let certificate = ClientCertificate(bytes: Array(bytes.prefix(filled)), passphrase: passphrase)
        do {
            try ClientIdentity.check(certificate)
        } catch {
            throw DownloadsErrorName.invalidArgument.error(error.message)
        }
        return certificate
    }
}
