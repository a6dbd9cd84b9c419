import Foundation

/// The directory holding Package.swift: where tests find the built programs (`.build/debug/…`)
/// and the shipped files (`dbus/`, `data/`, `Tests/fuzz/`).
public enum PackageRoot {
    public static let url: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/"
            && !FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path)
        {
            url.deleteLastPathComponent()
        }
        return url
    }()

    /// A program of this package in the debug build.
    public static func debugBinary(_ name: String) -> String {
        url.appendingPathComponent(".build/debug/\(name)").path
    }
}
