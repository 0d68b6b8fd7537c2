"""`python -m calibration.run.ray_loopback start --head --node-ip-address=127.0.0.1 --port=P ...`

Ray's own CLI, except that a loopback address stays loopback. Ray rewrites "127.0.0.1"/"localhost" to this
machine's interface address (ray._private.services.resolve_ip_for_localhost) so that other nodes can reach
it; a single-machine cluster for tests and local use then listens and connects on that interface. Here
every Ray process of the head binds 127.0.0.1 only. The Ray runner connects the same way (runners.py).
"""

from __future__ import annotations

import sys


def keep_loopback() -> None:
    from ray._private import services

    services.resolve_ip_for_localhost = lambda host: "127.0.0.1" if host == "localhost" else host


def main(argv: list[str] | None = None) -> None:
    keep_loopback()
    from ray.scripts.scripts import main as ray_main

    sys.argv = ["ray", *(sys.argv[1:] if argv is None else argv)]
    ray_main()


if __name__ == "__main__":
    main()
