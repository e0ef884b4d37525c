/*
 * The zygote's loop in C: receive a clone command, step into the session's
 * namespaces, clone the box, step home, answer its pid (see zygote_loop.py).
 *
 * Why C: every page the zygote writes after a clone is shared with the boxes
 * still alive, so each write copies one. The same loop in Python touched ~95
 * pages per clone (its frames, the objects it names, ctypes, the allocator);
 * this one touches its stack and the command buffer.
 *
 * The node builds it once per machine with the host's C compiler
 * (runtime/native.py); without one the zygote runs the Python twin of this
 * loop, which takes the same commands and gives the same answers.
 *
 * Command (one SOCK_SEQPACKET datagram): a header of the clone flags (u64,
 * native order), the box's fd count (u8) and whether a ready pipe follows
 * them (u8), then what only the box reads. With it, by SCM_RIGHTS: the box's
 * fds, the ready pipe, the session's mount and IPC namespaces and, optionally,
 * a network namespace. Answer: the pid as 8 bytes (signed, big-endian), or
 * -errno.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_FDS 16
#define HEADER_SIZE 10

enum { IN_MNT = 1, IN_NET = 2, IN_IPC = 4 };

struct home {
    int mnt, net, ipc;
};

/* Enter what was asked, in the Python twin's order; the kinds entered, or -errno. */
static int step_in(int mnt, int net, int ipc, int *entered)
{
    *entered = 0;
    if (setns(mnt, CLONE_NEWNS) < 0)
        return -errno;
    *entered |= IN_MNT;
    if (net >= 0) {
        if (setns(net, CLONE_NEWNET) < 0)
            return -errno;
        *entered |= IN_NET;
    }
    if (setns(ipc, CLONE_NEWIPC) < 0)
        return -errno;
    *entered |= IN_IPC;
    return 0;
}

/* Back home from what was entered; a zygote that cannot get home must not go on. */
static void step_out(const struct home *home, int entered)
{
    if (((entered & IN_MNT) && setns(home->mnt, CLONE_NEWNS) < 0)
        || ((entered & IN_NET) && setns(home->net, CLONE_NEWNET) < 0)
        || ((entered & IN_IPC) && setns(home->ipc, CLONE_NEWIPC) < 0))
        _exit(1);
}

static int received_fds(struct msghdr *mh, int *fds)
{
    int count = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (count < MAX_FDS)
                fds[count++] = fd;
            else
                close(fd);
        }
    }
    return count;
}

/*
 * Serve clone commands on `sock` until the master hangs up (returns -1, in the
 * zygote). Returns 0 in each box it clones, with the command in `msg` (`*msg_len`
 * bytes) and the fds received in `fds` (`*nfds` of them, at most 16).
 */
long collimate_zygote_serve(int sock, int home_mnt, int home_net, int home_ipc, char *msg,
                            long msg_cap, long *msg_len, int *fds, int *nfds)
{
    const struct home home = {home_mnt, home_net, home_ipc};
    for (;;) {
        union {
            char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
            struct cmsghdr align;
        } control;
        struct iovec iov = {msg, (size_t)msg_cap};
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = control.buf;
        mh.msg_controllen = sizeof control.buf;
        ssize_t got = recvmsg(sock, &mh, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        int count = received_fds(&mh, fds);
        long answer = -EINVAL;
        if (got >= HEADER_SIZE && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
            uint64_t flags;
            memcpy(&flags, msg, sizeof flags);
            int at = (unsigned char)msg[8] + (msg[9] != 0);
            if (count >= at + 2) {
                int net = count > at + 2 ? fds[at + 2] : -1;
                int entered;
                answer = step_in(fds[at], net, fds[at + 1], &entered);
                if (answer == 0) {
                    long pid = syscall(SYS_clone, (unsigned long)flags | CLONE_PARENT | SIGCHLD,
                                       0, 0, 0, 0);
                    if (pid == 0) { /* the box, in its new namespaces for good */
                        *msg_len = got;
                        *nfds = count;
                        return 0;
                    }
                    answer = pid < 0 ? -errno : pid;
                }
                step_out(&home, entered);
            }
        }
        for (int i = 0; i < count; i++)
            close(fds[i]);
        unsigned char out[8];
        uint64_t word = (uint64_t)answer;
        for (int i = 7; i >= 0; i--, word >>= 8)
            out[i] = (unsigned char)(word & 0xff);
        if (send(sock, out, sizeof out, MSG_NOSIGNAL) != (ssize_t)sizeof out)
            return -1;
    }
}
