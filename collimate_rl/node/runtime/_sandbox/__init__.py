"""The in-sandbox runtime: template master, session servers, factories, exec children.

These modules run *inside* the sandbox under the sandbox's own Python, so
they are stdlib-only and Python 3.10+ compatible. The host imports some of
them too (tests, the bwrap launcher, crash recovery), so importing any of
them has no side effects. ``supervisor.py`` is the one entry script (see it
for how the modules load as a package inside the sandbox).

Process model (``bwrap`` driver)::

    bwrap (host uid = sandbox uid, its own user/pid/net/ipc/uts/mount ns)
      master            fork-server, preloads the template's modules, subreaper
        session server  pid 1 of its own user/pid/net/ipc/mount namespaces,
                        owns a size-limited tmpfs with its overlay layers
          factory F     forked before the server reads any request; hidden
                        /.collimate, no capabilities, no_new_privs, seccomp,
                        non-dumpable; forks warm pristine processes on demand
          exec child    private mount ns with /.collimate hidden, rlimits,
                        no capabilities, no_new_privs, seccomp; runs the exec

The factory (``factory.py``) lets an exec get
a warm Python process that never saw any request: the exec's files are in
the exec child's memory (and in the server's), so a fork of either is not
clean. Every exec gets fd ``ZYGOTE_FD`` (4), named by ``COLLIMATE_ZYGOTE_FD``:
its own ``SOCK_SEQPACKET`` connection to F (a socketpair the server makes per
exec and hands to F over their control socket by SCM_RIGHTS). Protocol: one
JSON request ``{"op": "spawn", "seed", "env", "code": "source"|"marshal",
"tag"}`` with the new process's fds 0..4 attached; reply ``{"ok", "pid",
"marshal"}``; then the exec writes the program to the new fd 0 and closes it
(see ``factory.py``). The post-exec sweep kills every process but the server
and F. F is never re-created (a fork of a server that has read requests is
not pristine): if it dies, later execs of the session get no
``COLLIMATE_ZYGOTE_FD`` and callers fall back to a fresh interpreter. The
``none`` driver has no F.

A fork of session P into children C1..Cn is done by the master: each child
joins P's user and mount namespaces (the master owns them), drops P's
/sandbox and /tmp mounts, then creates fresh namespaces and stacks an overlay
over P's frozen layers. The children's pid namespaces are siblings of P's, so
P's sweeps and P's death never touch them.

Wire format on every unix socket: a frame is a 4-byte big-endian length and a
JSON object; a header may announce ``payload_len`` raw bytes that follow it.

Modules, one job each:

* ``supervisor.py``: the entry script (``master`` or ``bake``);
* ``master.py``: the fork-server; ``session_setup.py``: bringing a session up;
* ``session_server.py``: a session's exec loop; ``running_exec.py``: one exec
  in flight; ``session_sweep.py``: the post-exec sweep; ``layers.py``: the
  overlay layers and freezes;
* ``exec_child.py``: the process that runs one exec;
* ``factory.py`` / ``factory_link.py``: the pristine factory F and the
  server's side of it; ``service.py`` / ``service_link.py``: a template
  service's keeper K and the server's side of it;
* ``syscalls.py``, ``seccomp.py``, ``hardening.py``: Linux calls, the seccomp
  filter, capabilities and rlimits; ``framing.py``: socket frames;
  ``seeding.py``: seeding ``random`` and numpy; ``layout.py``: paths and fds;
  ``common.py``: small shared helpers; ``bake.py``: baking a template layer.
"""
