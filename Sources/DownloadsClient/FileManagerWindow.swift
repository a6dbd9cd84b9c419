import DBus

/// "Show in folder", as every browser's download list does it: the desktop's file manager
/// (Nautilus, Dolphin, Nemo, Caja, PCManFM: `org.freedesktop.FileManager1` on the session bus,
/// started by D-Bus activation when it is not running) opens the file's folder with the file
/// selected.
public enum FileManagerWindow {
    public static let busName = "org.freedesktop.FileManager1"
    public static let path: ObjectPath = "/org/freedesktop/FileManager1"

    /// `ShowItems` of `file` (an absolute path); throws when no file manager answers (the
    /// caller then opens the folder some other way).
    public static func show(_ file: String, on session: Connection, startupID: String = "") async throws {
        _ = try await session.call(
            destination: busName, path: path, interface: busName, method: "ShowItems",
            arguments: [.strings([FileURI.of(file)]), .string(startupID)], timeout: .seconds(10))
    }

    /// `ShowFolders` of `directory`: a folder opened, nothing selected (a file not there yet).
    public static func showFolder(_ directory: String, on session: Connection, startupID: String = "") async throws {
        _ = try await session.call(
            destination: busName, path: path, interface: busName, method: "ShowFolders",
            arguments: [.strings([FileURI.of(directory)]), .string(startupID)], timeout: .seconds(10))
    }
}
