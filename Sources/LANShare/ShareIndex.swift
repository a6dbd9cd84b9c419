import NIOConcurrencyHelpers

/// The files offered by SHA-256, one per hash: what the share server answers from and what
/// `ListShared` and `Unshare` read. A file leaves it when it expires, when it was served
/// `shareLimit` times, when its owner withdraws it, or when the server finds it changed; each
/// departure is told to `onWithdraw` (the publisher takes its advert down there).
///
/// The lock is a leaf: nothing is called under it.
public final class ShareIndex: Sendable {
    /// Why a file stopped being offered.
    public enum Withdrawal: String, Sendable {
        case expired, limitReached = "limit reached", unshared, changed, replaced
    }

    private let files = NIOLockedValueBox([String: SharedFile]())
    private let withdrawn: @Sendable (SharedFile, Withdrawal) -> Void

    public init(onWithdraw: @escaping @Sendable (SharedFile, Withdrawal) -> Void = { _, _ in }) {
        withdrawn = onWithdraw
    }

    /// Offers `file`; one already offered under the same hash is replaced (the newer copy is the
    /// one that exists).
    public func add(_ file: SharedFile) {
        let old = files.withLockedValue { $0.updateValue(file, forKey: file.sha256) }
        if let old, old != file { withdrawn(old, .replaced) }
    }

    /// The file offered under `sha256` at `now`, if any; an expired or used-up one is withdrawn.
    public func offered(_ sha256: String, at now: Int64) -> SharedFile? {
        let (file, gone) = files.withLockedValue { files -> (SharedFile?, (SharedFile, Withdrawal)?) in
            guard let file = files[sha256] else { return (nil, nil) }
            guard file.isOffered(at: now) else {
                files[sha256] = nil
                return (nil, (file, now >= file.expires ? .expired : .limitReached))
            }
            return (file, nil)
        }
        if let gone { withdrawn(gone.0, gone.1) }
        return file
    }

    /// Counts `bytes` served of `sha256`; the file is withdrawn once they make `shareLimit`
    /// downloads (the answer that reached it is finished).
    public func served(_ sha256: String, bytes: Int64) {
        let done = files.withLockedValue { files -> SharedFile? in
            guard var file = files[sha256] else { return nil }
            file.bytesServed += bytes
            files[sha256] = file
            guard file.shares >= file.shareLimit else { return nil }
            files[sha256] = nil
            return file
        }
        if let done { withdrawn(done, .limitReached) }
    }

    /// Withdraws `sha256` if `owner` offers it (root: anyone's). Returns whether it did.
    @discardableResult
    public func remove(_ sha256: String, owner: UInt32, reason: Withdrawal = .unshared) -> Bool {
        let gone = files.withLockedValue { files -> SharedFile? in
            guard let file = files[sha256], owner == 0 || file.owner == owner else { return nil }
            files[sha256] = nil
            return file
        }
        if let gone { withdrawn(gone, reason) }
        return gone != nil
    }

    /// Withdraws what expired by `now`.
    public func expire(at now: Int64) {
        let gone = files.withLockedValue { files -> [SharedFile] in
            let expired = files.values.filter { now >= $0.expires }
            for file in expired { files[file.sha256] = nil }
            return expired
        }
        for file in gone { withdrawn(file, .expired) }
    }

    /// What `owner` offers (every file for nil), by hash.
    public func list(owner: UInt32?) -> [SharedFile] {
        files.withLockedValue { files in
            files.values.filter { owner == nil || $0.owner == owner }.sorted { $0.sha256 < $1.sha256 }
        }
    }

    public var isEmpty: Bool { files.withLockedValue { $0.isEmpty } }
}
