#ifndef CUSERFILES_H
#define CUSERFILES_H

#include <stddef.h>
#include <sys/types.h>

/// O_PATH (glibc defines it only under _GNU_SOURCE).
extern const int uf_O_PATH;

/// openat2(2) of one name below `dirfd` with RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH; falls back
/// to openat(O_NOFOLLOW) where the kernel has no openat2 (ENOSYS). Returns -1 with errno set.
int uf_open_beneath(int dirfd, const char *name, int flags, mode_t mode);

/// renameat2(2); `noreplace` adds RENAME_NOREPLACE. Returns -1 with errno set.
int uf_renameat2(int olddirfd, const char *oldname, int newdirfd, const char *newname, int noreplace);

/// fsetxattr(2) of `name` to the `length` bytes at `value` on the open file `fd`. Returns -1
/// with errno set (ENOTSUP where the file system keeps no user attributes).
int uf_set_attribute(int fd, const char *name, const void *value, size_t length);

/// Sends one datagram on a SOCK_SEQPACKET socket, with `passfd` (if >= 0) as SCM_RIGHTS.
ssize_t uf_send(int socket, const void *buffer, size_t length, int passfd);

/// Receives one datagram; a passed descriptor lands in *passfd (else -1), marked close-on-exec.
/// A datagram longer than `capacity` fails with EMSGSIZE.
ssize_t uf_receive(int socket, void *buffer, size_t capacity, int *passfd);

/// prctl(PR_SET_NO_NEW_PRIVS, 1).
int uf_set_no_new_privs(void);

/// prctl(PR_SET_DUMPABLE, 1): after a change of user the kernel makes a process undumpable, and
/// its /proc entries root's; this makes them its new user's again.
int uf_set_dumpable(void);

/// Drops to uid/gid with exactly the given supplementary groups (setgroups, setresgid,
/// setresuid), then sets no_new_privs and checks that root cannot be taken back.
int uf_drop_privileges(uid_t uid, gid_t gid, const gid_t *groups, size_t count);

/// posix_spawn of `path` with `argv`/`envp`, `socket` as descriptor 3 in the child, every other
/// descriptor closed (close_range in the child is not available to posix_spawn: callers create
/// every descriptor close-on-exec). Returns the pid or -1 with errno set.
pid_t uf_spawn(const char *path, char *const argv[], char *const envp[], int socket);

/// Closes every descriptor from `first` on (close_range, else one by one up to the limit).
void uf_close_from(int first);

/// pidfd_open(2) of `pid` (close-on-exec). Returns -1 with errno set.
int uf_pidfd_open(pid_t pid);

/// Whether the process a pidfd names still runs (poll: a pidfd is readable once it exited).
int uf_pidfd_alive(int pidfd);

#endif
