"""A FUSE file system whose one file, stuck.pem, answers stat and open but never a read: what a
hung network mount or a hostile FUSE mount does to whoever reads it. Mounted with allow_other by
root, so the tests' other users and the daemon reach it. Usage: blocker.py MOUNTPOINT [READS]
(foreground, until unmounted or killed); a line is added to the file READS for each read begun."""
import errno
import stat
import sys
import threading

from fusepy import FUSE, FuseOSError, Operations


class Blocker(Operations):
    def getattr(self, path, fh=None):
        if path == '/':
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path == '/stuck.pem':
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=2000)
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return ['.', '..', 'stuck.pem']

    def open(self, path, flags):
        return 0

    def read(self, path, size, offset, fh):
        if len(sys.argv) > 2:
            with open(sys.argv[2], 'a') as reads:
                reads.write('read\n')
        threading.Event().wait()


FUSE(Blocker(), sys.argv[1], foreground=True, allow_other=True, nothreads=False, direct_io=True)
