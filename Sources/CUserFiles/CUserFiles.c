#define _GNU_SOURCE
#include "CUserFiles.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <poll.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

const int uf_O_PATH = O_PATH;

int uf_open_beneath(int dirfd, const char *name, int flags, mode_t mode) {
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (unsigned long long)(flags | O_CLOEXEC | O_NOFOLLOW);
    how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS) {
        if (strchr(name, '/') != NULL) { errno = EINVAL; return -1; }
        return openat(dirfd, name, flags | O_CLOEXEC | O_NOFOLLOW, mode);
    }
    return (int)fd;
}

int uf_renameat2(int olddirfd, const char *oldname, int newdirfd, const char *newname, int noreplace) {
    return renameat2(olddirfd, oldname, newdirfd, newname, noreplace ? RENAME_NOREPLACE : 0);
}

int uf_set_attribute(int fd, const char *name, const void *value, size_t length) {
    return fsetxattr(fd, name, value, length, 0);
}

ssize_t uf_send(int socket, const void *buffer, size_t length, int passfd) {
    struct iovec iov = { .iov_base = (void *)buffer, .iov_len = length };
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    union { char bytes[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } control;
    if (passfd >= 0) {
        memset(&control, 0, sizeof control);
        message.msg_control = control.bytes;
        message.msg_controllen = sizeof control.bytes;
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(header), &passfd, sizeof(int));
    }
    ssize_t n;
    do { n = sendmsg(socket, &message, MSG_NOSIGNAL); } while (n < 0 && errno == EINTR);
    return n;
}

ssize_t uf_receive(int socket, void *buffer, size_t capacity, int *passfd) {
    *passfd = -1;
    struct iovec iov = { .iov_base = buffer, .iov_len = capacity };
    union { char bytes[CMSG_SPACE(sizeof(int) * 4)]; struct cmsghdr align; } control;
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof control.bytes;
    ssize_t n;
    do { n = recvmsg(socket, &message, MSG_CMSG_CLOEXEC); } while (n < 0 && errno == EINTR);
    if (n < 0) return n;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            if (*passfd < 0) *passfd = fd; else close(fd);
        }
    }
    if (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        if (*passfd >= 0) { close(*passfd); *passfd = -1; }
        errno = EMSGSIZE;
        return -1;
    }
    return n;
}

int uf_set_no_new_privs(void) {
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

int uf_set_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

int uf_drop_privileges(uid_t uid, gid_t gid, const gid_t *groups, size_t count) {
    if (setgroups(count, groups) != 0) return -1;
    if (setresgid(gid, gid, gid) != 0) return -1;
    if (setresuid(uid, uid, uid) != 0) return -1;
    if (uf_set_no_new_privs() != 0) return -1;
    if (uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) { errno = EPERM; return -1; }
    return 0;
}

pid_t uf_spawn(const char *path, char *const argv[], char *const envp[], int socket) {
    posix_spawn_file_actions_t actions;
    if (posix_spawn_file_actions_init(&actions) != 0) return -1;
    posix_spawn_file_actions_adddup2(&actions, socket, 3);
    pid_t pid = -1;
    int result = posix_spawn(&pid, path, &actions, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    if (result != 0) { errno = result; return -1; }
    return pid;
}

void uf_close_from(int first) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, ~0U, 0) == 0) return;
#endif
    long limit = sysconf(_SC_OPEN_MAX);
    if (limit < 0 || limit > 65536) limit = 65536;
    for (int fd = first; fd < limit; fd++) close(fd);
}

int uf_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int uf_pidfd_alive(int pidfd) {
    struct pollfd entry = { .fd = pidfd, .events = POLLIN };
    int ready = poll(&entry, 1, 0);
    return ready == 0;
}
