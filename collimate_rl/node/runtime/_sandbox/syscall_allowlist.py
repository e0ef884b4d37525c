"""The syscalls a sandboxed process may make: the allowlist its seccomp filter is built from.

Every other number gets ``ENOSYS`` (libc then falls back, as under Docker), except the
known-dangerous calls of ``seccomp.DENY_COMMON``, which keep ``EPERM``. A few allowed calls
are checked further by the filter: ``clone`` (no ``CLONE_NEW*`` flag), ``socket`` and
``socketpair`` (the session's families), ``personality`` (Docker's five values).

Derived from what real workloads make (``docs/syscalls/recorded/``, recorded in the real sandbox
by ``collimate_rl/node/runtime/syscall_recorder.py``) and reviewed against Docker's default
profile, call by call (``docs/syscalls/docker-default.json``; every difference is explained in
``docs/security.md``, "Syscall policy"). ``tests/node/runtime/test_syscall_recorder.py`` fails
when a workload on this machine makes a call that is neither here nor refused on purpose.

>>> "read" in allowed_calls("x86_64"), "ptrace" in allowed_calls("x86_64")
(True, False)
"""

from __future__ import annotations

#: Allowed on every architecture (a name the architecture lacks is skipped).
COMMON = """
read write readv writev pread64 pwrite64 preadv preadv2 pwritev pwritev2 lseek
open openat openat2 creat close close_range dup dup2 dup3 fcntl flock ioctl
stat fstat lstat newfstatat statx statfs fstatfs access faccessat faccessat2
readlink readlinkat getdents getdents64 getcwd chdir fchdir
mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2 link linkat symlink symlinkat
mknod mknodat chmod fchmod fchmodat fchmodat2 chown fchown lchown fchownat umask
truncate ftruncate fallocate fadvise64 readahead fsync fdatasync sync syncfs sync_file_range
utime utimes utimensat futimesat copy_file_range sendfile splice tee vmsplice
getxattr lgetxattr fgetxattr setxattr lsetxattr fsetxattr listxattr llistxattr flistxattr
removexattr lremovexattr fremovexattr getxattrat setxattrat listxattrat removexattrat
inotify_init inotify_init1 inotify_add_watch inotify_rm_watch
pipe pipe2 eventfd eventfd2 signalfd signalfd4 timerfd_create timerfd_settime timerfd_gettime
poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait
epoll_pwait2
io_setup io_destroy io_submit io_cancel io_getevents io_pgetevents
mmap munmap mprotect mremap madvise mincore msync mlock mlock2 munlock mlockall munlockall
brk membarrier memfd_create pkey_alloc pkey_free pkey_mprotect mseal map_shadow_stack
cachestat
socket socketpair bind listen accept accept4 connect getsockname getpeername
sendto recvfrom sendmsg recvmsg sendmmsg recvmmsg shutdown setsockopt getsockopt
clone fork vfork execve execveat exit exit_group wait4 waitid
kill tkill tgkill pidfd_open pidfd_send_signal
rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigsuspend rt_sigtimedwait
rt_sigqueueinfo rt_tgsigqueueinfo sigaltstack pause restart_syscall
alarm getitimer setitimer timer_create timer_settime timer_gettime timer_getoverrun
timer_delete nanosleep clock_nanosleep clock_gettime clock_getres gettimeofday time times
futex futex_waitv futex_wake futex_wait futex_requeue set_robust_list get_robust_list
set_tid_address rseq
getpid getppid gettid getpgid setpgid getpgrp getsid setsid
getuid geteuid getgid getegid getresuid getresgid getgroups
setuid setgid setreuid setregid setresuid setresgid setfsuid setfsgid setgroups
capget capset prctl personality seccomp
landlock_create_ruleset landlock_add_rule landlock_restrict_self
getrlimit setrlimit prlimit64 getrusage getpriority setpriority ioprio_get ioprio_set
sched_yield sched_getaffinity sched_setaffinity sched_getparam sched_setparam
sched_getscheduler sched_setscheduler sched_get_priority_max sched_get_priority_min
sched_rr_get_interval sched_getattr sched_setattr getcpu
uname sysinfo getrandom
mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr
msgget msgsnd msgrcv msgctl semget semop semtimedop semctl shmget shmat shmdt shmctl
"""

#: Allowed only where the architecture has them (x86_64's own calls).
ARCH_ONLY = {
    "x86_64": "arch_prctl get_thread_area set_thread_area",
    "aarch64": "",
}


def allowed_calls(arch: str) -> frozenset[str]:
    """The names a sandboxed process of ``arch`` may call (before the filter's argument checks
    and its dangerous-call denials, which win)."""
    return frozenset(COMMON.split()) | frozenset(ARCH_ONLY.get(arch, "").split())


#: Calls a recorded workload makes that stay refused (ENOSYS), and why it still works.
REFUSED_ON_PURPOSE = {
    # numpy's OpenBLAS binds its buffers to NUMA nodes when it can; without it they land
    # where the kernel puts them. Docker refuses it too (CAP_SYS_NICE only).
    "mbind": "a NUMA placement hint (numpy's OpenBLAS); ignored when refused",
}
