// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "org.example.Downloads",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "downloadsd", targets: ["downloadsd"]),
        .executable(name: "downloads-file-helper", targets: ["downloads-file-helper"]),
        .executable(name: "downloadsctl", targets: ["downloadsctl"]),
        .executable(name: "downloads-monitor", targets: ["downloads-monitor"]),
        .executable(name: "downloads-agent", targets: ["downloads-agent"]),
        .executable(name: "downloads-apt-method", targets: ["downloads-apt-method"]),
        .executable(name: "dbus-bench", targets: ["dbus-bench"]),
        .executable(name: "engine-bench", targets: ["engine-bench"]),
        .library(name: "DBus", targets: ["DBus"]),
        .library(name: "DownloadModel", targets: ["DownloadModel"]),
        .library(name: "DownloadEngine", targets: ["DownloadEngine"]),
        .library(name: "DownloadsAPI", targets: ["DownloadsAPI"]),
        .library(name: "DownloadsClient", targets: ["DownloadsClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client.git", exact: "1.37.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", exact: "3.12.3"),
        .package(url: "https://github.com/apple/swift-nio.git", exact: "2.101.3"),
        // Already under AsyncHTTPClient; named so TLS errors are classified by type.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", exact: "2.37.6"),
        // Already under AsyncHTTPClient; named so an h2 stream's codec can be found in its pipeline.
        .package(url: "https://github.com/apple/swift-nio-http2.git", exact: "1.46.0"),
        // The test server only: NIOResumableUpload, the IETF resumable-upload draft's reference server.
        .package(url: "https://github.com/apple/swift-nio-extras.git", exact: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", exact: "1.8.0"),
        // Already under swift-nio-extras; named for the share server's self-signed certificate.
        .package(url: "https://github.com/apple/swift-certificates.git", exact: "1.21.1"),
    ],
    targets: [
        // libdbus-1 through a module map; static inline helpers only where Swift cannot import libdbus.
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        // The Swift D-Bus layer: connection, main loop, marshalling, exported objects.
        .target(
            name: "DBus",
            dependencies: [
                "CDBus",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // openat2, renameat2, SCM_RIGHTS and privilege dropping: what Swift cannot call directly.
        .target(name: "CUserFiles"),
        // downloadsd's malloc settings, made by a constructor before any thread starts.
        .target(name: "CMallocTuning"),
        // Named places where a debug build kills itself on request (DOWNLOADSD_CRASH_AT): the crash tests.
        .target(name: "CrashPoints"),
        // Which app a calling process belongs to (Flatpak, Snap, or the host), from the kernel.
        .target(name: "CallerApps", dependencies: ["CUserFiles"]),
        // File operations done with a user's credentials, in process or in that user's helper.
        .target(name: "UserFiles", dependencies: ["CUserFiles", "CrashPoints", "FileIdentities", "TerminalOutput"]),
        // The per-user file helper downloadsd starts (small: no NIO, no Foundation).
        .executableTarget(name: "downloads-file-helper", dependencies: ["UserFiles"]),
        // The value types every layer shares: task records, options, states, errors, resume data,
        // checksums and piece hashes, the observer protocol. No HTTP, no SQLite, no D-Bus.
        .target(
            name: "DownloadModel",
            dependencies: [
                "FileIdentities", "ShownText", "ProxyRules", .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Downloads over HTTP(S): SessionManager, EventDelivery, transfers, resume data. No D-Bus.
        .target(
            name: "DownloadEngine",
            dependencies: [
                "DownloadModel", "CrashPoints", "UserFiles", "FileIdentities", "ShownText", "TerminalOutput",
                "ProxyRules", "Metalink",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ]
        ),
        // SQLite state (GRDB): sessions, tasks, checkpoints, completion handlers.
        .target(
            name: "DownloadStore",
            dependencies: [
                "CrashPoints", "DownloadModel", "UserFiles", "FileIdentities", "ProxyRules",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // The public contract as code: names, paths, interfaces, errors, options, signals.
        .target(name: "DownloadsAPI", dependencies: ["DBus"]),
        // A URLSession-shaped client of the service (DownloadSession, delegate, resume data).
        .target(
            name: "DownloadsClient",
            dependencies: [
                "DBus", "DownloadsAPI", "ProxyRules", .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // Proxy URLs, no_proxy and the proxy environment variables with curl's rules, and CIDR
        // ranges: shared by the daemon (its own environment) and the client (the caller's).
        .target(name: "ProxyRules"),
        // Metalink v4 documents (RFC 5854), read with Foundation's XMLParser (libxml2).
        .target(name: "Metalink"),
        // Unbuffered output for the command-line programs.
        .target(name: "TerminalOutput"),
        // Text a server or a caller chose, made safe for where a person sees it (terminal, log, markup).
        .target(name: "ShownText"),
        // Which file a descriptor or path is (device and inode): the model's and the file operations'.
        .target(name: "FileIdentities"),
        // Sharing finished files with the local network on Passim's wire: the index of shared
        // files by SHA-256, the HTTPS server that answers `GET /name?sha256=`, its key.
        .target(
            name: "LANShare",
            dependencies: [
                "FileIdentities", "DBus",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        // The command line: get, start, list, status, pause, resume, cancel, wait, watch.
        .executableTarget(
            name: "downloadsctl",
            dependencies: [
                "DownloadsClient", "DownloadsAPI", "DBus", "TerminalOutput", "ShownText",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The desktop bridge: a user's tasks as KDE job views, dock progress and notifications.
        .executableTarget(
            name: "downloads-agent",
            dependencies: [
                "DownloadsClient", "DownloadsAPI", "DBus", "TerminalOutput", "ShownText", "RecentFiles",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // GIO (GDBus) through a module map, for the GLib example client.
        .systemLibrary(name: "CGio", pkgConfig: "gio-2.0", providers: [.apt(["libglib2.0-dev"])]),
        // The user's recently used files (`recently-used.xbel`), through GLib's GBookmarkFile as
        // GTK's own recent manager writes it: the per-user daemon and the agent add finished files.
        .target(name: "RecentFiles", dependencies: ["CGio"]),
        // One line per task event, on GDBus: an independent D-Bus implementation against ours.
        .executableTarget(name: "downloads-monitor", dependencies: ["CGio", "TerminalOutput", "ShownText"]),
        // apt's transport through the service (/usr/lib/apt/methods/downloads): apt's method
        // protocol (AptMethod, pure) and the items as tasks of the system service.
        .target(name: "AptMethod"),
        .executableTarget(
            name: "downloads-apt-method",
            dependencies: [
                "AptMethod", "DownloadsClient", "DownloadsAPI", "DownloadModel", "DBus", "CUserFiles",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // org.example.Downloads objects <-> engine: the only place D-Bus and downloads meet.
        .target(
            name: "DownloadsService",
            dependencies: [
                "CrashPoints", "DBus", "DownloadsAPI", "DownloadModel", "DownloadEngine", "DownloadStore",
                "TerminalOutput", "ProxyRules", "Metalink",
                "CallerApps", "UserFiles", "ShownText", "LANShare",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "downloadsd",
            dependencies: [
                "DownloadsService", "DownloadsAPI", "DownloadEngine", "DownloadModel", "DownloadStore", "DBus",
                "ProxyRules",
                "RecentFiles", "ShownText", "CMallocTuning", "LANShare", "FileIdentities",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // An HTTP/1.1 server on 127.0.0.1 that misbehaves on request (tests and benchmarks).
        .target(
            name: "TestHTTPServer",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOResumableUpload", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .executableTarget(
            name: "engine-bench",
            dependencies: [
                "DownloadModel", "DownloadEngine", "DownloadStore", .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Benchmarks/engine-bench"
        ),
        // The resumable-upload servers of the upload benchmark (NIOResumableUpload, a cutting relay).
        .executableTarget(name: "upload-servers", dependencies: ["TestHTTPServer"], path: "Benchmarks/upload-servers"),
        // Test fixtures shared by the test targets: a private dbus-daemon, a subprocess runner.
        .target(name: "TestSupport", dependencies: [.product(name: "Crypto", package: "swift-crypto")]),
        .executableTarget(
            name: "dbus-bench",
            dependencies: ["DBus", "TestSupport"],
            path: "Benchmarks/dbus-bench"
        ),
        .testTarget(
            name: "UserFilesTests", dependencies: ["CrashPoints", "UserFiles", "FileIdentities", "TestSupport"]),
        .testTarget(name: "TerminalOutputTests", dependencies: ["TerminalOutput", "ShownText"]),
        .testTarget(name: "CallerAppsTests", dependencies: ["CallerApps", "TestSupport"]),
        .testTarget(name: "MetalinkTests", dependencies: ["Metalink"]),
        .testTarget(name: "AptMethodTests", dependencies: ["AptMethod"]),
        .testTarget(
            name: "LANShareTests",
            dependencies: [
                "LANShare", "FileIdentities", "TestSupport", "DBus", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]),
        .testTarget(name: "DBusTests", dependencies: ["DBus", "TestSupport"]),
        .testTarget(
            name: "DownloadEngineTests",
            dependencies: [
                "DownloadModel", "DownloadEngine", "FileIdentities", "Metalink", "ProxyRules", "TestHTTPServer",
                "TestSupport",
                "UserFiles", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            ]),
        .testTarget(
            name: "DownloadStoreTests",
            dependencies: [
                "DownloadStore", "DownloadModel", "DownloadEngine", "TestSupport", "ProxyRules",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        .testTarget(
            name: "DownloadsServiceTests",
            dependencies: [
                "CrashPoints", "DownloadsService", "DownloadsAPI", "DownloadsClient", "DownloadStore", "DownloadModel",
                "DownloadEngine", "TestHTTPServer",
                "TestSupport", "DBus", "AptMethod",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
    ]
)
