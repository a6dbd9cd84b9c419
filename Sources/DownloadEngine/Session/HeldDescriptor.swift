import UserFiles

/// A descriptor a caller handed over with a task, while this daemon holds it (not kept across a
/// restart): a download's directory (`StartAt`: every file of the task is made below it) or an
/// upload's file (`UploadAt`).
enum HeldDescriptor: Sendable {
    case directory(DescriptorAnchor)
    case file(SourceFile)
}
