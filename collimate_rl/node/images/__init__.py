"""The node's images: where they come from, where they are kept, how they become layers.

The node owns the image store; clients only name a reference. One job per module:

- ``reference``: parse ``python:3.12-slim``, ``host:5000/repo@sha256:...``, ``oci:DIR:tag``, ...
- ``distribution``: the OCI distribution API client (auth challenges, digests, resume).
- ``sources``: local images (an OCI layout, an ``oci-archive``, a ``docker-archive``).
- ``config``: the image config as a frozen dataclass.
- ``pull``: any reference into the store, fetching only the blobs it lacks.
- ``store`` / ``unpack``: the content-addressed store and the confined unpacker.
- ``errors``: the error tree.
"""

__all__: list[str] = []  # the modules above are the API; the package exports nothing itself
