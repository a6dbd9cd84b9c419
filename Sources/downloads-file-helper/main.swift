import UserFiles
#if canImport(Glibc)
import Glibc
#endif

// downloads-file-helper --uid UID: started by downloadsd (as root) with its socket on
// descriptor 3; does file operations for one user with that user's credentials.
let arguments = CommandLine.arguments
guard arguments.count == 3, arguments[1] == "--uid", let uid = UInt32(arguments[2]) else {
    FileHelperServer.printError(
        "usage: downloads-file-helper --uid UID (started by downloadsd, socket on descriptor 3)")
    exit(2)
}
var info = stat()
guard fstat(3, &info) == 0, (info.st_mode & S_IFMT) == S_IFSOCK else {
    FileHelperServer.printError("downloads-file-helper: descriptor 3 is not a socket; it is started by downloadsd")
    exit(2)
}
exit(FileHelperServer.run(uid: uid, socket: 3))
