import Foundation
import TestSupport
import XCTest

/// apt itself in a test: a root of its own, packages built with dpkg-deb (`AptMethodTests`,
/// `LANShareRigTests`).
extension DaemonTestCase {
    static let aptMethod = PackageRoot.debugBinary("downloads-apt-method")

    /// An apt root named `name` in the test's directory whose sources list is `sources`, and a
    /// methods directory of apt's methods and `downloads`, `downloads+http`, `downloads+https`.
    func makeAptRoot(sources: String, name: String = "apt-root") throws -> AptRoot {
        let root = directory.file(name)
        for sub in [
            "etc/apt/sources.list.d", "etc/apt/preferences.d", "etc/apt/apt.conf.d", "var/lib/apt/lists/partial",
            "var/cache/apt/archives/partial", "var/lib/dpkg",
        ] {
            try FileManager.default.createDirectory(atPath: root + "/" + sub, withIntermediateDirectories: true)
        }
        FileManager.default.createFile(atPath: root + "/var/lib/dpkg/status", contents: Data())
        try sources.write(toFile: root + "/etc/apt/sources.list", atomically: true, encoding: .utf8)
        let methods = directory.file(name + "-methods")
        try FileManager.default.createDirectory(atPath: methods, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: "/usr/lib/apt/methods") {
            try FileManager.default.createSymbolicLink(
                atPath: methods + "/" + name, withDestinationPath: "/usr/lib/apt/methods/" + name)
        }
        for name in ["downloads", "downloads+http", "downloads+https"] {
            try FileManager.default.createSymbolicLink(
                atPath: methods + "/" + name, withDestinationPath: Self.aptMethod)
        }
        return AptRoot(root: root, methods: methods)
    }

    /// A package `name` holding `payload`, built with dpkg-deb; its .deb's bytes.
    func makePackage(_ name: String, payload: [UInt8], into folder: String? = nil) async throws -> [UInt8] {
        let tree = directory.file("pkg-\(name)")
        try FileManager.default.createDirectory(atPath: tree + "/DEBIAN", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: tree + "/usr/share/\(name)", withIntermediateDirectories: true)
        try """
        Package: \(name)
        Version: 1.0
        Architecture: all
        Maintainer: Tests <tests@example.org>
        Description: a package of the apt method's tests

        """.write(toFile: tree + "/DEBIAN/control", atomically: true, encoding: .utf8)
        FileManager.default.createFile(atPath: tree + "/usr/share/\(name)/payload", contents: Data(payload))
        let deb = (folder ?? directory.path) + "/\(name)_1.0_all.deb"
        let built = try await run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", tree, deb])
        XCTAssertEqual(built.status, 0, built.stderr)
        return Array(try Data(contentsOf: URL(fileURLWithPath: deb)))
    }
}
