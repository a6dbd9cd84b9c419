import Foundation

/// A WebDAV server no one here wrote, on 127.0.0.1: lighttpd with `mod_webdav` (Debian's
/// `lighttpd` and `lighttpd-mod-webdav`) or Apache httpd with `mod_dav_fs` (`apache2-bin`), each
/// from a configuration of its own in `work`, serving `root` for reading and writing. lighttpd
/// answers `OPTIONS` with a complete head and a chunked body it never ends: a client that waits
/// for that body waits for ever.
public final class WebDAVServer: @unchecked Sendable {
    public enum Kind: String, Sendable { case lighttpd, apache }

    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    public let kind: Kind
    public let port: Int
    /// What the server serves: an uploaded `/dav/NAME` is `root/NAME`.
    public let root: String
    private let directory: String
    private var process: ChildProcess?
    /// The tree is outside `work` and removed by `stop`.
    private let ownTree: Bool

    public init(_ kind: Kind, in work: String) throws {
        self.kind = kind
        port = try FreePort.pick()
        // Apache serves as `nobody`, who must reach the tree: it gets one of its own in /tmp.
        directory = kind == .apache ? "/tmp/apache-dav-\(port)-\(getpid())" : work + "/\(kind.rawValue)-\(port)"
        ownTree = kind == .apache
        root = directory + "/root/dav"
        let manager = FileManager.default
        for folder in [root, directory + "/tmp", directory + "/lock"] {
            try manager.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        let config = directory + "/server.conf"
        let arguments: [String]
        switch kind {
        case .lighttpd:
            let binary = "/usr/sbin/lighttpd"
            guard manager.fileExists(atPath: binary), manager.fileExists(atPath: "/usr/lib/lighttpd/mod_webdav.so")
            else {
                throw Unavailable(description: "lighttpd with mod_webdav is not installed: run make deps")
            }
            try """
            server.modules = ("mod_webdav")
            server.document-root = "\(directory)/root"
            server.bind = "127.0.0.1"
            server.port = \(port)
            server.errorlog = "\(directory)/error.log"
            server.upload-dirs = ("\(directory)/tmp")
            webdav.activate = "enable"
            webdav.is-readonly = "disable"
            """.write(toFile: config, atomically: true, encoding: .utf8)
            arguments = [binary, "-D", "-f", config]
        case .apache:
            let binary = "/usr/sbin/apache2", modules = "/usr/lib/apache2/modules"
            guard manager.fileExists(atPath: binary), manager.fileExists(atPath: modules + "/mod_dav_fs.so") else {
                throw Unavailable(description: "apache2-bin is not installed: run make deps")
            }
            // Apache drops root for `User`: the served tree is that user's to write.
            try """
            ServerRoot "\(directory)"
            ServerName 127.0.0.1
            Listen 127.0.0.1:\(port)
            LoadModule mpm_event_module \(modules)/mod_mpm_event.so
            LoadModule authz_core_module \(modules)/mod_authz_core.so
            LoadModule dav_module \(modules)/mod_dav.so
            LoadModule dav_fs_module \(modules)/mod_dav_fs.so
            PidFile "\(directory)/httpd.pid"
            ErrorLog "\(directory)/error.log"
            User nobody
            Group nogroup
            DocumentRoot "\(directory)/root"
            DavLockDB "\(directory)/lock/DavLock"
            <Directory "\(directory)/root">
              Dav On
              Require all granted
            </Directory>
            """.write(toFile: config, atomically: true, encoding: .utf8)
            chmod(directory, 0o755)
            chmod(directory + "/root", 0o755)
            for folder in [root, directory + "/lock"] { chown(folder, 65534, 65534) }
            arguments = [binary, "-DFOREGROUND", "-f", config]
        }
        process = try ChildProcess(arguments)
        let deadline = Date().addingTimeInterval(20)
        while !FreePort.accepts(port: port) {
            guard Date() < deadline, process?.hasExited == false else {
                let log = (try? String(contentsOfFile: directory + "/error.log", encoding: .utf8)) ?? ""
                stop()
                throw Unavailable(description: "\(kind.rawValue) did not start: \(log)")
            }
            usleep(20_000)
        }
    }

    /// `http://127.0.0.1:PORT/dav/NAME`.
    public func url(_ name: String) -> String { "http://127.0.0.1:\(port)/dav/\(name)" }

    public func stop() {
        process?.stop()
        process = nil
        if ownTree { try? FileManager.default.removeItem(atPath: directory) }
    }

    deinit { stop() }
}
