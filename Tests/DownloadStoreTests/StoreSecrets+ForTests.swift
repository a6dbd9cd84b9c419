import Crypto
import DownloadStore

extension StoreSecrets {
    /// One key for every store a test opens, so a store opened again reads what it sealed.
    static let forTests = StoreSecrets(rootKey: SymmetricKey(data: [UInt8](repeating: 7, count: 32)))
}
