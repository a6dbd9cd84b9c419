import Dispatch
import DownloadModel
import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#endif

/// Resolves a host name to its addresses with getaddrinfo, off the caller's thread (it blocks).
enum AddressResolver {
    /// Cancellation (a Pause or Cancel of the task) answers at once with `CancellationError`;
    /// getaddrinfo cannot be interrupted, so its thread finishes on its own and is ignored.
    static func resolve(_ host: String, port: Int) async throws -> [String] {
        let pending = NIOLockedValueBox<CheckedContinuation<[String], Error>?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                pending.withLockedValue { $0 = continuation }
                if Task.isCancelled {
                    pending.withLockedValue { $0.take() }?.resume(throwing: CancellationError())
                    return
                }
                BlockingWork.start {
                    let result = Result { try resolveBlocking(host, port: port) }
                    pending.withLockedValue { $0.take() }?.resume(with: result)
                }
            }
        } onCancel: {
            pending.withLockedValue { $0.take() }?.resume(throwing: CancellationError())
        }
    }

    static func resolveBlocking(_ host: String, port: Int) throws -> [String] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0 else {
            throw DownloadError.network("could not resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var addresses: [String] = []
        var entry = list
        while let current = entry {
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(
                current.pointee.ai_addr, current.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0,
                NI_NUMERICHOST) == 0
            {
                let address = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !addresses.contains(address) { addresses.append(address) }
            }
            entry = current.pointee.ai_next
        }
        return addresses
    }
}
