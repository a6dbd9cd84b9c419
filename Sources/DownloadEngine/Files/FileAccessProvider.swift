import DownloadModel
import UserFiles

/// Hands out the file access for one task owner (uid).
public protocol FileAccessProvider: Sendable {
    func files(for owner: UInt32) -> any FileAccess
    /// The owner's file access below a descriptor the caller handed over (`StartAt`): nothing
    /// outside it is touched.
    func files(for owner: UInt32, below anchor: DescriptorAnchor) -> any FileAccess
}
